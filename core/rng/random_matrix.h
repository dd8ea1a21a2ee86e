// SPDX-License-Identifier: GPL-3.0-or-later
// Random matrices drawn from an Rng: what both the data regimes and the schemes' random parts need.
#pragma once

#include "core/rng/rng.h"

#include <Eigen/Core>

namespace kvlens {

/// A d x r matrix with orthonormal columns, the Q factor of a Gaussian matrix with the signs fixed
/// so that R has a positive diagonal (Haar-distributed). Needs 1 <= r <= d.
Eigen::MatrixXd randomOrthonormal(int d, int r, Rng& rng);

} // namespace kvlens
