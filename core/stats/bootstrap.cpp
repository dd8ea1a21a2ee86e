// SPDX-License-Identifier: GPL-3.0-or-later
// Percentile bootstrap: resample indices with a seeded Rng, sort the statistics, read quantiles.
#include "core/stats/bootstrap.h"

#include "core/rng/rng.h"
#include "core/stats/total_order.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace kvlens::stats {

namespace {

/// Location of `values`, reordering them (nth_element) for the median.
double locationInPlace(std::vector<double>& values, Location loc)
{
    if (values.empty())
        return 0.0;
    if (loc == Location::Mean)
        return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    const std::size_t half = values.size() / 2;
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(half);
    std::nth_element(values.begin(), middle, values.end(), totalLess);
    const double upper = *middle;
    if (values.size() % 2 == 1)
        return upper;
    // The lower middle value is the largest of the first half.
    const double lower = *std::max_element(values.begin(), middle, totalLess);
    return 0.5 * (lower + upper);
}

/// The median of bootstrap resamples read from counts over the once-sorted sample: the k-th
/// smallest of a resample is the sorted value where the running count passes k, so each
/// resample costs its draws and one scan instead of a copy and a selection. The values are the
/// same order statistics nth_element finds, so the medians are identical.
class CountedMedian {
public:
    explicit CountedMedian(std::span<const double> values)
        : m_sorted(values.begin(), values.end()), m_rank(values.size()), m_counts(values.size(), 0)
    {
        std::vector<std::size_t> order(values.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return totalLess(values[a], values[b]); });
        for (std::size_t r = 0; r < order.size(); ++r) {
            m_rank[order[r]] = static_cast<std::uint32_t>(r);
            m_sorted[r] = values[order[r]];
        }
    }
    void clear()
    {
        std::fill(m_counts.begin(), m_counts.end(), 0u);
        m_total = 0;
    }
    void add(std::size_t original, std::uint32_t weight = 1)
    {
        m_counts[m_rank[original]] += weight;
        m_total += weight;
    }
    /// Median of the added multiset (m_total draws; 0 for none).
    double median() const
    {
        if (m_total == 0)
            return 0.0;
        const std::size_t n = m_total, upper = n / 2;
        const std::size_t lowerRank = n % 2 ? upper : upper - 1;
        double lower = 0.0;
        std::size_t seen = 0;
        bool haveLower = false;
        for (std::size_t p = 0; p < m_sorted.size(); ++p) {
            seen += m_counts[p];
            if (!haveLower && seen > lowerRank) {
                lower = m_sorted[p];
                haveLower = true;
            }
            if (seen > upper)
                return n % 2 ? m_sorted[p] : 0.5 * (lower + m_sorted[p]);
        }
        return m_sorted.back();
    }

private:
    std::vector<double> m_sorted;
    std::vector<std::uint32_t> m_rank;
    std::vector<std::uint32_t> m_counts;
    std::size_t m_total = 0;
};

/// Fills `out` with values[i] for n indices drawn with replacement.
void resampleInto(std::span<const double> values, Rng& rng, std::vector<double>& out)
{
    out.resize(values.size());
    for (double& v : out)
        v = values[static_cast<std::size_t>(rng.below(values.size()))];
}

