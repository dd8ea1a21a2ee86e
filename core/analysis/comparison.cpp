// SPDX-License-Identifier: GPL-3.0-or-later
// Comparison table: pairs x budgets, paired bootstrap of the median-KL ratio, rank tests, KS, energy, Holm.
#include "core/analysis/comparison.h"

#include "core/spec/grid.h"
#include "core/regimes/regime.h"

#include "core/common/parallel.h"

#include "core/io/csv.h"
#include "core/analysis/result_tables.h"
#include "core/rng/rng.h"
#include "core/stats/bootstrap.h"
#include "core/stats/energy.h"
#include "core/stats/holm.h"
#include "core/stats/kolmogorov_smirnov.h"
#include "core/stats/mann_whitney.h"
#include "core/stats/wilcoxon.h"

#include <algorithm>
#include <cstring>
#include <array>
#include <limits>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <numbers>
#include <thread>

namespace kvlens::stats {

namespace {

/// A grid cell's trials, sorted by seed index (TrialCells).
using Cell = std::vector<const TrialResult*>;

/// The cell's per-query KL pooled over seeds. A NaN (a KL computed from a non-finite estimate)
/// becomes +inf, so the rank tests count it as the worst damage; `nonFinite` counts NaN and inf.
std::vector<double> pooledKl(const Cell& cell, std::size_t& nonFinite)
{
    std::vector<double> out;
    for (const TrialResult* t : cell)
        out.insert(out.end(), t->kl.begin(), t->kl.end());
    nonFinite = 0;
    for (double& v : out) {
        if (!std::isfinite(v))
            ++nonFinite;
        if (std::isnan(v))
            v = std::numeric_limits<double>::infinity();
    }
    return out;
}

/// The cell's 6D trial points with every coordinate finite, at most kMaxEnergyPoints of them (a
/// seeded subsample without replacement beyond that, so the energy test's (n + m)^2 distance
/// matrix stays bounded whatever seeds.count is).
Eigen::MatrixXd sixDPoints(const Cell& cell, std::uint64_t seed)
{
    std::vector<std::array<double, 6>> rows;
    for (const TrialResult* t : cell) {
        const auto v = t->sixD.values();
        std::array<double, 6> row{};
        bool finite = true;
        for (int c = 0; c < 6; ++c) {
            row[static_cast<std::size_t>(c)] = v[static_cast<std::size_t>(c)];
            finite = finite && std::isfinite(row[static_cast<std::size_t>(c)]);
        }
        if (finite)
            rows.push_back(row);
    }
    if (rows.size() > static_cast<std::size_t>(kMaxEnergyPoints)) {
        Rng rng(EngineKind::Pcg64, seed);
        for (std::size_t k = 0; k < static_cast<std::size_t>(kMaxEnergyPoints); ++k)
            std::swap(rows[k], rows[k + static_cast<std::size_t>(rng.below(rows.size() - k))]);
        rows.resize(static_cast<std::size_t>(kMaxEnergyPoints));
    }
    Eigen::MatrixXd m(static_cast<Eigen::Index>(rows.size()), 6);
    for (std::size_t i = 0; i < rows.size(); ++i)
        for (int c = 0; c < 6; ++c)
            m(static_cast<Eigen::Index>(i), c) = rows[i][static_cast<std::size_t>(c)];
    return m;
}

/// Divides each column by the pooled standard deviation of both samples (columns that do
/// not vary are left alone).
void standardize(Eigen::MatrixXd& a, Eigen::MatrixXd& b)
{
    const Eigen::Index n = a.rows() + b.rows();
    if (n < 2)
        return;
    for (int c = 0; c < 6; ++c) {
        const double mean = (a.col(c).sum() + b.col(c).sum()) / static_cast<double>(n);
        const double var = ((a.col(c).array() - mean).square().sum() + (b.col(c).array() - mean).square().sum())
                           / static_cast<double>(n - 1);
        if (var > 0.0 && std::isfinite(var)) {
            const double sd = std::sqrt(var);
            a.col(c) /= sd;
            b.col(c) /= sd;
        }
    }
}

} // namespace

std::vector<double> seedKl(const TrialResult& t)
{
    std::vector<double> v(t.kl.begin(), t.kl.end());
    for (double& x : v)
        if (std::isnan(x))
            x = std::numeric_limits<double>::infinity();
    return v;
}

std::string_view comparisonStatusName(ComparisonStatus s)
{
    switch (s) {
    case ComparisonStatus::Tested: return "tested";
    case ComparisonStatus::Identical: return "identical";
    case ComparisonStatus::Degenerate: return "degenerate";
    case ComparisonStatus::Untestable: return "untestable";
    }
    return "tested";
}

std::string_view comparisonKindName(ComparisonKind k)
{
    return k == ComparisonKind::EqualBits ? "equal_bits" : "nominal";
}

namespace {

/// Trials of two cells on the seeds both hold, aligned by seed index (a partial run's cells may
/// hold different seeds: schemes are compared on what they share).
struct SharedSeeds {
    Cell a, b;
};
SharedSeeds sharedSeeds(const Cell& ca, const Cell& cb)
{
    SharedSeeds s;
    std::size_t i = 0, j = 0;
    while (i < ca.size() && j < cb.size()) {
        if (ca[i]->key.seedIndex == cb[j]->key.seedIndex) {
            s.a.push_back(ca[i++]);
            s.b.push_back(cb[j++]);
        } else if (ca[i]->key.seedIndex < cb[j]->key.seedIndex) {
            ++i;
        } else {
            ++j;
        }
    }
    return s;
}

bool sameBits(const std::vector<float>& x, const std::vector<float>& y)
{
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

/// ln(a) - ln(b) with equal values (0 and 0, inf and inf) a tie: the per-seed log median ratio.
double logRatio(double a, double b)
{
    if (a == b)
        return 0.0;
    return std::log(a) - std::log(b);
}

/// Relative tolerance on exact bits for two schemes to count as equal-bits.
constexpr double kBitsTolerance = 0.005;

bool bitsMatch(double a, double b)
{
    return std::abs(a - b) <= kBitsTolerance * std::max(std::abs(a), std::abs(b));
}

} // namespace

namespace {

/// The scheme pairs compared: spec.comparisons.pairs (those naming two of the run's schemes), or
/// every pair in scheme order.
std::vector<std::pair<int, int>> comparedPairs(const ResultSet& results)
{
    std::vector<std::pair<int, int>> pairs;
    if (results.spec.comparisons.pairs.empty()) {
        for (int a = 0; a < static_cast<int>(results.schemes.size()); ++a)
            for (int b = a + 1; b < static_cast<int>(results.schemes.size()); ++b)
                pairs.emplace_back(a, b);
    } else {
        for (const auto& [a, b] : results.spec.comparisons.pairs) {
            const int ia = results.schemeIndex(a), ib = results.schemeIndex(b);
            if (ia >= 0 && ib >= 0)
                pairs.emplace_back(ia, ib);
        }
    }
    return pairs;
}

/// The grid points holding any trial, ascending.
std::vector<int> pointsWithTrials(const TrialCells& cells)
{
    std::vector<int> points;
    for (int p = 0; p < cells.shape().points; ++p) {
        bool any = false;
        for (int b = 0; b < cells.shape().budgets && !any; ++b)
            for (int sc = 0; sc < cells.shape().schemes && !any; ++sc)
                any = !cells.at(p, b, sc).empty();
        if (any)
            points.push_back(p);
    }
    return points;
}

/// One row to compute, with its own resampling seed (from its place in the full table, so a row's
/// numbers do not depend on which others exist or on the thread that computes it).
struct Job {
    int point, budget, budgetB, ia, ib;
    ComparisonKind kind;
    std::uint64_t rowSeed;
};

/// Every row of the table: each pair at each budget, then at equal bits where the grid allows (the
/// pair at two different nominal budgets whose exact bits per coordinate match: KQV spends 4.25 bits
/// at n = 4 against KV's 4.125, a nominal n is not a cost).
std::vector<Job> planJobs(const ResultSet& results, const TrialCells& cells, const std::vector<std::pair<int, int>>& pairs)
{
    const std::vector<int>& budgets = results.spec.budgets;
    const std::vector<int> points = pointsWithTrials(cells);
    std::vector<Job> jobs;
    std::uint64_t rowSeed = 0;
    for (int point : points)
        for (int budget : budgets)
            for (const auto& [ia, ib] : pairs) {
                ++rowSeed;
                if (!cells.atBudget(point, budget, ia).empty() && !cells.atBudget(point, budget, ib).empty())
                    jobs.push_back(Job{point, budget, budget, ia, ib, ComparisonKind::Nominal, rowSeed});
            }
    for (int point : points)
        for (const auto& [ia, ib] : pairs)
            for (int ba : budgets)
                for (int bb : budgets) {
                    if (ba == bb)
                        continue;
                    ++rowSeed;
                    const Cell& ca = cells.atBudget(point, ba, ia);
                    const Cell& cb = cells.atBudget(point, bb, ib);
                    if (!ca.empty() && !cb.empty() && bitsMatch(meanBits(ca), meanBits(cb)))
                        jobs.push_back(Job{point, ba, bb, ia, ib, ComparisonKind::EqualBits, rowSeed});
                }
    return jobs;
}

/// What kind of row this is, before any test: the same KL on every shared query, an exact key path
/// on one side, or one shared seed. Returns true when the row is finished (identical, degenerate).
bool classifyRow(ComparisonRow& row, const SharedSeeds& shared, const std::vector<double>& klA,
                 const std::vector<double>& klB, const ResultSet& results)
{
    const Cell& ca = shared.a;
    const Cell& cb = shared.b;
    const bool identical = !ca.empty() && std::equal(ca.begin(), ca.end(), cb.begin(), [](const TrialResult* x, const TrialResult* y) {
        return sameBits(x->kl, y->kl);
    });
    auto allZero = [](const std::vector<double>& v) {
        return !v.empty() && std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; });
    };
    if (identical) {
        row.status = ComparisonStatus::Identical;
        row.statusNote = "KL identical on all " + std::to_string(row.queries) + " shared queries (the same key path)";
        row.medianKlRatio = 1.0;
    } else if (allZero(klA) || allZero(klB)) {
        row.status = ComparisonStatus::Degenerate;
        row.statusNote = "KL = 0 exactly for " + results.schemes[static_cast<std::size_t>(allZero(klA) ? row.schemeA : row.schemeB)].name
                         + " (its key path is exact: no attention weight moves)";
        row.medianKlRatio = std::numeric_limits<double>::quiet_NaN();
    } else if (row.units < 2) {
        row.status = ComparisonStatus::Untestable;
        row.statusNote = std::to_string(row.units) + " shared seed: no seed-level test is possible";
    }
    if (row.status == ComparisonStatus::Identical || row.status == ComparisonStatus::Degenerate) {
        row.ratioLow = row.ratioHigh = row.medianKlRatio;
        return true;
    }
    return false;
}

/// The seed as the unit: per-seed median KL, the clustered bootstrap interval of the ratio, then
/// exact Wilcoxon over the seeds.
void seedLevelTest(ComparisonRow& row, const SharedSeeds& shared, const ExperimentSpec& spec, const Job& job,
                   const CancelToken& cancel)
{
    std::vector<std::vector<double>> seedsA, seedsB;
    std::vector<double> dA, zero;
    for (std::size_t k = 0; k < shared.a.size(); ++k) {
        seedsA.push_back(seedKl(*shared.a[k]));
        seedsB.push_back(seedKl(*shared.b[k]));
        const double d = logRatio(location(seedsA.back(), Location::Median), location(seedsB.back(), Location::Median));
        dA.push_back(d);
        zero.push_back(0.0);
        row.seedsALower += d < 0.0;
    }
    row.seedRatioMedian = std::exp(location(dA, Location::Median));
    const std::uint64_t seed = deriveSeed(spec.firstSeed, Stream::Statistics, job.rowSeed);
    const BootstrapCi ci = bootstrapClusteredRatio(seedsA, seedsB, row.design, 0.95, spec.comparisons.bootstrap, seed, cancel);
    row.ratioLow = ci.lower;
    row.ratioHigh = ci.upper;
    if (row.status == ComparisonStatus::Tested) {
        const WilcoxonResult w = wilcoxonSignedRankExact(dA, zero);
        row.test = "wilcoxon-seeds";
        row.p = w.p;
    }
}

/// Secondary: the query-level tests (queries treated as independent) and the energy test on the
/// seeds' standardized 6D points.
void queryLevelTests(ComparisonRow& row, const SharedSeeds& shared, const std::vector<double>& klA,
                     const std::vector<double>& klB, const ExperimentSpec& spec, const Job& job, const CancelToken& cancel)
{
    const MannWhitneyResult mw = mannWhitneyU(klA, klB);
    row.mannWhitneyU = mw.u1;
    row.rankBiserial = mw.rankBiserial;
    row.mannWhitneyP = mw.p;
    row.mannWhitneyPNoContinuity = mw.pNoContinuity;
    if (row.paired) {
        const WilcoxonResult w = wilcoxonSignedRank(klA, klB);
        row.wilcoxonStatistic = w.statistic;
        row.wilcoxonP = w.p;
        row.queryTest = "wilcoxon";
        row.queryP = w.p;
    } else {
        row.queryTest = "mann-whitney";
        row.queryP = mw.p;
    }
    const KsResult ks = ksTwoSample(klA, klB);
    row.ksD = ks.d;
    row.ksP = ks.p;

    const std::uint64_t energySeed = deriveSeed(spec.firstSeed, Stream::Statistics, job.rowSeed + (1ULL << 32));
    Eigen::MatrixXd pa = sixDPoints(shared.a, energySeed + 1), pb = sixDPoints(shared.b, energySeed + 2);
    row.energyPoints = static_cast<int>(std::min(pa.rows(), pb.rows()));
    standardize(pa, pb);
    const EnergyTestResult e = energyTest(pa, pb, spec.comparisons.permutations, energySeed, cancel);
    row.energy = e.statistic;
    row.energyP = e.pValue;
}

/// One row of the table: the pair's cells on the seeds both hold, classified, then tested.
ComparisonRow compareRow(const ResultSet& results, const TrialCells& cells, const Job& job, ClusterDesign design,
                         const CancelToken& cancel)
{
    cancel.check();
    const SharedSeeds shared = sharedSeeds(cells.atBudget(job.point, job.budget, job.ia),
                                           cells.atBudget(job.point, job.budgetB, job.ib));
    ComparisonRow row;
    row.point = job.point;
    row.budget = job.budget;
    row.budgetB = job.budgetB;
    row.kind = job.kind;
    row.schemeA = job.ia;
    row.schemeB = job.ib;
    row.design = design;
    row.units = static_cast<int>(shared.a.size());
    row.bitsA = meanBits(shared.a);
    row.bitsB = meanBits(shared.b);
    row.bitsMatched = bitsMatch(row.bitsA, row.bitsB);
    const std::vector<double> klA = pooledKl(shared.a, row.nonFiniteA), klB = pooledKl(shared.b, row.nonFiniteB);
    row.queries = klA.size();
    row.paired = klA.size() == klB.size();
    row.medianKlA = location(klA, Location::Median);
    row.medianKlB = location(klB, Location::Median);
    row.medianKlRatio = row.medianKlB != 0.0 ? row.medianKlA / row.medianKlB : std::numeric_limits<double>::quiet_NaN();
    row.pMin = std::ldexp(2.0, -row.units);
    if (classifyRow(row, shared, klA, klB, results))
        return row;
    seedLevelTest(row, shared, results.spec, job, cancel);
    queryLevelTests(row, shared, klA, klB, results.spec, job, cancel);
    return row;
}

} // namespace

