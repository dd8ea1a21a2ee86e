// SPDX-License-Identifier: GPL-3.0-or-later
// QJL encode / estimate / reconstruct on the host (the CPU oracle for the OpenCL kernels).
#include "core/quant/qjl.h"

#include <Eigen/QR>

#include <algorithm>
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

RowMatrixXf QjlSketch::drawOrthogonalMatrix(int m, int dim, Rng& rng)
{
    RowMatrixXf s(m, dim);
    for (int first = 0; first < m; first += dim) {
        const int rows = std::min(dim, m - first);
        RowMatrixXf g(rows, dim);
        rng.fillNormal(g.data(), static_cast<std::size_t>(g.size()));
        // Rows of g orthonormalized (Householder QR of g^T), signs fixed by R's diagonal, then
        // scaled to norm sqrt(dim), the expected norm of a Gaussian row.
        const Eigen::MatrixXd gt = g.transpose().cast<double>();
        Eigen::HouseholderQR<Eigen::MatrixXd> qr(gt);
        Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(dim, rows);
        const Eigen::MatrixXd r = qr.matrixQR().topRows(rows).triangularView<Eigen::Upper>();
        for (int c = 0; c < rows; ++c)
            if (r(c, c) < 0.0)
                q.col(c) = -q.col(c);
        s.middleRows(first, rows) = (std::sqrt(static_cast<double>(dim)) * q.transpose()).cast<float>();
    }
    return s;
}

double QjlSketch::reconstructionError(int m, int dim, bool orthogonal)
{
    if (orthogonal && m <= dim)
        return std::numbers::pi / 2.0 * dim / m - 1.0;
    return (std::numbers::pi / 2.0 * dim - 1.0) / m;
}

double QjlSketch::mseShrinkage(int m, int dim, bool orthogonal)
{
    return 1.0 / (1.0 + reconstructionError(m, dim, orthogonal));
}

void QjlSketch::encode(const Eigen::Ref<const RowMatrixXf>& residuals, QjlCodes& out) const
{
    RowMatrixXf signs;
    encode(residuals, out, signs);
}

void QjlSketch::encode(const Eigen::Ref<const RowMatrixXf>& residuals, QjlCodes& out, RowMatrixXf& signs) const
{
    assert(residuals.cols() == m_matrix.cols() && "QJL: residual width must match the sketch");
    const int n = static_cast<int>(residuals.rows());
    out.rows = n;
    out.m = m();
    out.wordsPerRow = (out.m + 31) / 32;
    out.signs.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(out.wordsPerRow), 0u);
    out.norms.resize(static_cast<std::size_t>(n));
    out.saturatedNorms = 0;
    signs.noalias() = residuals * m_matrix.transpose(); // n x m projections, turned into signs in place
    for (int r = 0; r < n; ++r) {
        float* row = signs.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(out.m);
        std::uint32_t* words = out.signs.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(out.wordsPerRow);
        for (int w = 0; w < out.wordsPerRow; ++w) {
            std::uint32_t word = 0;
            const int end = std::min(32, out.m - 32 * w);
            for (int i = 0; i < end; ++i)
                word |= static_cast<std::uint32_t>(row[32 * w + i] < 0.0f) << i;
            words[w] = word;
        }
        for (int i = 0; i < out.m; ++i)
            row[i] = row[i] < 0.0f ? -1.0f : 1.0f;
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
    RowMatrixXf signs;
    unpackSigns(codes, signs);
    estimateInnerProducts(queries, signs, codes.norms, out);
}

void QjlSketch::estimateInnerProducts(const Eigen::Ref<const RowMatrixXf>& queries, const RowMatrixXf& signs,
                                      const std::vector<float>& norms, RowMatrixXf& out) const
{
    assert(queries.cols() == m_matrix.cols());
    const RowMatrixXf sq = queries * m_matrix.transpose(); // nq x m
    out.noalias() = sq * signs.transpose();                // nq x n
    const float c = std::sqrt(std::numbers::pi_v<float> / 2.0f) / static_cast<float>(signs.cols());
    for (Eigen::Index j = 0; j < signs.rows(); ++j)
        out.col(j) *= c * norms[static_cast<std::size_t>(j)];
}

void QjlSketch::reconstruct(const QjlCodes& codes, RowMatrixXf& out) const
{
    RowMatrixXf signs;
    unpackSigns(codes, signs);
    reconstruct(signs, codes.norms, out);
}

void QjlSketch::reconstruct(const RowMatrixXf& signs, const std::vector<float>& norms, RowMatrixXf& out) const
{
    out.noalias() = signs * m_matrix; // n x dim
    const float c = std::sqrt(std::numbers::pi_v<float> / 2.0f) / static_cast<float>(signs.cols());
    for (Eigen::Index r = 0; r < signs.rows(); ++r)
        out.row(r) *= c * norms[static_cast<std::size_t>(r)];
}

} // namespace kvlens
