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
/// Callers pass finite values (asserted in debug builds). O(n log n).
Ranks averageRanks(std::span<const double> values);

} // namespace kvlens::stats