std::vector<ComparisonRow> compareSchemes(const ResultSet& results, const CancelToken& cancel)
{
    const TrialCells cells(results);
    const Regime* regime = findRegime(results.spec.regime);
    const ClusterDesign design = regime && regime->seedIndependent() ? ClusterDesign::Crossed : ClusterDesign::Nested;
    const std::vector<Job> jobs = planJobs(results, cells, comparedPairs(results));
    // Rows spread over the cores; each lands in its own slot, so the table is the same whatever
    // the thread count. A row's exception (bad_alloc, Cancelled) is rethrown here.
    std::vector<ComparisonRow> rows(jobs.size());
    parallelFor(jobs.size(), analysisWorkers(),
                [&](std::size_t i) { rows[i] = compareRow(results, cells, jobs[i], design, cancel); });
    // Holm over the tested rows only: identical or degenerate pairs are not hypotheses.
    holmAdjustRows(rows, [](const ComparisonRow& r) { return r.status == ComparisonStatus::Tested; });
    return rows;
}

namespace {

std::string designName(ClusterDesign d)
{
    return d == ClusterDesign::Crossed ? "crossed: fixed queries, seeds redraw the quantizer"
                                       : "nested: each seed draws its data and queries";
}

std::string intervalName(ClusterDesign d)
{
    return d == ClusterDesign::Crossed ? "two-way bootstrap over seeds and queries" : "cluster bootstrap over seeds";
}

} // namespace

