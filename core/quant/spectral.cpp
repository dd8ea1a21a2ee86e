// SPDX-License-Identifier: GPL-3.0-or-later
// SpectralQuant calibration maths: spectrum, effective dimension, bit allocation.
#include "core/quant/spectral.h"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <queue>

namespace kvlens {

double participationRatio(std::span<const double> eigenvalues)
{
    double sum = 0.0, sum2 = 0.0;
    for (double l : eigenvalues) {
        const double v = std::max(l, 0.0);
        sum += v;
        sum2 += v * v;
    }
    return sum2 > 0.0 ? sum * sum / sum2 : 0.0;
}

int gapRuleDeff(std::span<const double> eigenvalues, double threshold, double* ratio)
{
    const int d = static_cast<int>(eigenvalues.size());
    double best = 0.0;
    int cut = d;
    for (int i = 0; i + 1 < d; ++i) {
        const double next = std::max(eigenvalues[static_cast<std::size_t>(i + 1)], 1e-300);
        const double r = std::max(eigenvalues[static_cast<std::size_t>(i)], 0.0) / next;
        if (r > best) {
            best = r;
            cut = i + 1;
        }
    }
    if (ratio)
        *ratio = best;
    return best >= threshold ? cut : d;
}

SpectralAnalysis analyzeSpectrum(const Eigen::Ref<const RowMatrixXf>& calibration, double gapThreshold)
{
    const Eigen::Index d = calibration.cols();
    const double n = std::max<double>(1.0, static_cast<double>(calibration.rows()));
    const Eigen::MatrixXd x = calibration.cast<double>();
    const Eigen::MatrixXd c = (x.transpose() * x) / n;
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(c);
    SpectralAnalysis a;
    a.basis = solver.eigenvectors().rowwise().reverse(); // Eigen sorts ascending
    const Eigen::VectorXd values = solver.eigenvalues().reverse();
    a.eigenvalues.assign(values.data(), values.data() + d);
    a.participationRatio = participationRatio(a.eigenvalues);
    a.gapDeff = gapRuleDeff(a.eigenvalues, gapThreshold, &a.gapRatio);
    return a;
}

std::vector<int> waterFillBits(std::span<const double> variances, int totalBits, int maxBits)
{
    const auto n = variances.size();
    std::vector<int> bits(n, 0);
    // Max-heap on the distortion drop of the next bit, D(b) - D(b+1) = v 4^-b (3/4); ties: lower index.
    using Entry = std::pair<double, std::size_t>;
    auto cmp = [](const Entry& a, const Entry& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); };
    std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)> heap(cmp);
    for (std::size_t i = 0; i < n; ++i)
        heap.emplace(std::max(variances[i], 0.0), i);
    for (int given = 0; given < totalBits && !heap.empty(); ++given) {
        const auto [gain, i] = heap.top();
        heap.pop();
        ++bits[i];
        if (bits[i] < maxBits)
            heap.emplace(gain / 4.0, i);
    }
    return bits;
}

std::vector<int> uniformBits(int count, int totalBits, int maxBits)
{
    std::vector<int> bits(static_cast<std::size_t>(std::max(count, 0)), 0);
    if (count <= 0)
        return bits;
    const int each = totalBits / count, extra = totalBits % count;
    for (int i = 0; i < count; ++i)
        bits[static_cast<std::size_t>(i)] = std::min(maxBits, std::max(0, each + (i < extra ? 1 : 0)));
    return bits;
}

} // namespace kvlens
