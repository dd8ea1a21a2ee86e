// SPDX-License-Identifier: GPL-3.0-or-later
// Rate-distortion points: per-seed means, Student-t intervals over seeds, and the Pareto envelope.
#include "core/common/types.h"
#include "core/analysis/rate_distortion.h"

#include "core/common/math_policy.h"
#include "core/io/csv.h"
#include "core/spec/grid.h"

#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>

namespace kvlens {

std::string_view damageMetricName(DamageMetric metric)
{
    return metric == DamageMetric::MeanKl ? "mean_kl" : "output_rel_error";
}

std::string_view damageMetricUnit(DamageMetric metric)
{
    return metric == DamageMetric::MeanKl ? "nats" : "relative (1)";
}

namespace {


/// The mean over one trial's queries of the chosen per-query damage, in double; NaN when the
/// trial has no query or any query's value is not finite.
double seedMean(const TrialResult& t, DamageMetric metric, bool& allZero)
{
    const std::vector<float>& values = metric == DamageMetric::MeanKl ? t.kl : t.relMseT;
    if (values.empty()) {
        allZero = false;
        return kNan;
    }
    double sum = 0.0;
    for (float v : values) {
        if (!std::isfinite(v)) {
            allZero = false;
            return kNan;
        }
        if (v != 0.0f)
            allZero = false;
        sum += v;
    }
    return sum / static_cast<double>(values.size());
}

/// b dominates a: no more bits and no more damage, one of them strictly less.
bool dominates(const RateDistortionPoint& b, const RateDistortionPoint& a)
{
    return b.bits <= a.bits && b.damage <= a.damage && (b.bits < a.bits || b.damage < a.damage);
}

/// Fills a point's damage, interval and flags from its per-seed means (NaN where a seed's is not finite).
void fromSeedMeans(RateDistortionPoint& p, const std::vector<double>& means, bool allZero)
{
    p.seeds = static_cast<int>(means.size());
    p.finite = !means.empty() && std::all_of(means.begin(), means.end(), [](double m) { return std::isfinite(m); });
    p.exactZero = p.finite && allZero;
    if (!p.finite) {
        p.damage = kNan;
    } else {
        double sum = 0.0;
        for (double m : means)
            sum += m;
        p.damage = sum / static_cast<double>(means.size());
        if (means.size() > 1) {
            double ss = 0.0;
            for (double m : means)
                ss += (m - p.damage) * (m - p.damage);
            const double n = static_cast<double>(means.size());
            const boost::math::students_t_distribution<double, MathPolicy> student(n - 1.0);
            const double t = boost::math::quantile(boost::math::complement(student, 0.025));
            const double half = t * std::sqrt(ss / (n - 1.0) / n);
            p.low = p.damage - half;
            p.high = p.damage + half;
        }
    }
}

/// Marks, per grid point, the finite points no other finite point dominates.
void markEnvelope(RateDistortion& rd)
{
    for (RateDistortionPoint& a : rd.points) {
        if (!a.finite || !std::isfinite(a.bits))
            continue;
        a.onEnvelope = std::none_of(rd.points.begin(), rd.points.end(), [&](const RateDistortionPoint& b) {
            return &b != &a && b.point == a.point && b.finite && dominates(b, a);
        });
    }
}

/// Bits of a set of trials: mean and max - min.
void bitsOf(RateDistortionPoint& p, const std::vector<const TrialResult*>& trials)
{
    double sum = 0.0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const TrialResult* t : trials) {
        const double b = t->bits.total();
        sum += b;
        lo = std::min(lo, b);
        hi = std::max(hi, b);
    }
    p.bits = trials.empty() ? kNan : sum / static_cast<double>(trials.size());
    p.bitsSpread = trials.empty() ? 0.0 : hi - lo;
}

} // namespace

