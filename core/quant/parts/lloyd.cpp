// SPDX-License-Identifier: GPL-3.0-or-later
// Quantizer lloyd: each row's norm in a scalar format, its direction on a Lloyd-Max codebook
// (the sphere-coordinate Beta law, the Gaussian law, or one fitted to calibration data).
#include "core/quant/part_support.h"

#include "core/common/fp16.h"
#include "core/quant/lloyd_max.h"
#include "core/quant/norm_quantizer.h"

#include <algorithm>
#include <cmath>

namespace kvlens::parts {

namespace {

/// Distance (relative) from `value` to the nearest rounding midpoint of `format`; infinity for fp32.
double midpointDistance(float value, ScalarFormat format)
{
    if (format == ScalarFormat::Fp32 || !(value > 0.0f))
        return INFINITY;
    const bool half = format == ScalarFormat::Fp16;
    const std::uint16_t bits = half ? floatToHalfBits(value) : floatToBfloat16Bits(value);
    auto toFloat = [&](std::uint16_t b) { return half ? halfBitsToFloat(b) : bfloat16BitsToFloat(b); };
    const double rounded = toFloat(bits);
    double best = INFINITY;
    for (const std::uint16_t neighbour : {static_cast<std::uint16_t>(bits + 1), static_cast<std::uint16_t>(bits - 1)}) {
        const double other = toFloat(neighbour);
        if (std::isfinite(other))
            best = std::min(best, std::abs(value - 0.5 * (rounded + other)) / value);
    }
    return best;
}

class LloydPlan final : public QuantizerPlan {
public:
    LloydPlan(std::shared_ptr<const Codebook> codebook, ScalarFormat format, bool gaussian, int dim)
        : m_codebook(std::move(codebook)), m_format(format), m_gaussian(gaussian), m_dim(dim)
    {
    }

    void roundTrip(const Eigen::Ref<const RowMatrixXf>& xr, int bits, RowMatrixXf& xHat, int& saturated) const override
    {
        // Another width (a token policy's): the law's codebook at that width (Beta for empirical).
        const auto codebook = bits == m_codebook->bits ? m_codebook
                              : m_gaussian             ? cachedCodebook(CodebookLaw::Gaussian, m_dim, bits)
                                                       : cachedCodebook(CodebookLaw::Beta, std::max(m_dim, 3), bits);
        const NormQuantizer q(codebook, m_format);
        NormCodes codes;
        q.encode(xr, codes);
        q.decode(codes, xHat);
        saturated += codes.saturatedNorms;
    }
    const Codebook* codebook() const override { return m_codebook.get(); }
    ScalarFormat scalarFormat() const override { return m_format; }
    double bits(int tokens, int dim, double meanBits) const override
    {
        return static_cast<double>(tokens) * (meanBits * dim + scalarFormatBits(m_format));
    }
    std::optional<double> relativeDistortion() const override
    {
        if (!(m_codebook->variance > 0.0))
            return std::nullopt;
        return m_codebook->mse / m_codebook->variance;
    }
    int boundaryDecisions(const RowMatrixXf& stored, double margin) const override
    {
        int count = 0;
        for (Eigen::Index r = 0; r < stored.rows(); ++r) {
            const float norm = stored.row(r).norm();
            if (midpointDistance(norm, m_format) < margin)
                ++count;
            if (!(norm > 0.0f))
                continue;
            for (Eigen::Index c = 0; c < stored.cols(); ++c) {
                const double u = stored(r, c) / norm;
                for (const float t : m_codebook->thresholdsF)
                    if (std::abs(u - t) < margin)
                        ++count;
            }
        }
        return count;
    }

private:
    std::shared_ptr<const Codebook> m_codebook;
    ScalarFormat m_format;
    bool m_gaussian;
    int m_dim;
};

ScalarFormat formatOf(const CodecPart& p, const char* key)
{
    return scalarFormatFromName(p.text(key)).value_or(ScalarFormat::Fp16);
}

} // namespace

std::vector<PartKind> lloydParts()
{
    PartKind k;
    k.name = "lloyd";
    k.role = PartRole::Quantizer;
    k.description = "Each row's norm in a scalar format and its direction on a Lloyd-Max codebook of 2^bits levels "
                    "for the coordinates of a uniformly random unit vector (Beta law), the Gaussian N(0, 1/dim), or "
                    "fitted to calibration rows.";
    k.options = {choice("law", {"beta", "gauss", "empirical"}, "beta", "The law the codebook is designed for."),
                 scalarFormat("norm", "Storage format of each row's norm.")};
    k.needsCalibration = [](const CodecPart& p) { return p.text("law") == "empirical"; };
    k.planQuantizer = [](const CodecPart& p, PlanContext& c) -> std::shared_ptr<const QuantizerPlan> {
        const std::string law = p.text("law");
        const ScalarFormat format = formatOf(p, "norm");
        std::shared_ptr<const Codebook> codebook;
        const RowMatrixXf* cal = law == "empirical" && c.storedCalibration ? c.storedCalibration() : nullptr;
        if (cal && cal->rows() > 0)
            codebook = std::make_shared<const Codebook>(NormQuantizer::trainEmpirical(*cal, c.bits, format).codebook());
        else if (law == "gauss")
            codebook = cachedCodebook(CodebookLaw::Gaussian, c.dim, c.bits);
        else // beta, or an empirical codebook planned without data (a preview)
            codebook = cachedCodebook(CodebookLaw::Beta, std::max(c.dim, 3), c.bits);
        return std::make_shared<LloydPlan>(std::move(codebook), format, law == "gauss", c.dim);
    };
    return {k};
}

} // namespace kvlens::parts
