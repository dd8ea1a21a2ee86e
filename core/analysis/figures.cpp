// SPDX-License-Identifier: GPL-3.0-or-later
// Histogram bins, ECDFs, seed intervals and the theory rows.
#include "core/stats/total_order.h"
#include "core/analysis/figures.h"

#include "core/spec/grid.h"

#include "core/common/math_policy.h"

#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <tuple>

namespace kvlens {

Interval seedInterval(std::span<const double> perSeed)
{
    Interval out;
    out.n = static_cast<int>(perSeed.size());
    if (perSeed.empty())
        return out;
    double sum = 0.0;
    for (double v : perSeed)
        sum += v;
    out.mean = sum / out.n;
    double ss = 0.0;
    for (double v : perSeed)
        ss += (v - out.mean) * (v - out.mean);
    // Student's t with n - 1 degrees of freedom: with 4 or 8 seeds the normal 1.96 is 14-30 % too narrow.
    const double t = out.n > 1 ? boost::math::quantile(boost::math::students_t_distribution<double, MathPolicy>(out.n - 1), 0.975) : 0.0;
    const double half = out.n > 1 ? t * std::sqrt(ss / (out.n - 1) / out.n) : 0.0;
    out.low = out.mean - half;
    out.high = out.mean + half;
    return out;
}

namespace {

constexpr int kKlBins = 40;

bool qjlKeys(const SchemeConfig& s) { return s.key.has("qjl"); }

} // namespace

namespace {

/// A per-cell record of the figure data (KlDistribution, RecallPoint, SweepCell) at its cell.
template <class Record>
Record atCell(int point, int scheme, int budget)
{
    Record r;
    r.point = point;
    r.scheme = scheme;
    r.budget = budget;
    return r;
}

/// Shared log bins over every positive KL of the run, so histograms compare across schemes (none
/// when no KL is positive).
std::vector<double> klBinEdges(const ResultSet& results)
{
    std::vector<double> edges;
    double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
    for (const auto& t : results.trials)
        for (float v : t.kl)
            if (v > 0.0f) {
                lo = std::min(lo, static_cast<double>(v));
                hi = std::max(hi, static_cast<double>(v));
            }
    if (hi > 0.0) {
        if (hi <= lo)
            hi = lo * 10.0;
        const double a = std::log10(lo), b = std::log10(hi) + 1e-9;
        for (int i = 0; i <= kKlBins; ++i)
            edges.push_back(std::pow(10.0, a + (b - a) * i / kKlBins));
    }
    return edges;
}

/// A cell's per-query KL pooled over its seeds: moments, quantiles, the ECDF and the density on
/// the run's shared bins.
void fillKlDistribution(KlDistribution& k, const std::vector<const TrialResult*>& trials,
                        const std::vector<double>& binEdges)
{
    std::vector<double> kl;
    for (const TrialResult* t : trials)
        kl.insert(kl.end(), t->kl.begin(), t->kl.end());
    stats::sortTotal(kl.begin(), kl.end()); // NaN last (a KL of a non-finite estimate), never UB
    if (kl.empty())
        return;
    const std::size_t n = kl.size();
    double sum = 0.0;
    for (double v : kl)
        sum += v;
    k.mean = sum / static_cast<double>(n);
    auto q = [&](double p) {
        const double h = (static_cast<double>(n) - 1.0) * p;
        const auto i = static_cast<std::size_t>(std::floor(h));
        const std::size_t j = std::min(i + 1, n - 1);
        return kl[i] + (h - static_cast<double>(i)) * (kl[j] - kl[i]);
    };
    k.median = q(0.5);
    k.p99 = q(0.99);
    k.max = kl.back();
    const std::size_t points = std::min(n, KlDistribution::kMaxEcdfPoints);
    for (std::size_t i = 0; i < points; ++i) {
        const std::size_t at = points == n ? i : (i * (n - 1)) / (points - 1);
        k.ecdfX.push_back(kl[at]);
        k.ecdfY.push_back(static_cast<double>(at + 1) / static_cast<double>(n));
    }
    k.density.assign(binEdges.empty() ? 0 : binEdges.size() - 1, 0.0);
    for (double v : kl) {
        if (v <= 0.0) {
            ++k.zeros;
            continue;
        }
        const auto it = std::upper_bound(binEdges.begin(), binEdges.end(), v);
        const auto bin = std::clamp<std::ptrdiff_t>(it - binEdges.begin() - 1, 0,
                                                    static_cast<std::ptrdiff_t>(k.density.size()) - 1);
        if (!k.density.empty())
            k.density[static_cast<std::size_t>(bin)] += 1.0 / static_cast<double>(n);
    }
}

/// Per seed, the mean top-k recall and the fraction of queries whose argmax moved, with intervals.
void fillRecall(RecallPoint& r, const std::vector<const TrialResult*>& trials)
{
    std::vector<double> recall, shift;
    for (const TrialResult* t : trials) {
        double a = 0.0, s = 0.0;
        for (float v : t->recall)
            a += v;
        for (auto v : t->argmaxShift)
            s += v;
        const double nq = std::max<std::size_t>(1, t->recall.size());
        recall.push_back(a / nq);
        shift.push_back(s / nq);
    }
    r.recall = seedInterval(recall);
    r.argmaxShift = seedInterval(shift);
}

/// A cell of the sweep figure: per-seed mean and p99 KL, the 6D frame and the bits spent.
void fillSweepCell(SweepCell& cell, const std::vector<const TrialResult*>& trials)
{
    std::vector<double> klMeans, klP99s;
    std::array<std::vector<double>, 6> six;
    double bits = 0.0;
    for (const TrialResult* t : trials) {
        double sum = 0.0;
        for (float v : t->kl)
            sum += v;
        klMeans.push_back(t->kl.empty() ? 0.0 : sum / static_cast<double>(t->kl.size()));
        klP99s.push_back(t->kl.empty() ? 0.0 : quantile(t->kl, 0.99));
        const auto values = t->sixD.values();
        for (std::size_t c = 0; c < 6; ++c)
            six[c].push_back(values[c]);
        bits += t->bits.total();
    }
    cell.klMean = seedInterval(klMeans);
    cell.klP99 = seedInterval(klP99s);
    for (std::size_t c = 0; c < 6; ++c)
        cell.sixD[c] = seedInterval(six[c]);
    cell.bitsTotal = bits / static_cast<double>(trials.size());
}

/// The theory row of a summary row: measured against predicted score-error variance, and for a
/// QJL key path its ratios to the residual-free base and to its one-bit-wider scalar partner (found
/// among the summary rows of the same point and budget).
TheoryRow theoryRow(const ResultSet& results, const std::vector<SummaryRow>& summary, const SummaryRow& row)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    TheoryRow t;
    t.point = row.point;
    t.scheme = row.scheme;
    t.budget = row.budget;
    t.measured = row.scoreErrorVar;
    t.predicted = row.scoreErrorVarPredicted;
    t.base = row.scoreErrorVarBase;
    const SchemeConfig& s = results.schemes[static_cast<std::size_t>(row.scheme)];
    t.qjlOnKeys = qjlKeys(s);
    t.qjlOverBase = t.qjlOnKeys && t.base > 0.0 ? t.measured / t.base : nan;
    t.overScalar = nan;
    if (t.qjlOnKeys) {
        for (const SummaryRow& other : summary) {
            const SchemeConfig& o = results.schemes[static_cast<std::size_t>(other.scheme)];
            if (other.point == row.point && other.budget == row.budget && !qjlKeys(o)
                && o.key.transforms == s.key.transforms && o.key.quantizer == s.key.quantizer
                && o.key.bits.at(row.budget) == s.key.bits.at(row.budget) + 1 && other.scoreErrorVar > 0.0) {
                t.scalarPartner = other.scheme;
                t.overScalar = t.measured / other.scoreErrorVar;
                break;
            }
        }
    }
    t.jensenPredicted = 0.5 * row.scoreErrorVar;
    t.jensenMeasured = row.logMeanExpScoreError;
    return t;
}

} // namespace

