// SPDX-License-Identifier: GPL-3.0-or-later
// Model-lens tables over a model run's cells, and the allocation advisor's exact and Lagrangian fronts.
#include "core/common/types.h"
#include "core/stats/total_order.h"
#include "core/analysis/model_lens.h"

#include "core/io/csv.h"
#include "core/spec/grid.h"
#include "core/regimes/regime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <array>
#include <cstdio>
#include <numeric>
#include <set>
#include <tuple>

namespace kvlens {

namespace {

constexpr double kZ = 1.959963984540054; // the 97.5% normal quantile

struct Mean {
    double sum = 0.0, sum2 = 0.0;
    long long n = 0;
    long long nonFinite = 0; ///< values left out of the mean because they were NaN or infinite
    void add(double x)
    {
        if (!std::isfinite(x)) {
            ++nonFinite;
            return;
        }
        sum += x;
        sum2 += x * x;
        ++n;
    }
    double mean() const { return n ? sum / static_cast<double>(n) : kNan; }
    /// Normal-approximation 95% interval of the mean.
    std::pair<double, double> interval() const
    {
        if (n < 2)
            return {kNan, kNan};
        const double m = mean();
        const double var = std::max(0.0, (sum2 - n * m * m) / static_cast<double>(n - 1));
        const double half = kZ * std::sqrt(var / static_cast<double>(n));
        return {m - half, m + half};
    }
};

/// Wilson 95% interval of a rate of `k` in `n`.
std::pair<double, double> wilson(double k, double n)
{
    if (n <= 0.0)
        return {kNan, kNan};
    const double p = k / n, z2 = kZ * kZ;
    const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
    const double half = kZ * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n);
    return {centre - half, centre + half};
}

double percentile99(std::vector<float> v)
{
    if (v.empty())
        return kNan;
    std::sort(v.begin(), v.end(), [](float a, float b) { return stats::totalLess(a, b); }); // NaN last
    const double h = (static_cast<double>(v.size()) - 1.0) * 0.99;
    const auto lo = static_cast<std::size_t>(std::floor(h));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (h - static_cast<double>(lo)) * (static_cast<double>(v[hi]) - v[lo]);
}

/// A statistic of per-query values and its 95% interval (see measuredLoss); non-finite values are
/// counted apart and left out.
struct Estimate {
    double value = kNan, low = kNan, high = kNan;
    long long n = 0, nonFinite = 0;
};

Estimate estimate(const std::vector<float>& values, AdvisorStatistic statistic)
{
    Estimate e;
    if (statistic == AdvisorStatistic::Mean) {
        Mean m;
        for (float x : values)
            m.add(x);
        e.value = m.mean();
        std::tie(e.low, e.high) = m.interval();
        e.n = m.n;
        e.nonFinite = m.nonFinite;
        return e;
    }
    std::vector<double> v;
    v.reserve(values.size());
    for (float x : values) {
        if (std::isfinite(x))
            v.push_back(x);
        else
            ++e.nonFinite;
    }
    e.n = static_cast<long long>(v.size());
    if (v.empty())
        return e;
    std::sort(v.begin(), v.end());
    const double p = statistic == AdvisorStatistic::Median ? 0.5 : 0.99;
    const double n = static_cast<double>(v.size());
    // Type 7 (linear) interpolation, as percentile99 and NumPy's default.
    const double h = (n - 1.0) * p;
    const auto lo = static_cast<std::size_t>(std::floor(h));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    e.value = v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
    if (v.size() < 2)
        return e;
    // Distribution-free: the order statistics of ranks n p -+ z sqrt(n p (1 - p)) (1-based), clipped.
    const double half = kZ * std::sqrt(n * p * (1.0 - p));
    const auto rank = [&](double r) {
        return static_cast<std::size_t>(std::clamp(r, 1.0, n)) - 1;
    };
    e.low = v[rank(std::floor(n * p - half))];
    e.high = v[rank(std::ceil(n * p + half))];
    return e;
}

const std::vector<float>& lossValues(const TrialResult& t, AdvisorLoss loss)
{
    return loss == AdvisorLoss::Kl ? t.kl : t.relMseT;
}

std::string lossText(AdvisorLoss loss)
{
    return loss == AdvisorLoss::Kl ? "KL" : "output relative error";
}

} // namespace

