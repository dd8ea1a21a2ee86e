// SPDX-License-Identifier: GPL-3.0-or-later
// Comparison table: pairs x budgets, paired bootstrap of the median-KL ratio, rank tests, KS, energy, Holm.
#include "core/analysis/comparison.h"

#include "core/model/grid.h"

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

int schemeIndex(const ResultSet& r, const std::string& name)
{
    for (std::size_t i = 0; i < r.schemes.size(); ++i)
        if (r.schemes[i].name == name)
            return static_cast<int>(i);
    return -1;
}

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

std::vector<ComparisonRow> compareSchemes(const ResultSet& results, const CancelToken& cancel)
{
    const ExperimentSpec& spec = results.spec;
    const TrialCells cells(results);
    std::vector<std::pair<int, int>> pairs;
    if (spec.comparisons.pairs.empty()) {
        for (int a = 0; a < static_cast<int>(results.schemes.size()); ++a)
            for (int b = a + 1; b < static_cast<int>(results.schemes.size()); ++b)
                pairs.emplace_back(a, b);
    } else {
        for (const auto& [a, b] : spec.comparisons.pairs) {
            const int ia = schemeIndex(results, a), ib = schemeIndex(results, b);
            if (ia >= 0 && ib >= 0)
                pairs.emplace_back(ia, ib);
        }
    }

    std::vector<int> points; // the points holding any trial, ascending
    for (int p = 0; p < cells.shape().points; ++p) {
        bool any = false;
        for (int b = 0; b < cells.shape().budgets && !any; ++b)
            for (int sc = 0; sc < cells.shape().schemes && !any; ++sc)
                any = !cells.at(p, b, sc).empty();
        if (any)
            points.push_back(p);
    }

    // The rows to compute, each with its own resampling seeds (from its place in the full table,
    // so a row's numbers do not depend on which others exist or on the thread that computes it).
    struct Job {
        int point, budget, ia, ib;
        std::uint64_t rowSeed;
    };
    std::vector<Job> jobs;
    std::uint64_t rowSeed = 0;
    for (int point : points)
        for (int budget : spec.budgets)
            for (const auto& [ia, ib] : pairs) {
                ++rowSeed;
                if (!cells.atBudget(point, budget, ia).empty() && !cells.atBudget(point, budget, ib).empty())
                    jobs.push_back(Job{point, budget, ia, ib, rowSeed});
            }

    auto compute = [&](const Job& job) {
        const Cell& ca = cells.atBudget(job.point, job.budget, job.ia);
        const Cell& cb = cells.atBudget(job.point, job.budget, job.ib);
        ComparisonRow row;
        row.point = job.point;
        row.budget = job.budget;
        row.schemeA = job.ia;
        row.schemeB = job.ib;
        cancel.check();
        const std::vector<double> klA = pooledKl(ca, row.nonFiniteA), klB = pooledKl(cb, row.nonFiniteB);
        row.queries = klA.size();
        // Paired when both hold the same seeds in the same order (the queries are then identical).
        row.paired = klA.size() == klB.size() && ca.size() == cb.size()
                     && std::equal(ca.begin(), ca.end(), cb.begin(), [](const TrialResult* x, const TrialResult* y) {
                            return x->key.seedIndex == y->key.seedIndex;
                        });
        row.medianKlA = location(klA, Location::Median);
        row.medianKlB = location(klB, Location::Median);
        const std::uint64_t seed = deriveSeed(spec.firstSeed, Stream::Statistics, job.rowSeed);
        const BootstrapCi ci = row.paired
            ? bootstrapPairedRatio(klA, klB, Location::Median, 0.95, spec.comparisons.bootstrap, seed, cancel)
            : bootstrapRatio(klA, klB, Location::Median, 0.95, spec.comparisons.bootstrap, seed, cancel);
        row.medianKlRatio = ci.estimate;
        row.ratioLow = ci.lower;
        row.ratioHigh = ci.upper;

        const MannWhitneyResult mw = mannWhitneyU(klA, klB);
        row.mannWhitneyU = mw.u1;
        row.rankBiserial = mw.rankBiserial;
        row.mannWhitneyP = mw.p;
        row.mannWhitneyPNoContinuity = mw.pNoContinuity;
        if (row.paired) {
            const WilcoxonResult w = wilcoxonSignedRank(klA, klB);
            row.wilcoxonStatistic = w.statistic;
            row.wilcoxonP = w.p;
            row.test = "wilcoxon";
            row.p = w.p;
        } else {
            row.test = "mann-whitney";
            row.p = mw.p;
        }
        const KsResult ks = ksTwoSample(klA, klB);
        row.ksD = ks.d;
        row.ksP = ks.p;

        const std::uint64_t energySeed = deriveSeed(spec.firstSeed, Stream::Statistics, job.rowSeed + (1ULL << 32));
        Eigen::MatrixXd pa = sixDPoints(ca, energySeed + 1), pb = sixDPoints(cb, energySeed + 2);
        row.energyPoints = static_cast<int>(std::min(pa.rows(), pb.rows()));
        standardize(pa, pb);
        const EnergyTestResult e = energyTest(pa, pb, spec.comparisons.permutations, energySeed, cancel);
        row.energy = e.statistic;
        row.energyP = e.pValue;
        return row;
    };

    // Rows spread over the cores; each lands in its own slot, so the table is the same whatever
    // the thread count. A row's exception (bad_alloc, Cancelled) is rethrown here.
    std::vector<ComparisonRow> rows(jobs.size());
    parallelFor(jobs.size(), analysisWorkers(), [&](std::size_t i) { rows[i] = compute(jobs[i]); });

    std::vector<double> logP;
    logP.reserve(rows.size());
    for (const auto& r : rows)
        logP.push_back(r.p.logP);
    const std::vector<double> adjusted = holmAdjustLog(logP);
    for (std::size_t i = 0; i < rows.size(); ++i)
        rows[i].pHolm = pFromLog(std::min(0.0, adjusted[i]));
    return rows;
}

