// SPDX-License-Identifier: GPL-3.0-or-later
// Transform channel_norm: each channel centred and scaled by its calibration mean and standard
// deviation (fp16 constants of the layer, counted in the bits). Without calibration data it is the
// identity.
#include "core/quant/part_support.h"

#include "core/quant/channel_stats.h"

namespace kvlens::parts {

namespace {

class ChannelNormPlan final : public TransformPlan {
public:
    explicit ChannelNormPlan(ChannelStats stats) : m_stats(std::move(stats)) {}
    int outDim() const override { return static_cast<int>(m_stats.mean.size()); }
    void forward(const Eigen::Ref<const RowMatrixXf>& x, RowMatrixXf& out) const override { out = m_stats.normalize(x); }
    void inverse(const Eigen::Ref<const RowMatrixXf>& y, RowMatrixXf& out) const override { out = m_stats.denormalize(y); }
    /// The statistics are stored once per cache matrix, whatever its length.
    double bits(int tokens) const override { return tokens > 0 ? m_stats.bits() : 0.0; }

private:
    ChannelStats m_stats;
};

} // namespace

std::vector<PartKind> channelNormParts()
{
    PartKind k;
    k.name = "channel_norm";
    k.role = PartRole::Transform;
    k.description = "Per-channel normalization (KVQuant's): each channel centred and scaled by its calibration mean "
                    "and standard deviation, stored as two fp16 numbers a channel.";
    k.needsCalibration = [](const CodecPart&) { return true; };
    k.planTransform = [](const CodecPart&, PlanContext& c) -> std::shared_ptr<const TransformPlan> {
        const RowMatrixXf* cal = c.storedCalibration ? c.storedCalibration() : nullptr;
        return std::make_shared<ChannelNormPlan>(cal && cal->rows() > 0 ? ChannelStats::of(*cal)
                                                                       : ChannelStats::identity(c.dim));
    };
    return {k};
}

} // namespace kvlens::parts
