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

} // namespace kvlens::stats
