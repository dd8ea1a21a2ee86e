// SPDX-License-Identifier: GPL-3.0-or-later
// Haar-distributed orthonormal bases by Householder QR of a Gaussian matrix.
#include "core/rng/random_matrix.h"

#include <Eigen/QR>

#include <cassert>

namespace kvlens {

Eigen::MatrixXd randomOrthonormal(int d, int r, Rng& rng)
{
    assert(r >= 1 && r <= d);
    Eigen::MatrixXd g(d, r);
    for (int i = 0; i < d; ++i)
        for (int j = 0; j < r; ++j)
            g(i, j) = rng.normal();
    Eigen::HouseholderQR<Eigen::MatrixXd> qr(g);
    Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(d, r);
    // Fix the signs (R with a positive diagonal) so the basis is Haar-distributed.
    const Eigen::MatrixXd& rr = qr.matrixQR();
    for (int j = 0; j < r; ++j)
        if (rr(j, j) < 0.0)
            q.col(j) = -q.col(j);
    return q;
}

} // namespace kvlens
