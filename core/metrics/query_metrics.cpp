// SPDX-License-Identifier: GPL-3.0-or-later
// Per-query metric reductions over the key axis, accumulated in double.
#include "core/metrics/query_metrics.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace kvlens {

std::vector<int> topKIndices(std::span<const float> row, int k)
{
    const int n = static_cast<int>(row.size());
    k = std::clamp(k, 0, n);
    std::vector<int> idx(static_cast<std::size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    auto before = [&](int a, int b) {
        const float pa = row[static_cast<std::size_t>(a)], pb = row[static_cast<std::size_t>(b)];
        return pa > pb || (pa == pb && a < b);
    };
    if (k < n)
        std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
    idx.resize(static_cast<std::size_t>(k));
    std::sort(idx.begin(), idx.end());
    return idx;
}

QueryMetrics queryMetrics(const AttentionPair& a, std::span<const float> valueError2, int topK)
{
    assert(a.scores && a.probs && a.logSumExp && a.scoresHat && a.probsHat && a.logSumExpHat);
    const Eigen::Index nq = a.scores->rows(), n = a.scores->cols();
    assert(valueError2.size() == static_cast<std::size_t>(n));
    QueryMetrics m;
    const auto q = static_cast<std::size_t>(nq);
    m.kl.resize(q);
    m.recall.resize(q);
    m.argmaxShift.resize(q);
    m.fisher.resize(q);
    m.a2.resize(q);
    m.entropy.resize(q);
    const int k = static_cast<int>(std::min<Eigen::Index>(topK, n));
    for (Eigen::Index i = 0; i < nq; ++i) {
        const float* s = a.scores->data() + i * n;
        const float* p = a.probs->data() + i * n;
        const float* sh = a.scoresHat->data() + i * n;
        const float* ph = a.probsHat->data() + i * n;
        const double lse = (*a.logSumExp)[static_cast<std::size_t>(i)];
        const double lseHat = (*a.logSumExpHat)[static_cast<std::size_t>(i)];
        double pDelta = 0.0, pDelta2 = 0.0, ps = 0.0, a2 = 0.0;
        Eigen::Index argmax = 0, argmaxHat = 0;
        for (Eigen::Index j = 0; j < n; ++j) {
            const double pj = p[j];
            const double delta = static_cast<double>(sh[j]) - s[j];
            pDelta += pj * delta;
            pDelta2 += pj * delta * delta;
            ps += pj * s[j];
            a2 += pj * pj * valueError2[static_cast<std::size_t>(j)];
            if (p[j] > p[argmax])
                argmax = j;
            if (ph[j] > ph[argmaxHat])
                argmaxHat = j;
        }
        const auto qi = static_cast<std::size_t>(i);
        // KL(p || p^) = sum p (log p - log p^) = -sum p ds + (lse^ - lse).
        m.kl[qi] = static_cast<float>(std::max(0.0, -pDelta + (lseHat - lse)));
        m.fisher[qi] = static_cast<float>(std::max(0.0, pDelta2 - pDelta * pDelta));
        m.a2[qi] = static_cast<float>(a2);
        m.entropy[qi] = static_cast<float>(std::max(0.0, lse - ps));
        m.argmaxShift[qi] = argmax != argmaxHat ? 1 : 0;
        if (k > 0) {
            const auto top = topKIndices({p, static_cast<std::size_t>(n)}, k);
            const auto topHat = topKIndices({ph, static_cast<std::size_t>(n)}, k);
            std::vector<int> common;
            std::set_intersection(top.begin(), top.end(), topHat.begin(), topHat.end(), std::back_inserter(common));
            m.recall[qi] = static_cast<float>(common.size()) / static_cast<float>(k);
        } else {
            m.recall[qi] = 1.0f;
        }
    }
    return m;
}

} // namespace kvlens
