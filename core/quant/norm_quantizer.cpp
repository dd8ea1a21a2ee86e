// SPDX-License-Identifier: GPL-3.0-or-later
// Norm + codebook quantizer and the storage formats of per-vector scalars.
#include "core/quant/norm_quantizer.h"

#include "core/common/fp16.h"
#include "core/common/simd.h"
#include "core/quant/wht.h"

#include <cassert>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvlens {

std::string_view scalarFormatName(ScalarFormat format)
{
    switch (format) {
    case ScalarFormat::Fp16: return "fp16";
    case ScalarFormat::Bf16: return "bf16";
    case ScalarFormat::Fp32: return "fp32";
    }
    return "fp16";
}

std::optional<ScalarFormat> scalarFormatFromName(std::string_view name)
{
    if (name == "fp16")
        return ScalarFormat::Fp16;
    if (name == "bf16")
        return ScalarFormat::Bf16;
    if (name == "fp32")
        return ScalarFormat::Fp32;
    return std::nullopt;
}

int scalarFormatBits(ScalarFormat format)
{
    return format == ScalarFormat::Fp32 ? 32 : 16;
}

float storeScalar(float value, ScalarFormat format, bool* saturated)
{
    switch (format) {
    case ScalarFormat::Fp16: {
        const bool over = std::abs(value) > kHalfMax;
        if (saturated)
            *saturated = over;
        return over ? std::copysign(kHalfMax, value) : roundToHalf(value);
    }
    case ScalarFormat::Bf16:
        if (saturated)
            *saturated = false;
        return roundToBfloat16(value);
    case ScalarFormat::Fp32:
        if (saturated)
            *saturated = false;
        return value;
    }
    return value;
}

NormQuantizer::NormQuantizer(std::shared_ptr<const Codebook> codebook, ScalarFormat normFormat)
    : m_codebook(std::move(codebook)), m_normFormat(normFormat)
{
    assert(m_codebook && "NormQuantizer needs a codebook");
}

NormQuantizer NormQuantizer::trainEmpirical(const Eigen::Ref<const RowMatrixXf>& calibration, int bits,
                                            ScalarFormat normFormat)
{
    std::vector<float> samples;
    samples.reserve(static_cast<std::size_t>(calibration.size()));
    for (Eigen::Index r = 0; r < calibration.rows(); ++r) {
        const float norm = calibration.row(r).norm();
        if (norm <= 0.0f)
            continue;
        for (Eigen::Index c = 0; c < calibration.cols(); ++c)
            samples.push_back(calibration(r, c) / norm);
    }
    auto codebook = std::make_shared<const Codebook>(
        designEmpiricalCodebook(samples, bits, static_cast<int>(calibration.cols())));
    return NormQuantizer(std::move(codebook), normFormat);
}

