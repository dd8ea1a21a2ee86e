// SPDX-License-Identifier: GPL-3.0-or-later
// Mann-Whitney U test of two independent samples, with tie correction and rank-biserial effect size.
#pragma once

#include "core/stats/p_value.h"

#include <cstddef>
#include <span>

namespace kvlens::stats {

/// Everything the Mann-Whitney U test reports. With N = n1 + n2, the pooled average
/// ranks and R1 the rank sum of x:
///   U1 = R1 - n1(n1+1)/2 = #{(i,j): x_i > y_j} + #{ties}/2,   U2 = n1 n2 - U1,
///   mu = n1 n2 / 2,   sigma^2 = n1 n2 / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))).
/// Degenerate input (an empty sample, or all N values tied so sigma = 0): z = 0, p = 1,
/// logP = 0, rankBiserial = 0 (U1 and U2 still as defined, 0 when a sample is empty).
struct MannWhitneyResult {
    std::size_t n1 = 0, n2 = 0;
    double u1 = 0.0;        ///< U of the first sample, R1 - n1(n1+1)/2
    double u2 = 0.0;        ///< n1 n2 - u1
    double u = 0.0;         ///< the U reported: u1, as scipy.stats.mannwhitneyu reports for x
    /// (u1 - mu -+ 1/2) / sigma, the continuity correction taken towards mu (z = 0 when
    /// |u1 - mu| <= 1/2). Signed like R's wilcox.test: z > 0 when x tends to be LARGER than y.
    double z = 0.0;
    PValue p;               ///< two-sided 2 Q(|z|): tie- and continuity-corrected (scipy's default)
    PValue pNoContinuity;   ///< two-sided, tie-corrected, without continuity correction
    /// Rank-biserial correlation r = 1 - 2 U1 / (n1 n2) = (U2 - U1) / (n1 n2)
    ///   = P(X < Y) - P(X > Y) over all n1 n2 pairs (tied pairs count in neither).
    /// r > 0 when x tends to be SMALLER than y (r = +1: every x below every y); note that
    /// this is the opposite sign to z and to WilcoxonResult::rankBiserial.
    /// Reference: Wendt (1972); Kerby (2014), "The simple difference formula".
    double rankBiserial = 0.0;
};

/// Two-sided Mann-Whitney U test (Wilcoxon rank-sum) of independent samples x and y by the
/// tie-corrected normal approximation; matches scipy.stats.mannwhitneyu(x, y,
/// method='asymptotic') in U and p. Callers pass finite values (asserted in debug builds).
/// Reference: Mann & Whitney (1947); Hollander, Wolfe & Chicken, "Nonparametric Statistical
/// Methods" (3rd ed., 2014), sec. 4.1 (ties).
MannWhitneyResult mannWhitneyU(std::span<const double> x, std::span<const double> y);

/// The same statistic with the EXACT two-sided p for few units (two independent groups of seeds:
/// the unit-level test between two runs): every one of the C(n1 + n2, n1) assignments of the pooled
/// values to the groups is equally likely under H0; the number giving each U is counted by the
/// recursion f(i, j, u) = f(i - 1, j, u - j) + f(i, j - 1, u), and p = min(1, 2 min(P(U <= u1),
/// P(U >= u1))). The smallest p is 2 / C(n1 + n2, n1): 0.029 for 4 and 4 units, 1.6e-4 for 8 and 8.
/// Tied values or more than kMaxExactUnits per group: the asymptotic test above. p.method says which.
MannWhitneyResult mannWhitneyUExact(std::span<const double> x, std::span<const double> y);
inline constexpr std::size_t kMaxExactUnits = 50;

} // namespace kvlens::stats
