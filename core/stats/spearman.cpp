// SPDX-License-Identifier: GPL-3.0-or-later
// Spearman's rho as the Pearson correlation of mid ranks.
#include "core/stats/spearman.h"

#include "core/stats/ranks.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace kvlens::stats {

double spearman(std::span<const double> x, std::span<const double> y)
{
    assert(x.size() == y.size() && "spearman: samples must be paired");
    if (x.size() < 2 || x.size() != y.size())
        return std::numeric_limits<double>::quiet_NaN();
    const Ranks rx = averageRanks(x);
    const Ranks ry = averageRanks(y);
    // Mid ranks average exactly (n + 1) / 2; centred ranks are multiples of 1/2, so the sums
    // below are exact for any realistic n and a monotone transform gives exactly 1.
    const double centre = 0.5 * (static_cast<double>(x.size()) + 1.0);
    double sxy = 0.0, sxx = 0.0, syy = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double a = rx.ranks[i] - centre;
        const double b = ry.ranks[i] - centre;
        sxy += a * b;
        sxx += a * a;
        syy += b * b;
    }
    if (sxx == 0.0 || syy == 0.0)
        return std::numeric_limits<double>::quiet_NaN();
    return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

} // namespace kvlens::stats
