// SPDX-License-Identifier: GPL-3.0-or-later
// EvalSpec's checks (its JSON lives in spec_json.cpp with the other spec formats).
#include "core/spec/eval_spec.h"

#include <cstdio>

namespace kvlens {

std::string_view attributionName(Attribution a)
{
    switch (a) {
    case Attribution::None: return "none";
    case Attribution::Layers: return "layers";
    case Attribution::Heads: return "heads";
    }
    return "layers";
}

long long EvalSpec::configurationCount() const
{
    return static_cast<long long>(schemes.size()) * static_cast<long long>(budgets.size()) * seedCount;
}

namespace {

Error outOfRange(const std::string& field, long long lo, long long hi, long long got)
{
    return Error{field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(got)};
}

} // namespace

Status checkEvalSpec(const EvalSpec& s, int headDim)
{
    using L = EvalLimits;
    if (s.modelDir.empty())
        return Error{"model", "name the model folder (a Hugging Face folder: config.json and model.safetensors)"};
    if (s.textFile.empty() == s.tokensFile.empty())
        return Error{s.textFile.empty() ? "text" : "tokens", "give exactly one of \"text\" (a UTF-8 file) and \"tokens\" "
                                                             "(token ids, .npy int32 or int64)"};
    if (s.ctx < L::kMinCtx || s.ctx > L::kMaxCtx)
        return outOfRange("ctx", L::kMinCtx, L::kMaxCtx, s.ctx);
    if (s.chunks < 0 || s.chunks > L::kMaxChunks)
        return outOfRange("chunks", 0, L::kMaxChunks, s.chunks);
    if (s.calibrationTokens < -1 || s.calibrationTokens > L::kMaxCtx * 16)
        return outOfRange("calibration_tokens", -1, L::kMaxCtx * 16, s.calibrationTokens);
    if (s.seedCount < 1 || s.seedCount > L::kMaxSeeds)
        return outOfRange("seeds.count", 1, L::kMaxSeeds, s.seedCount);
    if (s.residual < 0 || s.residual > s.ctx)
        return outOfRange("residual", 0, s.ctx, s.residual);
    if (s.threads < 0 || s.threads > 1024)
        return outOfRange("threads", 0, 1024, s.threads);
    if (!(s.memoryLimitMb >= 0.0 && s.memoryLimitMb <= L::kMaxMemoryLimitMb))
        return Error{"memory_limit_mb", "must be a number of MiB in [0, 1073741824] (0: most of physical memory)"};
    if (s.schemes.empty())
        return Error{"schemes", "choose at least one scheme (known: " + schemeNames() + ")"};
    if (s.budgets.empty())
        return Error{"budgets", "give at least one budget in [1, 8]"};
    for (std::size_t i = 0; i < s.budgets.size(); ++i) {
        if (s.budgets[i] < 1 || s.budgets[i] > 8)
            return outOfRange("budgets[" + std::to_string(i) + "]", 1, 8, s.budgets[i]);
        for (std::size_t j = 0; j < i; ++j)
            if (s.budgets[j] == s.budgets[i])
                return Error{"budgets[" + std::to_string(i) + "]", "budget " + std::to_string(s.budgets[i]) + " is listed twice"};
    }
    if (s.configurationCount() > L::kMaxConfigurations)
        return Error{"schemes", "schemes x budgets x seeds is " + std::to_string(s.configurationCount())
                                    + " configurations, above " + std::to_string(L::kMaxConfigurations)};
    for (std::size_t i = 0; i < s.schemes.size(); ++i) {
        const std::string field = "schemes[" + std::to_string(i) + "]";
        for (std::size_t j = 0; j < i; ++j)
            if (s.schemes[j].scheme.name == s.schemes[i].scheme.name)
                return Error{field, "scheme '" + s.schemes[i].scheme.name + "' is listed twice"};
        if (headDim <= 0)
            continue;
        if (auto ok = validateScheme(s.schemes[i].scheme, s.budgets, headDim, field); !ok)
            return ok;
        for (std::size_t l = 0; l < s.schemes[i].layers.size(); ++l)
            if (auto ok = validateScheme(s.schemes[i].layers[l], s.budgets, headDim,
                                         s.schemes[i].origin.empty() ? field + ".layers[" + std::to_string(l) + "]"
                                                                     : field + " (" + s.schemes[i].origin + ", layer "
                                                                           + std::to_string(l) + ")");
                !ok)
                return ok;
    }
    return Ok{};
}

std::uint64_t cellSeed(std::uint64_t seed, int layer, int kvHead)
{
    // SplitMix64 of the seed and the cell's index: every (layer, KV head) its own stream of signs and
    // sketches, a fixed function of the run's seed (the same on every machine).
    std::uint64_t z = seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(layer) * 65536ULL
                                                       + static_cast<std::uint64_t>(kvHead) + 1));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

} // namespace kvlens