std::string advisorObjectiveText(const AdvisorOptions& o)
{
    switch (o.objective) {
    case AdvisorStatistic::Mean: return "mean " + lossText(o.loss);
    case AdvisorStatistic::Median: return "median " + lossText(o.loss);
    case AdvisorStatistic::P99: return "p99 of the " + lossText(o.loss);
    }
    return lossText(o.loss);
}

std::vector<ModelCell> modelCells(const ResultSet& results)
{
    std::vector<ModelCell> cells;
    if (!results.spec.hasModelCells())
        return cells;
    for (int p = 0; p < results.spec.pointCount(); ++p) {
        const ExperimentSpec ps = results.spec.pointSpec(p);
        cells.push_back({static_cast<int>(paramNumber(ps.regimeParams, "layer")),
                         static_cast<int>(paramNumber(ps.regimeParams, "head"))});
    }
    return cells;
}

std::vector<MapValue> modelMap(const ResultSet& results)
{
    std::vector<MapValue> out;
    const std::vector<ModelCell> cells = modelCells(results);
    if (cells.empty())
        return out;
    const TrialCells grouped(results);
    for (const TrialCells::Cell& cell : grouped.nonEmpty()) {
        const ModelCell& where = cells[static_cast<std::size_t>(cell.at.point)];
        const auto& trials = *cell.trials;
        Mean kl, recall, relT, scoreVar, scorePred, entropy;
        std::vector<float> allKl;
        double shifts = 0.0, queries = 0.0;
        for (const TrialResult* t : trials) {
            for (float x : t->kl) {
                kl.add(x);
                allKl.push_back(x);
            }
            for (float x : t->recall)
                recall.add(x);
            for (float x : t->relMseT)
                relT.add(x);
            for (auto s : t->argmaxShift)
                shifts += s;
            queries += static_cast<double>(t->argmaxShift.size());
            scoreVar.add(t->scoreErrorVar);
            scorePred.add(t->scoreErrorVarPredicted);
            entropy.add(t->meanEntropy);
        }
        auto push = [&](const char* metric, double value, std::pair<double, double> ci) {
            out.push_back(MapValue{where.layer, where.head, cell.at.schemeIndex, trials.front()->key.budget, metric,
                                   value, ci.first, ci.second});
        };
        push("kl_mean", kl.mean(), kl.interval());
        push("kl_p99", percentile99(allKl), {kNan, kNan});
        push("recall", recall.mean(), recall.interval());
        push("argmax_shift", queries > 0 ? shifts / queries : kNan, wilson(shifts, queries));
        push("rel_mse_t", relT.mean(), relT.interval());
        push("score_err_var", scoreVar.mean(), {kNan, kNan});
        push("score_err_var_pred", scorePred.mean(), {kNan, kNan});
        push("entropy", entropy.mean(), {kNan, kNan});
    }
    return out;
}

std::string modelMapCsv(const ResultSet& results, const std::vector<MapValue>& map)
{
    CsvWriter csv({"layer", "head", "scheme", "budget", "metric", "value", "ci_low", "ci_high"});
    for (const MapValue& v : map) {
        csv.add(v.layer).add(v.head).add(results.schemes[static_cast<std::size_t>(v.scheme)].name).add(v.budget)
            .add(v.metric).add(v.value).add(v.ciLow).add(v.ciHigh);
        csv.endRow();
    }
    return csv.text();
}

