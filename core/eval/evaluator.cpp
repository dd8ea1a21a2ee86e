// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluator: chunks, the reference and quantized passes in lockstep, per-token statistics,
// per-layer attribution by resuming the forward at the layer, calibration from the text's head.
#include "core/eval/evaluator.h"

#include "core/common/memory.h"
#include "core/eval/eval_shard.h"
#include "core/eval/model_input.h"
#include "core/io/ggml_dot.h"
#include "core/lm/gguf_model.h"
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
#include <span>

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
    std::optional<ggml::GgmlType> queryConversion;   ///< ggml's vec_dot_type of the keys' cache type
};

namespace {

/// The vec_dot_type ggml converts a query to before its product with keys stored by `path`: for a
/// path that is one of llama.cpp's cache types (a ggml block quantizer or fp16, with no transform
/// or residual beside it); nullopt for every other path.
std::optional<ggml::GgmlType> llamaQueryType(const PathConfig& path)
{
    if (!path.transforms.empty() || !path.residuals.empty() || path.tokenPolicy.kind != "uniform")
        return std::nullopt;
    std::optional<ggml::GgmlType> stored;
    if (path.quantizer.kind == "fp16")
        stored = ggml::GgmlType::F16;
    else if (path.quantizer.kind == "ggml")
        if (auto type = ggml::parseGgmlType(path.quantizer.text("type")))
            stored = ggml::ggmlType(*type);
    if (!stored)
        return std::nullopt;
    auto conversion = ggml::vecDotType(*stored);
    return conversion ? std::optional<ggml::GgmlType>(*conversion) : std::nullopt;
}

} // namespace

Result<std::shared_ptr<const CodecCache>> CodecCache::plan(const std::vector<SchemeConfig>& layers, int budget,
                                                           int kvHeads, int headDim, std::uint64_t seed,
                                                           const Calibration* calibration, bool ggmlQueryConversion)
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
            if (ggmlQueryConversion)
                cell->queryConversion = llamaQueryType(scheme.key);
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

std::optional<ggml::GgmlType> CodecCache::queryConversion(int layer, int kvHead) const
{
    return m_cells[static_cast<std::size_t>(layer)][static_cast<std::size_t>(kvHead)]->queryConversion;
}

