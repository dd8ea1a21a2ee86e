// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluator: chunks, the reference and quantized passes in lockstep, per-token statistics,
// per-layer attribution by resuming the forward at the layer, calibration from the text's head.
#include "core/eval/evaluator.h"

#include "core/common/memory.h"
#include "core/experiment/runner.h"
#include "core/eval/model_input.h"
#include "core/lm/hf_config.h"
#include "core/lm/token_ids.h"
#include "core/lm/tokenizer.h"
#include "core/lm/weights.h"
#include "core/quant/codec_parts.h"
#include "core/quant/path.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

namespace kvlens::eval {

const char* attributionPathName(AttributionPath p)
{
    switch (p) {
    case AttributionPath::K: return "K";
    case AttributionPath::V: return "V";
    case AttributionPath::Both: return "both";
    }
    return "both";
}

// --- the quantized cache ----------------------------------------------------------------------

struct CodecCache::Cell {
    PathPlan key, value;
    const RowMatrixXf* calibrationQueries = nullptr; ///< the A^2 policy's queries (may be null)
};

Result<std::shared_ptr<const CodecCache>> CodecCache::plan(const std::vector<SchemeConfig>& layers, int budget,
                                                           int kvHeads, int headDim, std::uint64_t seed,
                                                           const Calibration* calibration)
{
    auto cache = std::shared_ptr<CodecCache>(new CodecCache());
    cache->m_calibration = calibration;
    cache->m_cells.resize(layers.size());
    for (std::size_t l = 0; l < layers.size(); ++l) {
        SchemeConfig scheme = normalizedScheme(layers[l]);
        if (auto ok = validateScheme(scheme, {budget}, headDim, "layer " + std::to_string(l)); !ok)
            return ok.error();
        for (int h = 0; h < kvHeads; ++h) {
            auto cell = std::make_shared<Cell>();
            const auto rows = [&](const std::vector<std::vector<RowMatrixXf>>& m) -> const RowMatrixXf* {
                if (!calibration || l >= m.size() || static_cast<std::size_t>(h) >= m[l].size() || m[l][h].rows() == 0)
                    return nullptr;
                return &m[l][static_cast<std::size_t>(h)];
            };
            const RowMatrixXf* queries = calibration ? rows(calibration->queries) : nullptr;
            const std::uint64_t cellSeedValue = cellSeed(seed, static_cast<int>(l), h);
            cell->key = planPath(scheme.key, budget, headDim, PathSite::Keys,
                                 PlanInputs{calibration ? rows(calibration->keys) : nullptr, queries, nullptr},
                                 EngineKind::Mt19937_64, cellSeedValue);
            cell->value = planPath(scheme.value, budget, headDim, PathSite::Values,
                                   PlanInputs{calibration ? rows(calibration->values) : nullptr, queries, nullptr},
                                   EngineKind::Mt19937_64, cellSeedValue);
            cell->calibrationQueries = queries;
            cache->m_cells[l].push_back(std::move(cell));
        }
    }
    return std::shared_ptr<const CodecCache>(std::move(cache));
}

void CodecCache::applyMasked(const Mask& mask, int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v,
                             RowMatrixXf& khat, RowMatrixXf& vhat) const
{
    const bool here = (mask.layer < 0 || mask.layer == layer) && (mask.kvHead < 0 || mask.kvHead == kvHead);
    const Cell& cell = *m_cells[static_cast<std::size_t>(layer)][static_cast<std::size_t>(kvHead)];
    // The token policy (A^2) reads this chunk's keys and values of the group being written.
    const TokenContext context{k, v, cell.calibrationQueries, cell.value.scoreScale};
    khat = here && mask.keys ? encodePathCausal(cell.key, k, nullptr, CausalOptions{}, &context).reconstruction : k;
    vhat = here && mask.values ? encodePathCausal(cell.value, v, nullptr, CausalOptions{}, &context).reconstruction : v;
}

int CodecCache::causalGroup(int layer, bool keys) const
{
    int group = 1;
    for (const auto& cell : m_cells[static_cast<std::size_t>(layer)])
        group = std::max(group, (keys ? cell->key : cell->value).causalGroup());
    return group;
}

void CodecCache::apply(int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat,
                       RowMatrixXf& vhat) const
{
    applyMasked(Mask{}, layer, kvHead, k, v, khat, vhat);
}

namespace {

class MaskedHook final : public lm::KvCacheHook {
public:
    MaskedHook(const CodecCache& cache, CodecCache::Mask mask) : m_cache(cache), m_mask(mask) {}
    bool quantizes(int layer) const override { return m_mask.layer < 0 || m_mask.layer == layer; }
    int causalGroup(int layer, bool keys) const override { return m_cache.causalGroup(layer, keys); }
    void apply(int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat,
               RowMatrixXf& vhat) const override
    {
        m_cache.applyMasked(m_mask, layer, kvHead, k, v, khat, vhat);
    }

private:
    const CodecCache& m_cache;
    CodecCache::Mask m_mask;
};

} // namespace

std::shared_ptr<const lm::KvCacheHook> CodecCache::masked(const Mask& mask) const
{
    return std::make_shared<MaskedHook>(*this, mask);
}

double CodecCache::bitsK(int tokens) const
{
    double sum = 0.0;
    int n = 0;
    for (const auto& layer : m_cells)
        for (const auto& cell : layer) {
            sum += pathBitsPerCoordinate(cell->key, tokens);
            ++n;
        }
    return n > 0 ? sum / n : 0.0;
}

double CodecCache::bitsV(int tokens) const
{
    double sum = 0.0;
    int n = 0;
    for (const auto& layer : m_cells)
        for (const auto& cell : layer) {
            sum += pathBitsPerCoordinate(cell->value, tokens);
            ++n;
        }
    return n > 0 ? sum / n : 0.0;
}

// --- the evaluation ---------------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

/// Accumulates one attribution row's per-token values.
struct Accumulator {
    double sum = 0.0, sumSquares = 0.0;
    std::size_t count = 0, same = 0;
    void add(const lm::TokenStat& t)
    {
        sum += t.kld;
        sumSquares += t.kld * t.kld;
        ++count;
        same += t.sameTop() ? 1 : 0;
    }
};

/// The kTopTokens most likely next tokens of a logits row, with their probabilities (softmax in double).
TopTokens topOf(const Eigen::Ref<const Eigen::Matrix<float, 1, Eigen::Dynamic>>& logits)
{
    TopTokens out{};
    double m = -std::numeric_limits<double>::infinity();
    for (Eigen::Index i = 0; i < logits.size(); ++i)
        m = std::max(m, static_cast<double>(logits[i]));
    double z = 0.0;
    for (Eigen::Index i = 0; i < logits.size(); ++i)
        z += std::exp(static_cast<double>(logits[i]) - m);
    std::vector<std::int32_t> order(static_cast<std::size_t>(logits.size()));
    std::iota(order.begin(), order.end(), 0);
    const auto k = std::min<std::size_t>(kTopTokens, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (std::size_t i = 0; i < k; ++i)
        out[i] = TopToken{order[i], static_cast<float>(std::exp(static_cast<double>(logits[order[i]]) - m) / z)};
    return out;
}

/// The configurations of a spec: (scheme, budget, seed), schemes outermost.
struct Configuration {
    int scheme = 0, budget = 0, seedIndex = 0;
    std::shared_ptr<const CodecCache> cache;
    bool identity = false; ///< every part exact: the reference's own pass (its KLD is 0 by construction)
};

/// Proxies of the damage's position start + i: each measure's mean over layers and heads (NaN entries,
/// an attention output of zero energy, left out; NaN when every one is).
TokenProxies tokenProxies(const lm::AttentionDamage& d, int i)
{
    auto mean = [&](const std::vector<float>& values, int units) {
        double sum = 0.0;
        int n = 0;
        for (int u = 0; u < units; ++u) {
            const float x = values[static_cast<std::size_t>(u) * static_cast<std::size_t>(d.count) + static_cast<std::size_t>(i)];
            if (std::isfinite(x)) {
                sum += x;
                ++n;
            }
        }
        return n > 0 ? static_cast<float>(sum / n) : std::numeric_limits<float>::quiet_NaN();
    };
    const int oracle = d.layers * d.heads, side = d.layers * d.kvHeads;
    TokenProxies p{};
    p[static_cast<int>(TokenProxy::AttnKl)] = mean(d.kl, oracle);
    p[static_cast<int>(TokenProxy::Fisher)] = mean(d.fisher, oracle);
    p[static_cast<int>(TokenProxy::A2)] = mean(d.a2, oracle);
    p[static_cast<int>(TokenProxy::OutErr)] = mean(d.outErr, oracle);
    p[static_cast<int>(TokenProxy::RelK)] = mean(d.relK, side);
    p[static_cast<int>(TokenProxy::RelV)] = mean(d.relV, side);
    p[static_cast<int>(TokenProxy::CalibScoreErr)] = mean(d.calibScoreErr, side);
    return p;
}

/// Every layer's paths store the cache exactly (quantizer none, no transform, no residual).
bool isIdentity(const EvalScheme& e)
{
    auto exact = [](const SchemeConfig& s) {
        for (const PathConfig* p : {&s.key, &s.value})
            if (p->quantizer.kind != "none" || !p->transforms.empty() || !p->residuals.empty())
                return false;
        return true;
    };
    return e.layers.empty() ? exact(e.scheme) : std::all_of(e.layers.begin(), e.layers.end(), exact);
}

std::vector<SchemeConfig> layerSchemes(const EvalScheme& e, int layers)
{
    if (e.layers.empty())
        return std::vector<SchemeConfig>(static_cast<std::size_t>(layers), e.scheme);
    return e.layers;
}

/// Both paths of every layer store widths the budget n does not set (fp16, exact, llama.cpp's types,
/// or an absolute bits rule): the configuration is the same at every budget, so it runs once.
bool budgetFree(const EvalScheme& e)
{
    auto fixed = [](const SchemeConfig& s) {
        for (const PathConfig* p : {&s.key, &s.value}) {
            const PartKind* kind = findPart(p->quantizer.kind, PartRole::Quantizer);
            if (!kind || (!kind->fixedWidth && p->bits.relative))
                return false;
        }
        return true;
    };
    if (e.layers.empty())
        return fixed(e.scheme);
    return std::all_of(e.layers.begin(), e.layers.end(), fixed);
}

bool anyCalibrated(const EvalSpec& spec)
{
    for (const EvalScheme& e : spec.schemes) {
        if (needsCalibration(e.scheme))
            return true;
        for (const SchemeConfig& s : e.layers)
            if (needsCalibration(s))
                return true;
    }
    return false;
}

} // namespace

Result<CodecCache::Calibration> calibrationFromText(const lm::Transformer& model, const std::vector<std::int32_t>& tokens,
                                                   int calibration, int ctx, std::optional<std::int32_t> bos,
                                                   const std::function<bool()>& cancelled)
{
    const lm::ModelConfig& config = model.config();
    CodecCache::Calibration rows;
    const int groupSize = config.heads / config.kvHeads;
    rows.keys.assign(static_cast<std::size_t>(config.layers), std::vector<RowMatrixXf>(static_cast<std::size_t>(config.kvHeads)));
    rows.values = rows.keys;
    rows.queries = rows.keys;
    if (calibration > static_cast<int>(tokens.size()))
        return Error{"calibration_tokens", std::to_string(calibration) + " calibration tokens but the text has "
                                               + std::to_string(tokens.size())};
    for (int start = 0; start < calibration; start += ctx) {
        const int count = std::min(ctx, calibration - start);
        std::vector<std::int32_t> chunk(tokens.begin() + start, tokens.begin() + start + count);
        if (bos)
            chunk.front() = *bos;
        lm::ForwardOptions options;
        options.capture = lm::CaptureRequest{0, count};
        options.logitsStart = count - 1;
        options.cancelled = cancelled;
        auto pass = model.forward(chunk, options);
        if (!pass)
            return pass.error();
        for (int l = 0; l < config.layers; ++l) {
            const lm::LayerCapture& c = pass->capture[static_cast<std::size_t>(l)];
            for (int h = 0; h < config.kvHeads; ++h) {
                auto append = [&](RowMatrixXf& into, const std::vector<float>& from, int head) {
                    const Eigen::Index at = into.rows();
                    into.conservativeResize(at + count, config.headDim);
                    for (int t = 0; t < count; ++t)
                        for (int j = 0; j < config.headDim; ++j)
                            into(at + t, j) = from[(static_cast<std::size_t>(head) * count + t) * config.headDim + j];
                };
                append(rows.keys[l][h], c.k, h);
                append(rows.values[l][h], c.v, h);
                for (int g = 0; g < groupSize; ++g)
                    append(rows.queries[l][h], c.q, h * groupSize + g);
            }
        }
    }
    return rows;
}

std::vector<SchemeConfig> configurationLayers(const EvalSpec& spec, int scheme, int layers)
{
    return layerSchemes(spec.schemes[static_cast<std::size_t>(scheme)], layers);
}

Result<EvalResult> runEval(const EvalSpec& spec, const lm::Transformer& model, const std::vector<std::int32_t>& tokens,
                           std::optional<std::int32_t> bos, const EvalCallbacks& callbacks,
                           const std::function<std::string(std::int32_t)>& tokenText)
{
    const auto started = Clock::now();
    const lm::ModelConfig& config = model.config();
    if (auto ok = checkEvalSpec(spec, config.headDim); !ok)
        return ok.error();
    for (std::size_t i = 0; i < spec.schemes.size(); ++i)
        if (!spec.schemes[i].layers.empty() && static_cast<int>(spec.schemes[i].layers.size()) != config.layers)
            return Error{"schemes[" + std::to_string(i) + "].allocation",
                         spec.schemes[i].origin + " gives " + std::to_string(spec.schemes[i].layers.size())
                             + " layers but the model has " + std::to_string(config.layers)};
    const int context = config.maxPositions > 0 ? std::min(config.maxPositions, config.maxChunkTokens()) : config.maxChunkTokens();
    if (spec.ctx > context)
        return Error{"ctx", "must be at most " + std::to_string(context) + " (the model's context: "
                                + (config.maxPositions > 0 ? "max_position_embeddings" : "its positions") + " of "
                                + config.source + "), got " + std::to_string(spec.ctx)};
    if (auto ok = lm::checkTokenIds(tokens, config.vocab, spec.tokensFile.empty() ? spec.textFile : spec.tokensFile); !ok)
        return ok.error();

    const int ctx = spec.ctx;
    const int calibration = spec.calibrationTokens >= 0 ? spec.calibrationTokens : (anyCalibrated(spec) ? ctx : 0);
    const long long available = (static_cast<long long>(tokens.size()) - calibration) / ctx;
    const std::string textField = spec.tokensFile.empty() ? "text" : "tokens";
    if (available < 2)
        return Error{textField, (spec.tokensFile.empty() ? spec.textFile : spec.tokensFile) + " gives "
                                    + std::to_string(tokens.size()) + " tokens: after " + std::to_string(calibration)
                                    + " for calibration that is fewer than two chunks of " + std::to_string(ctx)
                                    + " (ctx); give a longer text or a smaller ctx"};
    const int chunks = static_cast<int>(spec.chunks > 0 ? std::min<long long>(spec.chunks, available) : available);
    const int first = ctx / 2; // llama.cpp: the first half of a chunk is context, the rest is scored
    const int scoredPerChunk = ctx - 1 - first;

    EvalResult result;
    result.spec = spec;
    result.modelSummary = config.summary();
    result.layers = config.layers;
    result.kvHeads = config.kvHeads;
    result.headDim = config.headDim;
    result.vocab = config.vocab;
    result.calibrationTokens = calibration;
    result.tokens = tokens;
    result.bos = bos;

    // Work units for progress: token-layers through forward passes.
    const long long configurationCount = spec.configurationCount();
    const int attributionPasses = spec.attribution == Attribution::None ? 0
                                  : 3 * config.layers + (spec.attribution == Attribution::Heads ? config.layers * config.kvHeads : 0);
    // A pass resumed at layer L runs layers - L layers: on average about half.
    const double attributionLayers = spec.attribution == Attribution::None ? 0.0
                                     : 3.0 * config.layers * (config.layers + 1) / 2.0
                                           + (spec.attribution == Attribution::Heads
                                                  ? config.kvHeads * config.layers * (config.layers + 1) / 2.0
                                                  : 0.0);
    const double perChunk = static_cast<double>(ctx) * (config.layers * (1.0 + configurationCount) + configurationCount * attributionLayers);
    const double total = perChunk * chunks + static_cast<double>(calibration) * config.layers;
    double done = 0.0;
    auto report = [&](const std::string& stage) {
        if (callbacks.progress)
            callbacks.progress(done, total, stage);
    };
    auto isCancelled = [&] { return callbacks.cancelled && callbacks.cancelled(); };
    double forwardMs = 0.0;
    auto forward = [&](std::span<const std::int32_t> chunk, lm::ForwardOptions options, int layersRun)
        -> Result<lm::ForwardResult> {
        options.cancelled = callbacks.cancelled;
        const auto t0 = Clock::now();
        auto r = model.forward(chunk, options);
        forwardMs += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        result.forwardTokens += static_cast<long long>(chunk.size()) * layersRun / std::max(1, config.layers);
        done += static_cast<double>(chunk.size()) * layersRun;
        return r;
    };
    auto finish = [&](bool cancelled) -> Result<EvalResult> {
        result.cancelled = cancelled;
        for (ConfigurationResult& c : result.configurations)
            if (c.tokens.size() >= 2)
                if (auto s = lm::summarizeNextTokens(c.tokens))
                    c.summary = *s;
        result.forwardMs = forwardMs;
        result.elapsedMs = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
        return result;
    };

    // Calibration: the exact cache's K, V and Q over the leading tokens, per (layer, KV head).
    CodecCache::Calibration calibrationRows;
    if (calibration > 0) {
        report("calibration: " + std::to_string(calibration) + " tokens");
        auto rows = calibrationFromText(model, tokens, calibration, ctx, bos, callbacks.cancelled);
        done += static_cast<double>(calibration) * config.layers;
        if (!rows)
            return rows.error().cancelled() ? finish(true) : Result<EvalResult>(rows.error());
        calibrationRows = std::move(rows).value();
    }

    // The calibration queries' second moment per (layer, KV head), for the deployable score-error proxy.
    std::vector<std::vector<Eigen::MatrixXf>> queryMoments;
    if (calibration > 0) {
        queryMoments.resize(calibrationRows.queries.size());
        for (std::size_t l = 0; l < queryMoments.size(); ++l)
            for (const RowMatrixXf& q : calibrationRows.queries[l]) {
                Eigen::MatrixXf m = Eigen::MatrixXf::Zero(config.headDim, config.headDim);
                if (q.rows() > 0 && q.cols() == config.headDim)
                    m = (q.transpose() * q) / static_cast<float>(q.rows());
                queryMoments[l].push_back(std::move(m));
            }
    }

    // Every configuration's cache, planned once.
    std::vector<Configuration> configurations;
    for (std::size_t s = 0; s < spec.schemes.size(); ++s)
        for (int budget : budgetFree(spec.schemes[s]) ? std::vector<int>{spec.budgets.front()} : spec.budgets)
            for (int k = 0; k < spec.seedCount; ++k) {
                auto cache = CodecCache::plan(layerSchemes(spec.schemes[s], config.layers), budget, config.kvHeads,
                                              config.headDim, spec.seed(k), calibration > 0 ? &calibrationRows : nullptr);
                if (!cache)
                    return Error{"schemes[" + std::to_string(s) + "]", cache.error().text()};
                configurations.push_back(Configuration{static_cast<int>(s), budget, k, *cache, isIdentity(spec.schemes[s])});
                ConfigurationResult r;
                r.scheme = static_cast<int>(s);
                r.budget = budgetFree(spec.schemes[s]) ? 0 : budget;
                r.seedIndex = k;
                r.name = spec.schemes[s].scheme.name;
                r.bitsK = (*cache)->bitsK(ctx);
                r.bitsV = (*cache)->bitsV(ctx);
                r.tokens.reserve(static_cast<std::size_t>(chunks) * scoredPerChunk);
                result.configurations.push_back(std::move(r));
            }

    // Attribution rows, accumulated over chunks.
    struct AttributionKey {
        int configuration, layer, kvHead;
        AttributionPath path;
    };
    std::vector<AttributionKey> attributionKeys;
    if (spec.attribution != Attribution::None)
        for (std::size_t c = 0; c < configurations.size(); ++c)
            for (int l = 0; l < config.layers; ++l) {
                for (AttributionPath p : {AttributionPath::K, AttributionPath::V, AttributionPath::Both})
                    attributionKeys.push_back({static_cast<int>(c), l, -1, p});
                if (spec.attribution == Attribution::Heads)
                    for (int h = 0; h < config.kvHeads; ++h)
                        attributionKeys.push_back({static_cast<int>(c), l, h, AttributionPath::Both});
            }
    std::vector<Accumulator> attribution(attributionKeys.size());
    (void)attributionPasses;

    auto attributionRows = [&] {
        std::vector<AttributionRow> rows;
        for (std::size_t a = 0; a < attributionKeys.size(); ++a) {
            const Accumulator& acc = attribution[a];
            AttributionRow row;
            row.configuration = attributionKeys[a].configuration;
            row.layer = attributionKeys[a].layer;
            row.kvHead = attributionKeys[a].kvHead;
            row.path = attributionKeys[a].path;
            row.kld = lm::meanAndError(acc.sum, acc.sumSquares, acc.count);
            row.kldLow = row.kld.mean - 1.96 * row.kld.error;
            row.kldHigh = row.kld.mean + 1.96 * row.kld.error;
            row.sameTop = acc.count > 0 ? static_cast<double>(acc.same) / static_cast<double>(acc.count) : 0.0;
            rows.push_back(row);
        }
        return rows;
    };

    double referenceNll = 0.0;
    std::size_t referenceCount = 0;
    for (int chunkIndex = 0; chunkIndex < chunks; ++chunkIndex) {
        const long long begin = calibration + static_cast<long long>(chunkIndex) * ctx;
        std::vector<std::int32_t> chunk(tokens.begin() + begin, tokens.begin() + begin + ctx);
        if (bos) // llama.cpp replaces each chunk's first token with BOS
            chunk.front() = *bos;
        const std::string where = "chunk " + std::to_string(chunkIndex + 1) + " of " + std::to_string(chunks);
        report(where + ": reference");
        std::vector<RowMatrixXf> layerInputs;
        lm::ForwardOptions baseOptions;
        baseOptions.logitsStart = first;
        if (spec.attribution != Attribution::None)
            baseOptions.layerInputs = &layerInputs;
        auto base = forward(chunk, baseOptions, config.layers);
        if (!base)
            return base.error().cancelled() ? finish(true) : Result<EvalResult>(base.error());
        for (int i = 0; i < scoredPerChunk; ++i) {
            const int position = first + i;
            result.scored.push_back(ScoredToken{chunkIndex, position, chunk[static_cast<std::size_t>(position)],
                                                chunk[static_cast<std::size_t>(position + 1)]});
            result.tokenText.push_back(tokenText ? tokenText(chunk[static_cast<std::size_t>(position + 1)]) : std::string());
        }
        auto scoreInto = [&](const RowMatrixXf& logits, const std::function<void(const lm::TokenStat&)>& sink) -> Status {
            for (int i = 0; i < scoredPerChunk; ++i) {
                const int position = first + i;
                const auto row = static_cast<Eigen::Index>(i);
                auto stat = lm::scoreToken(std::span<const float>(base->logits.row(row).data(), base->logits.cols()),
                                           std::span<const float>(logits.row(row).data(), logits.cols()),
                                           chunk[static_cast<std::size_t>(position + 1)]);
                if (!stat)
                    return stat.error();
                sink(*stat);
            }
            return Ok{};
        };
        // The reference's own NLL (Q = base: KLD 0), and its five most likely next tokens.
        if (auto ok = scoreInto(base->logits, [&](const lm::TokenStat& t) {
                referenceNll += t.nllBase;
                ++referenceCount;
            });
            !ok)
            return ok.error();
        for (int i = 0; i < scoredPerChunk; ++i)
            result.topBase.push_back(topOf(base->logits.row(i)));

        for (std::size_t c = 0; c < configurations.size(); ++c) {
            const Configuration& conf = configurations[c];
            ConfigurationResult& out = result.configurations[c];
            report(where + ": " + out.name + " n = " + std::to_string(conf.budget));
            lm::ForwardOptions options;
            // The identity codec is not applied: with a residual window the cache path sums P V in two
            // products (exact and cached keys), which rounds differently from the reference's one.
            options.cache = conf.identity ? nullptr : conf.cache.get();
            options.residual = conf.identity ? 0 : spec.residual;
            options.logitsStart = first;
            if (!conf.identity)
                options.damage = lm::DamageRequest{first, queryMoments.empty() ? nullptr : &queryMoments};
            auto quantized = forward(chunk, options, config.layers);
            if (!quantized)
                return quantized.error().cancelled() ? finish(true) : Result<EvalResult>(quantized.error());
            if (auto ok = scoreInto(quantized->logits, [&](const lm::TokenStat& t) { out.tokens.push_back(t); }); !ok)
                return ok.error();
            for (int i = 0; i < scoredPerChunk; ++i) {
                out.top.push_back(topOf(quantized->logits.row(i)));
                out.proxies.push_back(quantized->damage ? tokenProxies(*quantized->damage, i) : TokenProxies{});
            }
            if (isCancelled())
                return finish(true);
        }

        // Attribution: resume each layer's pass from the reference's state entering that layer.
        for (std::size_t a = 0; a < attributionKeys.size(); ++a) {
            const AttributionKey& key = attributionKeys[a];
            const Configuration& conf = configurations[static_cast<std::size_t>(key.configuration)];
            CodecCache::Mask mask;
            mask.layer = key.layer;
            mask.kvHead = key.kvHead;
            mask.keys = key.path != AttributionPath::V;
            mask.values = key.path != AttributionPath::K;
            const auto hook = conf.cache->masked(mask);
            lm::ForwardOptions options;
            options.cache = conf.identity ? nullptr : hook.get();
            options.residual = conf.identity ? 0 : spec.residual;
            options.logitsStart = first;
            options.startLayer = key.layer;
            options.startHidden = &layerInputs[static_cast<std::size_t>(key.layer)];
            report(where + ": " + result.configurations[static_cast<std::size_t>(key.configuration)].name + " n = "
                   + std::to_string(conf.budget) + ", layer " + std::to_string(key.layer) + " alone");
            auto pass = forward(chunk, options, config.layers - key.layer);
            if (!pass)
                return pass.error().cancelled() ? finish(true) : Result<EvalResult>(pass.error());
            if (auto ok = scoreInto(pass->logits, [&](const lm::TokenStat& t) { attribution[a].add(t); }); !ok)
                return ok.error();
        }
        ++result.chunksScored;
        if (callbacks.partial && chunkIndex + 1 < chunks) {
            EvalResult sofar = result;
            sofar.referenceNllMean = referenceCount > 0 ? referenceNll / static_cast<double>(referenceCount) : 0.0;
            sofar.attribution = attributionRows();
            for (ConfigurationResult& c : sofar.configurations)
                if (c.tokens.size() >= 2)
                    if (auto s = lm::summarizeNextTokens(c.tokens))
                        c.summary = *s;
            sofar.forwardMs = forwardMs;
            sofar.elapsedMs = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
            callbacks.partial(sofar);
        }
    }
    result.referenceNllMean = referenceCount > 0 ? referenceNll / static_cast<double>(referenceCount) : 0.0;
    result.attribution = attributionRows();
    report("done");
    return finish(false);
}

Result<EvalResult> runEval(const EvalSpec& spec, const EvalCallbacks& callbacks)
{
    if (auto ok = checkEvalSpec(spec); !ok)
        return ok.error();
    auto config = lm::loadHfConfig(spec.modelDir);
    if (!config)
        return config.error();
    if (auto ok = checkEvalSpec(spec, config->headDim); !ok)
        return ok.error();
    lm::LoadOptions load;
    const double limitMb = spec.memoryLimitMb > 0.0 ? spec.memoryLimitMb : 0.5 * physicalMemoryBytes() / 1048576.0;
    load.memoryLimitMiB = static_cast<std::uint64_t>(std::max(1.0, limitMb));
    load.contextTokens = spec.ctx;
    load.forwardsInFlight = 2;
    load.threads = spec.threads;
    auto model = lm::Transformer::load(spec.modelDir, load);
    if (!model)
        return model.error();
    retainFreedMemory();

    auto read = readModelInput(spec.modelDir, spec.textFile, spec.tokensFile, spec.parseSpecialTokens,
                               model->config().vocab);
    if (!read)
        return read.error();
    const std::vector<std::int32_t> tokens = std::move(read->tokens);
    const std::unique_ptr<lm::Tokenizer> tokenizer = std::move(read->tokenizer);
    const lm::Tokenizer& t = *tokenizer;
    auto result = runEval(spec, *model, tokens, t.bos(), callbacks, [&t](std::int32_t id) { return t.tokenBytes(id); });
    if (result)
        result->tokenizer = t.kind();
    return result;
}

} // namespace kvlens::eval
