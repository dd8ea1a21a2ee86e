// SPDX-License-Identifier: GPL-3.0-or-later
// Scaled dot-product attention pieces: scores, a numerically stable softmax, and the output.
#pragma once

#include "core/common/types.h"

#include <span>
#include <vector>

namespace kvlens {

/// s = scale * Q K^T: Q is nq x d, K is n x d; s becomes nq x n.
void attentionScores(const Eigen::Ref<const RowMatrixXf>& queries, const Eigen::Ref<const RowMatrixXf>& keys,
                     float scale, RowMatrixXf& scores);

/// Row-wise softmax p_ij = exp(s_ij - m_i) / sum_j exp(s_ij - m_i) with m_i the row maximum,
/// so no exponent overflows. `logSumExp` (if given) receives log sum_j exp(s_ij) per row in
/// double, which lets KL and entropy be formed without a log per weight.
void softmaxRows(const RowMatrixXf& scores, RowMatrixXf& probs, std::vector<double>* logSumExp = nullptr);

/// log sum_j exp(s_j) of one score vector, in double, shifted by the maximum (softmaxRows' rule).
double logSumExp(std::span<const float> scores);
/// p = softmax(s) of one score vector, in double (empty for no scores).
std::vector<double> softmaxVector(std::span<const float> scores);
/// KL(p || p^) of one query from its scores, p = softmax(s): log p_j - log p^_j =
/// (s_j - s^_j) - (lse - lse^), so no log of a tiny weight is taken (queryMetrics' identity);
/// round-off below zero is clamped.
double klFromScores(std::span<const double> p, std::span<const float> s, std::span<const float> sHat);

/// T = P V: P is nq x n, V is n x d; T becomes nq x d.
void attentionOutput(const RowMatrixXf& probs, const Eigen::Ref<const RowMatrixXf>& values, RowMatrixXf& output);

} // namespace kvlens
