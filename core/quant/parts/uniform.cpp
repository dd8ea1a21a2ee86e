// SPDX-License-Identifier: GPL-3.0-or-later
// Quantizer uniform: KIVI's asymmetric min-max integers in groups, per channel (keys) or per token
// (values), with an optional full-precision window of the most recent tokens.
#include "core/quant/part_support.h"

#include "core/quant/uniform_quantizer.h"

namespace kvlens::parts {

namespace {

class UniformPlan final : public QuantizerPlan {
public:
    explicit UniformPlan(UniformOptions options) : m_options(options) {}

    void roundTrip(const Eigen::Ref<const RowMatrixXf>& xr, int bits, RowMatrixXf& xHat, int&) const override
    {
        UniformOptions options = m_options;
        options.bits = bits;
        const UniformQuantizer q(options);
        UniformCodes codes;
        q.encode(xr, codes);
        q.decode(codes, xHat);
    }
    ScalarFormat scalarFormat() const override { return m_options.scaleFormat; }
    double bits(int tokens, int dim, double meanBits) const override
    {
        UniformOptions options = m_options;
        options.bits = 0; // overheads only: group parameters and the full-precision window
        const double quantRows = std::max(0, tokens - std::min(m_options.fullPrecisionWindow, tokens));
        return UniformQuantizer(options).totalBits(tokens, dim) + meanBits * dim * quantRows;
    }
    /// Per-channel groups span `groupSize` consecutive tokens: such a group is encoded when complete.
    int causalGroup() const override { return m_options.axis == UniformAxis::PerChannel ? m_options.groupSize : 1; }

private:
    UniformOptions m_options;
};

} // namespace

std::vector<PartKind> uniformParts()
{
    PartKind k;
    k.name = "uniform";
    k.role = PartRole::Quantizer;
    k.description = "KIVI's asymmetric min-max integers: each group stores its min and scale (max - min)/(2^bits - 1); "
                    "per-channel groups of consecutive tokens (keys) or per-token groups of consecutive channels "
                    "(values).";
    k.options = {integer("group", 1, 1 << 20, 32, "Coordinates per group along the grouping axis."),
                 choice("axis", {"per_token", "per_channel"}, "per_token",
                        "per_channel: a group is consecutive tokens of one channel; per_token: consecutive channels of "
                        "one token."),
                 integer("window", 0, 1 << 22, 0, "The most recent tokens kept in fp16, unquantized."),
                 scalarFormat("scale", "Storage format of each group's min and scale.")};
    k.planQuantizer = [](const CodecPart& p, PlanContext& c) -> std::shared_ptr<const QuantizerPlan> {
        UniformOptions o;
        o.bits = c.bits;
        o.groupSize = p.integer("group");
        o.axis = uniformAxisFromName(p.text("axis")).value_or(UniformAxis::PerToken);
        o.fullPrecisionWindow = p.integer("window");
        o.scaleFormat = scalarFormatFromName(p.text("scale")).value_or(ScalarFormat::Fp16);
        return std::make_shared<UniformPlan>(o);
    };
    return {k};
}

} // namespace kvlens::parts
