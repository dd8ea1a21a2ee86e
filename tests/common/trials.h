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
#include <variant>
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

/// The first field in which two trials differ (its forEachTrialField name), floats by their bits
/// (NaN equals the same NaN), or an empty string; timings optional.
inline QString trialDifference(const TrialResult& a, const TrialResult& b, bool timings)
{
    using Field = std::variant<const int*, const std::uint64_t*, const double*, const bool*, const std::vector<float>*,
                               const std::vector<std::uint8_t>*>;
    std::vector<Field> fieldsOfB;
    forEachTrialField(b, [&](const char*, auto, const auto& field) { fieldsOfB.push_back(&field); });
    QString first;
    std::size_t at = 0;
    forEachTrialField(a, [&](const char* name, auto kind, const auto& field) {
        const auto& other = *std::get<const std::decay_t<decltype(field)>*>(fieldsOfB[at++]);
        bool same = false;
        if constexpr (std::is_same_v<std::decay_t<decltype(field)>, double>)
            same = sameBits(field, other);
        else if constexpr (std::is_arithmetic_v<std::decay_t<decltype(field)>>)
            same = field == other;
        else
            same = sameBits(field, other);
        if (first.isEmpty() && !same && (timings || !std::is_same_v<decltype(kind), WallClock>))
            first = QString::fromLatin1(name);
    });
    return first;
}

} // namespace kvlens::test
