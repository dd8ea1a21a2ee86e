// SPDX-License-Identifier: GPL-3.0-or-later
// Per-vector error geometry: scale error (SNR in dB) and direction error (angle), the 6D frame's parts.
#pragma once

#include "core/common/types.h"

#include <vector>

namespace kvlens {

/// SNR above this is reported as this (an exact reconstruction would be +inf dB).
inline constexpr double kSnrCapDb = 200.0;

/// Scale and direction error of one reconstruction x^ of x (design section 5):
///   snrDb = 10 log10(||x||^2 / ||x - x^||^2)   (Shannon view: about 6.02 dB per bit)
///   phi   = angle between x and x^ in radians  (computed as atan2(||x^_perp||, x^.u), exact for tiny angles)
///   relErr = ||x - x^||^2 / ||x||^2
struct VectorError {
    double snrDb = 0.0;
    double phi = 0.0;
    double relErr = 0.0;
    double norm2 = 0.0; ///< ||x||^2
};

/// Errors of one pair of length-n float arrays, accumulated in double.
VectorError vectorError(const float* x, const float* xHat, Eigen::Index n);

/// Per-row errors of X^ against X (both rows x d) plus the totals sum ||x - x^||^2 and
/// sum ||x||^2 (for relMSE over the whole set).
struct RowErrors {
    std::vector<float> snrDb;
    std::vector<float> phi;
    std::vector<float> relErr;
    double sumError2 = 0.0;
    double sumNorm2 = 0.0;
};
RowErrors rowErrors(const Eigen::Ref<const RowMatrixXf>& x, const Eigen::Ref<const RowMatrixXf>& xHat);

} // namespace kvlens
