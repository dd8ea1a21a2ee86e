// SPDX-License-Identifier: GPL-3.0-or-later
// KS distance by merging the two sorted samples; p-value from the Kolmogorov series.
#include "core/stats/kolmogorov_smirnov.h"

#include "core/stats/total_order.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <vector>

namespace kvlens::stats {

namespace {

/// Where the two series are switched (Numerical Recipes' choice: both need a handful of
/// terms there).
constexpr double kSeriesSwitch = 1.18;
/// Terms are added until they fall below this fraction of the leading one.
constexpr double kSeriesTolerance = 1e-17;
constexpr int kMaxTerms = 100;

/// sum_{k>=1} exp(-(2k-1)^2 pi^2 / (8 lambda^2)) for 0 < lambda < kSeriesSwitch.
double thetaSeries(double lambda)
{
    const double scale = -std::numbers::pi * std::numbers::pi / (8.0 * lambda * lambda);
    double sum = 0.0;
    for (int k = 1; k <= kMaxTerms; ++k) {
        const double odd = 2.0 * k - 1.0;
        const double term = std::exp(scale * odd * odd);
        sum += term;
        if (term <= kSeriesTolerance * sum)
            break;
    }
    return sum;
}

/// sum_{k>=1} (-1)^(k-1) exp(-2 (k^2 - 1) lambda^2) for lambda >= kSeriesSwitch, i.e.
/// Q_KS(lambda) / (2 exp(-2 lambda^2)); in (1 - 1e-3, 1].
double alternatingSeries(double lambda)
{
    double sum = 1.0;
    for (int k = 2; k <= kMaxTerms; ++k) {
        const double term = std::exp(-2.0 * (static_cast<double>(k) * k - 1.0) * lambda * lambda);
        sum += (k % 2 == 0) ? -term : term;
        if (term <= kSeriesTolerance)
            break;
    }
    return sum;
}

} // namespace

double kolmogorovSurvival(double lambda)
{
    assert(!std::isnan(lambda) && "kolmogorovSurvival: lambda is NaN");
    if (lambda <= 0.0)
        return 1.0;
    if (lambda < kSeriesSwitch)
        return 1.0 - std::sqrt(2.0 * std::numbers::pi) / lambda * thetaSeries(lambda);
    return 2.0 * std::exp(-2.0 * lambda * lambda) * alternatingSeries(lambda);
}

double kolmogorovLogSurvival(double lambda)
{
    assert(!std::isnan(lambda) && "kolmogorovLogSurvival: lambda is NaN");
    if (lambda <= 0.0)
        return 0.0;
    if (lambda < kSeriesSwitch)
        return std::log1p(-std::sqrt(2.0 * std::numbers::pi) / lambda * thetaSeries(lambda));
    return std::numbers::ln2 - 2.0 * lambda * lambda + std::log(alternatingSeries(lambda));
}

KsResult ksTwoSample(std::span<const double> x, std::span<const double> y)
{
    KsResult out;
    out.n1 = x.size();
    out.n2 = y.size();
    if (x.empty() || y.empty())
        return out;
    out.nonFinite = countNonFinite(x) + countNonFinite(y);

    // The total order (NaN above +inf, NaNs tied) makes the walk advance past every value.
    std::vector<double> a(x.begin(), x.end());
    std::vector<double> b(y.begin(), y.end());
    sortTotal(a.begin(), a.end());
    sortTotal(b.begin(), b.end());

    // |F1 - F2| = |i n2 - j n1| / (n1 n2) after i values of x and j of y: integer numerators
    // keep D exact (k / lcm), so D of identical samples is exactly 0.
    const auto n1 = static_cast<long long>(out.n1);
    const auto n2 = static_cast<long long>(out.n2);
    long long best = 0;
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const double t = totalLess(b[j], a[i]) ? b[j] : a[i];
        while (i < a.size() && totalEqual(a[i], t))
            ++i;
        while (j < b.size() && totalEqual(b[j], t))
            ++j;
        best = std::max(best, std::llabs(static_cast<long long>(i) * n2 - static_cast<long long>(j) * n1));
    }
    // Once one sample is exhausted |F1 - F2| only shrinks towards 0, so the sup is found.
    const double n1d = static_cast<double>(n1), n2d = static_cast<double>(n2);
    out.d = static_cast<double>(best) / (n1d * n2d);
    out.effectiveN = n1d * n2d / (n1d + n2d);

    const double root = std::sqrt(out.effectiveN);
    const double lambda = (root + 0.12 + 0.11 / root) * out.d;
    const double logP = kolmogorovLogSurvival(lambda);
    out.p = {std::max(0.0, std::min(1.0, kolmogorovSurvival(lambda))), std::min(0.0, logP)};
    // D = 1 (no overlap) has the exact tail 2 / C(N, n1); elsewhere the asymptotic one, never below it.
    const double logFloor = logSeparationTail(out.n1, out.n2);
    if (best == n1 * n2) {
        out.p = pFromLog(logFloor);
        out.p.method = PMethod::Exact;
    } else {
        out.p = atLeast(out.p, logFloor);
    }
    return out;
}

} // namespace kvlens::stats
