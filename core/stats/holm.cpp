// SPDX-License-Identifier: GPL-3.0-or-later
// Holm step-down: one stable sort, then a running maximum of the scaled p-values.
#include "core/stats/holm.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace kvlens::stats {

namespace {

/// The step-down pass shared by both scales: `scale(value, factor)` is the Bonferroni-like
/// step (m - j + 1) p_(j) capped at the top of the scale, in the scale of `values`.
template <class Scale>
std::vector<double> stepDown(std::span<const double> values, Scale scale)
{
    const std::size_t m = values.size();
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    std::vector<double> adjusted(m);
    double runningMax = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < m; ++j) {
        const double step = scale(values[order[j]], static_cast<double>(m - j));
        runningMax = std::max(runningMax, step);
        adjusted[order[j]] = runningMax;
    }
    return adjusted;
}

} // namespace

std::vector<double> holmAdjust(std::span<const double> p)
{
    assert(std::all_of(p.begin(), p.end(), [](double v) { return v >= 0.0 && v <= 1.0; })
           && "holmAdjust: p-values must lie in [0, 1]");
    return stepDown(p, [](double value, double factor) { return std::min(1.0, factor * value); });
}

std::vector<double> holmAdjustLog(std::span<const double> logP)
{
    assert(std::all_of(logP.begin(), logP.end(), [](double v) { return !std::isnan(v) && v <= 0.0; })
           && "holmAdjustLog: log p-values must be <= 0");
    return stepDown(logP, [](double value, double factor) { return std::min(0.0, std::log(factor) + value); });
}

} // namespace kvlens::stats
