// SPDX-License-Identifier: GPL-3.0-or-later
// CPU attention (the oracle for the OpenCL kernels).
#include "core/attention/attention.h"

#include "core/common/simd.h"

#include <algorithm>
#include <cmath>

namespace kvlens {

void attentionScores(const Eigen::Ref<const RowMatrixXf>& queries, const Eigen::Ref<const RowMatrixXf>& keys,
                     float scale, RowMatrixXf& scores)
{
    scores.noalias() = queries * keys.transpose();
    scores *= scale;
}

void softmaxRows(const RowMatrixXf& scores, RowMatrixXf& probs, std::vector<double>* logSumExp)
{
    const Eigen::Index rows = scores.rows(), cols = scores.cols();
    probs.resize(rows, cols);
    if (logSumExp)
        logSumExp->resize(static_cast<std::size_t>(rows));
    for (Eigen::Index r = 0; r < rows; ++r) {
        const float* s = scores.data() + r * cols;
        float* p = probs.data() + r * cols;
        float maximum = s[0];
        for (Eigen::Index j = 1; j < cols; ++j)
            maximum = std::max(maximum, s[j]);
        // Vector exponentials (simd::exp, within 2 ulp) summed in double over eight lanes.
        const simd::Float8 m8 = simd::broadcast(maximum);
        simd::Double8 lanes{};
        Eigen::Index j = 0;
        for (; j + 8 <= cols; j += 8) {
            const simd::Float8 e = simd::exp(simd::load(s + j) - m8);
            simd::store(p + j, e);
            lanes += simd::widen(e);
        }
        double sum = simd::sum(lanes);
        for (; j < cols; ++j) {
            p[j] = simd::exp(simd::broadcast(s[j] - maximum))[0];
            sum += p[j];
        }
        const auto inv = static_cast<float>(1.0 / sum);
        for (Eigen::Index j = 0; j < cols; ++j)
            p[j] *= inv;
        if (logSumExp)
            (*logSumExp)[static_cast<std::size_t>(r)] = maximum + std::log(sum);
    }
}

double logSumExp(std::span<const float> s)
{
    const double m = *std::max_element(s.begin(), s.end());
    double sum = 0.0;
    for (float v : s)
        sum += std::exp(static_cast<double>(v) - m);
    return m + std::log(sum);
}

std::vector<double> softmaxVector(std::span<const float> scores)
{
    std::vector<double> p(scores.size());
    if (scores.empty())
        return p;
    const double m = *std::max_element(scores.begin(), scores.end());
    double sum = 0.0;
    for (std::size_t j = 0; j < scores.size(); ++j)
        sum += (p[j] = std::exp(static_cast<double>(scores[j]) - m));
    for (double& v : p)
        v /= sum;
    return p;
}

double klFromScores(std::span<const double> p, std::span<const float> s, std::span<const float> sHat)
{
    const double shift = logSumExp(s) - logSumExp(sHat);
    double kl = 0.0;
    for (std::size_t j = 0; j < p.size(); ++j)
        kl += p[j] * ((static_cast<double>(s[j]) - sHat[j]) - shift);
    return std::max(0.0, kl);
}

void attentionOutput(const RowMatrixXf& probs, const Eigen::Ref<const RowMatrixXf>& values, RowMatrixXf& output)
{
    output.noalias() = probs * values;
}

} // namespace kvlens
