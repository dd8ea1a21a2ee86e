// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/eval/drill_down.h"

#include "core/eval/evaluator.h"

#include <algorithm>
#include <cmath>

namespace kvlens::eval {

namespace {

/// The configuration's cache, planned as the evaluation planned it (the same seed, calibration).
Result<std::shared_ptr<const CodecCache>> cacheOf(const lm::Transformer& model, const EvalResult& r, int configuration,
                                                  const std::function<bool()>& cancelled)
{
    const ConfigurationResult& c = r.configurations[static_cast<std::size_t>(configuration)];
    const lm::ModelConfig& config = model.config();
    CodecCache::Calibration calibration;
    if (r.calibrationTokens > 0) {
        auto rows = calibrationFromText(model, r.tokens, r.calibrationTokens, r.spec.ctx, r.bos, cancelled);
        if (!rows)
            return rows.error();
        calibration = std::move(rows).value();
    }
    const int budget = c.budget > 0 ? c.budget : r.spec.budgets.front();
    return CodecCache::plan(configurationLayers(r.spec, c.scheme, config.layers), budget, config.kvHeads, config.headDim,
                            r.spec.seed(c.seedIndex), r.calibrationTokens > 0 ? &calibration : nullptr);
}

/// The scored position's chunk, as the evaluation ran it.
std::vector<std::int32_t> chunkOf(const EvalResult& r, int scored)
{
    const ScoredToken& s = r.scored[static_cast<std::size_t>(scored)];
    const auto begin = static_cast<std::size_t>(r.calibrationTokens) + static_cast<std::size_t>(s.chunk) * r.spec.ctx;
    std::vector<std::int32_t> chunk(r.tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                                    r.tokens.begin() + static_cast<std::ptrdiff_t>(begin + r.spec.ctx));
    if (r.bos)
        chunk.front() = *r.bos;
    return chunk;
}

Result<TokenAttention> probeWith(const lm::Transformer& model, const EvalResult& r, const CodecCache& cache,
                                 int configuration, int scored, int layer, int head, const std::function<bool()>& cancelled)
{
    const ScoredToken& s = r.scored[static_cast<std::size_t>(scored)];
    const std::vector<std::int32_t> chunk = chunkOf(r, scored);
    const lm::ProbeRequest request{layer, head, s.position};
    lm::ForwardOptions reference;
    reference.probe = request;
    reference.logitsStart = s.position;
    reference.cancelled = cancelled;
    auto base = model.forward(chunk, reference);
    if (!base)
        return base.error();
    lm::ForwardOptions quantized = reference;
    quantized.cache = &cache;
    quantized.residual = r.spec.residual;
    auto q = model.forward(chunk, quantized);
    if (!q)
        return q.error();
    TokenAttention a;
    a.configuration = configuration;
    a.scored = scored;
    a.layer = layer;
    a.head = head;
    a.kvHead = base->probe->kvHead;
    a.position = s.position;
    a.keys.assign(chunk.begin(), chunk.begin() + s.position + 1);
    a.exact = base->probe->exactProbs;
    a.quantized = q->probe->cacheProbs;
    a.scoreError.resize(a.exact.size());
    for (std::size_t j = 0; j < a.scoreError.size(); ++j)
        a.scoreError[j] = static_cast<double>(q->probe->cacheScores[j]) - static_cast<double>(q->probe->exactScores[j]);
    for (std::size_t j = 0; j < a.exact.size(); ++j)
        if (a.exact[j] > 0.0)
            a.kl += a.exact[j] * (std::log(a.exact[j]) - std::log(std::max(a.quantized[j], 1e-300)));
    a.kl = std::max(0.0, a.kl);
    return a;
}

Status checkArguments(const lm::Transformer& model, const EvalResult& r, int configuration, int scored)
{
    if (configuration < 0 || configuration >= static_cast<int>(r.configurations.size()))
        return Error{"configuration", "must be in [0, " + std::to_string(r.configurations.size()) + "), got "
                                          + std::to_string(configuration)};
    if (scored < 0 || scored >= static_cast<int>(r.scored.size()))
        return Error{"token", "must be a scored position in [0, " + std::to_string(r.scored.size()) + "), got "
                                  + std::to_string(scored)};
    if (r.tokens.empty())
        return Error{"token", "the evaluation kept no token ids (a cancelled or foreign result)"};
    if (model.config().layers != r.layers || model.config().headDim != r.headDim)
        return Error{"model", "is not the evaluated model (" + model.config().summary() + ")"};
    return Ok{};
}

} // namespace

Result<TokenAttention> probeToken(const lm::Transformer& model, const EvalResult& r, int configuration, int scored,
                                  int layer, int head, const std::function<bool()>& cancelled)
{
    if (auto ok = checkArguments(model, r, configuration, scored); !ok)
        return ok.error();
    if (layer < 0 || layer >= model.config().layers)
        return Error{"layer", "must be in [0, " + std::to_string(model.config().layers) + "), got " + std::to_string(layer)};
    if (head < 0 || head >= model.config().heads)
        return Error{"head", "must be in [0, " + std::to_string(model.config().heads) + "), got " + std::to_string(head)};
    auto cache = cacheOf(model, r, configuration, cancelled);
    if (!cache)
        return cache.error();
    return probeWith(model, r, **cache, configuration, scored, layer, head, cancelled);
}

Result<std::vector<TokenAttention>> headChanges(const lm::Transformer& model, const EvalResult& r, int configuration,
                                                int scored, const std::function<bool()>& cancelled)
{
    if (auto ok = checkArguments(model, r, configuration, scored); !ok)
        return ok.error();
    auto cache = cacheOf(model, r, configuration, cancelled);
    if (!cache)
        return cache.error();
    std::vector<TokenAttention> out;
    for (int l = 0; l < model.config().layers; ++l)
        for (int h = 0; h < model.config().heads; ++h) {
            auto a = probeWith(model, r, **cache, configuration, scored, l, h, cancelled);
            if (!a)
                return a.error();
            out.push_back(std::move(a).value());
        }
    std::stable_sort(out.begin(), out.end(), [](const TokenAttention& a, const TokenAttention& b) { return a.kl > b.kl; });
    return out;
}

} // namespace kvlens::eval
