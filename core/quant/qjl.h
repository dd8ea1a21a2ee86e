// SPDX-License-Identifier: GPL-3.0-or-later
// QJL: a 1-bit Johnson-Lindenstrauss sketch of residuals, with the inner-product estimator.
#pragma once

#include "core/common/types.h"
#include "core/quant/norm_quantizer.h"
#include "core/rng/rng.h"

#include <cstdint>
#include <vector>

namespace kvlens {

/// Sketch codes: m sign bits per row, packed little-endian into 32-bit words, and the
/// stored residual norm of every row.
struct QjlCodes {
    int rows = 0;
    int m = 0;
    int wordsPerRow = 0;              ///< ceil(m / 32)
    std::vector<std::uint32_t> signs; ///< rows x wordsPerRow; bit i of row r set means sign(S r)_i = -1
    std::vector<float> norms;         ///< rows stored residual norms
    int saturatedNorms = 0;

    /// +1 or -1 for sketch coordinate i of row r (sign(0) counts as +1).
    float sign(int r, int i) const
    {
        const std::uint32_t word = signs[static_cast<std::size_t>(r) * static_cast<std::size_t>(wordsPerRow)
                                         + static_cast<std::size_t>(i >> 5)];
        return ((word >> (i & 31)) & 1u) ? -1.0f : 1.0f;
    }
};

/// QJL sketch (Zandieh, Daliri, Han 2024) with S in R^{m x dim}, i.i.d. N(0, 1) entries.
/// Stores sign(S r) (m bits) and ||r||. Estimators, with c = sqrt(pi/2) / m:
///   inner product  <q, r> ~ c ||r|| <S q, sign(S r)>  (unbiased; variance
///                  (1/m) [(pi/2) ||q||^2 ||r||^2 - <q, r>^2])
///   reconstruction r^ = c ||r|| S^T sign(S r)          (unbiased; since E[sign(s.r) s] =
///                  sqrt(2/pi) r/||r|| for a Gaussian row s, E||r^ - r||^2 = ||r||^2 ((pi/2) dim - 1)/m)
class QjlSketch {
public:
    /// Takes the sketch matrix S (m x dim).
    explicit QjlSketch(RowMatrixXf matrix, ScalarFormat normFormat = ScalarFormat::Fp16);

    /// Draws S with i.i.d. N(0, 1) entries from `rng` (row by row).
    static RowMatrixXf drawMatrix(int m, int dim, Rng& rng);
    /// Draws S with orthogonal rows of norm sqrt(dim), in blocks of at most dim rows: each block
    /// is the Q factor of a Gaussian draw (the first block from the same draws as drawMatrix).
    static RowMatrixXf drawOrthogonalMatrix(int m, int dim, Rng& rng);
    /// Error energy E||r^ - r||^2 / ||r||^2 of the unbiased reconstruction: ((pi/2) dim - 1)/m
    /// for a Gaussian S; (pi/2) dim/m - 1 for orthogonal rows (m <= dim: S S^T = dim I; taller
    /// orthogonal sketches use the Gaussian value, their blocks being independent).
    static double reconstructionError(int m, int dim, bool orthogonal);
    /// The factor alpha = 1 / (1 + e) that minimizes E||alpha r^ - r||^2 given that error energy
    /// e (E<r, r^> = ||r||^2 for both sketches); what is left is e / (1 + e).
    static double mseShrinkage(int m, int dim, bool orthogonal);

    int m() const { return static_cast<int>(m_matrix.rows()); }
    int dim() const { return static_cast<int>(m_matrix.cols()); }
    const RowMatrixXf& matrix() const { return m_matrix; }
    ScalarFormat normFormat() const { return m_normFormat; }

    /// Sketches residual rows R (n x dim).
    void encode(const Eigen::Ref<const RowMatrixXf>& residuals, QjlCodes& out) const;
    /// The same, also returning the signs as a +-1 float matrix (n x m), so the estimators
    /// below can use them without unpacking the bits again.
    void encode(const Eigen::Ref<const RowMatrixXf>& residuals, QjlCodes& out, RowMatrixXf& signs) const;

    /// out(i, j) = estimate of <q_i, r_j> for queries Q (nq x dim): nq x n, row-major.
    void estimateInnerProducts(const Eigen::Ref<const RowMatrixXf>& queries, const QjlCodes& codes,
                               RowMatrixXf& out) const;
    /// The same from the unpacked signs (n x m) and the stored norms.
    void estimateInnerProducts(const Eigen::Ref<const RowMatrixXf>& queries, const RowMatrixXf& signs,
                               const std::vector<float>& norms, RowMatrixXf& out) const;

    /// Unbiased reconstruction of the residual rows (n x dim).
    void reconstruct(const QjlCodes& codes, RowMatrixXf& out) const;
    /// The same from the unpacked signs (n x m) and the stored norms.
    void reconstruct(const RowMatrixXf& signs, const std::vector<float>& norms, RowMatrixXf& out) const;

    /// Signs as a +-1 float matrix (n x m), the form the estimators multiply with.
    static void unpackSigns(const QjlCodes& codes, RowMatrixXf& out);

    /// Storage per sketched vector: m sign bits + the residual norm.
    double bitsPerVector() const { return m() + scalarFormatBits(m_normFormat); }

private:
    RowMatrixXf m_matrix;
    ScalarFormat m_normFormat;
};

} // namespace kvlens
