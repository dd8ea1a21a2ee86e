// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/quant/channel_stats.h"

#include "core/common/fp16.h"

#include <algorithm>
#include <cmath>

namespace kvlens {

ChannelStats ChannelStats::identity(int d)
{
    return ChannelStats{Eigen::RowVectorXf::Zero(d), Eigen::RowVectorXf::Ones(d)};
}

ChannelStats ChannelStats::of(const RowMatrixXf& calibration)
{
    const auto d = static_cast<int>(calibration.cols());
    ChannelStats s = identity(d);
    if (calibration.rows() == 0)
        return s;
    for (int j = 0; j < d; ++j) {
        const auto col = calibration.col(j).cast<double>();
        const double mean = col.mean();
        const double sd = std::sqrt(std::max(0.0, col.squaredNorm() / static_cast<double>(calibration.rows()) - mean * mean));
        s.mean(j) = roundToHalf(static_cast<float>(mean));
        const float stored = sd > 0.0 ? roundToHalf(static_cast<float>(sd)) : 1.0f;
        // A deviation below fp16's smallest subnormal rounds to 0: such a channel is treated as constant.
        s.scale(j) = stored > 0.0f && std::isfinite(stored) ? stored : 1.0f;
    }
    return s;
}

RowMatrixXf ChannelStats::normalize(const Eigen::Ref<const RowMatrixXf>& x) const
{
    return ((x.rowwise() - mean).array().rowwise() / scale.array()).matrix();
}

RowMatrixXf ChannelStats::denormalize(const Eigen::Ref<const RowMatrixXf>& u) const
{
    RowMatrixXf x(u.rows(), u.cols());
    for (Eigen::Index r = 0; r < u.rows(); ++r)
        for (Eigen::Index j = 0; j < u.cols(); ++j)
            x(r, j) = mean(j) + scale(j) * u(r, j);
    return x;
}

} // namespace kvlens
