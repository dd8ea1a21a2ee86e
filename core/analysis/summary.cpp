// SPDX-License-Identifier: GPL-3.0-or-later
// Aggregation of trials into the summary table.
#include "core/stats/total_order.h"
#include "core/analysis/summary.h"

#include "core/spec/grid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace kvlens {

double quantile(std::span<const float> values, double q)
{
    if (values.empty())
        return std::numeric_limits<double>::quiet_NaN();
    std::vector<float> v(values.begin(), values.end());
    std::sort(v.begin(), v.end(), [](float a, float b) { return stats::totalLess(a, b); }); // NaN last
    const double h = (static_cast<double>(v.size()) - 1.0) * std::clamp(q, 0.0, 1.0);
    const auto lo = static_cast<std::size_t>(std::floor(h));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (h - static_cast<double>(lo)) * (static_cast<double>(v[hi]) - v[lo]);
}

std::vector<SummaryRow> summarize(const ResultSet& results)
{
    // One row per non-empty cell, in walk order.
    const TrialCells cells(results);
    std::vector<SummaryRow> rows;
    for (const TrialCells::Cell& cell : cells.nonEmpty()) {
        const TrialSlot& at = cell.at;
        const std::vector<const TrialResult*>& trials = *cell.trials;
        SummaryRow r;
        r.point = at.point;
        r.scheme = at.schemeIndex;
        r.budget = trials.front()->key.budget;
        r.trials = static_cast<int>(trials.size());
        std::vector<float> kl;
        double recall = 0.0, shifts = 0.0, fisher = 0.0, a2 = 0.0;
        std::array<double, 6> six{};
        for (const TrialResult* t : trials) {
            kl.insert(kl.end(), t->kl.begin(), t->kl.end());
            for (float x : t->recall)
                recall += x;
            for (auto s : t->argmaxShift)
                shifts += s;
            for (float x : t->fisher)
                fisher += x;
            for (float x : t->a2)
                a2 += x;
            const auto v = t->sixD.values();
            for (std::size_t i = 0; i < 6; ++i)
                six[i] += v[i];
            r.bits.key += t->bits.key;
            r.bits.value += t->bits.value;
            r.relMseK += t->relMseK;
            r.relMseV += t->relMseV;
            r.scoreErrorVar += t->scoreErrorVar;
            r.scoreErrorVarBase += t->scoreErrorVarBase;
            r.scoreErrorVarPredicted += t->scoreErrorVarPredicted;
            r.logMeanExpScoreError += t->logMeanExpScoreError;
            r.meanEntropy += t->meanEntropy;
            r.saturatedNorms += t->saturatedNorms;
        }
        const double nt = static_cast<double>(trials.size());
        const double nq = static_cast<double>(kl.size());
        r.queries = static_cast<long long>(kl.size());
        r.bits.key /= nt;
        r.bits.value /= nt;
        r.relMseK /= nt;
        r.relMseV /= nt;
        r.scoreErrorVar /= nt;
        r.scoreErrorVarBase /= nt;
        r.scoreErrorVarPredicted /= nt;
        r.logMeanExpScoreError /= nt;
        r.meanEntropy /= nt;
        r.sixD = SixD{six[0] / nt, six[1] / nt, six[2] / nt, six[3] / nt, six[4] / nt, six[5] / nt};
        if (nq > 0) {
            double sum = 0.0;
            for (float x : kl)
                sum += x;
            r.klMean = sum / nq;
            r.klMedian = quantile(kl, 0.5);
            r.klP99 = quantile(kl, 0.99);
            r.klMax = *std::max_element(kl.begin(), kl.end(), [](float a, float b) { return stats::totalLess(a, b); });
            r.recallMean = recall / nq;
            r.argmaxShiftRate = shifts / nq;
            r.fisherMean = fisher / nq;
            r.a2Mean = a2 / nq;
        }
        rows.push_back(r);
    }
    return rows;
}

} // namespace kvlens