/// Quantile q of sorted values, linear between order statistics (Hyndman & Fan type 7).
double sortedQuantile(const std::vector<double>& sorted, double q)
{
    const double h = q * static_cast<double>(sorted.size() - 1);
    const auto below = static_cast<std::size_t>(std::floor(h));
    const std::size_t above = std::min(below + 1, sorted.size() - 1);
    return sorted[below] + (h - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

/// The interval from the bootstrap statistics (consumed).
BootstrapCi finish(double estimate, double level, std::vector<double> statistics)
{
    BootstrapCi ci;
    ci.estimate = estimate;
    ci.level = level;
    ci.resamples = static_cast<int>(statistics.size());
    if (statistics.empty()) {
        ci.lower = ci.upper = estimate;
        return ci;
    }
    sortTotal(statistics.begin(), statistics.end());
    ci.lower = sortedQuantile(statistics, 0.5 * (1.0 - level));
    ci.upper = sortedQuantile(statistics, 0.5 * (1.0 + level));
    return ci;
}

} // namespace

double location(std::span<const double> values, Location loc)
{
    std::vector<double> copy(values.begin(), values.end());
    return locationInPlace(copy, loc);
}

BootstrapCi bootstrapLocation(std::span<const double> x, Location loc, double level, int resamples,
                              std::uint64_t seed, const CancelToken& cancel)
{
    assert(level > 0.0 && level < 1.0 && "bootstrapLocation: level must lie in (0, 1)");
    if (x.empty())
        return finish(0.0, level, {});
    Rng rng(EngineKind::Pcg64, seed);
    std::vector<double> statistics;
    statistics.reserve(static_cast<std::size_t>(std::max(resamples, 0)));
    if (loc == Location::Median) {
        CountedMedian median(x);
        for (int b = 0; b < resamples; ++b) {
        cancel.check();
            median.clear();
            for (std::size_t k = 0; k < x.size(); ++k)
                median.add(static_cast<std::size_t>(rng.below(x.size())));
            statistics.push_back(median.median());
        }
        return finish(location(x, loc), level, std::move(statistics));
    }
    std::vector<double> scratch;
    for (int b = 0; b < resamples; ++b) {
        cancel.check();
        resampleInto(x, rng, scratch);
        statistics.push_back(locationInPlace(scratch, loc));
    }
    return finish(location(x, loc), level, std::move(statistics));
}

BootstrapCi bootstrapRatio(std::span<const double> x, std::span<const double> y, Location loc, double level,
                           int resamples, std::uint64_t seed, const CancelToken& cancel)
{
    assert(level > 0.0 && level < 1.0 && "bootstrapRatio: level must lie in (0, 1)");
    const double denominator = location(y, loc);
    if (x.empty() || y.empty() || denominator == 0.0)
        return finish(0.0, level, {});
    Rng rng(EngineKind::Pcg64, seed);
    std::vector<double> statistics;
    statistics.reserve(static_cast<std::size_t>(std::max(resamples, 0)));
    if (loc == Location::Median) {
        CountedMedian mx(x), my(y);
        for (int b = 0; b < resamples; ++b) {
        cancel.check();
            mx.clear();
            my.clear();
            for (std::size_t k = 0; k < x.size(); ++k) // the draws in the order resampleInto makes them
                mx.add(static_cast<std::size_t>(rng.below(x.size())));
            for (std::size_t k = 0; k < y.size(); ++k)
                my.add(static_cast<std::size_t>(rng.below(y.size())));
            const double bottom = my.median();
            if (bottom != 0.0)
                statistics.push_back(mx.median() / bottom);
        }
        return finish(location(x, loc) / denominator, level, std::move(statistics));
    }
    std::vector<double> scratchX, scratchY;
    for (int b = 0; b < resamples; ++b) {
        cancel.check();
        resampleInto(x, rng, scratchX);
        resampleInto(y, rng, scratchY);
        const double bottom = locationInPlace(scratchY, loc);
        if (bottom != 0.0)
            statistics.push_back(locationInPlace(scratchX, loc) / bottom);
    }
    return finish(location(x, loc) / denominator, level, std::move(statistics));
}

BootstrapCi bootstrapPairedRatio(std::span<const double> x, std::span<const double> y, Location loc, double level,
                                 int resamples, std::uint64_t seed, const CancelToken& cancel)
{
    assert(level > 0.0 && level < 1.0 && "bootstrapPairedRatio: level must lie in (0, 1)");
    assert(x.size() == y.size() && "bootstrapPairedRatio: samples must be paired");
    const double denominator = location(y, loc);
    if (x.empty() || x.size() != y.size() || denominator == 0.0)
        return finish(0.0, level, {});
    Rng rng(EngineKind::Pcg64, seed);
    std::vector<double> statistics;
    statistics.reserve(static_cast<std::size_t>(std::max(resamples, 0)));
    if (loc == Location::Median) {
        CountedMedian mx(x), my(y);
        for (int b = 0; b < resamples; ++b) {
        cancel.check();
            mx.clear();
            my.clear();
            for (std::size_t k = 0; k < x.size(); ++k) {
                const auto i = static_cast<std::size_t>(rng.below(x.size()));
                mx.add(i);
                my.add(i);
            }
            const double bottom = my.median();
            if (bottom != 0.0)
                statistics.push_back(mx.median() / bottom);
        }
        return finish(location(x, loc) / denominator, level, std::move(statistics));
    }
    std::vector<double> scratchX(x.size()), scratchY(y.size());
    for (int b = 0; b < resamples; ++b) {
        cancel.check();
        for (std::size_t k = 0; k < x.size(); ++k) {
            const auto i = static_cast<std::size_t>(rng.below(x.size()));
            scratchX[k] = x[i];
            scratchY[k] = y[i];
        }
        const double bottom = locationInPlace(scratchY, loc);
        if (bottom != 0.0)
            statistics.push_back(locationInPlace(scratchX, loc) / bottom);
    }
    return finish(location(x, loc) / denominator, level, std::move(statistics));
}

BootstrapCi bootstrapClusteredRatio(const std::vector<std::vector<double>>& x, const std::vector<std::vector<double>>& y,
                                    ClusterDesign design, double level, int resamples, std::uint64_t seed,
                                    const CancelToken& cancel, Location loc)
{
    assert(level > 0.0 && level < 1.0 && "bootstrapClusteredRatio: level must lie in (0, 1)");
    assert(x.size() == y.size() && "bootstrapClusteredRatio: one cluster of each sample per unit");
    const std::size_t clusters = std::min(x.size(), y.size());
    std::vector<double> px, py;
    std::vector<std::size_t> startX, startY;
    for (std::size_t k = 0; k < clusters; ++k) {
        startX.push_back(px.size());
        startY.push_back(py.size());
        px.insert(px.end(), x[k].begin(), x[k].end());
        py.insert(py.end(), y[k].begin(), y[k].end());
    }
    const double denominator = location(py, loc);
    if (px.empty() || py.empty() || denominator == 0.0)
        return finish(0.0, level, {});
    const double estimate = location(px, loc) / denominator;
    // Crossed: every cluster holds the same items in the same order (fixed queries).
    std::size_t items = 0;
    if (design == ClusterDesign::Crossed) {
        items = x[0].size();
        for (std::size_t k = 0; k < clusters; ++k)
            if (x[k].size() != items || y[k].size() != items)
                return finish(estimate, level, {});
    }
    Rng rng(EngineKind::Pcg64, seed);
    CountedMedian mx(px), my(py);
    std::vector<std::uint32_t> clusterCount(clusters), itemCount(items);
    std::vector<double> statistics;
    statistics.reserve(static_cast<std::size_t>(std::max(resamples, 0)));
    for (int b = 0; b < resamples; ++b) {
        cancel.check();
        std::fill(clusterCount.begin(), clusterCount.end(), 0u);
        for (std::size_t k = 0; k < clusters; ++k)
            ++clusterCount[static_cast<std::size_t>(rng.below(clusters))];
        if (design == ClusterDesign::Crossed) {
            std::fill(itemCount.begin(), itemCount.end(), 0u);
            for (std::size_t i = 0; i < items; ++i)
                ++itemCount[static_cast<std::size_t>(rng.below(items))];
        }
        mx.clear();
        my.clear();
        double sumX = 0.0, sumY = 0.0, weightX = 0.0, weightY = 0.0;
        for (std::size_t k = 0; k < clusters; ++k) {
            if (clusterCount[k] == 0)
                continue;
            auto addCluster = [&](CountedMedian& m, const std::vector<double>& values, std::size_t start, double& sum,
                                  double& weight) {
                for (std::size_t i = 0; i < values.size(); ++i) {
                    const std::uint32_t w = design == ClusterDesign::Crossed ? clusterCount[k] * itemCount[i] : clusterCount[k];
                    if (!w)
                        continue;
                    if (loc == Location::Median)
                        m.add(start + i, w);
                    sum += w * values[i];
                    weight += w;
                }
            };
            addCluster(mx, x[k], startX[k], sumX, weightX);
            addCluster(my, y[k], startY[k], sumY, weightY);
        }
        const double top = loc == Location::Median ? mx.median() : (weightX > 0.0 ? sumX / weightX : 0.0);
        const double bottom = loc == Location::Median ? my.median() : (weightY > 0.0 ? sumY / weightY : 0.0);
        if (bottom != 0.0)
            statistics.push_back(top / bottom);
    }
    return finish(estimate, level, std::move(statistics));
}

} // namespace kvlens::stats

