// SPDX-License-Identifier: GPL-3.0-or-later
// Test helpers over runs: a spec from JSON, a CPU run, and a field-by-field comparison of trials by their bits.
#pragma once

#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"

#include <QString>
#include <QTest>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace kvlens::test {

/// A spec from JSON; a bad test spec stops the test binary with the spec's error.
inline ExperimentSpec makeSpec(const char* json)
{
    auto spec = specFromJson(json);
    if (!spec)
        qFatal("bad test spec: %s", spec.error().text().c_str());
    return *spec;
}

/// Runs a spec on the CPU backend; a failed run stops the test binary with its error.
inline ResultSet runSpec(const ExperimentSpec& spec, int threads = 2, Progress* progress = nullptr,
                         const TrialFilter& filter = {}, TrialCache* cache = nullptr)
{
    CpuBackend backend(threads);
    auto result = runExperiment(spec, backend, progress, filter, cache);
    if (!result)
        qFatal("run failed: %s", result.error().text().c_str());
    return std::move(result).value();
}

template <class T>
bool sameBits(const std::vector<T>& a, const std::vector<T>& b)
{
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](T x, T y) {
               if constexpr (std::is_same_v<T, float>)
                   return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
               else
                   return x == y;
           });
}

inline bool sameBits(double a, double b)
{
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

/// The first field in which two trials differ, floats by their bits (NaN equals the same NaN),
/// or an empty string; timings optional.
inline QString trialDifference(const TrialResult& a, const TrialResult& b, bool timings)
{
    if (a.key.point != b.key.point || a.key.scheme != b.key.scheme || a.key.budget != b.key.budget
        || a.key.seedIndex != b.key.seedIndex || a.key.seed != b.key.seed)
        return QStringLiteral("key");
    const auto sa = a.sixD.values(), sb = b.sixD.values();
    for (std::size_t i = 0; i < sa.size(); ++i)
        if (!sameBits(sa[i], sb[i]))
            return QStringLiteral("sixD[%1]").arg(i);
    const double da[] = {a.bits.key, a.bits.value, a.relMseK, a.relMseV, a.rawMseK, a.scoreErrorMean, a.scoreErrorVar,
                         a.scoreErrorVarBase, a.scoreErrorVarPredicted, a.logMeanExpScoreError, a.meanEntropy,
                         a.deffK.participationRatio, a.deffV.participationRatio};
    const double db[] = {b.bits.key, b.bits.value, b.relMseK, b.relMseV, b.rawMseK, b.scoreErrorMean, b.scoreErrorVar,
                         b.scoreErrorVarBase, b.scoreErrorVarPredicted, b.logMeanExpScoreError, b.meanEntropy,
                         b.deffK.participationRatio, b.deffV.participationRatio};
    for (std::size_t i = 0; i < std::size(da); ++i)
        if (!sameBits(da[i], db[i]))
            return QStringLiteral("scalar %1").arg(i);
    if (a.saturatedNorms != b.saturatedNorms || a.deffK.used != b.deffK.used || a.deffK.gapRule != b.deffK.gapRule
        || a.deffK.byGap != b.deffK.byGap || a.deffV.used != b.deffV.used || a.deffV.gapRule != b.deffV.gapRule
        || a.deffV.byGap != b.deffV.byGap)
        return QStringLiteral("integers");
    const std::vector<float> TrialResult::*arrays[] = {&TrialResult::kl,  &TrialResult::recall, &TrialResult::fisher,
                                                       &TrialResult::a2,  &TrialResult::snrT,   &TrialResult::phiT,
                                                       &TrialResult::relMseT, &TrialResult::d2};
    for (std::size_t i = 0; i < std::size(arrays); ++i)
        if (!sameBits(a.*arrays[i], b.*arrays[i]))
            return QStringLiteral("array %1").arg(i);
    if (!sameBits(a.argmaxShift, b.argmaxShift))
        return QStringLiteral("argmaxShift");
    for (const auto site : {&TrialResult::samplesK, &TrialResult::samplesV, &TrialResult::samplesT})
        if (!sameBits((a.*site).snrDb, (b.*site).snrDb) || !sameBits((a.*site).phi, (b.*site).phi))
            return QStringLiteral("samples");
    if (timings
        && (!sameBits(a.timings.keyPath, b.timings.keyPath) || !sameBits(a.timings.valuePath, b.timings.valuePath)
            || !sameBits(a.timings.attention, b.timings.attention) || !sameBits(a.timings.metrics, b.timings.metrics)))
        return QStringLiteral("timings");
    return {};
}

} // namespace kvlens::test
