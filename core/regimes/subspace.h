// SPDX-License-Identifier: GPL-3.0-or-later
// What the subspace regimes (low_rank, kv_subspace) share: how the subspace is oriented against
// the coordinate axes, the latent spectrum z ~ N(0, diag lambda), and queries drawn in, out of,
// or partly in the key subspace.
#pragma once

#include "core/regimes/regime.h"
#include "core/rng/rng.h"

#include <string_view>
#include <vector>

namespace kvlens {

/// How a regime's subspace sits in the coordinate basis.
enum class SubspaceBasis {
    Haar,       ///< a Haar-random orthonormal basis: incoherent with every fixed basis
    Axis,       ///< the first columns' coordinate axes (e_1, e_2, ...): outlier channels at fixed indices
    RandomAxes, ///< coordinate axes chosen by the seed
};

/// "haar" -> Haar, "axis" -> Axis, "random_axes" -> RandomAxes (the Choice parameter "basis").
SubspaceBasis subspaceBasisFromText(std::string_view text);

/// A d x cols orthonormal basis of the given kind, drawn from `rng` (Haar: the draws of
/// randomOrthonormal; RandomAxes: a partial Fisher-Yates shuffle; Axis: none).
Eigen::MatrixXd subspaceBasis(SubspaceBasis kind, int d, int cols, Rng& rng);

/// Variances of the r latent coordinates, lambda_i proportional to i^-decay (i = 1..r), scaled so
/// they sum to d: the total variance of the Gaussian regime (decay 0: d / r each).
std::vector<double> latentVariances(int r, double decay, int d);

/// Rows x d samples U z with z ~ N(0, diag lambda) (`basis` is d x r).
void fillSubspace(RowMatrixXf& out, int rows, const Eigen::MatrixXf& basis, const std::vector<double>& lambda, Rng& rng);

/// Queries whose direction has cosine `overlap` with the key subspace: q = c U z + sqrt(1 - c^2) g,
/// g a Gaussian vector projected on the subspace's orthogonal complement and rescaled to E|g|^2 = d,
/// so E|q|^2 = d for every c (c = 1: in the subspace; c = 0: orthogonal to it).
void fillQueries(RowMatrixXf& out, int rows, const Eigen::MatrixXf& basis, const std::vector<double>& lambda,
                 double overlap, Rng& rng);

/// The parameters the subspace regimes share: basis, decay, query_overlap.
std::vector<ParamDesc> subspaceParams();

} // namespace kvlens