namespace {

/// K-only and V-only trials of a model run per (layer, budget): output error of each, K-only's
/// KL, and the bits each stored. Empty when the run lacks either scheme.
struct SplitDamage {
    Mean kRelT, vRelT, kKl, kBits, vBits;
    std::vector<float> kValues, vValues; ///< the advisor's per-query loss (kept only when asked for)
};
std::map<std::pair<int, int>, SplitDamage> splitDamage(const ResultSet& results,
                                                       std::optional<AdvisorLoss> keep = std::nullopt)
{
    std::map<std::pair<int, int>, SplitDamage> acc;
    const std::vector<ModelCell> cells = modelCells(results);
    const int kOnly = results.schemeIndex("K-only"), vOnly = results.schemeIndex("V-only");
    if (cells.empty() || kOnly < 0 || vOnly < 0)
        return acc;
    for (const TrialResult& t : results.trials) {
        if (t.key.scheme != kOnly && t.key.scheme != vOnly)
            continue;
        SplitDamage& a = acc[{cells[static_cast<std::size_t>(t.key.point)].layer, t.key.budget}];
        const bool k = t.key.scheme == kOnly;
        for (float x : t.relMseT)
            (k ? a.kRelT : a.vRelT).add(x);
        if (keep) {
            const std::vector<float>& values = lossValues(t, *keep);
            auto& into = k ? a.kValues : a.vValues;
            into.insert(into.end(), values.begin(), values.end());
        }
        if (k) {
            for (float x : t.kl)
                a.kKl.add(x);
            a.kBits.add(t.bits.key);
        } else {
            a.vBits.add(t.bits.value);
        }
    }
    return acc;
}

} // namespace

std::vector<SensitivityRow> kvSensitivity(const ResultSet& results)
{
    std::vector<SensitivityRow> rows;
    for (const auto& [key, a] : splitDamage(results))
        rows.push_back(SensitivityRow{key.first, key.second, a.kRelT.mean(), a.vRelT.mean(), a.kKl.mean()});
    return rows;
}

std::string kvSensitivityCsv(const std::vector<SensitivityRow>& rows)
{
    CsvWriter csv({"layer", "budget", "k_only_rel_mse_t", "v_only_rel_mse_t", "k_over_v", "k_only_kl_mean",
                   "v_only_kl_mean"});
    for (const SensitivityRow& r : rows) {
        csv.add(r.layer).add(r.budget).add(r.kOnlyRelMseT).add(r.vOnlyRelMseT).add(r.kOverV()).add(r.kOnlyKl).add(0.0);
        csv.endRow();
    }
    return csv.text();
}

BitAllocation evaluateAllocation(const std::vector<LayerCurves>& layers, const std::vector<int>& kChoice,
                              const std::vector<int>& vChoice)
{
    BitAllocation a;
    for (std::size_t l = 0; l < layers.size(); ++l) {
        const LayerCurves& c = layers[l];
        const auto k = static_cast<std::size_t>(kChoice[l]), v = static_cast<std::size_t>(vChoice[l]);
        a.layers.push_back(c.layer);
        a.kBits.push_back(c.kBits[k]);
        a.vBits.push_back(c.vBits[v]);
        a.layerBits.push_back(0.5 * (c.kCost[k] + c.vCost[v]));
        a.bits += 0.5 * (c.kCost[k] + c.vCost[v]);
        a.loss += c.kLoss[k] + c.vLoss[v];
    }
    if (!layers.empty())
        a.bits /= static_cast<double>(layers.size());
    return a;
}

namespace {

/// The lower-left Pareto points of (bits, loss), ascending in bits, strictly descending in loss.
template <class Point>
std::vector<Point> lowerFront(std::vector<Point> points)
{
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
        return a.bits < b.bits || (a.bits == b.bits && a.loss < b.loss);
    });
    std::vector<Point> front;
    for (const Point& p : points)
        if (front.empty() || p.loss < front.back().loss - 1e-15 * std::abs(front.back().loss))
            front.push_back(p);
    return front;
}

} // namespace

