// SPDX-License-Identifier: GPL-3.0-or-later
// Quantizers fp16 (IEEE half precision, 16 bits a coordinate) and none (the exact cache, float32),
// and the schemes built on them: K-only, V-only (one path in fp16, the other quantized) and FP16.
#include "core/quant/part_support.h"

#include "core/common/fp16.h"

#include <cmath>

namespace kvlens::parts {

namespace {

class HalfPlan final : public QuantizerPlan {
public:
    void roundTrip(const Eigen::Ref<const RowMatrixXf>& x, int, RowMatrixXf& xHat, int& saturated) const override
    {
        xHat = x.unaryExpr([](float v) { return roundToHalf(v); });
        for (Eigen::Index i = 0; i < x.size(); ++i)
            if (std::isinf(xHat.data()[i]) && std::isfinite(x.data()[i]))
                ++saturated; // beyond the fp16 range: the value overflows
    }
    double bits(int tokens, int dim, double) const override { return 16.0 * dim * tokens; }
};

class ExactPlan final : public QuantizerPlan {
public:
    void roundTrip(const Eigen::Ref<const RowMatrixXf>& x, int, RowMatrixXf& xHat, int&) const override { xHat = x; }
    double bits(int tokens, int dim, double) const override { return 32.0 * dim * tokens; }
};

/// WHT + n-bit Lloyd-Max (TurboQuant's scalar path, as TQ-KV's).
PathConfig turboQuantPath()
{
    PathConfig p;
    p.transforms = {part("wht")};
    p.quantizer = part("lloyd");
    return p;
}

} // namespace

std::vector<PartKind> halfParts()
{
    PartKind half;
    half.name = "fp16";
    half.role = PartRole::Quantizer;
    half.description = "The path stored in IEEE half precision: 16 bits per coordinate, whatever the budget.";
    half.fixedWidth = true;
    half.planQuantizer = [](const CodecPart&, PlanContext&) -> std::shared_ptr<const QuantizerPlan> {
        return std::make_shared<HalfPlan>();
    };
    PathConfig halfPath;
    halfPath.quantizer = part("fp16");
    half.schemes.push_back(SchemeConfig{"K-only",
                                        "Only the keys quantized (WHT + n-bit Lloyd-Max, as TQ-KV); the values kept in "
                                        "fp16: the K side of the model lens's K-vs-V sensitivity.",
                                        turboQuantPath(), halfPath, true});
    half.schemes.push_back(SchemeConfig{"V-only",
                                        "Only the values quantized (WHT + n-bit Lloyd-Max, as TQ-KV); the keys kept in "
                                        "fp16: the V side of the model lens's K-vs-V sensitivity.",
                                        halfPath, turboQuantPath(), true});
    half.schemes.push_back(SchemeConfig{"FP16", "Both paths in fp16: the unquantized cache (16 bits per coordinate).",
                                        halfPath, halfPath, true});

    PartKind exact;
    exact.name = "none";
    exact.role = PartRole::Quantizer;
    exact.description = "No quantization: the exact float32 cache (32 bits per coordinate); the reference of an "
                        "end-to-end evaluation, whose damage is exactly 0.";
    exact.fixedWidth = true;
    exact.planQuantizer = [](const CodecPart&, PlanContext&) -> std::shared_ptr<const QuantizerPlan> {
        return std::make_shared<ExactPlan>();
    };
    PathConfig exactPath;
    exactPath.quantizer = part("none");
    exact.schemes.push_back(SchemeConfig{"exact", "Both paths exact (float32): the unquantized reference.", exactPath,
                                         exactPath, true});
    return {half, exact};
}

} // namespace kvlens::parts