std::string CodecCache::queryConversionName() const
{
    std::string out;
    std::string last;
    for (std::size_t l = 0; l < m_cells.size(); ++l) {
        const auto& c = m_cells[l].front()->queryConversion;
        const std::string name = c ? std::string(ggml::ggmlName(*c)) : "f32";
        if (l == 0 || name != last)
            out += (out.empty() ? "" : " ") + (m_cells.size() > 1 && l > 0 ? "layer " + std::to_string(l) + ": " : "") + name;
        last = name;
    }
    return out;
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
    std::optional<ggml::GgmlType> queryConversion(int layer, int kvHead) const override
    {
        const bool keysHere = m_mask.keys && (m_mask.kvHead < 0 || m_mask.kvHead == kvHead);
        return keysHere ? m_cache.queryConversion(layer, kvHead) : std::nullopt;
    }
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

namespace {

/// Keeps the first `count` scored positions of `r` (a cancelled chunk's positions dropped).
void trimTokens(EvalResult& r, std::size_t count)
{
    auto cut = [count](auto& v) {
        if (v.size() > count)
            v.resize(count);
    };
    cut(r.scored);
    cut(r.tokenText);
    cut(r.topBase);
    cut(r.referenceNll);
    for (auto& tokens : r.attributionTokens)
        cut(tokens);
    for (ConfigurationResult& c : r.configurations) {
        cut(c.tokens);
        cut(c.top);
        cut(c.proxies);
    }
}

/// Which layer (and KV head) and path a pass of the attribution quantizes.
struct AttributionKey {
    int configuration, layer, kvHead;
    AttributionPath path;
};

/// How the text is cut: calibration tokens first, then chunks of ctx whose second half is scored.
struct Chunking {
    int ctx = 0;
    int calibration = 0;     ///< leading tokens for calibration, never scored
    int chunks = 0;          ///< chunks scored
    int first = 0;           ///< the first scored position of a chunk (llama.cpp: ctx / 2)
    int scoredPerChunk = 0;  ///< positions first .. ctx - 2
};

/// Whether a path stores anything other than the exact values (a quantizer, a transform, a residual).
bool quantizesPath(const PathConfig& p)
{
    return p.quantizer.kind != "none" || !p.transforms.empty() || !p.residuals.empty();
}

/// One evaluation in three phases: plan (check, chunk, calibrate, plan every configuration's cache and
/// the attribution), run each chunk (the reference pass, every configuration's, the attribution
/// passes resumed from the reference's layer inputs), finish (summaries, timings). Cancellation is an
/// error of kind Cancelled from any forward; it ends the run with what was scored, marked cancelled.
class Evaluation {
public:
    Evaluation(const EvalSpec& spec, const lm::Transformer& model, const std::vector<std::int32_t>& tokens,
               std::optional<std::int32_t> bos, const EvalCallbacks& callbacks,
               const std::function<std::string(std::int32_t)>& tokenText, EvalShard shard, const EvalResult* reuse)
        : m_spec(spec), m_model(model), m_config(model.config()), m_tokens(tokens), m_bos(bos), m_callbacks(callbacks),
          m_tokenText(tokenText), m_started(Clock::now()), m_shard(shard), m_reuse(reuse)
    {
    }

    Result<EvalResult> run()
    {
        if (auto s = plan(); !s)
            return s.error().cancelled() ? Result<EvalResult>(finish(true)) : Result<EvalResult>(s.error());
        for (std::size_t i = 0; i < m_result.chunkIndices.size(); ++i) {
            if (auto s = runChunk(m_result.chunkIndices[i]); !s)
                return s.error().cancelled() ? Result<EvalResult>(finish(true)) : Result<EvalResult>(s.error());
            if (m_callbacks.partial && i + 1 < m_result.chunkIndices.size())
                m_callbacks.partial(snapshot());
        }
        report("done");
        return finish(false);
    }

private:
    // --- plan --------------------------------------------------------------------------------------

    Status plan()
    {
        if (auto s = validate(); !s)
            return s;
        if (auto s = planChunking(); !s)
            return s;
        startResult();
        if (auto s = calibrate(); !s)
            return s;
        computeQueryMoments();
        if (auto s = planConfigurations(); !s)
            return s;
        planAttribution();
        if (auto s = matchReuse(); !s)
            return s;
        m_totalWork = totalWork();
        return Ok{};
    }

    // --- reuse: configurations an earlier run of the same model, text and settings computed ---------

    /// Which configurations and attribution rows `m_reuse` holds. It must be a whole run (not a shard)
    /// of the same weights, tokens, thread count and settings (everything but the schemes, budgets and
    /// seeds), or it is refused naming what differs: then its rows are what this run would compute,
    /// bit for bit.
    Status matchReuse()
    {
        m_reusedConfiguration.assign(m_configurations.size(), -1);
        m_reusedAttribution.assign(m_attributionKeys.size(), -1);
        if (!m_reuse)
            return Ok{};
        const EvalResult& old = *m_reuse;
        const std::string why = old.shardCount != 1                          ? "it is a shard, not a whole run"
                                : old.modelHash != m_result.modelHash         ? "it ran other weights"
                                : old.tokensHash != m_result.tokensHash       ? "it read other tokens"
                                : old.threads != m_result.threads             ? "it ran on " + std::to_string(old.threads)
                                                                                    + " threads, this run on "
                                                                                    + std::to_string(m_result.threads)
                                : evalSettingsHash(old.spec) != evalSettingsHash(m_spec) ? "its settings differ (ctx, chunks, "
                                                                                          "calibration, residual, attribution "
                                                                                          "or query conversion)"
                                : old.chunkIndices.size() != static_cast<std::size_t>(m_chunking.chunks) ? "it is partial"
                                                                                                         : "";
        if (!why.empty())
            return Error{"reuse", "the earlier run cannot be reused: " + why};
        for (std::size_t c = 0; c < m_configurations.size(); ++c)
            for (std::size_t o = 0; o < old.configurations.size(); ++o)
                if (sameConfiguration(m_result.configurations[c], old.configurations[o], old.spec)) {
                    m_reusedConfiguration[c] = static_cast<int>(o);
                    break;
                }
        for (std::size_t a = 0; a < m_attributionKeys.size(); ++a) {
            const AttributionKey& key = m_attributionKeys[a];
            const int from = m_reusedConfiguration[static_cast<std::size_t>(key.configuration)];
            for (std::size_t r = 0; from >= 0 && r < old.attribution.size(); ++r) {
                const AttributionRow& row = old.attribution[r];
                if (row.configuration == from && row.layer == key.layer && row.kvHead == key.kvHead && row.path == key.path) {
                    m_reusedAttribution[a] = static_cast<int>(r);
                    break;
                }
            }
        }
        return Ok{};
    }

    /// The same scheme (composition, per-layer allocation and name), budget and seed value.
    bool sameConfiguration(const ConfigurationResult& now, const ConfigurationResult& old, const EvalSpec& oldSpec) const
    {
        return now.budget == old.budget && m_spec.seed(now.seedIndex) == oldSpec.seed(old.seedIndex)
               && old.scheme >= 0 && static_cast<std::size_t>(old.scheme) < oldSpec.schemes.size()
               && m_spec.schemes[static_cast<std::size_t>(now.scheme)] == oldSpec.schemes[static_cast<std::size_t>(old.scheme)];
    }

    bool everythingReused() const
    {
        return m_reuse && std::all_of(m_reusedConfiguration.begin(), m_reusedConfiguration.end(), [](int i) { return i >= 0; })
               && std::all_of(m_reusedAttribution.begin(), m_reusedAttribution.end(), [](int i) { return i >= 0; });
    }

    /// The rows of chunk `index` in a whole run: scoredPerChunk of them, chunk after chunk.
    std::size_t reusedRow(int index) const
    {
        return static_cast<std::size_t>(index) * static_cast<std::size_t>(m_chunking.scoredPerChunk);
    }

    /// A reused configuration's rows of chunk `index`.
    void takeConfiguration(std::size_t c, int index)
    {
        const ConfigurationResult& from = m_reuse->configurations[static_cast<std::size_t>(m_reusedConfiguration[c])];
        ConfigurationResult& to = m_result.configurations[c];
        const std::size_t first = reusedRow(index), n = static_cast<std::size_t>(m_chunking.scoredPerChunk);
        auto take = [&](auto& into, const auto& source) {
            into.insert(into.end(), source.begin() + static_cast<std::ptrdiff_t>(first),
                        source.begin() + static_cast<std::ptrdiff_t>(first + n));
        };
        take(to.tokens, from.tokens);
        take(to.top, from.top);
        take(to.proxies, from.proxies);
    }

    /// The reference's rows of chunk `index`, when nothing of the chunk is computed.
    void takeReference(int index)
    {
        const std::size_t first = reusedRow(index), n = static_cast<std::size_t>(m_chunking.scoredPerChunk);
        auto take = [&](auto& into, const auto& source) {
            into.insert(into.end(), source.begin() + static_cast<std::ptrdiff_t>(first),
                        source.begin() + static_cast<std::ptrdiff_t>(first + n));
        };
        take(m_result.scored, m_reuse->scored);
        take(m_result.tokenText, m_reuse->tokenText);
        take(m_result.topBase, m_reuse->topBase);
        take(m_result.referenceNll, m_reuse->referenceNll);
    }

    Status validate() const
    {
        if (auto ok = checkEvalSpec(m_spec, m_config.headDim); !ok)
            return ok;
        for (std::size_t i = 0; i < m_spec.schemes.size(); ++i)
            if (!m_spec.schemes[i].layers.empty() && static_cast<int>(m_spec.schemes[i].layers.size()) != m_config.layers)
                return Error{"schemes[" + std::to_string(i) + "].allocation",
                             m_spec.schemes[i].origin + " gives " + std::to_string(m_spec.schemes[i].layers.size())
                                 + " layers but the model has " + std::to_string(m_config.layers)};
        if (m_spec.ctx > m_config.maxChunkTokens())
            return Error{"ctx", "must be at most " + std::to_string(m_config.maxChunkTokens()) + " (the model's context: '"
                                    + m_config.contextKey + "' of " + m_config.source + "), got " + std::to_string(m_spec.ctx)};
        return lm::checkTokenIds(m_tokens, m_config.vocab, m_spec.tokensFile.empty() ? m_spec.textFile : m_spec.tokensFile);
    }

    Status planChunking()
    {
        Chunking& c = m_chunking;
        c.ctx = m_spec.ctx;
        c.calibration = m_spec.calibrationTokens >= 0 ? m_spec.calibrationTokens : (anyCalibrated(m_spec) ? c.ctx : 0);
        const long long available = (static_cast<long long>(m_tokens.size()) - c.calibration) / c.ctx;
        if (available < 2) {
            const bool text = m_spec.tokensFile.empty();
            return Error{text ? "text" : "tokens", (text ? m_spec.textFile : m_spec.tokensFile) + " gives "
                                                       + std::to_string(m_tokens.size()) + " tokens: after "
                                                       + std::to_string(c.calibration)
                                                       + " for calibration that is fewer than two chunks of "
                                                       + std::to_string(c.ctx) + " (ctx); give a longer text or a smaller ctx"};
        }
        c.chunks = static_cast<int>(m_spec.chunks > 0 ? std::min<long long>(m_spec.chunks, available) : available);
        if (m_shard.count > c.chunks)
            return Error{"shard", "the text gives " + std::to_string(c.chunks) + " chunks of " + std::to_string(c.ctx)
                                      + ", fewer than the " + std::to_string(m_shard.count)
                                      + " shards asked for: use at most " + std::to_string(c.chunks) + " shards"};
        c.first = c.ctx / 2; // llama.cpp: the first half of a chunk is context, the rest is scored
        c.scoredPerChunk = c.ctx - 1 - c.first;
        return Ok{};
    }

    void startResult()
    {
        m_result.spec = m_spec;
        m_result.modelSummary = m_config.summary();
        m_result.layers = m_config.layers;
        m_result.kvHeads = m_config.kvHeads;
        m_result.headDim = m_config.headDim;
        m_result.vocab = m_config.vocab;
        m_result.calibrationTokens = m_chunking.calibration;
        m_result.tokens = m_tokens;
        m_result.bos = m_bos;
        // A shard scores a fixed 1/N of the chunks: [C i / N, C (i + 1) / N), the same whatever else runs.
        m_result.shardIndex = m_shard.index;
        m_result.shardCount = m_shard.count;
        m_result.modelHash = m_model.dataHash();
        m_result.threads = m_model.threads();
        const auto used = static_cast<std::size_t>(m_chunking.calibration)
                          + static_cast<std::size_t>(m_chunking.chunks) * static_cast<std::size_t>(m_chunking.ctx);
        m_result.tokensHash = tokensHash(std::vector<std::int32_t>(m_tokens.begin(), m_tokens.begin() + static_cast<std::ptrdiff_t>(used)));
        const long long total = m_chunking.chunks;
        for (long long c = total * m_shard.index / m_shard.count; c < total * (m_shard.index + 1) / m_shard.count; ++c)
            m_result.chunkIndices.push_back(static_cast<int>(c));
    }

    /// The exact cache's K, V and Q over the calibration tokens, per (layer, KV head).
    Status calibrate()
    {
        if (m_chunking.calibration == 0)
            return Ok{};
        report("calibration: " + std::to_string(m_chunking.calibration) + " tokens");
        auto rows = calibrationFromText(m_model, m_tokens, m_chunking.calibration, m_chunking.ctx, m_bos,
                                        m_callbacks.cancelled);
        m_done += static_cast<double>(m_chunking.calibration) * m_config.layers;
        if (!rows)
            return rows.error();
        m_calibration = std::move(rows).value();
        return Ok{};
    }

    /// The calibration queries' second moment per (layer, KV head), for the deployable score-error proxy.
    void computeQueryMoments()
    {
        if (m_chunking.calibration == 0)
            return;
        m_queryMoments.resize(m_calibration.queries.size());
        for (std::size_t l = 0; l < m_queryMoments.size(); ++l)
            for (const RowMatrixXf& q : m_calibration.queries[l]) {
                Eigen::MatrixXf m = Eigen::MatrixXf::Zero(m_config.headDim, m_config.headDim);
                if (q.rows() > 0 && q.cols() == m_config.headDim)
                    m = (q.transpose() * q) / static_cast<float>(q.rows());
                m_queryMoments[l].push_back(std::move(m));
            }
    }

    /// Every configuration's cache, planned once: schemes outermost, then budgets (once for a
    /// budget-free scheme), then seeds.
    Status planConfigurations()
    {
        for (std::size_t s = 0; s < m_spec.schemes.size(); ++s) {
            const bool fixed = budgetFree(m_spec.schemes[s]);
            for (int budget : fixed ? std::vector<int>{m_spec.budgets.front()} : m_spec.budgets)
                for (int k = 0; k < m_spec.seedCount; ++k)
                    if (auto st = planConfiguration(static_cast<int>(s), budget, k, fixed); !st)
                        return st;
        }
        return Ok{};
    }

    Status planConfiguration(int s, int budget, int seedIndex, bool fixed)
    {
        const EvalScheme& scheme = m_spec.schemes[static_cast<std::size_t>(s)];
        const std::vector<SchemeConfig> layers = layerSchemes(scheme, m_config.layers);
        auto cache = CodecCache::plan(layers, budget, m_config.kvHeads, m_config.headDim, m_spec.seed(seedIndex),
                                      m_chunking.calibration > 0 ? &m_calibration : nullptr, m_spec.ggmlQueryConversion);
        if (!cache)
            return Error{"schemes[" + std::to_string(s) + "]", cache.error().text()};
        Configuration conf{s, budget, seedIndex, *cache, isIdentity(scheme)};
        ConfigurationResult r;
        r.scheme = s;
        r.budget = fixed ? 0 : budget;
        r.seedIndex = seedIndex;
        r.name = scheme.scheme.name;
        r.bitsK = conf.cache->bitsK(m_chunking.ctx);
        r.bitsV = conf.cache->bitsV(m_chunking.ctx);
        r.queryConversion = conf.identity ? "f32" : conf.cache->queryConversionName();
        if (!conf.identity)
            if (auto st = cacheReads(conf, layers, r); !st)
                return Error{"schemes[" + std::to_string(s) + "]", st.error().message};
        r.tokens.reserve(static_cast<std::size_t>(m_chunking.chunks) * m_chunking.scoredPerChunk);
        m_configurations.push_back(std::move(conf));
        m_result.configurations.push_back(std::move(r));
        return Ok{};
    }

    /// The share of the keys (and values) scored queries read from the quantized cache, per path: a
    /// codec that encodes groups of G tokens leaves a query's open group exact, as does a residual
    /// window. A path that quantizes but whose cache no scored query ever reads would report its
    /// nominal bits and measure nothing: refused, with the context it needs.
    Status cacheReads(const Configuration& conf, const std::vector<SchemeConfig>& layers, ConfigurationResult& r) const
    {
        const Chunking& c = m_chunking;
        double share[2] = {0.0, 0.0};
        for (int keys = 1; keys >= 0; --keys) {
            for (int l = 0; l < m_config.layers; ++l) {
                const PathConfig& path = keys ? layers[static_cast<std::size_t>(l)].key : layers[static_cast<std::size_t>(l)].value;
                const int group = conf.cache->causalGroup(l, keys != 0);
                double sum = 0.0;
                for (int t = c.first; t < c.first + c.scoredPerChunk; ++t)
                    sum += static_cast<double>(lm::cachedKeys(t, group, m_spec.residual)) / (t + 1);
                const double layerShare = quantizesPath(path) ? sum / c.scoredPerChunk : 1.0;
                if (quantizesPath(path) && lm::cachedKeys(c.ctx - 2, group, m_spec.residual) == 0)
                    return Error{"", "'" + r.name + "' encodes its " + (keys ? "keys" : "values") + " in groups of "
                                         + std::to_string(group) + " tokens (layer " + std::to_string(l)
                                         + "), so at ctx " + std::to_string(c.ctx)
                                         + (m_spec.residual > 0 ? " with a residual window of " + std::to_string(m_spec.residual) : "")
                                         + " no scored token reads a quantized " + (keys ? "key" : "value")
                                         + ": it would measure nothing; use a ctx of at least "
                                         + std::to_string(2 * (group + std::max(0, m_spec.residual)))};
                share[keys] += layerShare / m_config.layers;
            }
        }
        r.cacheShareK = share[1];
        r.cacheShareV = share[0];
        return Ok{};
    }

    void planAttribution()
    {
        if (m_spec.attribution == Attribution::None)
            return;
        for (std::size_t c = 0; c < m_configurations.size(); ++c)
            for (int l = 0; l < m_config.layers; ++l) {
                for (AttributionPath p : {AttributionPath::K, AttributionPath::V, AttributionPath::Both})
                    m_attributionKeys.push_back({static_cast<int>(c), l, -1, p});
                if (m_spec.attribution == Attribution::Heads)
                    for (int h = 0; h < m_config.kvHeads; ++h)
                        m_attributionKeys.push_back({static_cast<int>(c), l, h, AttributionPath::Both});
            }
        for (const AttributionKey& key : m_attributionKeys) {
            AttributionRow row;
            row.configuration = key.configuration;
            row.layer = key.layer;
            row.kvHead = key.kvHead;
            row.path = key.path;
            m_result.attribution.push_back(row);
        }
        m_result.attributionTokens.assign(m_attributionKeys.size(), {});
    }

    /// Work units for progress: token-layers through forward passes.
    double totalWork() const
    {
        const lm::ModelConfig& c = m_config;
        // Reused configurations cost nothing; the reference runs unless everything is reused.
        const double configurations = static_cast<double>(
            std::count(m_reusedConfiguration.begin(), m_reusedConfiguration.end(), -1));
        const double reference = everythingReused() ? 0.0 : 1.0;
        // A pass resumed at layer L runs layers - L layers: on average about half.
        const double attributionLayers = m_spec.attribution == Attribution::None ? 0.0
                                         : 3.0 * c.layers * (c.layers + 1) / 2.0
                                               + (m_spec.attribution == Attribution::Heads
                                                      ? c.kvHeads * c.layers * (c.layers + 1) / 2.0
                                                      : 0.0);
        const double perChunk = static_cast<double>(m_chunking.ctx)
                                * (c.layers * (reference + configurations) + configurations * attributionLayers);
        return perChunk * static_cast<double>(m_result.chunkIndices.size())
               + static_cast<double>(m_chunking.calibration) * c.layers;
    }

    // --- one chunk ---------------------------------------------------------------------------------

    Status runChunk(int index)
    {
        const long long begin = m_chunking.calibration + static_cast<long long>(index) * m_chunking.ctx;
        std::vector<std::int32_t> chunk(m_tokens.begin() + begin, m_tokens.begin() + begin + m_chunking.ctx);
        if (m_bos) // llama.cpp replaces each chunk's first token with BOS
            chunk.front() = *m_bos;
        m_where = "chunk " + std::to_string(index + 1) + " of " + std::to_string(m_chunking.chunks);
        if (everythingReused()) {
            takeReference(index);
            for (std::size_t c = 0; c < m_configurations.size(); ++c)
                takeConfiguration(c, index);
            for (std::size_t a = 0; a < m_attributionKeys.size(); ++a)
                takeAttribution(a, index);
            m_chunksDone.push_back(index);
            return Ok{};
        }
        std::vector<RowMatrixXf> layerInputs;
        auto base = runReference(index, chunk, layerInputs);
        if (!base)
            return base.error();
        for (std::size_t c = 0; c < m_configurations.size(); ++c) {
            if (m_reuse && m_reusedConfiguration[c] >= 0) {
                takeConfiguration(c, index);
                continue;
            }
            if (auto s = runConfiguration(c, chunk, *base); !s)
                return s;
            if (cancelled())
                return Error::cancellation();
        }
        for (std::size_t a = 0; a < m_attributionKeys.size(); ++a) {
            if (m_reuse && m_reusedAttribution[a] >= 0) {
                takeAttribution(a, index);
                continue;
            }
            if (auto s = runAttribution(a, chunk, *base, layerInputs); !s)
                return s;
        }
        m_chunksDone.push_back(index);
        return Ok{};
    }

    /// A reused attribution row's tokens of chunk `index`.
    void takeAttribution(std::size_t a, int index)
    {
        const auto& from = m_reuse->attributionTokens[static_cast<std::size_t>(m_reusedAttribution[a])];
        const std::size_t first = reusedRow(index), n = static_cast<std::size_t>(m_chunking.scoredPerChunk);
        auto& to = m_result.attributionTokens[a];
        to.insert(to.end(), from.begin() + static_cast<std::ptrdiff_t>(first), from.begin() + static_cast<std::ptrdiff_t>(first + n));
    }

    /// The exact pass: the scored positions, the reference's own NLL and five most likely next tokens.
    Result<RowMatrixXf> runReference(int index, const std::vector<std::int32_t>& chunk, std::vector<RowMatrixXf>& layerInputs)
    {
        report(m_where + ": reference");
        lm::ForwardOptions options;
        options.logitsStart = m_chunking.first;
        if (m_spec.attribution != Attribution::None)
            options.layerInputs = &layerInputs;
        auto base = forward(chunk, options, m_config.layers);
        if (!base)
            return base.error();
        for (int i = 0; i < m_chunking.scoredPerChunk; ++i) {
            const auto position = static_cast<std::size_t>(m_chunking.first + i);
            m_result.scored.push_back(ScoredToken{index, static_cast<int>(position), chunk[position], chunk[position + 1]});
            m_result.tokenText.push_back(m_tokenText ? m_tokenText(chunk[position + 1]) : std::string());
        }
        // The reference against itself: Q = base, so KLD 0 and its NLL.
        if (auto ok = score(chunk, base->logits, base->logits,
                            [&](const lm::TokenStat& t) { m_result.referenceNll.push_back(t.nllBase); });
            !ok)
            return ok.error();
        for (int i = 0; i < m_chunking.scoredPerChunk; ++i)
            m_result.topBase.push_back(topOf(base->logits.row(i)));
        return std::move(base->logits);
    }

    Status runConfiguration(std::size_t c, const std::vector<std::int32_t>& chunk, const RowMatrixXf& base)
    {
        const Configuration& conf = m_configurations[c];
        ConfigurationResult& out = m_result.configurations[c];
        report(m_where + ": " + out.name + (out.budget > 0 ? " n = " + std::to_string(out.budget) : std::string()));
        lm::ForwardOptions options;
        // The identity codec is not applied: with a residual window the cache path sums P V in two
        // products (exact and cached keys), which rounds differently from the reference's one.
        options.cache = conf.identity ? nullptr : conf.cache.get();
        options.residual = conf.identity ? 0 : m_spec.residual;
        options.logitsStart = m_chunking.first;
        if (!conf.identity)
            options.damage = lm::DamageRequest{m_chunking.first, m_queryMoments.empty() ? nullptr : &m_queryMoments};
        auto quantized = forward(chunk, options, m_config.layers);
        if (!quantized)
            return quantized.error();
        if (auto ok = score(chunk, base, quantized->logits, [&](const lm::TokenStat& t) { out.tokens.push_back(t); }); !ok)
            return ok;
        for (int i = 0; i < m_chunking.scoredPerChunk; ++i) {
            out.top.push_back(topOf(quantized->logits.row(i)));
            out.proxies.push_back(quantized->damage ? tokenProxies(*quantized->damage, i) : TokenProxies{});
        }
        return Ok{};
    }

    /// One attribution pass: resumed at the key's layer from the reference's state entering it, with
    /// only that layer's (or KV head's) cache quantized on the key's paths.
    Status runAttribution(std::size_t a, const std::vector<std::int32_t>& chunk, const RowMatrixXf& base,
                          const std::vector<RowMatrixXf>& layerInputs)
    {
        const AttributionKey& key = m_attributionKeys[a];
        const Configuration& conf = m_configurations[static_cast<std::size_t>(key.configuration)];
        CodecCache::Mask mask;
        mask.layer = key.layer;
        mask.kvHead = key.kvHead;
        mask.keys = key.path != AttributionPath::V;
        mask.values = key.path != AttributionPath::K;
        const auto hook = conf.cache->masked(mask);
        lm::ForwardOptions options;
        options.cache = conf.identity ? nullptr : hook.get();
        options.residual = conf.identity ? 0 : m_spec.residual;
        options.logitsStart = m_chunking.first;
        options.startLayer = key.layer;
        options.startHidden = &layerInputs[static_cast<std::size_t>(key.layer)];
        report(m_where + ": " + m_result.configurations[static_cast<std::size_t>(key.configuration)].name + " n = "
               + std::to_string(conf.budget) + ", layer " + std::to_string(key.layer) + " alone");
        auto pass = forward(chunk, options, m_config.layers - key.layer);
        if (!pass)
            return pass.error();
        return score(chunk, base, pass->logits,
                     [&](const lm::TokenStat& t) { m_result.attributionTokens[a].push_back({t.kld, t.sameTop()}); });
    }

    Result<lm::ForwardResult> forward(std::span<const std::int32_t> chunk, lm::ForwardOptions options, int layersRun)
    {
        options.cancelled = m_callbacks.cancelled;
        const auto t0 = Clock::now();
        auto r = m_model.forward(chunk, options);
        m_forwardMs += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        m_result.forwardTokens += static_cast<long long>(chunk.size()) * layersRun / std::max(1, m_config.layers);
        m_done += static_cast<double>(chunk.size()) * layersRun;
        return r;
    }

    /// llama.cpp's per-token statistics of the scored positions: logits against the reference's.
    Status score(const std::vector<std::int32_t>& chunk, const RowMatrixXf& base, const RowMatrixXf& logits,
                 const std::function<void(const lm::TokenStat&)>& sink) const
    {
        for (int i = 0; i < m_chunking.scoredPerChunk; ++i) {
            const auto row = static_cast<Eigen::Index>(i);
            auto stat = lm::scoreToken(std::span<const float>(base.row(row).data(), static_cast<std::size_t>(base.cols())),
                                       std::span<const float>(logits.row(row).data(), static_cast<std::size_t>(logits.cols())),
                                       chunk[static_cast<std::size_t>(m_chunking.first + i + 1)]);
            if (!stat)
                return stat.error();
            sink(*stat);
        }
        return Ok{};
    }

    // --- finish ------------------------------------------------------------------------------------

    /// The result so far: the chunks every part finished (a cancelled chunk's partial rows dropped),
    /// its summaries and attribution rows, timings.
    EvalResult snapshot() const
    {
        EvalResult r = m_result;
        r.chunkIndices = m_chunksDone;
        const std::size_t tokens = m_chunksDone.size() * static_cast<std::size_t>(m_chunking.scoredPerChunk);
        trimTokens(r, tokens);
        finishEvalResult(r);
        r.forwardMs = m_forwardMs;
        r.elapsedMs = std::chrono::duration<double, std::milli>(Clock::now() - m_started).count();
        // Read at the end: a device's label counts the passes that fell back to the CPU.
        r.forward = m_model.device() ? m_model.device()->label() : "CPU, " + std::to_string(m_model.threads()) + " threads";
        return r;
    }

    EvalResult finish(bool wasCancelled)
    {
        EvalResult r = snapshot();
        r.cancelled = wasCancelled;
        return r;
    }

    void report(const std::string& stage) const
    {
        if (m_callbacks.progress)
            m_callbacks.progress(m_done, m_totalWork, stage);
    }

    bool cancelled() const { return m_callbacks.cancelled && m_callbacks.cancelled(); }

    const EvalSpec& m_spec;
    const lm::Transformer& m_model;
    const lm::ModelConfig& m_config;
    const std::vector<std::int32_t>& m_tokens;
    std::optional<std::int32_t> m_bos;
    const EvalCallbacks& m_callbacks;
    const std::function<std::string(std::int32_t)>& m_tokenText;
    Clock::time_point m_started;
    EvalShard m_shard;
    const EvalResult* m_reuse = nullptr;
    std::vector<int> m_reusedConfiguration; ///< per configuration: its index in m_reuse, or -1
    std::vector<int> m_reusedAttribution;   ///< per attribution key: its row in m_reuse, or -1

    Chunking m_chunking;
    CodecCache::Calibration m_calibration;
    std::vector<std::vector<Eigen::MatrixXf>> m_queryMoments;
    std::vector<Configuration> m_configurations;
    std::vector<AttributionKey> m_attributionKeys;

    EvalResult m_result;
    std::string m_where;
    std::vector<int> m_chunksDone; ///< chunks whose every pass finished, in order
    double m_done = 0.0, m_totalWork = 0.0, m_forwardMs = 0.0;
};

} // namespace

void finishEvalResult(EvalResult& r)
{
    r.chunksScored = static_cast<int>(r.chunkIndices.size());
    for (ConfigurationResult& c : r.configurations) {
        c.summary = lm::NextTokenSummary{};
        if (c.tokens.size() >= 2)
            if (auto s = lm::summarizeNextTokens(c.tokens))
                c.summary = *s;
    }
    for (std::size_t a = 0; a < r.attribution.size() && a < r.attributionTokens.size(); ++a) {
        double sum = 0.0, sumSquares = 0.0;
        std::size_t same = 0;
        for (const AttributionToken& t : r.attributionTokens[a]) {
            sum += t.kld;
            sumSquares = std::fma(t.kld, t.kld, sumSquares); // fused as written: contraction-proof
            same += t.sameTop ? 1 : 0;
        }
        const std::size_t count = r.attributionTokens[a].size();
        AttributionRow& row = r.attribution[a];
        row.kld = lm::meanAndError(sum, sumSquares, count);
        // Fused as written: a compiler contracting a*b + c or not would move the last bit of the ends.
        row.kldLow = std::fma(-1.96, row.kld.error, row.kld.mean);
        row.kldHigh = std::fma(1.96, row.kld.error, row.kld.mean);
        row.sameTop = count > 0 ? static_cast<double>(same) / static_cast<double>(count) : 0.0;
    }
    double nll = 0.0;
    for (const double x : r.referenceNll)
        nll += x;
    r.referenceNllMean = r.referenceNll.empty() ? 0.0 : nll / static_cast<double>(r.referenceNll.size());
}

Result<EvalResult> runEval(const EvalSpec& spec, const lm::Transformer& model, const std::vector<std::int32_t>& tokens,
                           std::optional<std::int32_t> bos, const EvalCallbacks& callbacks,
                           const std::function<std::string(std::int32_t)>& tokenText, EvalShard shard,
                           const EvalResult* reuse)
{
    if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
        return Error{"shard", "must be I/N with 0 <= I < N, got " + std::to_string(shard.index) + "/"
                                  + std::to_string(shard.count)};
    return Evaluation(spec, model, tokens, bos, callbacks, tokenText, shard, reuse).run();
}

namespace {

/// What an evaluation cancelled before its first forward returns: nothing scored, marked cancelled.
EvalResult cancelledBeforeStart(const EvalSpec& spec)
{
    EvalResult r;
    r.spec = spec;
    r.cancelled = true;
    return r;
}

} // namespace

std::uint64_t evalWorkingBytes(const EvalSpec& spec, const lm::ModelConfig& c, std::int64_t tokens)
{
    const std::uint64_t hd = static_cast<std::uint64_t>(c.headDim), layers = static_cast<std::uint64_t>(c.layers),
                        kvHeads = static_cast<std::uint64_t>(c.kvHeads), heads = static_cast<std::uint64_t>(c.heads);
    const auto calibration = static_cast<std::uint64_t>(spec.calibrationTokens >= 0 ? spec.calibrationTokens : spec.ctx);
    // Calibration K, V and Q rows, and each (layer, KV head)'s query second moment.
    std::uint64_t floats = layers * (2 * kvHeads + heads) * calibration * hd + layers * kvHeads * hd * hd;
    // The reference's layer inputs, kept for the attribution passes.
    if (spec.attribution != Attribution::None)
        floats += layers * static_cast<std::uint64_t>(spec.ctx) * static_cast<std::uint64_t>(c.hidden);
    // Per scored token and configuration: llama.cpp's statistics, five top tokens, seven proxies; per
    // token and attribution row, its KLD and top-1 agreement.
    const std::int64_t available = std::max<std::int64_t>(0, (tokens - static_cast<std::int64_t>(calibration)) / spec.ctx);
    const std::int64_t chunks = spec.chunks > 0 ? std::min<std::int64_t>(spec.chunks, available) : available;
    const auto scored = static_cast<std::uint64_t>(chunks) * static_cast<std::uint64_t>(spec.ctx / 2);
    const std::uint64_t perToken = sizeof(lm::TokenStat) + sizeof(TopTokens) + sizeof(TokenProxies);
    const auto configurations = static_cast<std::uint64_t>(std::max<long long>(1, spec.configurationCount()) + 1);
    const std::uint64_t rowsPerConfiguration = spec.attribution == Attribution::None ? 0
                                               : 3 * layers + (spec.attribution == Attribution::Heads ? layers * kvHeads : 0);
    const std::uint64_t attribution = scored * sizeof(AttributionToken) * rowsPerConfiguration * configurations;
    return floats * sizeof(float) + scored * perToken * configurations + attribution + static_cast<std::uint64_t>(tokens) * 4;
}

std::size_t evalTokensNeeded(const EvalSpec& spec)
{
    if (spec.chunks <= 0)
        return 0;
    // Calibration (a chunk when -1, read either way: the bound only has to hold), then the chunks.
    return static_cast<std::size_t>(std::max(0, spec.calibrationTokens) + spec.ctx)
           + static_cast<std::size_t>(spec.chunks) * static_cast<std::size_t>(spec.ctx);
}

std::uint64_t memoryLimitMiB(double requestedMb)
{
    if (requestedMb > 0.0)
        return static_cast<std::uint64_t>(std::clamp(requestedMb, 1.0, static_cast<double>(EvalLimits::kMaxMemoryLimitMb)));
    return lm::defaultMemoryLimitMiB();
}

Result<EvalResult> runEval(const EvalSpec& spec, const EvalCallbacks& callbacks, EvalShard shard, const EvalResult* reuse)
{
    if (auto ok = checkEvalSpec(spec); !ok)
        return ok.error();
    auto source = lm::openModelSource(spec.modelDir); // a Hugging Face folder or a GGUF file
    if (!source)
        return source.error();
    const lm::ModelConfig* config = &source->config;
    if (auto ok = checkEvalSpec(spec, config->headDim); !ok)
        return ok.error();
    // The tokens first (only as many as the run needs), so the memory check sees the whole run.
    const std::size_t needed = evalTokensNeeded(spec);
    auto read = readModelInput(spec.modelDir, spec.textFile, spec.tokensFile, spec.parseSpecialTokens, config->vocab,
                               needed, callbacks.cancelled);
    if (!read)
        return read.error().cancelled() ? Result<EvalResult>(cancelledBeforeStart(spec)) : Result<EvalResult>(read.error());
    lm::LoadOptions load;
    load.memoryLimitMiB = memoryLimitMiB(spec.memoryLimitMb);
    load.contextTokens = spec.ctx;
    load.forwardsInFlight = 2;
    load.threads = spec.threads;
    load.otherBytes = evalWorkingBytes(spec, *config, static_cast<std::int64_t>(read->tokens.size()));
    load.otherWhat = "calibration, attribution inputs and per-token statistics";
    auto model = lm::Transformer::load(*source, load);
    if (!model)
        return model.error();
    retainFreedMemory();
    std::string forwardNote;
    if (callbacks.prepare) {
        auto note = callbacks.prepare(*model);
        if (!note)
            return note.error();
        forwardNote = std::move(note).value();
    }
    const std::vector<std::int32_t> tokens = std::move(read->tokens);
    const std::unique_ptr<lm::Tokenizer> tokenizer = std::move(read->tokenizer);
    const lm::Tokenizer& t = *tokenizer;
    auto result = runEval(spec, *model, tokens, t.bos(), callbacks, [&t](std::int32_t id) { return t.tokenBytes(id); },
                          shard, reuse);
    if (result) {
        result->tokenizer = t.kind();
        if (!forwardNote.empty())
            result->forward += " (" + forwardNote + ")";
    }
    return result;
}

} // namespace kvlens::eval
