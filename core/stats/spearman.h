// SPDX-License-Identifier: GPL-3.0-or-later
// Spearman's rank correlation.
#pragma once

#include <span>

namespace kvlens::stats {

/// Spearman's rho: the Pearson correlation of the average ranks of x and of y (ties get mid
/// ranks, as scipy.stats.spearmanr), x.size() == y.size(). A strictly increasing transform of
/// x gives exactly 1. Degenerate input (fewer than 2 pairs, or all x or all y tied, where rho
/// is undefined) gives NaN: a constant proxy predicts nothing, and 0 would read as a measured
/// absence of correlation. Non-finite values rank as averageRanks orders them (NaN above +inf).
/// Reference: Spearman (1904); Kendall & Gibbons, "Rank Correlation Methods" (1990), ch. 2.
double spearman(std::span<const double> x, std::span<const double> y);

} // namespace kvlens::stats
