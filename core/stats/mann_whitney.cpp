// SPDX-License-Identifier: GPL-3.0-or-later
// Mann-Whitney U from pooled average ranks; the normal approximation ends in a log-space tail.
#include "core/stats/mann_whitney.h"

#include "core/stats/ranks.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvlens::stats {

namespace {

/// The largest min(U1, U2) whose exact tail is counted (O(min(n1, n2) x k) additions).
constexpr double kExactLimit = 5000.0;

/// log P(U <= k) under the null for untied samples of sizes n1, n2, k <= max(n1, n2): the number
/// of arrangements with U = j is the number of partitions of j into at most max(n1, n2) parts
/// each <= min(n1, n2) (the q-binomial coefficient); for j <= max(n1, n2) the number of parts is
/// never binding, so the counts are those of partitions into parts <= min(n1, n2), summed by
/// additions alone, and divided by C(n1 + n2, n1).
double logLowerTail(std::size_t n1, std::size_t n2, std::size_t k)
{
    const std::size_t parts = std::min(n1, n2);
    std::vector<double> count(k + 1, 0.0);
    count[0] = 1.0;
    for (std::size_t s = 1; s <= std::min(parts, k); ++s)
        for (std::size_t j = s; j <= k; ++j)
            count[j] += count[j - s];
    double total = 0.0;
    for (double c : count)
        total += c;
    const double a = static_cast<double>(n1), b = static_cast<double>(n2);
    return std::log(total) - (std::lgamma(a + b + 1.0) - std::lgamma(a + 1.0) - std::lgamma(b + 1.0));
}

} // namespace

MannWhitneyResult mannWhitneyU(std::span<const double> x, std::span<const double> y)
{
    MannWhitneyResult out;
    out.n1 = x.size();
    out.n2 = y.size();
    if (x.empty() || y.empty())
        return out;

    std::vector<double> pooled(x.begin(), x.end());
    pooled.insert(pooled.end(), y.begin(), y.end());
    const Ranks ranks = averageRanks(pooled);

    const auto n1 = static_cast<double>(out.n1);
    const auto n2 = static_cast<double>(out.n2);
    const double n = n1 + n2;
    double r1 = 0.0;
    for (std::size_t i = 0; i < out.n1; ++i)
        r1 += ranks.ranks[i];
    out.u1 = r1 - 0.5 * n1 * (n1 + 1.0);
    out.u2 = n1 * n2 - out.u1;
    out.u = out.u1;

    const double variance = n1 * n2 / 12.0 * ((n + 1.0) - ranks.tieSum / (n * (n - 1.0)));
    if (!(variance > 0.0)) // all values tied: U carries no information
        return out;
    const double sigma = std::sqrt(variance);
    const double deviation = out.u1 - 0.5 * n1 * n2;
    const double corrected = std::max(0.0, std::abs(deviation) - 0.5);
    out.z = std::copysign(corrected / sigma, deviation);
    // Complete separation (U1 = 0 or n1 n2: the samples do not overlap) has the exact tail
    // 2 / C(N, n1), ties within a sample included. Near it (normal p below 1e-6, where the
    // approximation is far off), untied samples get the exact tail 2 P(U <= min(U1, U2)).
    // Elsewhere the normal tail, never
    // below the smallest p the test can produce.
    const double logFloor = logSeparationTail(out.n1, out.n2);
    const double k = std::min(out.u1, out.u2);
    if (k == 0.0) {
        out.p = out.pNoContinuity = pFromLog(logFloor);
        out.p.method = out.pNoContinuity.method = PMethod::Exact;
    } else if (ranks.tieSum == 0.0 && k <= std::min(kExactLimit, std::max(n1, n2))
               && normalTwoSided(out.z).logP < kLogExactBelow) {
        const double logTwoTails = std::log(2.0) + logLowerTail(out.n1, out.n2, static_cast<std::size_t>(k));
        out.p = out.pNoContinuity = pFromLog(std::min(0.0, logTwoTails));
        out.p.method = out.pNoContinuity.method = PMethod::Exact;
    } else {
        out.p = atLeast(normalTwoSided(out.z), logFloor);
        out.pNoContinuity = atLeast(normalTwoSided(deviation / sigma), logFloor);
    }
    out.rankBiserial = 1.0 - 2.0 * out.u1 / (n1 * n2);
    return out;
}

MannWhitneyResult mannWhitneyUExact(std::span<const double> x, std::span<const double> y)
{
    MannWhitneyResult out = mannWhitneyU(x, y);
    const std::size_t n1 = x.size(), n2 = y.size();
    if (n1 == 0 || n2 == 0 || n1 > kMaxExactUnits || n2 > kMaxExactUnits)
        return out;
    std::vector<double> pooled(x.begin(), x.end());
    pooled.insert(pooled.end(), y.begin(), y.end());
    if (averageRanks(pooled).tieSum != 0.0)
        return out; // ties: U is a half-integer lattice the count below does not cover
    // f[i][j][u]: arrangements of i x-values and j y-values with U = u (x above y counted).
    const std::size_t maxU = n1 * n2;
    std::vector<std::vector<double>> prev(n2 + 1, std::vector<double>(maxU + 1, 0.0)), cur = prev;
    for (std::size_t j = 0; j <= n2; ++j)
        prev[j][0] = 1.0; // i = 0: one arrangement, U = 0
    for (std::size_t i = 1; i <= n1; ++i) {
        for (std::size_t j = 0; j <= n2; ++j) {
            std::fill(cur[j].begin(), cur[j].end(), 0.0);
            for (std::size_t u = 0; u <= i * j; ++u) {
                // The largest value is an x (it beats all j y's) or a y.
                double f = u >= j ? prev[j][u - j] : 0.0;
                if (j > 0)
                    f += cur[j - 1][u];
                cur[j][u] = f;
            }
        }
        std::swap(prev, cur);
    }
    const std::vector<double>& count = prev[n2];
    const auto u = static_cast<std::size_t>(std::lround(out.u1));
    double lower = 0.0, upper = 0.0, total = 0.0;
    for (std::size_t k = 0; k <= maxU; ++k) {
        total += count[k];
        if (k <= u)
            lower += count[k];
        if (k >= u)
            upper += count[k];
    }
    out.p = pFromLog(std::min(0.0, std::log(2.0 * std::min(lower, upper)) - std::log(total)));
    out.p.method = PMethod::Exact;
    return out;
}

} // namespace kvlens::stats