std::vector<BitAllocation> paretoFront(const std::vector<LayerCurves>& layers, long long exactLimit)
{
    if (layers.empty())
        return {};
    const std::size_t L = layers.size();
    // Items: (layer, path); each chooses one width. Cost and loss add over items.
    long long combinations = 1;
    for (const LayerCurves& c : layers) {
        combinations *= static_cast<long long>(c.kBits.size() * c.vBits.size());
        if (combinations > exactLimit)
            break;
    }
    if (combinations <= exactLimit) {
        struct Point {
            double bits, loss;
            long long index;
        };
        std::vector<Point> points;
        points.reserve(static_cast<std::size_t>(combinations));
        std::vector<int> k(L, 0), v(L, 0);
        // Combination `index` as mixed-radix digits: layer l's K choice, then its V choice.
        auto decode = [&](long long index) {
            for (std::size_t l = 0; l < L; ++l) {
                const auto nk = static_cast<long long>(layers[l].kBits.size());
                const auto nv = static_cast<long long>(layers[l].vBits.size());
                k[l] = static_cast<int>(index % nk);
                index /= nk;
                v[l] = static_cast<int>(index % nv);
                index /= nv;
            }
            return evaluateAllocation(layers, k, v);
        };
        for (long long index = 0; index < combinations; ++index) {
            const BitAllocation a = decode(index);
            points.push_back({a.bits, a.loss, index});
        }
        std::vector<BitAllocation> front;
        for (const Point& p : lowerFront(points))
            front.push_back(decode(p.index));
        return front;
    }
    // Lagrangian: each item's lower convex hull, then its segments in order of loss saved per bit.
    struct Segment {
        double slope; // loss change per bit (negative)
        std::size_t item;
        int to;
    };
    std::vector<int> choice(2 * L, 0);
    std::vector<Segment> segments;
    for (std::size_t item = 0; item < 2 * L; ++item) {
        const LayerCurves& c = layers[item / 2];
        const bool isK = item % 2 == 0;
        const auto& cost = isK ? c.kCost : c.vCost;
        const auto& loss = isK ? c.kLoss : c.vLoss;
        std::vector<int> order(cost.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int a, int b) {
            return cost[static_cast<std::size_t>(a)] < cost[static_cast<std::size_t>(b)]
                   || (cost[static_cast<std::size_t>(a)] == cost[static_cast<std::size_t>(b)]
                       && loss[static_cast<std::size_t>(a)] < loss[static_cast<std::size_t>(b)]);
        });
        std::vector<int> hull;
        for (int o : order) {
            const auto at = [&](int i) { return std::pair{cost[static_cast<std::size_t>(i)], loss[static_cast<std::size_t>(i)]}; };
            if (!hull.empty() && at(o).second >= at(hull.back()).second)
                continue; // costs more, saves nothing
            while (hull.size() >= 2) {
                const auto [x1, y1] = at(hull[hull.size() - 2]);
                const auto [x2, y2] = at(hull.back());
                const auto [x3, y3] = at(o);
                if ((y2 - y1) * (x3 - x1) >= (y3 - y1) * (x2 - x1))
                    hull.pop_back(); // not convex: the middle point lies above the chord
                else
                    break;
            }
            hull.push_back(o);
        }
        choice[item] = hull.front();
        for (std::size_t h = 1; h < hull.size(); ++h) {
            const double dc = cost[static_cast<std::size_t>(hull[h])] - cost[static_cast<std::size_t>(hull[h - 1])];
            const double dl = loss[static_cast<std::size_t>(hull[h])] - loss[static_cast<std::size_t>(hull[h - 1])];
            segments.push_back({dl / dc, item, hull[h]});
        }
    }
    std::stable_sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.slope < b.slope; });
    auto current = [&] {
        std::vector<int> k(L), v(L);
        for (std::size_t l = 0; l < L; ++l) {
            k[l] = choice[2 * l];
            v[l] = choice[2 * l + 1];
        }
        return evaluateAllocation(layers, k, v);
    };
    std::vector<BitAllocation> front{current()};
    for (const Segment& s : segments) {
        choice[s.item] = s.to;
        front.push_back(current());
    }
    return lowerFront(front);
}

std::optional<BitAllocation> allocate(const std::vector<LayerCurves>& layers, double budget, long long exactLimit)
{
    std::optional<BitAllocation> best;
    for (const BitAllocation& a : paretoFront(layers, exactLimit))
        if (a.bits <= budget + 1e-9 && (!best || a.loss < best->loss))
            best = a;
    return best;
}

