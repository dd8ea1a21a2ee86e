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

/// Quantizes one row (dim coordinates) into `codes`; returns the stored norm.
float encodeRow(const float* row, Eigen::Index dim, const Codebook& cb, ScalarFormat format, std::uint8_t* codes,
                bool& saturated)
{
    using namespace simd;
    // A plain float accumulator is a serial chain of dim dependent adds (the compiler may not
    // reassociate): eight lanes of partial sums instead.
    const Eigen::Index blocks = dim / 8;
    Float8 partial = {};
    for (Eigen::Index b = 0; b < blocks; ++b) {
        const Float8 v = load(row + 8 * b);
        partial += v * v;
    }
    float total = sum(partial);
    for (Eigen::Index c = 8 * blocks; c < dim; ++c)
        total += row[c] * row[c];
    const float norm = std::sqrt(total);
    const float stored = storeScalar(norm, format, &saturated);
    // The direction is quantized with the exact norm; only the stored norm is rounded.
    const float inv = norm > 0.0f ? 1.0f / norm : 0.0f;
    const auto& thresholds = cb.thresholdsF;
    Eigen::Index done = 0;
    if (thresholds.size() <= 15) {
        // Compare-and-count: the code is the number of thresholds below the value (a search
        // per value measured ~100x slower). A lane comparison yields -1 where true.
        const Float8 scale = broadcast(inv);
        for (Eigen::Index b = 0; b + 1 < blocks; b += 2) {
            const Float8 u0 = load(row + 8 * b) * scale, u1 = load(row + 8 * b + 8) * scale;
            Int8 k0 = {}, k1 = {};
            for (const float t : thresholds) {
                const Float8 tv = broadcast(t);
                k0 -= u0 > tv;
                k1 -= u1 > tv;
            }
            const Bytes16 bytes = lowBytes(k0, k1);
            std::memcpy(codes + 8 * b, &bytes, sizeof bytes);
            done = 8 * b + 16;
        }
    }
    for (Eigen::Index c = done; c < dim; ++c)
        codes[c] = static_cast<std::uint8_t>(cb.encode(row[c] * inv));
    return stored;
}

} // namespace

void NormQuantizer::encode(const Eigen::Ref<const RowMatrixXf>& x, NormCodes& out) const
{
    const Eigen::Index n = x.rows(), dim = x.cols();
    out.codes.resize(n, dim);
    out.norms.resize(static_cast<std::size_t>(n));
    out.saturatedNorms = 0;
    for (Eigen::Index r = 0; r < n; ++r) {
        bool saturated = false;
        out.norms[static_cast<std::size_t>(r)] =
            encodeRow(x.data() + r * x.outerStride(), dim, *m_codebook, m_normFormat, out.codes.data() + r * dim, saturated);
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
    Eigen::VectorXf buffer(dim); // Eigen storage is vector-aligned: no loads split across cache lines
    for (Eigen::Index r = 0; r < n; ++r) {
        const float* src = x.data() + r * x.outerStride();
        float* row = rotated ? rotated->data() + r * dim : buffer.data();
        for (Eigen::Index j = 0; j < d; ++j)
            row[j] = src[j] * signs[static_cast<std::size_t>(j)] * scale;
        for (Eigen::Index j = d; j < dim; ++j)
            row[j] = 0.0f;
        fwhtInPlace(row, static_cast<std::size_t>(dim));
        bool saturated = false;
        out.norms[static_cast<std::size_t>(r)] =
            encodeRow(row, dim, *m_codebook, m_normFormat, out.codes.data() + r * dim, saturated);
        out.saturatedNorms += saturated ? 1 : 0;
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
