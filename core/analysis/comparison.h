// SPDX-License-Identifier: GPL-3.0-or-later
// The comparison table: every chosen pair of schemes at every budget, tested on the seed as the unit.
#pragma once

#include "core/common/cancel.h"
#include "core/spec/result.h"
#include "core/stats/bootstrap.h"
#include "core/stats/holm.h"
#include "core/stats/p_value.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::stats {

/// Holm's step-down adjustment over one family of rows (those `inFamily` selects): each member's
/// `pHolm` from its `p`, on the log scale (holmAdjustLog), at most 1. The comparison table's family
/// is its tested rows; kvlens compare's, the tested rows of one metric.
template <class Row, class InFamily>
void holmAdjustRows(std::vector<Row>& rows, InFamily inFamily)
{
    std::vector<double> logP;
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (inFamily(rows[i])) {
            logP.push_back(rows[i].p.logP);
            members.push_back(i);
        }
    const std::vector<double> adjusted = holmAdjustLog(logP);
    for (std::size_t k = 0; k < members.size(); ++k)
        rows[members[k]].pHolm = pFromLog(std::min(0.0, adjusted[k]));
}

/// One seed's per-query KL with NaN as +inf (a KL of a non-finite estimate ranks as the worst): the
/// seed-level test takes its median (as does kvlens compare's kl_median).
std::vector<double> seedKl(const TrialResult& t);

/// What a row of the table is.
enum class ComparisonStatus {
    Tested,     ///< a seed-level test was run (the row is in the Holm family)
    Identical,  ///< both schemes gave bit-identical per-query KL on every shared query (the same key
                ///< path: K-only, TQ-KV and KQV share one): nothing to test
    Degenerate, ///< a scheme's KL is 0 exactly on every query (V-only moves no attention weight): the
                ///< ratio is undefined and no test means anything
    Untestable, ///< fewer than 2 shared seeds: no test of a seed-level effect is possible
};
/// "tested", "identical", "degenerate", "untestable".
std::string_view comparisonStatusName(ComparisonStatus s);

/// Which comparisons a row belongs to.
enum class ComparisonKind {
    Nominal,   ///< both schemes at the same nominal budget n
    EqualBits, ///< the schemes at different nominal budgets whose exact bits per coordinate match
};
std::string_view comparisonKindName(ComparisonKind k); ///< "nominal", "equal_bits"

/// One row: scheme A against scheme B at one grid point.
///
/// The statistical unit is the seed: the queries of one seed share one draw of the data (synthetic
/// regimes) or of the rotation and sketch (every regime), so they are not independent. The primary
/// test is exact Wilcoxon signed-rank over the shared seeds on d_k = ln(median_q KL_A) - ln(median_q
/// KL_B) (seed k's median over its queries), two-sided; its smallest possible p is 2 / 2^units. The
/// interval resamples seeds (ClusterDesign::Nested) or seeds and queries independently (Crossed, for
/// the fixed queries of an imported or model regime). The query-level tests are kept, labelled
/// secondary: they treat queries as independent and overstate the evidence.
///
/// Sign convention of `rankBiserial` (secondary, query level): r = P(KL_A < KL_B) - P(KL_A > KL_B)
/// over all pairs of queries; r > 0 means A does LESS damage than B.
struct ComparisonRow {
    int point = 0;
    int budget = 0;                  ///< A's nominal budget
    int budgetB = 0;                 ///< B's (equal to budget for ComparisonKind::Nominal)
    ComparisonKind kind = ComparisonKind::Nominal;
    int schemeA = 0, schemeB = 0;    ///< indices into ResultSet::schemes
    ComparisonStatus status = ComparisonStatus::Tested;
    std::string statusNote;          ///< why a row is not tested ("KL identical on all 256 shared queries")

    // The unit of replication.
    std::string unit = "seed";
    int units = 0;                   ///< seeds both schemes hold (the comparison uses only these)
    ClusterDesign design = ClusterDesign::Nested;
    double bitsA = 0.0, bitsB = 0.0; ///< exact bits per coordinate (K and V averaged, overheads included)
    bool bitsMatched = false;        ///< |bitsA - bitsB| <= 0.5% of the larger

    std::size_t queries = 0;         ///< per scheme, over the shared seeds
    bool paired = false;             ///< the same queries under both schemes (same seeds)
    double medianKlA = 0.0, medianKlB = 0.0;
    double medianKlRatio = 0.0;      ///< median KL_A / median KL_B over the shared seeds' queries
    double ratioLow = 0.0, ratioHigh = 0.0; ///< 95% cluster-bootstrap interval (see `design`)

    // The primary, seed-level test.
    std::string test;                ///< "wilcoxon-seeds" (exact), or "" when not tested
    PValue p;                        ///< two-sided; p = 1 with an empty `test` when not tested
    PValue pHolm;                    ///< Holm-adjusted over the table's tested rows
    double pMin = 1.0;               ///< the smallest p the test can give with `units` seeds: 2 / 2^units
    int seedsALower = 0;             ///< seeds whose median KL of A is below B's
    double seedRatioMedian = 0.0;    ///< median over seeds of median KL_A / median KL_B

    // Secondary, query level (queries treated as independent: overstated).
    std::string queryTest;           ///< "wilcoxon" when paired, else "mann-whitney"
    PValue queryP;
    double mannWhitneyU = 0.0;       ///< U of A
    double rankBiserial = 0.0;       ///< see the sign convention above
    PValue mannWhitneyP;
    PValue mannWhitneyPNoContinuity; ///< the same without the continuity correction
    double wilcoxonStatistic = 0.0;  ///< min(W+, W-) of d = KL_A - KL_B (paired only)
    PValue wilcoxonP;
    double ksD = 0.0;                ///< two-sample Kolmogorov-Smirnov on the KL samples
    PValue ksP;
    double energy = 0.0;             ///< energy distance of the 6D trial points (standardized; one per seed)
    double energyP = 1.0;            ///< permutation p-value ((count >= observed) + 1) / (B + 1)
    std::size_t nonFiniteA = 0, nonFiniteB = 0; ///< queries whose KL is NaN or infinite: ranked as +inf
    int energyPoints = 0;            ///< finite 6D trial points per scheme the energy test used (subsampled
                                     ///< to kMaxEnergyPoints; trials with a non-finite coordinate left out)
};

/// Builds the table for a result set: for each point and budget, each pair of
/// spec.comparisons.pairs (every pair of schemes when empty), on the seeds both hold (a partial run's
/// schemes are compared on what they share); then, where the grid allows, every pair at two different
/// nominal budgets whose exact bits match (ComparisonKind::EqualBits). The 6D coordinates are
/// standardized by their pooled standard deviation before the energy distance, so dB and radians weigh
/// alike. Resampling is seeded from the spec's first seed. Polls `cancel` between rows and inside their
/// resampling loops (throws Cancelled); an exception of a row (bad_alloc, Cancelled) reaches the caller.
std::vector<ComparisonRow> compareSchemes(const ResultSet& results, const CancelToken& cancel = {});

/// The table as CSV: the unit, the number of units, the design and the status of every row, the
/// seed-level test, then the query-level ones (p-values also as log10 so 1e-300 and below stay
/// readable).
std::string comparisonsCsv(const ResultSet& results, const std::vector<ComparisonRow>& rows);

/// The table as aligned text for terminals: pair, budget, seeds, median-KL ratio with its interval,
/// the seed-level p (and Holm), the status of untested rows.
std::string comparisonsText(const ResultSet& results, const std::vector<ComparisonRow>& rows);

} // namespace kvlens::stats
