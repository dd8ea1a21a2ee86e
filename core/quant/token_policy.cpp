// SPDX-License-Identifier: GPL-3.0-or-later
// A^2 token weights from calibration queries and the integer bit allocation over tokens.
#include "core/quant/token_policy.h"

#include "core/attention/attention.h"
#include "core/quant/spectral.h"

#include <algorithm>

namespace kvlens {

std::vector<int> a2TokenBits(const RowMatrixXf& keys, const RowMatrixXf& calibrationQueries, const RowMatrixXf& values,
                             int bits, float scale, int maxQueries)
{
    const Eigen::Index n = keys.rows();
    const Eigen::Index q = std::min<Eigen::Index>(calibrationQueries.rows(), maxQueries);
    std::vector<int> out(static_cast<std::size_t>(n), bits);
    if (n == 0 || q == 0 || bits <= 1)
        return out;
    RowMatrixXf scores, probs;
    attentionScores(calibrationQueries.topRows(q), keys, scale, scores);
    softmaxRows(scores, probs);
    std::vector<double> importance(static_cast<std::size_t>(n), 0.0);
    for (Eigen::Index j = 0; j < n; ++j) {
        double w = 0.0;
        for (Eigen::Index i = 0; i < q; ++i)
            w += static_cast<double>(probs(i, j)) * probs(i, j);
        importance[static_cast<std::size_t>(j)] = w / static_cast<double>(q) * values.row(j).squaredNorm();
    }
    // Everyone keeps one bit; the rest of the budget goes where the surrogate falls most.
    const auto extra = waterFillBits(importance, static_cast<int>((bits - 1) * n), 7);
    for (std::size_t j = 0; j < out.size(); ++j)
        out[j] = 1 + extra[j];
    return out;
}

} // namespace kvlens
