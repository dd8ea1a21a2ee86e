// SPDX-License-Identifier: GPL-3.0-or-later
// Spec defaults and validation.
#include "core/experiment/spec.h"

#include "core/common/format.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kvlens {

int ExperimentSpec::calibrationRows() const
{
    const bool needed = std::any_of(schemes.begin(), schemes.end(), [](const SchemeConfig& s) { return needsCalibration(s); });
    if (!needed)
        return 0;
    return calibrationTokens > 0 ? calibrationTokens : tokens;
}

long long ExperimentSpec::trialCount() const
{
    return static_cast<long long>(schemes.size()) * static_cast<long long>(budgets.size()) * seedCount;
}

ExperimentSpec defaultSpec()
{
    ExperimentSpec spec;
    for (const char* name : {"KV", "KQV", "QKQV"})
        spec.schemes.push_back(*findScheme(name));
    spec.regimeParams = findRegime(spec.regime)->defaults();
    return spec;
}

namespace {

std::string num(double v)
{
    return formatNumber(v);
}

Error outOfRange(const std::string& field, double lo, double hi, double got, bool integer = true)
{
    return Error{field, std::string("must be ") + (integer ? "an integer " : "") + "in [" + num(lo) + ", " + num(hi)
                            + "], got " + num(got)};
}

} // namespace

Result<ExperimentSpec> normalizeSpec(const ExperimentSpec& given)
{
    using L = SpecLimits;
    ExperimentSpec spec = given;
    if (spec.d < L::kMinD || spec.d > L::kMaxD)
        return outOfRange("d", L::kMinD, L::kMaxD, spec.d);
    if (spec.tokens < L::kMinTokens || spec.tokens > L::kMaxTokens)
        return outOfRange("tokens", L::kMinTokens, L::kMaxTokens, spec.tokens);
    if (spec.queries < L::kMinQueries || spec.queries > L::kMaxQueries)
        return outOfRange("queries", L::kMinQueries, L::kMaxQueries, spec.queries);
    if (spec.calibrationTokens < 0 || spec.calibrationTokens > L::kMaxCalibration)
        return outOfRange("calibration_tokens", 0, L::kMaxCalibration, spec.calibrationTokens);
    if (!std::isfinite(spec.scoreScale) || spec.scoreScale <= 0.0 || spec.scoreScale > L::kMaxScoreScale)
        return Error{"score_scale", "must be in (0, " + num(L::kMaxScoreScale) + "], got " + num(spec.scoreScale)};
    if (spec.seedCount < 1 || spec.seedCount > L::kMaxSeeds)
        return outOfRange("seeds.count", 1, L::kMaxSeeds, spec.seedCount);
    if (spec.metrics.topK < 1 || spec.metrics.topK > spec.tokens)
        return outOfRange("metrics.top_k", 1, spec.tokens, spec.metrics.topK);
    if (spec.metrics.sampleCap < 0 || spec.metrics.sampleCap > L::kMaxSampleCap)
        return outOfRange("metrics.sample_cap", 0, L::kMaxSampleCap, spec.metrics.sampleCap);
    if (!std::isfinite(spec.memoryLimitMb) || spec.memoryLimitMb < 0.0)
        return Error{"memory_limit_mb", "must be >= 0 (0 means half of physical memory), got " + num(spec.memoryLimitMb)};
    if (spec.backend != "cpu" && spec.backend != "opencl" && spec.backend != "auto")
        return Error{"backend", "must be one of cpu, opencl, auto, got '" + spec.backend + "'"};

    const Regime* regime = findRegime(spec.regime);
    if (!regime)
        return Error{"regime.name", "unknown regime '" + spec.regime + "' (known: " + regimeNames() + ")"};
    const DataShape shape{spec.d, spec.tokens, spec.queries, 0};
    auto params = regime->normalize(spec.regimeParams, shape);
    if (!params)
        return params.error();
    spec.regimeParams = std::move(params).value();

    if (spec.budgets.empty())
        return Error{"budgets", "give at least one budget in [" + std::to_string(L::kMinBudget) + ", "
                                    + std::to_string(L::kMaxBudget) + "]"};
    std::set<int> seenBudgets;
    for (std::size_t i = 0; i < spec.budgets.size(); ++i) {
        const int b = spec.budgets[i];
        const std::string field = "budgets[" + std::to_string(i) + "]";
        if (b < L::kMinBudget || b > L::kMaxBudget)
            return outOfRange(field, L::kMinBudget, L::kMaxBudget, b);
        if (!seenBudgets.insert(b).second)
            return Error{field, "budget " + std::to_string(b) + " is listed twice"};
    }
    if (spec.schemes.empty())
        return Error{"schemes", "choose at least one scheme (known: " + schemeNames() + ")"};
    std::set<std::string> seenNames;
    for (std::size_t i = 0; i < spec.schemes.size(); ++i) {
        const std::string field = "schemes[" + std::to_string(i) + "]";
        if (auto s = validateScheme(spec.schemes[i], spec.budgets, spec.d, field); !s)
            return s.error();
        if (!seenNames.insert(spec.schemes[i].name).second)
            return Error{field, "scheme '" + spec.schemes[i].name + "' is listed twice"};
    }
    auto knownScheme = [&](const std::string& name) {
        return std::any_of(spec.schemes.begin(), spec.schemes.end(), [&](const SchemeConfig& c) { return c.name == name; });
    };
    for (std::size_t i = 0; i < spec.comparisons.pairs.size(); ++i) {
        const auto& [a, b] = spec.comparisons.pairs[i];
        const std::string field = "comparisons.pairs[" + std::to_string(i) + "]";
        if (!knownScheme(a))
            return Error{field + "[0]", "'" + a + "' is not one of the spec's schemes"};
        if (!knownScheme(b))
            return Error{field + "[1]", "'" + b + "' is not one of the spec's schemes"};
        if (a == b)
            return Error{field, "compares '" + a + "' with itself"};
    }
    if (spec.comparisons.bootstrap < 0 || spec.comparisons.bootstrap > L::kMaxResamples)
        return outOfRange("comparisons.bootstrap", 0, L::kMaxResamples, spec.comparisons.bootstrap);
    if (spec.comparisons.permutations < 0 || spec.comparisons.permutations > L::kMaxResamples)
        return outOfRange("comparisons.permutations", 0, L::kMaxResamples, spec.comparisons.permutations);
    return spec;
}

} // namespace kvlens
