// SPDX-License-Identifier: GPL-3.0-or-later
// Mann-Whitney U from pooled average ranks; the normal approximation ends in a log-space tail.
#include "core/stats/mann_whitney.h"

#include "core/stats/ranks.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvlens::stats {

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
    out.p = normalTwoSided(out.z);
    out.pNoContinuity = normalTwoSided(deviation / sigma);
    out.rankBiserial = 1.0 - 2.0 * out.u1 / (n1 * n2);
    return out;
}

} // namespace kvlens::stats
