// SPDX-License-Identifier: GPL-3.0-or-later
// Norm + codebook quantizer and the storage formats of per-vector scalars.
#include "core/quant/norm_quantizer.h"

#include "core/common/fp16.h"

#include <cassert>
#include <cmath>

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

void NormQuantizer::encode(const Eigen::Ref<const RowMatrixXf>& x, NormCodes& out) const
{
    const Eigen::Index n = x.rows(), dim = x.cols();
    out.codes.resize(n, dim);
    out.norms.resize(static_cast<std::size_t>(n));
    out.saturatedNorms = 0;
    const Codebook& cb = *m_codebook;
    for (Eigen::Index r = 0; r < n; ++r) {
        const float* row = x.data() + r * x.outerStride();
        double sum = 0.0;
        for (Eigen::Index c = 0; c < dim; ++c)
            sum += static_cast<double>(row[c]) * row[c];
        const auto norm = static_cast<float>(std::sqrt(sum));
        bool saturated = false;
        out.norms[static_cast<std::size_t>(r)] = storeScalar(norm, m_normFormat, &saturated);
        out.saturatedNorms += saturated ? 1 : 0;
        // The direction is quantized with the exact norm; only the stored norm is rounded.
        const float inv = norm > 0.0f ? 1.0f / norm : 0.0f;
        std::uint8_t* codes = out.codes.data() + r * dim;
        for (Eigen::Index c = 0; c < dim; ++c)
            codes[c] = static_cast<std::uint8_t>(cb.encode(row[c] * inv));
    }
}

void NormQuantizer::decode(const NormCodes& codes, RowMatrixXf& xHat) const
{
    const Eigen::Index n = codes.codes.rows(), dim = codes.codes.cols();
    xHat.resize(n, dim);
    const Codebook& cb = *m_codebook;
    for (Eigen::Index r = 0; r < n; ++r) {
        const float norm = codes.norms[static_cast<std::size_t>(r)];
        const std::uint8_t* c = codes.codes.data() + r * dim;
        float* dst = xHat.data() + r * dim;
        for (Eigen::Index j = 0; j < dim; ++j)
            dst[j] = norm * cb.decode(c[j]);
    }
}

double NormQuantizer::bitsPerVector(int dim) const
{
    return static_cast<double>(m_codebook->bits) * dim + scalarFormatBits(m_normFormat);
}

} // namespace kvlens