double runMeanEntropy(const ResultSet& results)
{
    double entropy = 0.0;
    for (const auto& t : results.trials)
        entropy += t.meanEntropy;
    return results.trials.empty() ? 0.0 : entropy / static_cast<double>(results.trials.size());
}

FigureData buildFigureData(const ResultSet& results)
{
    FigureData f;
    f.summary = summarize(results);
    f.meanEntropy = runMeanEntropy(results);
    f.klBinEdges = klBinEdges(results);
    const TrialCells cells(results);
    for (const TrialCells::Cell& where : cells.nonEmpty()) {
        const int point = where.at.point, scheme = where.at.schemeIndex;
        const int budget = results.spec.budgets[static_cast<std::size_t>(where.at.budgetIndex)];
        KlDistribution k = atCell<KlDistribution>(point, scheme, budget);
        fillKlDistribution(k, *where.trials, f.klBinEdges);
        f.kl.push_back(std::move(k));

        RecallPoint r = atCell<RecallPoint>(point, scheme, budget);
        fillRecall(r, *where.trials);
        f.recall.push_back(r);

        SweepCell cell = atCell<SweepCell>(point, scheme, budget);
        cell.recall = r.recall;
        cell.argmaxShift = r.argmaxShift;
        fillSweepCell(cell, *where.trials);
        f.sweep.push_back(cell);
    }
    // Theory rows follow the summary.
    for (const SummaryRow& row : f.summary)
        f.theory.push_back(theoryRow(results, f.summary, row));
    return f;
}

} // namespace kvlens
