// SPDX-License-Identifier: GPL-3.0-or-later
// The comparison table: every chosen pair of schemes at every budget, with effect sizes and tests.
#pragma once

#include "core/common/cancel.h"
#include "core/model/result.h"
#include "core/stats/p_value.h"

#include <string>
#include <vector>

namespace kvlens::stats {

/// One row: scheme A against scheme B at one budget (and grid point), on per-query KL
/// pooled over seeds and on the 6D trial points.
///
/// Sign convention of `rankBiserial`: r = P(KL_A < KL_B) - P(KL_A > KL_B) over all pairs of
/// queries, i.e. 1 - 2 U_A / (n_A n_B) with U_A the Mann-Whitney U of A. r > 0 means A does
/// LESS damage than B (its KL values rank lower); r = +1: every query of A below every one of B.
struct ComparisonRow {
    int point = 0;
    int budget = 0;
    int schemeA = 0, schemeB = 0;    ///< indices into ResultSet::schemes
    std::size_t queries = 0;         ///< per scheme
    std::size_t nonFiniteA = 0, nonFiniteB = 0; ///< queries whose KL is NaN or infinite: ranked as +inf
    int energyPoints = 0;            ///< finite 6D trial points per scheme the energy test used (subsampled
                                     ///< to kMaxEnergyPoints; trials with a non-finite coordinate left out)
    bool paired = false;             ///< the same queries under both schemes (same seeds)
    double medianKlA = 0.0, medianKlB = 0.0;
    double medianKlRatio = 0.0;      ///< median KL_A / median KL_B
    double ratioLow = 0.0, ratioHigh = 0.0; ///< percentile bootstrap 95% interval (paired when paired)
    std::string test;                ///< "wilcoxon" when paired, else "mann-whitney": the p Holm adjusts
    PValue p;                        ///< of `test`, two-sided
    PValue pHolm;                    ///< Holm-adjusted across the whole table
    double mannWhitneyU = 0.0;       ///< U of A
    double rankBiserial = 0.0;       ///< see the sign convention above
    PValue mannWhitneyP;
    PValue mannWhitneyPNoContinuity; ///< the same without the continuity correction
    double wilcoxonStatistic = 0.0;  ///< min(W+, W-) of d = KL_A - KL_B (paired only)
    PValue wilcoxonP;
    double ksD = 0.0;                ///< two-sample Kolmogorov-Smirnov on the KL samples
    PValue ksP;
    double energy = 0.0;             ///< energy distance of the 6D trial points (standardized coordinates)
    double energyP = 1.0;            ///< permutation p-value ((count >= observed) + 1) / (B + 1)
};

/// Builds the table for a result set: for each point and budget, each pair of
/// spec.comparisons.pairs (every pair of schemes when empty). The 6D coordinates are
/// standardized by their pooled standard deviation before the energy distance, so dB and
/// radians weigh alike. Resampling is seeded from the spec's first seed.
/// Polls `cancel` between rows and inside their resampling loops (throws Cancelled); an exception
/// of a row (bad_alloc, Cancelled) reaches the caller.
std::vector<ComparisonRow> compareSchemes(const ResultSet& results, const CancelToken& cancel = {});

/// The table as CSV (p-values also as log10 so 1e-300 and below stay readable).
std::string comparisonsCsv(const ResultSet& results, const std::vector<ComparisonRow>& rows);

/// The table as aligned text for terminals: pair, budget, median-KL ratio with its interval,
/// test p (and Holm), rank-biserial r, KS D, energy p.
std::string comparisonsText(const ResultSet& results, const std::vector<ComparisonRow>& rows);

} // namespace kvlens::stats
