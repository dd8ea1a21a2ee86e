// SPDX-License-Identifier: GPL-3.0-or-later
// Randomized Walsh-Hadamard rotation: x' = H D [x, 0] / sqrt(dp), in place, O(dp log dp).
#pragma once

#include "core/common/types.h"
#include "core/rng/rng.h"

#include <cstddef>
#include <vector>

namespace kvlens {

/// Smallest power of two >= d (the rotated dimension; d itself when d is a power of two).
std::size_t paddedDimension(std::size_t d);

/// dp random signs (+-1) for the diagonal D, drawn from `rng`.
std::vector<float> randomSigns(std::size_t dp, Rng& rng);

/// In-place unnormalised fast Walsh-Hadamard transform of x[0..n) (n a power of two):
/// x <- H_n x with H_n the Sylvester Hadamard matrix (entries +-1). Iterative butterfly.
void fwhtInPlace(float* x, std::size_t n);

/// Rotates every row: out.row(i) = H D [in.row(i), 0...] / sqrt(dp), dp = signs.size().
/// `in` is n x d (d <= dp, row-major); `out` becomes n x dp. Orthogonal, so dot products
/// between rows rotated with the same signs are preserved.
void rotateRows(const Eigen::Ref<const RowMatrixXf>& in, const std::vector<float>& signs, RowMatrixXf& out);

/// Inverse of rotateRows: out.row(i) = first d coordinates of D H in.row(i) / sqrt(dp).
/// `in` is n x dp; `out` becomes n x d.
void unrotateRows(const Eigen::Ref<const RowMatrixXf>& in, const std::vector<float>& signs, std::size_t d,
                  RowMatrixXf& out);

} // namespace kvlens
