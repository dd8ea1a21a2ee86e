// SPDX-License-Identifier: GPL-3.0-or-later
// Per-channel statistics of a calibration set (mean and standard deviation, stored in fp16): the
// normalization KVQuant applies before quantizing, shared by the channel_norm transform and the
// kvquant quantizer.
#pragma once

#include "core/common/types.h"

namespace kvlens {

struct ChannelStats {
    Eigen::RowVectorXf mean;  ///< fp16-representable
    Eigen::RowVectorXf scale; ///< fp16-representable, 1 where a channel is constant

    /// Identity statistics (mean 0, scale 1) of `d` channels: what is used without calibration data.
    static ChannelStats identity(int d);
    /// Each column's mean and population standard deviation, rounded to fp16.
    static ChannelStats of(const RowMatrixXf& calibration);

    /// (x - mean) / scale, row by row.
    RowMatrixXf normalize(const Eigen::Ref<const RowMatrixXf>& x) const;
    /// mean + scale * u, row by row.
    RowMatrixXf denormalize(const Eigen::Ref<const RowMatrixXf>& u) const;
    /// Storage of the statistics: two fp16 numbers a channel.
    double bits() const { return 32.0 * static_cast<double>(mean.size()); }
};

} // namespace kvlens