std::string comparisonsCsv(const ResultSet& results, const std::vector<ComparisonRow>& rows)
{
    CsvWriter csv(withSweepColumns(
        results.spec, {"regime", "point"},
        {"budget", "budget_b", "kind", "scheme_a", "scheme_b", "status", "status_note", "unit", "units", "design",
         "bits_a", "bits_b", "bits_matched", "queries", "paired", "median_kl_a", "median_kl_b", "median_kl_ratio",
         "ratio_ci_low", "ratio_ci_high", "interval", "test", "p", "log10_p", "p_holm", "log10_p_holm", "p_min",
         "seeds_a_lower", "seed_ratio_median", "query_test", "query_p", "log10_query_p", "mw_u", "rank_biserial",
         "mw_p", "log10_mw_p", "wilcoxon_w", "wilcoxon_p", "log10_wilcoxon_p", "ks_d", "ks_p", "energy", "energy_p",
         "query_p_method", "mw_p_method", "mw_p_no_continuity", "log10_mw_p_no_continuity", "ks_p_method",
         "nonfinite_a", "nonfinite_b", "energy_points"}));
    const double toLog10 = 1.0 / std::numbers::ln10;
    for (const ComparisonRow& r : rows) {
        const bool tested = r.status == ComparisonStatus::Tested;
        const bool secondary = r.status != ComparisonStatus::Identical && r.status != ComparisonStatus::Degenerate;
        csv.add(results.spec.regime).add(r.point);
        addSweepValues(csv, results.spec, r.point);
        csv.add(r.budget).add(r.budgetB).add(std::string(comparisonKindName(r.kind)));
        csv.add(results.schemes[static_cast<std::size_t>(r.schemeA)].name);
        csv.add(results.schemes[static_cast<std::size_t>(r.schemeB)].name);
        csv.add(std::string(comparisonStatusName(r.status))).add(r.statusNote);
        csv.add(r.unit).add(r.units).add(designName(r.design));
        csv.add(r.bitsA).add(r.bitsB).add(r.bitsMatched ? "yes" : "no");
        csv.add(static_cast<long long>(r.queries)).add(r.paired ? "yes" : "no");
        csv.add(r.medianKlA).add(r.medianKlB).add(r.medianKlRatio).add(r.ratioLow).add(r.ratioHigh);
        csv.add(secondary ? intervalName(r.design) : std::string());
        // The primary test: blank where no test was made (identical, degenerate, one seed).
        if (tested)
            csv.add(r.test).add(r.p.p).add(r.p.logP * toLog10).add(r.pHolm.p).add(r.pHolm.logP * toLog10).add(r.pMin);
        else
            csv.add("").add("").add("").add("").add("").add(r.pMin);
        csv.add(r.seedsALower).add(r.seedRatioMedian);
        if (secondary) {
            csv.add(r.queryTest).add(r.queryP.p).add(r.queryP.logP * toLog10);
            csv.add(r.mannWhitneyU).add(r.rankBiserial).add(r.mannWhitneyP.p).add(r.mannWhitneyP.logP * toLog10);
            if (r.paired)
                csv.add(r.wilcoxonStatistic).add(r.wilcoxonP.p).add(r.wilcoxonP.logP * toLog10);
            else
                csv.add("").add("").add("");
            csv.add(r.ksD).add(r.ksP.p).add(r.energy).add(r.energyP);
            csv.add(pMethodName(r.queryP.method)).add(pMethodName(r.mannWhitneyP.method));
            csv.add(r.mannWhitneyPNoContinuity.p).add(r.mannWhitneyPNoContinuity.logP * toLog10);
            csv.add(pMethodName(r.ksP.method));
        } else {
            // Blank every secondary column above: 19 (query test 3, Mann-Whitney 4, Wilcoxon 3,
            // KS and energy 4, methods 2, Mann-Whitney without continuity 2, KS method 1).
            for (int i = 0; i < 19; ++i)
                csv.add("");
        }
        // Queries whose KL is NaN or infinite (ranked as +inf above), and the 6D points per scheme
        // the energy test used (finite ones, at most kMaxEnergyPoints).
        csv.add(static_cast<long long>(r.nonFiniteA)).add(static_cast<long long>(r.nonFiniteB)).add(r.energyPoints);
        csv.endRow();
    }
    return csv.text();
}

