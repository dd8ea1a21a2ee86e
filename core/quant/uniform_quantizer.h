// SPDX-License-Identifier: GPL-3.0-or-later
// Asymmetric min-max integer quantization in groups (KIVI): per-channel for keys, per-token for values.
#pragma once

#include "core/common/types.h"
#include "core/quant/norm_quantizer.h"

#include <optional>
#include <string_view>
#include <vector>

namespace kvlens {

/// Which coordinates share a (min, scale) pair.
enum class UniformAxis {
    PerChannel, ///< a group is `groupSize` consecutive tokens of one channel (KIVI keys)
    PerToken,   ///< a group is `groupSize` consecutive channels of one token (KIVI values)
};

std::string_view uniformAxisName(UniformAxis axis); ///< "per_channel", "per_token"
std::optional<UniformAxis> uniformAxisFromName(std::string_view name);

struct UniformOptions {
    int bits = 2;                    ///< 1..8
    int groupSize = 32;              ///< coordinates per group along the grouping axis (>= 1)
    UniformAxis axis = UniformAxis::PerToken;
    int fullPrecisionWindow = 0;     ///< the last R tokens (rows) are kept at fp16, unquantized
    ScalarFormat scaleFormat = ScalarFormat::Fp16; ///< storage of each group's min and scale
};

/// Codes of a UniformQuantizer. Groups are numbered row-major over the group grid.
struct UniformCodes {
    CodeMatrix codes;                 ///< n x dim (rows inside the full-precision window are unused)
    std::vector<float> mins;          ///< per group, stored format
    std::vector<float> scales;        ///< per group, stored format; x ~ min + code * scale
    RowMatrixXf window;               ///< the last `fullPrecisionWindow` rows, rounded to fp16
    int groupRows = 0, groupCols = 0; ///< shape of the group grid
};

/// KIVI-style asymmetric quantizer: each group stores min and scale = (max - min)/(2^b - 1)
/// and codes round((x - min)/scale). Reference: Liu et al. (2024), "KIVI".
/// Buffers: X is n x dim (tokens x channels), row-major.
class UniformQuantizer {
public:
    explicit UniformQuantizer(UniformOptions options) : m_options(options) {}

    const UniformOptions& options() const { return m_options; }

    void encode(const Eigen::Ref<const RowMatrixXf>& x, UniformCodes& out) const;
    void decode(const UniformCodes& codes, RowMatrixXf& xHat) const;

    /// Exact storage of an n x dim block in bits: codes, two scalars per group, fp16 window.
    double totalBits(Eigen::Index n, Eigen::Index dim) const;

private:
    UniformOptions m_options;
};

} // namespace kvlens