RateDistortion rateDistortion(const ResultSet& results, DamageMetric metric)
{
    RateDistortion rd;
    rd.metric = metric;
    const auto& budgets = results.spec.budgets;
    const TrialCells cells(results);
    for (const TrialCells::Cell& where : cells.nonEmpty()) {
        const std::vector<const TrialResult*>& trials = *where.trials;
        RateDistortionPoint p;
        p.point = where.at.point;
        p.scheme = where.at.schemeIndex;
        p.budget = budgets[static_cast<std::size_t>(where.at.budgetIndex)];
        bitsOf(p, trials);
        std::vector<double> means;
        bool allZero = true;
        for (const TrialResult* t : trials)
            means.push_back(seedMean(*t, metric, allZero));
        fromSeedMeans(p, means, allZero);
        rd.points.push_back(p);
    }
    markEnvelope(rd);
    return rd;
}

RateDistortion rateDistortionPooled(const ResultSet& results, DamageMetric metric)
{
    RateDistortion rd;
    rd.metric = metric;
    const TrialCells cells(results);
    const GridShape& shape = cells.shape();
    rd.pooledPoints = static_cast<int>(shape.points);
    for (long long b = 0; b < shape.budgets; ++b)
        for (long long s = 0; s < shape.schemes; ++s) {
            std::vector<const TrialResult*> all;
            std::vector<double> sum(static_cast<std::size_t>(shape.seeds), 0.0);
            std::vector<int> count(static_cast<std::size_t>(shape.seeds), 0);
            bool allZero = true;
            for (long long point = 0; point < shape.points; ++point)
                for (const TrialResult* t : cells.at(static_cast<int>(point), static_cast<int>(b), static_cast<int>(s))) {
                    all.push_back(t);
                    const auto seed = static_cast<std::size_t>(t->key.seedIndex);
                    if (seed >= sum.size())
                        continue;
                    sum[seed] += seedMean(*t, metric, allZero);
                    ++count[seed];
                }
            if (all.empty())
                continue;
            RateDistortionPoint p;
            p.scheme = static_cast<int>(s);
            p.budget = results.spec.budgets[static_cast<std::size_t>(b)];
            bitsOf(p, all);
            std::vector<double> means;
            for (std::size_t seed = 0; seed < sum.size(); ++seed)
                if (count[seed] > 0)
                    means.push_back(sum[seed] / count[seed]);
            fromSeedMeans(p, means, allZero);
            rd.points.push_back(p);
        }
    markEnvelope(rd);
    return rd;
}

std::vector<int> RateDistortion::envelope(int point) const
{
    std::vector<int> out;
    for (std::size_t i = 0; i < points.size(); ++i)
        if (points[i].point == point && points[i].onEnvelope)
            out.push_back(static_cast<int>(i));
    std::sort(out.begin(), out.end(), [&](int a, int b) {
        const RateDistortionPoint &pa = points[static_cast<std::size_t>(a)], &pb = points[static_cast<std::size_t>(b)];
        return pa.bits != pb.bits ? pa.bits < pb.bits : pa.damage > pb.damage;
    });
    return out;
}

std::string rateDistortionCsv(const ResultSet& results, const RateDistortion& rd)
{
    CsvWriter csv({"point", "point_label", "scheme", "budget_nominal", "bits_exact", "bits_spread", "metric", "unit",
                   "damage", "ci_low", "ci_high", "interval", "seeds", "on_envelope"});
    for (const RateDistortionPoint& p : rd.points) {
        const std::string scheme = p.scheme >= 0 && p.scheme < static_cast<int>(results.schemes.size())
                                       ? results.schemes[static_cast<std::size_t>(p.scheme)].name
                                       : std::string("?");
        const char* interval = !p.finite ? "none_not_finite" : p.seeds < 2 ? "none_one_seed" : "student_t_95_over_seeds";
        if (rd.pooledPoints > 0)
            csv.add("all").add("pooled over " + std::to_string(rd.pooledPoints) + " grid points");
        else
            csv.add(p.point).add(results.spec.pointLabel(p.point));
        csv
            .add(scheme)
            .add(p.budget)
            .add(p.bits)
            .add(p.bitsSpread)
            .add(damageMetricName(rd.metric))
            .add(damageMetricUnit(rd.metric))
            .add(p.damage)
            .add(p.low)
            .add(p.high)
            .add(interval)
            .add(p.seeds)
            .add(p.onEnvelope ? 1 : 0);
        csv.endRow();
    }
    return csv.text();
}

} // namespace kvlens