std::string comparisonsText(const ResultSet& results, const std::vector<ComparisonRow>& rows)
{
    std::string out;
    char line[320];
    std::snprintf(line, sizeof line, "%-34s %5s %5s %9s %21s %9s %9s %s\n", "comparison (A vs B)", "n", "seeds",
                  "KL ratio", "95% interval", "p", "p_holm", "");
    out += line;
    for (const ComparisonRow& r : rows) {
        std::string pair = results.schemes[static_cast<std::size_t>(r.schemeA)].name + " vs "
                           + results.schemes[static_cast<std::size_t>(r.schemeB)].name;
        if (results.spec.pointCount() > 1)
            pair = "[" + results.spec.pointLabel(r.point) + "] " + pair;
        const std::string n = r.kind == ComparisonKind::EqualBits
                                  ? std::to_string(r.budget) + "/" + std::to_string(r.budgetB)
                                  : std::to_string(r.budget);
        if (r.status == ComparisonStatus::Identical || r.status == ComparisonStatus::Degenerate) {
            std::snprintf(line, sizeof line, "%-34s %5s %5d %9s %21s %9s %9s %s: %s\n", pair.c_str(), n.c_str(), r.units,
                          "-", "", "-", "-", std::string(comparisonStatusName(r.status)).c_str(), r.statusNote.c_str());
        } else {
            const bool tested = r.status == ComparisonStatus::Tested;
            std::snprintf(line, sizeof line, "%-34s %5s %5d %9.4g [%9.4g, %9.4g] %9s %9s %s\n", pair.c_str(), n.c_str(),
                          r.units, r.medianKlRatio, r.ratioLow, r.ratioHigh,
                          tested ? formatPValue(r.p).c_str() : "-", tested ? formatPValue(r.pHolm).c_str() : "-",
                          tested ? (r.kind == ComparisonKind::EqualBits ? "(equal bits)" : "")
                                 : ("untestable: " + r.statusNote).c_str());
        }
        out += line;
    }
    out += "The unit is the seed: p is exact Wilcoxon signed-rank over the seeds both schemes hold, on each seed's\n"
           "log median-KL ratio (smallest possible p with k seeds: 2/2^k); the interval resamples seeds (and, for "
           "fixed\nqueries, queries). KL ratio = median KL_A / median KL_B; below 1, A does less damage. n a/b: the "
           "pair at two\nnominal budgets whose exact bits per coordinate match. Query-level tests: comparisons.csv "
           "(secondary).\n";
    return out;
}

} // namespace kvlens::stats
