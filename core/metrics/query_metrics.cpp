// SPDX-License-Identifier: GPL-3.0-or-later
// Per-query metric reductions over the key axis, accumulated in double.
#include "core/metrics/query_metrics.h"

#include "core/common/simd.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace kvlens {

namespace {

/// Writes the indices of the k largest entries of row[0..n) into `best` (descending by
/// value, ties: lower index first), keeping a sorted list of k candidates: one comparison
/// per entry once the list is full, no allocation. `values` is scratch of size k.
void selectTopK(const float* row, int n, int k, int* best, float* values)
{
    if (k > 64) {
        // Large k: the insertion list would cost O(n k); select with nth_element instead.
        std::vector<int> idx(static_cast<std::size_t>(n));
        std::iota(idx.begin(), idx.end(), 0);
        auto before = [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
        std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), before);
        std::sort(idx.begin(), idx.begin() + k, before);
        for (int i = 0; i < k; ++i) {
            best[i] = idx[static_cast<std::size_t>(i)];
            values[i] = row[best[i]];
        }
        return;
    }
    int filled = 0;
    for (int j = 0; j < n; ++j) {
        const float v = row[j];
        if (filled == k && !(v > values[k - 1]))
            continue; // an equal value at a later index ranks below the ones kept
        int pos = filled < k ? filled++ : k - 1;
        while (pos > 0 && v > values[pos - 1]) {
            values[pos] = values[pos - 1];
            best[pos] = best[pos - 1];
            --pos;
        }
        values[pos] = v;
        best[pos] = j;
    }
}

/// The first index of the largest entry, NaN entries never winning (as a scan that moves on
/// strictly greater values from entry 0): a vector maximum, then a search for it.
Eigen::Index firstArgmax(const float* v, Eigen::Index n)
{
    simd::Float8 m8 = simd::broadcast(v[0]);
    Eigen::Index j = 0;
    for (; j + 8 <= n; j += 8) {
        const simd::Float8 x = simd::load(v + j);
        m8 = x > m8 ? x : m8;
    }
    float m = v[0];
    for (int l = 0; l < 8; ++l)
        m = m8[l] > m ? m8[l] : m;
    for (; j < n; ++j)
        m = v[j] > m ? v[j] : m;
    for (Eigen::Index k = 0; k < n; ++k)
        if (v[k] == m)
            return k;
    return 0;
}

} // namespace

std::vector<int> topKIndices(std::span<const float> row, int k)
{
    const int n = static_cast<int>(row.size());
    k = std::clamp(k, 0, n);
    std::vector<int> idx(static_cast<std::size_t>(k));
    std::vector<float> values(static_cast<std::size_t>(k));
    if (k > 0)
        selectTopK(row.data(), n, k, idx.data(), values.data());
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
    std::vector<int> top(static_cast<std::size_t>(k)), topHat(static_cast<std::size_t>(k));
    std::vector<float> scratch(static_cast<std::size_t>(k));
    for (Eigen::Index i = 0; i < nq; ++i) {
        const float* s = a.scores->data() + i * n;
        const float* p = a.probs->data() + i * n;
        const float* sh = a.scoresHat->data() + i * n;
        const float* ph = a.probsHat->data() + i * n;
        const double lse = (*a.logSumExp)[static_cast<std::size_t>(i)];
        const double lseHat = (*a.logSumExpHat)[static_cast<std::size_t>(i)];
        // The four sums in double over eight lanes (a fixed order), then the two argmaxes.
        using namespace simd;
        Double8 vDelta{}, vDelta2{}, vPs{}, vA2{};
        Eigen::Index j = 0;
        for (; j + 8 <= n; j += 8) {
            const Double8 pj = widen(load(p + j)), sj = widen(load(s + j));
            const Double8 delta = widen(load(sh + j)) - sj;
            const Double8 pd = pj * delta;
            vDelta += pd;
            vDelta2 += pd * delta;
            vPs += pj * sj;
            vA2 += pj * pj * widen(load(valueError2.data() + j));
        }
        double pDelta = simd::sum(vDelta), pDelta2 = simd::sum(vDelta2), ps = simd::sum(vPs), a2 = simd::sum(vA2);
        for (; j < n; ++j) {
            const double pj = p[j];
            const double delta = static_cast<double>(sh[j]) - s[j];
            pDelta += pj * delta;
            pDelta2 += pj * delta * delta;
            ps += pj * s[j];
            a2 += pj * pj * valueError2[static_cast<std::size_t>(j)];
        }
        const Eigen::Index argmax = firstArgmax(p, n), argmaxHat = firstArgmax(ph, n);
        const auto qi = static_cast<std::size_t>(i);
        if (!std::isfinite(lse) || !std::isfinite(lseHat) || !std::isfinite(pDelta) || !std::isfinite(pDelta2)) {
            // A non-finite score (an overflowing estimate) has no KL: NaN, never the 0 that
            // std::max(0, NaN) would give, and no recall either.
            constexpr float nan = std::numeric_limits<float>::quiet_NaN();
            m.kl[qi] = m.fisher[qi] = m.a2[qi] = m.entropy[qi] = m.recall[qi] = nan;
            m.argmaxShift[qi] = argmax != argmaxHat ? 1 : 0;
            continue;
        }
        // KL(p || p^) = sum p (log p - log p^) = -sum p ds + (lse^ - lse).
        m.kl[qi] = static_cast<float>(std::max(0.0, -pDelta + (lseHat - lse)));
        m.fisher[qi] = static_cast<float>(std::max(0.0, pDelta2 - pDelta * pDelta));
        m.a2[qi] = static_cast<float>(a2);
        m.entropy[qi] = static_cast<float>(std::max(0.0, lse - ps));
        m.argmaxShift[qi] = argmax != argmaxHat ? 1 : 0;
        if (k > 0) {
            selectTopK(p, static_cast<int>(n), k, top.data(), scratch.data());
            selectTopK(ph, static_cast<int>(n), k, topHat.data(), scratch.data());
            std::sort(top.begin(), top.end());
            std::sort(topHat.begin(), topHat.end());
            int common = 0;
            for (int a = 0, b = 0; a < k && b < k;) {
                if (top[static_cast<std::size_t>(a)] == topHat[static_cast<std::size_t>(b)]) {
                    ++common;
                    ++a;
                    ++b;
                } else if (top[static_cast<std::size_t>(a)] < topHat[static_cast<std::size_t>(b)]) {
                    ++a;
                } else {
                    ++b;
                }
            }
            m.recall[qi] = static_cast<float>(common) / static_cast<float>(k);
        } else {
            m.recall[qi] = 1.0f;
        }
    }
    return m;
}

} // namespace kvlens
