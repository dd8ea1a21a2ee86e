// SPDX-License-Identifier: GPL-3.0-or-later
// Average ranks by a stable sort of indices, one pass over each tie group.
#include "core/stats/ranks.h"

#include "core/stats/total_order.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace kvlens::stats {

Ranks averageRanks(std::span<const double> values)
{
    const std::size_t n = values.size();
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return totalLess(values[a], values[b]); });

    Ranks out;
    out.ranks.resize(n);
    for (std::size_t first = 0; first < n;) {
        std::size_t last = first + 1;
        while (last < n && totalEqual(values[order[last]], values[order[first]]))
            ++last;
        // Positions first+1 .. last (1-based) share their mean.
        const double rank = 0.5 * static_cast<double>(first + 1 + last);
        for (std::size_t k = first; k < last; ++k)
            out.ranks[order[k]] = rank;
        const auto t = static_cast<double>(last - first);
        out.tieSum += t * t * t - t;
        first = last;
    }
    return out;
}

} // namespace kvlens::stats
