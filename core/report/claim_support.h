// SPDX-License-Identifier: GPL-3.0-or-later
// What every paper's claims share: reading cells of a result set, pooled samples, contrasts with
// bootstrap intervals, labels, and figure helpers. Internal to core/report.
#pragma once

#include "core/analysis/figures.h"
#include "core/spec/result.h"
#include "core/report/claims.h"
#include "core/stats/bootstrap.h"
#include "core/stats/mann_whitney.h"

#include <cstdint>
#include <initializer_list>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::claims::support {

inline constexpr double kPi = std::numbers::pi;

/// A per-query metric of a trial (KL, recall, phi_T, ...).
using QueryField = std::vector<float> TrialResult::*;

/// A sample's values by unit of replication: byUnit[k] holds seed `seeds[k]`'s values (its queries,
/// in order, so two cells of a run pair up unit by unit and query by query).
struct Units {
    std::vector<std::vector<double>> byUnit;
    std::vector<int> seeds;                                  ///< seed index of each unit, ascending
    stats::ClusterDesign design = stats::ClusterDesign::Nested; ///< how the run replicates (Crossed: fixed queries)
    std::vector<double> pooled() const;                      ///< every value, unit after unit
    std::size_t values() const;
};

/// How a run replicates: Crossed for a seed-independent regime (imported, model: fixed queries, seeds
/// redraw the quantizer), Nested otherwise (each seed draws its data).
stats::ClusterDesign designOf(const ResultSet& rs);

/// A cell's per-query values by seed.
Units units(const ResultSet& rs, const std::vector<const TrialResult*>& c, QueryField field);

/// Appends b's values to a's unit of the same seed (a layer's heads pooled per seed); a seed only b
/// holds becomes a unit of a. The design is a's.
void appendUnits(Units& a, const Units& b);

/// A against B on a lower-is-better sample, with the seed as the unit (issue 27): the units both
/// hold are paired by seed; p is exact Wilcoxon signed-rank over them on d_k = ln(median B_k) -
/// ln(median A_k); the ratio's interval is the cluster bootstrap of the design. The query-level
/// Mann-Whitney test and rank-biserial r are kept as secondary numbers.
struct Contrast {
    std::size_t nA = 0, nB = 0;                ///< values of each sample on the shared units
    int units = 0;                             ///< shared seeds
    stats::ClusterDesign design = stats::ClusterDesign::Nested;
    double medianA = 0.0, medianB = 0.0;
    double ratio = 0.0, low = 0.0, high = 0.0; ///< median A / median B with its cluster-bootstrap 95% interval
    double effect = 0.0;                       ///< median over seeds of ln(median B_k / median A_k): > 0 when A lower
    int unitsALower = 0;                       ///< seeds whose median of A is below B's
    stats::PValue p;                           ///< two-sided exact Wilcoxon over the seeds
    double pMin = 1.0;                         ///< the smallest p `units` seeds allow: 2 / 2^units
    double r = 0.0;                            ///< secondary: query-level rank-biserial, > 0 when A ranks lower
    stats::PValue queryP;                      ///< secondary: two-sided Mann-Whitney over the queries
};

/// The first of `names` the run has (KQV and TQ-KQV are one scheme under two papers' names).
int anyScheme(const ResultSet& rs, std::initializer_list<std::string_view> names);

/// The trials of one (point, scheme, budget), in seed order.
std::vector<const TrialResult*> cell(const ResultSet& rs, int point, int scheme, int budget);

/// Per-query values of a cell, pooled over seeds (queries in order, so two cells on the same
/// seeds pair up).
std::vector<double> pooled(const std::vector<const TrialResult*>& c, QueryField field);

/// Per-key direction error eps_dir = 1 - cos(phi) of the kept key samples, pooled over seeds
/// (the samples are the same key indices under every scheme, so two cells pair up).
std::vector<double> pooledEpsK(const std::vector<const TrialResult*>& c);

/// The same by seed (the kept key samples of each seed, in order).
Units unitsEpsK(const ResultSet& rs, const std::vector<const TrialResult*>& c);

/// The weakest of several outcomes a check needs together (NotTestable, then Contradicted, then
/// Borderline, then Holds; HoldsLarger only when all are).
Outcome allOf(const std::vector<Outcome>& outcomes);

/// Mean eps_dir^K per seed, with its 95% interval over seeds.
Interval epsKInterval(const std::vector<const TrialResult*>& c);

/// Mean per-query value per seed, with its 95% interval over seeds.
Interval queryMeanInterval(const std::vector<const TrialResult*>& c, QueryField field);

double median(std::vector<double> v);

double mean(const std::vector<double>& v);

/// `perUnit`: how a seed's values are summarized before the seed-level test (Mean for a discrete
/// measure such as top-5 recall, whose per-seed medians tie).
Contrast contrast(const Units& a, const Units& b, std::uint64_t seed, int resamples,
                  stats::Location perUnit = stats::Location::Median);

/// A against B when they come from two different runs, whose seeds are independent draws and do
/// not pair: each seed is summarized (`perUnit`), and p is the exact Mann-Whitney test over the two
/// groups of seeds (smallest p 2 / C(nA + nB, nA)); ratio = location of A's seed summaries over B's,
/// its interval a bootstrap that resamples each run's seeds. medianA/B hold those locations.
Contrast contrastRuns(const Units& a, const Units& b, std::uint64_t seed, int resamples,
                      stats::Location perUnit = stats::Location::Median);

/// The seed-level directional outcome of a contrast whose claim says A is lower (effect > 0).
Outcome directional(const Contrast& c);

/// "p = 0.0078 (8 seeds)": the seed-level p with its unit count, for a check's measured text.
std::string seedP(const Contrast& c);

std::string ratioText(double ratio, double low, double high);

std::string intervalText(const Interval& i, int digits = 3);

std::string signedText(double r);

/// "heavy_tail (nu = 1.5)", "low_rank (rank = 8, d = 1024)", "gaussian".
std::string runLabel(const ExperimentSpec& s);

std::string runLabel(const ResultSet& rs);

/// Run label plus the grid point's swept values.
std::string settingLabel(const ResultSet& rs, int point);

/// Budgets of a run, ascending.
std::vector<int> budgetsOf(const ResultSet& rs);

/// Grid points whose keys differ: a sweep over score_scale alone redraws only the queries' scale.
std::vector<int> keyPoints(const ResultSet& rs);

double pointValue(const ResultSet& rs, int point, SweepParameter parameter, std::string_view regimeKey, double fallback);

Series referenceLine(const std::string& name, double x0, double x1, double y);

void pushInterval(Series& s, double x, const Interval& i);

void pushRatio(Series& s, double x, double ratio, double low, double high);

/// Mean KL per scheme against the budget, with 95% intervals over seeds.
Figure klByBudgetFigure(const ResultSet& rs, int point, const std::vector<std::string>& names, const std::string& id,
                        const std::string& title, QueryField field = &TrialResult::kl,
                        const std::string& yLabel = "mean KL (nats)");

} // namespace kvlens::claims::support
