// SPDX-License-Identifier: GPL-3.0-or-later
// Wilcoxon signed-rank: rank |x - y| over the non-zero differences, then the normal approximation.
#include "core/stats/wilcoxon.h"

#include "core/stats/ranks.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

namespace kvlens::stats {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
} // namespace

WilcoxonResult wilcoxonSignedRank(std::span<const double> x, std::span<const double> y)
{
    assert(x.size() == y.size() && "wilcoxonSignedRank: paired samples must have equal sizes");
    WilcoxonResult out;
    out.nPairs = std::min(x.size(), y.size());

    std::vector<double> differences;
    differences.reserve(out.nPairs);
    for (std::size_t i = 0; i < out.nPairs; ++i) {
        // NaN counts as +inf (the worst damage); two equal infinities are a tie, not inf - inf = NaN.
        const double a = std::isnan(x[i]) ? kInf : x[i];
        const double b = std::isnan(y[i]) ? kInf : y[i];
        out.nonFinite += !std::isfinite(x[i]) || !std::isfinite(y[i]);
        const double d = a == b ? 0.0 : a - b;
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
    // Every non-zero difference of one sign: the exact tail is 2 / 2^n (one sign pattern of 2^n
    // each way), ties in |d| included. Near it (normal p below 1e-6), untied |d| get the exact
    // tail 2 P(W <= k): the number of subsets of the ranks {1..n} with sum <= k over 2^n.
    // Elsewhere the normal tail, never below 2 / 2^n.
    const double logFloor = std::min(0.0, (1.0 - n) * std::log(2.0));
    const double k = out.statistic;
    if (out.wPlus == 0.0 || out.wMinus == 0.0) {
        out.p = pFromLog(logFloor);
        out.p.method = PMethod::Exact;
    } else if (ranks.tieSum == 0.0 && k <= 5000.0 && normalTwoSided(out.z).logP < kLogExactBelow) {
        const auto top = static_cast<std::size_t>(k);
        std::vector<double> count(top + 1, 0.0); // subsets of {1..n} by sum, sums <= k
        count[0] = 1.0;
        for (std::size_t i = 1; i <= std::min(out.nUsed, top); ++i)
            for (std::size_t j = top; j >= i; --j)
                count[j] += count[j - i];
        double total = 0.0;
        for (double c : count)
            total += c;
        out.p = pFromLog(std::min(0.0, std::log(2.0) + std::log(total) - n * std::log(2.0)));
        out.p.method = PMethod::Exact;
    } else {
        out.p = atLeast(normalTwoSided(out.z), logFloor);
    }
    return out;
}

WilcoxonResult wilcoxonSignedRankExact(std::span<const double> x, std::span<const double> y)
{
    WilcoxonResult out = wilcoxonSignedRank(x, y);
    if (out.nUsed == 0 || out.nUsed > kMaxExactPairs)
        return out;
    // The non-zero differences again, with the same NaN/infinity convention.
    std::vector<double> differences;
    for (std::size_t i = 0; i < out.nPairs; ++i) {
        const double a = std::isnan(x[i]) ? kInf : x[i];
        const double b = std::isnan(y[i]) ? kInf : y[i];
        const double d = a == b ? 0.0 : a - b;
        if (d != 0.0)
            differences.push_back(d);
    }
    std::vector<double> magnitudes(differences.size());
    std::transform(differences.begin(), differences.end(), magnitudes.begin(), [](double d) { return std::abs(d); });
    const Ranks ranks = averageRanks(magnitudes);
    // Mid-ranks are multiples of 1/2: doubled, they are integers and the law of 2 W+ is counted
    // exactly by a subset-sum over them.
    std::vector<int> doubled(ranks.ranks.size());
    int total = 0;
    int observed = 0;
    for (std::size_t i = 0; i < doubled.size(); ++i) {
        doubled[i] = static_cast<int>(std::lround(2.0 * ranks.ranks[i]));
        total += doubled[i];
        if (differences[i] > 0.0)
            observed += doubled[i];
    }
    std::vector<double> count(static_cast<std::size_t>(total) + 1, 0.0); // sign patterns by 2 W+
    count[0] = 1.0;
    int reach = 0;
    for (const int r : doubled) {
        for (int s = reach; s >= 0; --s)
            if (count[static_cast<std::size_t>(s)] != 0.0)
                count[static_cast<std::size_t>(s + r)] += count[static_cast<std::size_t>(s)];
        reach += r;
    }
    double lower = 0.0, upper = 0.0;
    for (int s = 0; s <= total; ++s) {
        if (s <= observed)
            lower += count[static_cast<std::size_t>(s)];
        if (s >= observed)
            upper += count[static_cast<std::size_t>(s)];
    }
    const double logPatterns = static_cast<double>(out.nUsed) * std::log(2.0);
    const double logTail = std::log(2.0 * std::min(lower, upper)) - logPatterns;
    out.p = pFromLog(std::min(0.0, logTail));
    out.p.method = PMethod::Exact;
    return out;
}

} // namespace kvlens::stats