Result<std::vector<LayerCurves>> layerCurves(const ResultSet& results, const AdvisorOptions& objective)
{
    std::vector<LayerCurves> out;
    const std::map<std::pair<int, int>, SplitDamage> damage = splitDamage(results, objective.loss);
    std::set<int> runLayers;
    for (const ModelCell& c : modelCells(results))
        runLayers.insert(c.layer);
    if (damage.empty())
        return out;
    // A layer whose loss is unknown at some width cannot be left out: the advice would then be over
    // fewer layers than the uniform splits it is compared with (and look better for it).
    std::map<std::pair<int, int>, std::pair<Estimate, Estimate>> estimates;
    for (const auto& [key, a] : damage) {
        const Estimate k = estimate(a.kValues, objective.objective), v = estimate(a.vValues, objective.objective);
        for (const auto& [what, m] : {std::pair<const char*, const Estimate*>{"K-only", &k}, {"V-only", &v}}) {
            if (m->nonFinite > 0 || m->n == 0)
                return Error{"advisor", "layer " + std::to_string(key.first) + ": " + what + "'s "
                                            + lossText(objective.loss) + " at n = " + std::to_string(key.second) + " is "
                                            + (m->n == 0 ? std::string("missing")
                                                         : "not finite for " + std::to_string(m->nonFinite) + " of "
                                                               + std::to_string(m->n + m->nonFinite) + " queries")
                                            + ": no advice (every layer needs finite K-only and V-only curves)"};
        }
        estimates[key] = {k, v};
    }
    for (const auto& [key, a] : damage) { // (layer, budget) ascending
        if (out.empty() || out.back().layer != key.first)
            out.push_back(LayerCurves{key.first, {}, {}, {}, {}, {}, {}});
        LayerCurves& c = out.back();
        const auto& [k, v] = estimates[key];
        c.kBits.push_back(key.second);
        c.kLoss.push_back(k.value);
        c.kCost.push_back(a.kBits.mean());
        c.vBits.push_back(key.second);
        c.vLoss.push_back(v.value);
        c.vCost.push_back(a.vBits.mean());
    }
    for (const int layer : runLayers)
        if (std::none_of(out.begin(), out.end(), [&](const LayerCurves& c) { return c.layer == layer; }))
            return Error{"advisor", "layer " + std::to_string(layer) + " has no K-only or V-only trial: no advice"};
    return out;
}

std::optional<BitAllocation> bestUniformSplit(const std::vector<LayerCurves>& curves, double targetBits)
{
    std::optional<BitAllocation> uniform;
    if (curves.empty())
        return uniform;
    for (std::size_t k = 0; k < curves.front().kBits.size(); ++k)
        for (std::size_t v = 0; v < curves.front().vBits.size(); ++v) {
            std::vector<int> kc, vc;
            bool ok = true;
            for (const LayerCurves& c : curves) {
                const auto ki = std::find(c.kBits.begin(), c.kBits.end(), curves.front().kBits[k]);
                const auto vi = std::find(c.vBits.begin(), c.vBits.end(), curves.front().vBits[v]);
                ok = ok && ki != c.kBits.end() && vi != c.vBits.end();
                if (!ok)
                    break;
                kc.push_back(static_cast<int>(ki - c.kBits.begin()));
                vc.push_back(static_cast<int>(vi - c.vBits.begin()));
            }
            if (!ok)
                continue;
            const BitAllocation a = evaluateAllocation(curves, kc, vc);
            if (a.bits <= targetBits + 1e-9 && (!uniform || a.loss < uniform->loss))
                uniform = a;
        }
    return uniform;
}

