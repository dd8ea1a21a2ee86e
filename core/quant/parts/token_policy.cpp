// SPDX-License-Identifier: GPL-3.0-or-later
// Token policies: uniform (every token at the path's bits) and a2 (paper C: value bits where
// calibration queries' attention will read them, same total).
#include "core/quant/part_support.h"

#include "core/quant/token_policy.h"

namespace kvlens::parts {

namespace {

class UniformTokens final : public TokenPolicyPlan {
public:
    std::vector<int> tokenBits(const TokenContext&, int) const override { return {}; }
};

class A2Tokens final : public TokenPolicyPlan {
public:
    explicit A2Tokens(int group) : m_group(group) {}
    std::vector<int> tokenBits(const TokenContext& c, int bits) const override
    {
        if (!c.calibrationQueries || c.calibrationQueries->rows() == 0)
            return {};
        return a2TokenBits(c.keys, *c.calibrationQueries, c.values, bits, c.scoreScale);
    }
    /// The allocation spreads a group's bits over its tokens: applied causally, per group.
    int causalGroup() const override { return m_group; }

private:
    int m_group;
};

} // namespace

std::vector<PartKind> tokenPolicyParts()
{
    PartKind uniform;
    uniform.name = "uniform";
    uniform.role = PartRole::TokenPolicy;
    uniform.description = "Every token at the path's bits.";
    uniform.planTokenPolicy = [](const CodecPart&, PlanContext&) -> std::shared_ptr<const TokenPolicyPlan> {
        return std::make_shared<UniformTokens>();
    };

    PartKind a2;
    a2.name = "a2";
    a2.role = PartRole::TokenPolicy;
    a2.description = "Paper C's A^2-weighted value policy: token j gets bits by water-filling over w_j |v_j|^2, w_j "
                     "the mean p_j^2 of calibration queries, at the same total.";
    a2.options = {integer("group", 1, 1 << 20, 32, "Tokens allocated together when the cache is written causally.")};
    a2.needsCalibration = [](const CodecPart&) { return true; };
    a2.site = PathSite::Values;
    a2.siteReason = "the A^2 token policy is for value paths";
    a2.validate = [](const CodecPart&, const PathConfig& path, int, int, const std::string& field) -> Status {
        const std::string& q = path.quantizer.kind;
        const bool plainLloyd = q == "lloyd" && path.quantizer.text("law") != "empirical";
        const bool perTokenUniform = q == "uniform" && path.quantizer.text("axis") == "per_token";
        if ((!plainLloyd && !perTokenUniform) || !path.residuals.empty())
            return Error{field, "the A^2 token policy needs a plain per-token KIVI (uniform, axis per_token), lloyd beta "
                                "or lloyd gauss value path without residual stages"};
        return Ok{};
    };
    a2.planTokenPolicy = [](const CodecPart& p, PlanContext&) -> std::shared_ptr<const TokenPolicyPlan> {
        return std::make_shared<A2Tokens>(p.integer("group"));
    };
    return {uniform, a2};
}

} // namespace kvlens::parts
