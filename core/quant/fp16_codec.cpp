// SPDX-License-Identifier: GPL-3.0-or-later
// fp16: a path kept in IEEE half precision (16 bits per coordinate, no other overhead) — the
// unquantized cache of an fp16 model, and the "exact" side of the K-only / V-only sensitivity
// schemes the model lens uses to separate key damage from value damage.
#include "core/common/fp16.h"
#include "core/quant/codec.h"

#include <cmath>

namespace kvlens {

namespace {

class HalfCodec final : public PathCodec {
public:
    explicit HalfCodec(int d) : m_scoreScale(1.0f / std::sqrt(static_cast<float>(d))) {}

    double bitsPerCoordinate(int) const override { return 16.0; }

    PathResult encode(const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries) const override
    {
        PathResult out;
        out.reconstruction = x.unaryExpr([](float v) { return roundToHalf(v); });
        for (Eigen::Index i = 0; i < x.size(); ++i)
            if (std::isinf(out.reconstruction.data()[i]) && std::isfinite(x.data()[i]))
                ++out.saturatedNorms; // beyond the fp16 range: the value overflows
        if (queries) {
            out.scores.noalias() = *queries * out.reconstruction.transpose();
            out.scores *= m_scoreScale;
        }
        return out;
    }

private:
    float m_scoreScale;
};

/// WHT + n-bit Lloyd-Max (TurboQuant's scalar path, as TQ-KV's).
PathConfig turboQuantPath()
{
    PathConfig p;
    p.rotation = Rotation::Wht;
    p.quantizer = QuantizerKind::LloydBeta;
    return p;
}

} // namespace

SchemeExtension halfPrecisionExtension()
{
    SchemeExtension e;
    e.codec.name = "fp16";
    e.codec.description = "The path stored in IEEE half precision: 16 bits per coordinate, whatever the budget.";
    e.codec.previewBits = [](const PathConfig&, int, int, int) { return 16.0; };
    e.codec.plan = [](const CodecContext& c) -> std::shared_ptr<const PathCodec> {
        return std::make_shared<const HalfCodec>(c.d);
    };
    PathConfig half;
    half.codec = e.codec.name;
    e.schemes.push_back(SchemeConfig{"K-only",
                                     "Sensitivity: WHT + n-bit Lloyd-Max on K (as TQ-KV); V kept in fp16. With "
                                     "V-only, separates the damage keys do from the damage values do.",
                                     turboQuantPath(), half, true});
    e.schemes.push_back(SchemeConfig{"V-only",
                                     "Sensitivity: K kept in fp16; WHT + n-bit Lloyd-Max on V (as TQ-KV).", half,
                                     turboQuantPath(), true});
    e.schemes.push_back(SchemeConfig{"FP16", "Both paths in fp16: the unquantized cache (16 bits per coordinate).",
                                     half, half, true});
    return e;
}

} // namespace kvlens