AllocationCheck measuredLoss(const ResultSet& results, const std::string& name, double predicted,
                             const AdvisorOptions& objective)
{
    const std::vector<ModelCell> cells = modelCells(results);
    std::map<int, std::vector<float>> perLayer;
    for (const ModelCell& cell : cells) // every layer of the run counts, even one with no trial here
        perLayer[cell.layer];
    Mean bits;
    for (const TrialResult& t : results.trials) {
        std::vector<float>& m = perLayer[cells.empty() ? 0 : cells[static_cast<std::size_t>(t.key.point)].layer];
        const std::vector<float>& values = lossValues(t, objective.loss);
        m.insert(m.end(), values.begin(), values.end());
        bits.add(t.bits.total());
    }
    AllocationCheck c;
    c.name = name;
    c.predicted = predicted;
    c.bits = bits.mean();
    double below2 = 0.0, above2 = 0.0;
    c.layers = static_cast<int>(perLayer.size());
    for (const auto& [layer, values] : perLayer) {
        const Estimate e = estimate(values, objective.objective);
        c.nonFinite += e.nonFinite;
        // A layer without a finite value has no finite loss: the sum is not finite either.
        c.measured += e.n > 0 && e.nonFinite == 0 ? e.value : std::numeric_limits<double>::infinity();
        if (std::isfinite(e.low)) {
            if (objective.objective == AdvisorStatistic::Mean) { // symmetric: as it always was
                below2 += 0.25 * (e.high - e.low) * (e.high - e.low);
                above2 = below2;
            } else {
                below2 += (e.value - e.low) * (e.value - e.low);
                above2 += (e.high - e.value) * (e.high - e.value);
            }
        }
    }
    c.low = c.measured - std::sqrt(below2);
    c.high = c.measured + std::sqrt(above2);
    return c;
}

std::string allocationChecksCsv(const std::vector<AllocationCheck>& checks)
{
    CsvWriter csv({"allocation", "bits", "predicted_loss", "measured_loss", "ci_low", "ci_high", "layers",
                   "nonfinite_queries"});
    for (const AllocationCheck& c : checks) {
        csv.add(c.name).add(c.bits).add(c.predicted).add(c.measured).add(c.low).add(c.high).add(c.layers)
            .add(c.nonFinite);
        csv.endRow();
    }
    return csv.text();
}

std::string allocationChecksText(const std::vector<AllocationCheck>& checks, const AdvisorOptions& objective)
{
    std::string text = "the advice rerun as its own experiment (summed per-layer "
                       + (objective.objective == AdvisorStatistic::Mean ? lossText(objective.loss)
                                                                        : advisorObjectiveText(objective))
                       + ", 95% CI):\n";
    char line[256];
    for (const AllocationCheck& c : checks) {
        std::snprintf(line, sizeof line, "  %-22s %.4g bits  measured %.4g [%.4g, %.4g]%s\n", c.name.c_str(), c.bits,
                      c.measured, c.low, c.high,
                      std::isfinite(c.predicted) ? ("  predicted " + std::to_string(c.predicted).substr(0, 8)).c_str()
                                                 : "");
        text += line;
    }
    if (checks.size() > 1) {
        const AllocationCheck& advice = checks.front();
        bool beats = true;
        for (std::size_t i = 1; i < checks.size(); ++i)
            if (checks[i].bits <= advice.bits + 1e-9)
                beats = beats && advice.high < checks[i].low;
        bool beatsAll = true;
        for (std::size_t i = 1; i < checks.size(); ++i)
            beatsAll = beatsAll && advice.high < checks[i].low;
        text += beatsAll ? "the advice has less damage than every allocation above, beyond the intervals\n"
                : beats  ? "the advice has less damage than every allocation above of no more bits, beyond the "
                           "intervals, but not than all of them\n"
                         : "the advice does NOT beat every uniform allocation of no more bits beyond the intervals\n";
    }
    return text;
}

std::string kvSensitivityText(const std::vector<SensitivityRow>& sensitivity)
{
    std::string text = "K-vs-V sensitivity (output relative error, K-only / V-only, over each layer's heads):\n";
    bool kWorseEverywhere = true;
    char line[256];
    for (const SensitivityRow& r : sensitivity) {
        std::snprintf(line, sizeof line, "  layer %2d  n = %d  K-only %.4g  V-only %.4g  K/V %.2f  (K-only KL %.4g)\n",
                      r.layer, r.budget, r.kOnlyRelMseT, r.vOnlyRelMseT, r.kOverV(), r.kOnlyKl);
        text += line;
        kWorseEverywhere = kWorseEverywhere && r.kOnlyRelMseT > r.vOnlyRelMseT;
    }
    text += kWorseEverywhere ? "K damage exceeds V damage in every layer and budget\n"
                             : "K damage does not exceed V damage everywhere (see the rows with K/V < 1)\n";
    return text;
}

