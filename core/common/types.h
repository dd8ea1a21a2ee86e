// SPDX-License-Identifier: GPL-3.0-or-later
// Matrix types shared by every layer: token-major float matrices that match GPU buffers.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <limits>

namespace kvlens {

/// A quiet NaN: "not measured" in tables and curves.
inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

/// Token-major float matrix (one row per key, value or query vector), as GPU buffers store it.
using RowMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// Token-major double matrix, for calibration statistics that need the precision.
using RowMatrixXd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// Row-major byte matrix holding one quantization code per coordinate.
using CodeMatrix = Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

} // namespace kvlens
