// SPDX-License-Identifier: GPL-3.0-or-later
// QJL encode / estimate / reconstruct on the host (the CPU oracle for the OpenCL kernels).
#include "core/quant/qjl.h"

#include <cassert>
#include <cmath>
#include <numbers>

namespace kvlens {

QjlSketch::QjlSketch(RowMatrixXf matrix, ScalarFormat normFormat)
    : m_matrix(std::move(matrix)), m_normFormat(normFormat)
{
}

RowMatrixXf QjlSketch::drawMatrix(int m, int dim, Rng& rng)
{
    RowMatrixXf s(m, dim);
    rng.fillNormal(s.data(), static_cast<std::size_t>(s.size()));
    return s;
}

void QjlSketch::encode(const Eigen::Ref<const RowMatrixXf>& residuals, QjlCodes& out) const
{
    assert(residuals.cols() == m_matrix.cols() && "QJL: residual width must match the sketch");
    const int n = static_cast<int>(residuals.rows());
    out.rows = n;
    out.m = m();
    out.wordsPerRow = (out.m + 31) / 32;
    out.signs.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(out.wordsPerRow), 0u);
    out.norms.resize(static_cast<std::size_t>(n));
    out.saturatedNorms = 0;
    const RowMatrixXf projected = residuals * m_matrix.transpose(); // n x m
    for (int r = 0; r < n; ++r) {
        std::uint32_t* words = out.signs.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(out.wordsPerRow);
        for (int i = 0; i < out.m; ++i)
            if (projected(r, i) < 0.0f)
                words[i >> 5] |= 1u << (i & 31);
        bool saturated = false;
        out.norms[static_cast<std::size_t>(r)] = storeScalar(residuals.row(r).norm(), m_normFormat, &saturated);
        out.saturatedNorms += saturated ? 1 : 0;
    }
}

void QjlSketch::unpackSigns(const QjlCodes& codes, RowMatrixXf& out)
{
    out.resize(codes.rows, codes.m);
    for (int r = 0; r < codes.rows; ++r)
        for (int i = 0; i < codes.m; ++i)
            out(r, i) = codes.sign(r, i);
}

void QjlSketch::estimateInnerProducts(const Eigen::Ref<const RowMatrixXf>& queries, const QjlCodes& codes,
                                      RowMatrixXf& out) const
{
    assert(queries.cols() == m_matrix.cols());
    const RowMatrixXf sq = queries * m_matrix.transpose(); // nq x m
    RowMatrixXf signs;
    unpackSigns(codes, signs);
    out.noalias() = sq * signs.transpose(); // nq x n
    const float c = std::sqrt(std::numbers::pi_v<float> / 2.0f) / static_cast<float>(codes.m);
    for (int j = 0; j < codes.rows; ++j)
        out.col(j) *= c * codes.norms[static_cast<std::size_t>(j)];
}

void QjlSketch::reconstruct(const QjlCodes& codes, RowMatrixXf& out) const
{
    RowMatrixXf signs;
    unpackSigns(codes, signs);
    out.noalias() = signs * m_matrix; // n x dim
    const float c = std::sqrt(std::numbers::pi_v<float> / 2.0f) / static_cast<float>(codes.m);
    for (int r = 0; r < codes.rows; ++r)
        out.row(r) *= c * codes.norms[static_cast<std::size_t>(r)];
}

} // namespace kvlens