std::string comparisonsCsv(const ResultSet& results, const std::vector<ComparisonRow>& rows)
{
    CsvWriter csv(withSweepColumns(results.spec, {"regime", "point"}, {"budget", "scheme_a", "scheme_b", "queries", "paired", "median_kl_a",
                   "median_kl_b", "median_kl_ratio", "ratio_ci_low", "ratio_ci_high", "test", "p", "log10_p", "p_holm",
                   "log10_p_holm", "mw_u", "rank_biserial", "mw_p", "log10_mw_p", "wilcoxon_w", "wilcoxon_p",
                   "log10_wilcoxon_p", "ks_d", "ks_p", "energy", "energy_p", "p_method", "mw_p_method",
                   "mw_p_no_continuity", "log10_mw_p_no_continuity", "ks_p_method", "nonfinite_a", "nonfinite_b",
                   "energy_points"}));
    const double toLog10 = 1.0 / std::numbers::ln10;
    for (const ComparisonRow& r : rows) {
        csv.add(results.spec.regime).add(r.point);
        addSweepValues(csv, results.spec, r.point);
        csv.add(r.budget);
        csv.add(results.schemes[static_cast<std::size_t>(r.schemeA)].name);
        csv.add(results.schemes[static_cast<std::size_t>(r.schemeB)].name);
        csv.add(static_cast<long long>(r.queries)).add(r.paired ? "yes" : "no");
        csv.add(r.medianKlA).add(r.medianKlB).add(r.medianKlRatio).add(r.ratioLow).add(r.ratioHigh);
        csv.add(r.test).add(r.p.p).add(r.p.logP * toLog10).add(r.pHolm.p).add(r.pHolm.logP * toLog10);
        csv.add(r.mannWhitneyU).add(r.rankBiserial).add(r.mannWhitneyP.p).add(r.mannWhitneyP.logP * toLog10);
        if (r.paired)
            csv.add(r.wilcoxonStatistic).add(r.wilcoxonP.p).add(r.wilcoxonP.logP * toLog10);
        else
            csv.add("").add("").add("");
        csv.add(r.ksD).add(r.ksP.p).add(r.energy).add(r.energyP);
        // How each p was obtained: asymptotic, exact (complete separation) or the test's floor.
        csv.add(pMethodName(r.p.method)).add(pMethodName(r.mannWhitneyP.method));
        csv.add(r.mannWhitneyPNoContinuity.p).add(r.mannWhitneyPNoContinuity.logP * toLog10);
        csv.add(pMethodName(r.ksP.method));
        // Queries whose KL is NaN or infinite (ranked as +inf above), and the 6D points per scheme
        // the energy test used (finite ones, at most kMaxEnergyPoints).
        csv.add(static_cast<long long>(r.nonFiniteA)).add(static_cast<long long>(r.nonFiniteB)).add(r.energyPoints);
        csv.endRow();
    }
    return csv.text();
}

namespace {

std::string pText(const PValue& p)
{
    return formatPValue(p);
}

} // namespace

std::string comparisonsText(const ResultSet& results, const std::vector<ComparisonRow>& rows)
{
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-34s %2s %9s %21s %-8s %9s %9s %7s %6s %8s\n", "comparison (A vs B)", "n",
                  "KL ratio", "95% interval", "test", "p", "p_holm", "r", "ks_d", "energy_p");
    out += line;
    for (const ComparisonRow& r : rows) {
        std::string pair = results.schemes[static_cast<std::size_t>(r.schemeA)].name + " vs "
                           + results.schemes[static_cast<std::size_t>(r.schemeB)].name;
        if (results.spec.pointCount() > 1)
            pair = "[" + results.spec.pointLabel(r.point) + "] " + pair;
        std::snprintf(line, sizeof line, "%-34s %2d %9.4g [%9.4g, %9.4g] %-8s %9s %9s %+7.3f %6.3f %8.3g\n",
                      pair.c_str(), r.budget, r.medianKlRatio, r.ratioLow, r.ratioHigh,
                      r.test == "wilcoxon" ? "wilcoxon" : "mw", pText(r.p).c_str(), pText(r.pHolm).c_str(),
                      r.rankBiserial, r.ksD, r.energyP);
        out += line;
    }
    out += "r > 0: A's per-query KL ranks below B's (A does less damage); KL ratio = median KL_A / median KL_B.\n";
    return out;
}

} // namespace kvlens::stats
