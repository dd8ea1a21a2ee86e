// SPDX-License-Identifier: GPL-3.0-or-later
// The A^2-weighted value policy (paper C): value bits where attention will read them.
#pragma once

#include "core/common/types.h"

#include <vector>

namespace kvlens {

/// Per-token bits for a value path at `bits` on average (paper C's A^2 surrogate): calibration
/// queries' attention over the cached keys gives each token an expected p_j^2, its importance is
/// w_j ||v_j||^2, and bits * N bits are water-filled over tokens (each token 1..8 bits) against
/// the distortion model importance * 4^-bits. Uses at most `maxQueries` calibration queries.
/// keys, values: N x d; calibrationQueries: any x d (already multiplied by the score scale);
/// scale: 1/sqrt(d).
std::vector<int> a2TokenBits(const RowMatrixXf& keys, const RowMatrixXf& calibrationQueries, const RowMatrixXf& values,
                             int bits, float scale, int maxQueries = 256);

} // namespace kvlens
