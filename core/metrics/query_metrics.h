// SPDX-License-Identifier: GPL-3.0-or-later
// Per-query attention damage: KL, routing recall, argmax shift, Fisher score error, A^2 value error.
#pragma once

#include "core/common/types.h"

#include <cstdint>
#include <span>
#include <vector>

namespace kvlens {

/// Reference and quantized attention of the same queries (all nq x n, row-major).
struct AttentionPair {
    const RowMatrixXf* scores = nullptr;      ///< exact s = q.k / sqrt(d)
    const RowMatrixXf* probs = nullptr;       ///< p = softmax(s)
    const std::vector<double>* logSumExp = nullptr;
    const RowMatrixXf* scoresHat = nullptr;   ///< the cache's estimate s^
    const RowMatrixXf* probsHat = nullptr;    ///< p^ = softmax(s^)
    const std::vector<double>* logSumExpHat = nullptr;
};

/// Per-query metrics (one entry per query).
struct QueryMetrics {
    std::vector<float> kl;          ///< KL(p || p^) in nats
    std::vector<float> recall;      ///< |top_k(p) cap top_k(p^)| / k
    std::vector<std::uint8_t> argmaxShift; ///< 1 when argmax p^ != argmax p
    std::vector<float> fisher;      ///< Var_p(delta s) = sum p ds^2 - (sum p ds)^2, invariant to shifting all scores
    std::vector<float> a2;          ///< A^2-weighted value error sum_j p_j^2 ||v_j - v^_j||^2
    std::vector<float> entropy;     ///< H(p) in nats
};

/// Computes every per-query metric. `valueError2` holds ||v_j - v^_j||^2 per token (n).
/// KL uses log p_j - log p^_j = (s_j - s^_j) - (lse - lse^), so it needs no log per weight;
/// round-off below zero is clamped to 0. Top-k ties are broken by the lower token index.
/// References: KL and recall, paper A; Fisher score error and the A^2 surrogate, paper C (Eq. 6).
QueryMetrics queryMetrics(const AttentionPair& attention, std::span<const float> valueError2, int topK);

/// Indices of the k largest entries of row (ties: lower index first), sorted ascending.
std::vector<int> topKIndices(std::span<const float> row, int k);

} // namespace kvlens
