// SPDX-License-Identifier: GPL-3.0-or-later
// Wilcoxon signed-rank test of paired samples, with the matched-pairs rank-biserial effect size.
#pragma once

#include "core/stats/p_value.h"

#include <cstddef>
#include <span>

namespace kvlens::stats {

/// Everything the Wilcoxon signed-rank test reports. Differences d_i = x_i - y_i; exact
/// zeros are dropped (Wilcoxon's "wilcox" zero method), the n = nUsed others ranked by |d_i|
/// with average ranks:
///   W+ = sum of ranks of d_i > 0,  W- = sum of ranks of d_i < 0,  W+ + W- = n(n+1)/2,
///   mu = n(n+1)/4,  sigma^2 = n(n+1)(2n+1)/24 - sum(t^3 - t)/48.
/// Degenerate input (no non-zero difference): statistic 0, z = 0, p = 1, logP = 0,
/// rankBiserial = 0.
struct WilcoxonResult {
    std::size_t nPairs = 0;       ///< pairs given
    std::size_t nUsed = 0;        ///< pairs with a non-zero difference
    std::size_t zerosDropped = 0; ///< nPairs - nUsed
    std::size_t nonFinite = 0;    ///< pairs with a NaN or infinite member (treated as below)
    double wPlus = 0.0;
    double wMinus = 0.0;
    double statistic = 0.0;       ///< min(W+, W-), what scipy.stats.wilcoxon reports two-sided
    /// (W+ - mu) / sigma without continuity correction (scipy's default correction=False).
    /// Signed like R's wilcox.test: z > 0 when x tends to be LARGER than y.
    double z = 0.0;
    PValue p;                     ///< two-sided 2 Q(|z|)
    /// Matched-pairs rank-biserial correlation (W+ - W-) / (W+ + W-) in [-1, 1]:
    /// r > 0 when x tends to be LARGER than y (r = +1: every non-zero x_i - y_i positive).
    /// Reference: Kerby (2014), "The simple difference formula", matched-pairs case.
    double rankBiserial = 0.0;
};

/// Two-sided Wilcoxon signed-rank test of paired samples (x_i, y_i), x.size() == y.size(),
/// by the tie-corrected normal approximation; matches scipy.stats.wilcoxon(x, y,
/// method='approx') (zero_method='wilcox', correction=False) in statistic and p.
/// Non-finite values are defined: a NaN counts as +inf (the worst damage), a pair of equal
/// infinities is a zero difference, and an infinite difference ranks above every finite one;
/// such pairs are counted in nonFinite.
/// Reference: Wilcoxon (1945); Hollander, Wolfe & Chicken, "Nonparametric Statistical
/// Methods" (3rd ed., 2014), sec. 3.1 (ties).
WilcoxonResult wilcoxonSignedRank(std::span<const double> x, std::span<const double> y);

/// The same statistic with the EXACT two-sided p for few pairs (the unit-level tests: 3 to 50
/// seeds, where the normal approximation is far off): under H0 each of the nUsed signs is +/- with
/// probability 1/2 independently, so W+ is a sum of independent rank contributions; its law is
/// counted over the doubled mid-ranks (integers, so ties are exact too), and
/// p = min(1, 2 min(P(W+ <= w), P(W+ >= w))). The smallest p with n non-zero pairs is 2 / 2^n
/// (every difference of one sign): 0.25 for 3 units, 0.0078 for 8. More than kMaxExactPairs
/// pairs: the asymptotic test above. p.method says which.
/// Reference: Hollander, Wolfe & Chicken (2014), sec. 3.1; the conditional (permutation) null with ties.
WilcoxonResult wilcoxonSignedRankExact(std::span<const double> x, std::span<const double> y);
inline constexpr std::size_t kMaxExactPairs = 60;

} // namespace kvlens::stats
