// SPDX-License-Identifier: GPL-3.0-or-later
// Wilcoxon signed-rank: rank |x - y| over the non-zero differences, then the normal approximation.
#include "core/stats/wilcoxon.h"

#include "core/stats/ranks.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace kvlens::stats {

WilcoxonResult wilcoxonSignedRank(std::span<const double> x, std::span<const double> y)
{
    assert(x.size() == y.size() && "wilcoxonSignedRank: paired samples must have equal sizes");
    WilcoxonResult out;
    out.nPairs = std::min(x.size(), y.size());

    std::vector<double> differences;
    differences.reserve(out.nPairs);
    for (std::size_t i = 0; i < out.nPairs; ++i) {
        assert(std::isfinite(x[i]) && std::isfinite(y[i]) && "wilcoxonSignedRank: values must be finite");
        const double d = x[i] - y[i];
        if (d != 0.0)
            differences.push_back(d);
    }
    out.nUsed = differences.size();
    out.zerosDropped = out.nPairs - out.nUsed;
    if (differences.empty())
        return out;

    std::vector<double> magnitudes(differences.size());
    std::transform(differences.begin(), differences.end(), magnitudes.begin(),
                   [](double d) { return std::abs(d); });
    const Ranks ranks = averageRanks(magnitudes);
    for (std::size_t i = 0; i < differences.size(); ++i)
        (differences[i] > 0.0 ? out.wPlus : out.wMinus) += ranks.ranks[i];
    out.statistic = std::min(out.wPlus, out.wMinus);
    out.rankBiserial = (out.wPlus - out.wMinus) / (out.wPlus + out.wMinus);

    const auto n = static_cast<double>(out.nUsed);
    const double mean = 0.25 * n * (n + 1.0);
    const double variance = n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - ranks.tieSum / 48.0;
    if (!(variance > 0.0))
        return out;
    out.z = (out.wPlus - mean) / std::sqrt(variance);
    out.p = normalTwoSided(out.z);
    return out;
}

} // namespace kvlens::stats
