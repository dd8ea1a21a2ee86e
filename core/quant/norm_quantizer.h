// SPDX-License-Identifier: GPL-3.0-or-later
// Per-vector norm + scalar codebook quantizer: x ~ ||x|| * Q(x / ||x||), coordinate by coordinate.
#pragma once

#include "core/common/types.h"
#include "core/quant/lloyd_max.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace kvlens {

/// How a per-vector scalar (norm, residual norm, group scale) is stored.
enum class ScalarFormat { Fp16, Bf16, Fp32 };

std::string_view scalarFormatName(ScalarFormat format);                   ///< "fp16", "bf16", "fp32"
std::optional<ScalarFormat> scalarFormatFromName(std::string_view name);
int scalarFormatBits(ScalarFormat format);                                 ///< 16, 16, 32

/// Rounds a non-negative scale to `format`. fp16 saturates at 65504 instead of becoming
/// inf; `saturated` (if given) is set when that happened.
float storeScalar(float value, ScalarFormat format, bool* saturated = nullptr);

/// Codes of a NormQuantizer: one code per coordinate and the stored norm of every row.
struct NormCodes {
    CodeMatrix codes;            ///< n x dim
    std::vector<float> norms;    ///< n stored norms (already rounded to the storage format)
    int saturatedNorms = 0;      ///< how many norms hit the fp16 ceiling
};

/// Scalar quantizer with a stored per-vector norm (TurboQuant's data-oblivious stage):
/// encode stores ||x|| and the codebook cell of every coordinate of x / ||x||; decode
/// returns stored_norm * level. Buffers: X is n x dim, row-major.
class NormQuantizer {
public:
    NormQuantizer(std::shared_ptr<const Codebook> codebook, ScalarFormat normFormat = ScalarFormat::Fp16);

    const Codebook& codebook() const { return *m_codebook; }
    ScalarFormat normFormat() const { return m_normFormat; }

    /// Fits an empirical codebook to the normalized coordinates of `calibration` (n x dim).
    static NormQuantizer trainEmpirical(const Eigen::Ref<const RowMatrixXf>& calibration, int bits,
                                        ScalarFormat normFormat = ScalarFormat::Fp16);

    void encode(const Eigen::Ref<const RowMatrixXf>& x, NormCodes& out) const;
    /// Fused randomized WHT + encode: each row of x (n x d) is rotated in a small buffer
    /// (x' = H D [x, 0] / sqrt(dim), dim = signs.size() = codebook dimension) and quantized
    /// at once, so the rotated matrix is never written unless `rotated` asks for it (n x dim).
    /// Same codes as rotateRows followed by encode.
    void encodeRotated(const Eigen::Ref<const RowMatrixXf>& x, const std::vector<float>& signs, NormCodes& out,
                       RowMatrixXf* rotated = nullptr) const;
    void decode(const NormCodes& codes, RowMatrixXf& xHat) const;

    /// Storage of one vector of `dim` stored coordinates: bits * dim + the norm's bits.
    double bitsPerVector(int dim) const;

private:
    std::shared_ptr<const Codebook> m_codebook;
    ScalarFormat m_normFormat;
};

} // namespace kvlens