namespace {

/// The sum of squares of a row as every encoder computes it: eight lane-wise partial sums over
/// the blocks of eight (a plain float accumulator would be a serial chain of dim dependent adds,
/// and the compiler may not reassociate), summed in simd::sum's tree, then the tail. The order is
/// fixed: it decides the norm's last bit, and with it codes near a threshold.
float sumOfSquares(const float* row, Eigen::Index dim)
{
    using namespace simd;
    const Eigen::Index blocks = dim / 8;
    Float8 partial = {};
    for (Eigen::Index b = 0; b < blocks; ++b) {
        const Float8 v = load(row + 8 * b);
        partial += v * v;
    }
    float total = sum(partial);
    for (Eigen::Index c = 8 * blocks; c < dim; ++c)
        total += row[c] * row[c];
    return total;
}

/// The codebook's thresholds broadcast once per call, not once per block of a row.
struct Thresholds {
    static constexpr std::size_t kMax = 15; ///< compare-and-count up to 4 bits
    simd::Float8 t[kMax];
    std::size_t count = 0;
    bool vectorized = false;
    explicit Thresholds(const Codebook& cb)
    {
        vectorized = cb.thresholdsF.size() <= kMax;
        if (!vectorized)
            return;
        count = cb.thresholdsF.size();
        for (std::size_t i = 0; i < count; ++i)
            t[i] = simd::broadcast(cb.thresholdsF[i]);
    }
};

/// Codes of a row whose norm (and its reciprocal `inv`) is known: the number of thresholds below
/// each u = x * inv, sixteen coordinates at a time; the rest by the codebook's search.
template <std::size_t kCount>
Eigen::Index countCodes(const float* row, Eigen::Index dim, float inv, const Thresholds& th, std::uint8_t* codes)
{
    using namespace simd;
    // Compare-and-count: the code is the number of thresholds below the value (a search per value
    // measured ~100x slower). A lane comparison yields -1 where true.
    const Eigen::Index blocks = dim / 8;
    const std::size_t count = kCount > 0 ? kCount : th.count;
    const Float8 scale = broadcast(inv);
    Eigen::Index done = 0;
    for (Eigen::Index b = 0; b + 1 < blocks; b += 2) {
        const Float8 u0 = load(row + 8 * b) * scale, u1 = load(row + 8 * b + 8) * scale;
        Int8 k0 = {}, k1 = {};
        for (std::size_t i = 0; i < count; ++i) {
            k0 -= u0 > th.t[i];
            k1 -= u1 > th.t[i];
        }
        const Bytes16 bytes = lowBytes(k0, k1);
        std::memcpy(codes + 8 * b, &bytes, sizeof bytes);
        done = 8 * b + 16;
    }
    return done;
}

/// Codes of a row from its exact norm; returns the stored norm.
float encodeDirection(const float* row, Eigen::Index dim, float total, const Codebook& cb, const Thresholds& th,
                      ScalarFormat format, std::uint8_t* codes, bool& saturated)
{
    const float norm = std::sqrt(total);
    const float stored = storeScalar(norm, format, &saturated);
    // The direction is quantized with the exact norm; only the stored norm is rounded.
    const float inv = norm > 0.0f ? 1.0f / norm : 0.0f;
    Eigen::Index done = 0;
    if (th.vectorized) {
        switch (th.count) { // the common widths unrolled: 1, 2, 3 and 4 bits
        case 1: done = countCodes<1>(row, dim, inv, th, codes); break;
        case 3: done = countCodes<3>(row, dim, inv, th, codes); break;
        case 7: done = countCodes<7>(row, dim, inv, th, codes); break;
        case 15: done = countCodes<15>(row, dim, inv, th, codes); break;
        default: done = countCodes<0>(row, dim, inv, th, codes); break;
        }
    }
    for (Eigen::Index c = done; c < dim; ++c)
        codes[c] = static_cast<std::uint8_t>(cb.encode(row[c] * inv));
    return stored;
}

/// Quantizes one row (dim coordinates) into `codes`; returns the stored norm.
float encodeRow(const float* row, Eigen::Index dim, const Codebook& cb, const Thresholds& th, ScalarFormat format,
                std::uint8_t* codes, bool& saturated)
{
    return encodeDirection(row, dim, sumOfSquares(row, dim), cb, th, format, codes, saturated);
}

} // namespace

void NormQuantizer::encode(const Eigen::Ref<const RowMatrixXf>& x, NormCodes& out) const
{
    const Eigen::Index n = x.rows(), dim = x.cols();
    out.codes.resize(n, dim);
    out.norms.resize(static_cast<std::size_t>(n));
    out.saturatedNorms = 0;
    const Thresholds thresholds(*m_codebook);
    for (Eigen::Index r = 0; r < n; ++r) {
        bool saturated = false;
        out.norms[static_cast<std::size_t>(r)] = encodeRow(x.data() + r * x.outerStride(), dim, *m_codebook, thresholds,
                                                           m_normFormat, out.codes.data() + r * dim, saturated);
        out.saturatedNorms += saturated ? 1 : 0;
    }
}