std::string advisorText(const std::vector<LayerCurves>& curves, double targetBits, const AdvisorOptions& objective)
{
    std::string text;
    char line[256];
    const std::vector<BitAllocation> front = paretoFront(curves);
    const auto advice = allocate(curves, targetBits);
    if (!advice) {
        std::snprintf(line, sizeof line, "advisor: no allocation fits %.4g bits per coordinate", targetBits);
        text += line;
        if (!front.empty()) {
            std::snprintf(line, sizeof line, " (the cheapest costs %.4g)", front.front().bits);
            text += line;
        }
        return text + "\n";
    }
    std::snprintf(line, sizeof line, "advisor at %.3g bits/coordinate: predicted loss %.4g at %.4g bits:", targetBits,
                  advice->loss, advice->bits);
    text += line;
    for (std::size_t l = 0; l < advice->kBits.size(); ++l)
        text += " L" + std::to_string(advice->layers[l]) + " K" + std::to_string(advice->kBits[l]) + "/V"
                + std::to_string(advice->vBits[l]);
    text += "\n";
    // The best uniform split (the same K and V widths in every layer) within the same budget.
    const std::optional<BitAllocation> uniform = bestUniformSplit(curves, targetBits);
    if (uniform) {
        std::snprintf(line, sizeof line,
                      "best uniform split within the budget: K%d/V%d in every layer, predicted loss %.4g at %.4g bits "
                      "(the advice %s by %.1f%%)\n",
                      uniform->kBits.front(), uniform->vBits.front(), uniform->loss, uniform->bits,
                      advice->loss < uniform->loss ? "is lower" : "is not lower",
                      uniform->loss > 0 ? 100.0 * (uniform->loss - advice->loss) / uniform->loss : 0.0);
        text += line;
    }
    if (objective == AdvisorOptions{} || (objective.objective == AdvisorStatistic::Mean && objective.loss == AdvisorLoss::RelMseT))
        text += "(predicted from the K-only and V-only curves, assuming their damage adds)\n";
    else
        text += "(predicted from the K-only and V-only curves of the " + advisorObjectiveText(objective)
                + ", assuming their damage adds)\n";
    if (objective.loss == AdvisorLoss::Kl)
        text += "(KL cannot see V: a value error never moves the weights, so V always gets the narrowest width)\n";
    return text;
}

std::string modelLensText(const std::vector<SensitivityRow>& sensitivity, const std::vector<LayerCurves>& curves,
                          double targetBits)
{
    return kvSensitivityText(sensitivity) + advisorText(curves, targetBits);
}

std::string paretoCsv(const std::vector<BitAllocation>& front)
{
    CsvWriter csv({"bits", "predicted_loss", "k_bits", "v_bits"});
    for (const BitAllocation& a : front) {
        std::string k, v;
        for (std::size_t l = 0; l < a.kBits.size(); ++l) {
            k += (l ? " " : "") + std::to_string(a.kBits[l]);
            v += (l ? " " : "") + std::to_string(a.vBits[l]);
        }
        csv.add(a.bits).add(a.loss).add(k).add(v);
        csv.endRow();
    }
    return csv.text();
}

AllocationFile allocationFile(const BitAllocation& a, double targetBits, std::uint64_t specHash,
                              const std::string& loss, const std::string& objective)
{
    AllocationFile f;
    f.specHash = specHash;
    f.targetBits = targetBits;
    f.bits = a.bits;
    f.predictedLoss = a.loss;
    f.loss = loss;
    f.objective = objective;
    for (std::size_t l = 0; l < a.kBits.size(); ++l) {
        AllocationEntry e;
        e.layer = a.layers[l];
        e.kBits = a.kBits[l];
        e.vBits = a.vBits[l];
        e.bits = l < a.layerBits.size() ? a.layerBits[l] : 0.0;
        f.entries.push_back(e);
    }
    return f;
}

std::string allocationJson(const BitAllocation& a, double targetBits, std::uint64_t specHash, const std::string& loss,
                           const std::string& objective)
{
    return allocationToJson(allocationFile(a, targetBits, specHash, loss, objective));
}

} // namespace kvlens
