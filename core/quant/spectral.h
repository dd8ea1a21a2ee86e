// SPDX-License-Identifier: GPL-3.0-or-later
// SpectralQuant's calibration: eigenbasis, effective dimension, and bit allocation (paper B).
#pragma once

#include "core/common/types.h"

#include <span>
#include <vector>

namespace kvlens {

/// The eigen-decomposition of a calibration set's uncentred covariance C = X^T X / n.
struct SpectralAnalysis {
    Eigen::MatrixXd basis;           ///< d x d, column i the eigenvector of the i-th largest eigenvalue
    std::vector<double> eigenvalues; ///< descending
    double participationRatio = 0.0; ///< (sum lambda)^2 / sum lambda^2
    int gapDeff = 0;                 ///< d_eff by the spectral-gap rule (d when no gap passes the threshold)
    double gapRatio = 0.0;           ///< the winning ratio lambda_i / lambda_{i+1}
};

/// Eigen-decomposes C = X^T X / n of `calibration` (n x d). `gapThreshold`: see gapRuleDeff.
SpectralAnalysis analyzeSpectrum(const Eigen::Ref<const RowMatrixXf>& calibration, double gapThreshold);

/// Participation ratio (sum lambda)^2 / sum lambda^2: the number of equal eigenvalues that would
/// have the same spread. 0 for an empty or all-zero spectrum.
double participationRatio(std::span<const double> eigenvalues);

/// The spectral-gap rule: d_eff = the i (1-based) maximising lambda_i / lambda_{i+1} over the
/// descending spectrum, if that ratio is at least `threshold`; otherwise the whole dimension.
/// Unlike the participation ratio, one spurious large eigenvalue adds at most 1 to it.
/// `ratio` (if given) receives the winning ratio.
int gapRuleDeff(std::span<const double> eigenvalues, double threshold, double* ratio = nullptr);

/// Integer reverse water-filling: `totalBits` bits over coordinates of the given variances,
/// at most `maxBits` each, one bit at a time to the coordinate whose distortion
/// variance * 4^-bits would fall the most (greedy is optimal for this separable convex
/// allocation). Ties go to the lower index. Returns the bits per coordinate.
std::vector<int> waterFillBits(std::span<const double> variances, int totalBits, int maxBits = 8);

/// The same total spread evenly: floor(total / count) each, the remainder one more bit for the
/// first coordinates, capped at `maxBits`.
std::vector<int> uniformBits(int count, int totalBits, int maxBits = 8);

} // namespace kvlens
