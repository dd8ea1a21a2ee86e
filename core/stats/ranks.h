// SPDX-License-Identifier: GPL-3.0-or-later
// Average ranks with the tie term that the variance of every rank statistic needs.
#pragma once

#include <span>
#include <vector>

namespace kvlens::stats {

/// Ranks of a sample and the tie term of its variance formulas.
struct Ranks {
    std::vector<double> ranks; ///< 1-based, in input order; a tie group gets the mean of its positions
    double tieSum = 0.0;       ///< sum over tie groups of t^3 - t (t = group size; 0 without ties)
};

/// Average ("mid") ranks of `values`, as scipy.stats.rankdata(method='average').
/// Defined for every double: -inf ranks lowest, +inf above every finite value and NaN above +inf,
/// all NaNs tied (stats/total_order.h), so a NaN damage value ranks as the worst. O(n log n).
Ranks averageRanks(std::span<const double> values);

} // namespace kvlens::stats