void NormQuantizer::encodeRotated(const Eigen::Ref<const RowMatrixXf>& x, const std::vector<float>& signs,
                                  NormCodes& out, RowMatrixXf* rotated) const
{
    const Eigen::Index n = x.rows(), d = x.cols();
    const auto dim = static_cast<Eigen::Index>(signs.size());
    assert(d <= dim && "encodeRotated: more columns than signs");
    out.codes.resize(n, dim);
    out.norms.resize(static_cast<std::size_t>(n));
    out.saturatedNorms = 0;
    if (rotated)
        rotated->resize(n, dim);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    // x s scale with s = +-1: (x s) scale and x (s scale) are the same float.
    std::vector<float> scaled(signs.size());
    for (std::size_t j = 0; j < signs.size(); ++j)
        scaled[j] = signs[j] * scale;
    const Thresholds thresholds(*m_codebook);
    // Rows go through in groups of kGroup: each row's arithmetic is exactly the one-row encoder's,
    // but the group's norm accumulations (each a chain of dim / 8 dependent adds) are interleaved,
    // so the core runs them side by side instead of waiting out one chain per row.
    constexpr Eigen::Index kGroup = 4;
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> buffers(kGroup, dim); // vector-aligned rows
    for (Eigen::Index first = 0; first < n; first += kGroup) {
        const Eigen::Index rows = std::min(kGroup, n - first);
        float* row[kGroup];
        for (Eigen::Index k = 0; k < rows; ++k) {
            const Eigen::Index r = first + k;
            const float* src = x.data() + r * x.outerStride();
            row[k] = rotated ? rotated->data() + r * dim : buffers.data() + k * dim;
            for (Eigen::Index j = 0; j < d; ++j)
                row[k][j] = src[j] * scaled[static_cast<std::size_t>(j)];
            for (Eigen::Index j = d; j < dim; ++j)
                row[k][j] = 0.0f;
            fwhtInPlace(row[k], static_cast<std::size_t>(dim));
        }
        float total[kGroup] = {};
        if (rows == kGroup && dim % 8 == 0) {
            using namespace simd;
            Float8 partial[kGroup] = {};
            for (Eigen::Index b = 0; b < dim / 8; ++b)
                for (Eigen::Index k = 0; k < kGroup; ++k) {
                    const Float8 v = load(row[k] + 8 * b);
                    partial[k] += v * v;
                }
            for (Eigen::Index k = 0; k < kGroup; ++k)
                total[k] = sum(partial[k]);
        } else {
            for (Eigen::Index k = 0; k < rows; ++k)
                total[k] = sumOfSquares(row[k], dim);
        }
        for (Eigen::Index k = 0; k < rows; ++k) {
            const Eigen::Index r = first + k;
            bool saturated = false;
            out.norms[static_cast<std::size_t>(r)] = encodeDirection(row[k], dim, total[k], *m_codebook, thresholds,
                                                                     m_normFormat, out.codes.data() + r * dim, saturated);
            out.saturatedNorms += saturated ? 1 : 0;
        }
    }
}

void NormQuantizer::decode(const NormCodes& codes, RowMatrixXf& xHat) const
{
    const Eigen::Index n = codes.codes.rows(), dim = codes.codes.cols();
    xHat.resize(n, dim);
    const float* levels = m_codebook->levelsF.data();
    for (Eigen::Index r = 0; r < n; ++r) {
        const float norm = codes.norms[static_cast<std::size_t>(r)];
        const std::uint8_t* c = codes.codes.data() + r * dim;
        float* dst = xHat.data() + r * dim;
        for (Eigen::Index j = 0; j < dim; ++j)
            dst[j] = norm * levels[c[j]];
    }
}

double NormQuantizer::bitsPerVector(int dim) const
{
    return static_cast<double>(m_codebook->bits) * dim + scalarFormatBits(m_normFormat);
}

} // namespace kvlens
