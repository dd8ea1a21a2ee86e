// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/regimes/subspace.h"

#include "core/rng/random_matrix.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvlens {

SubspaceBasis subspaceBasisFromText(std::string_view text)
{
    if (text == "axis")
        return SubspaceBasis::Axis;
    if (text == "random_axes")
        return SubspaceBasis::RandomAxes;
    return SubspaceBasis::Haar;
}

Eigen::MatrixXd subspaceBasis(SubspaceBasis kind, int d, int cols, Rng& rng)
{
    if (kind == SubspaceBasis::Haar)
        return randomOrthonormal(d, cols, rng);
    std::vector<int> axes(static_cast<std::size_t>(d));
    std::iota(axes.begin(), axes.end(), 0);
    if (kind == SubspaceBasis::RandomAxes)
        for (int i = 0; i < cols; ++i) {
            const auto j = i + static_cast<int>(rng.below(static_cast<std::uint64_t>(d - i)));
            std::swap(axes[static_cast<std::size_t>(i)], axes[static_cast<std::size_t>(j)]);
        }
    Eigen::MatrixXd basis = Eigen::MatrixXd::Zero(d, cols);
    for (int i = 0; i < cols; ++i)
        basis(axes[static_cast<std::size_t>(i)], i) = 1.0;
    return basis;
}

std::vector<double> latentVariances(int r, double decay, int d)
{
    std::vector<double> lambda(static_cast<std::size_t>(r));
    for (int i = 0; i < r; ++i)
        lambda[static_cast<std::size_t>(i)] = std::pow(static_cast<double>(i + 1), -decay);
    const double sum = std::accumulate(lambda.begin(), lambda.end(), 0.0);
    for (double& l : lambda)
        l *= static_cast<double>(d) / sum;
    return lambda;
}

namespace {

/// z ~ N(0, diag lambda), rows x r.
RowMatrixXf latent(int rows, const std::vector<double>& lambda, Rng& rng)
{
    RowMatrixXf z;
    fillGaussian(z, rows, static_cast<Eigen::Index>(lambda.size()), rng);
    for (std::size_t i = 0; i < lambda.size(); ++i)
        z.col(static_cast<Eigen::Index>(i)) *= static_cast<float>(std::sqrt(lambda[i]));
    return z;
}

} // namespace

void fillSubspace(RowMatrixXf& out, int rows, const Eigen::MatrixXf& basis, const std::vector<double>& lambda, Rng& rng)
{
    out.noalias() = latent(rows, lambda, rng) * basis.transpose();
}

void fillQueries(RowMatrixXf& out, int rows, const Eigen::MatrixXf& basis, const std::vector<double>& lambda,
                 double overlap, Rng& rng)
{
    fillSubspace(out, rows, basis, lambda, rng);
    if (overlap >= 1.0)
        return; // in the subspace: the same draws as before the parameter existed
    const Eigen::Index d = basis.rows(), r = basis.cols();
    RowMatrixXf g;
    fillGaussian(g, rows, d, rng);
    g -= (g * basis) * basis.transpose(); // the component in the orthogonal complement
    const auto complement = static_cast<float>(std::sqrt(static_cast<double>(d) / static_cast<double>(std::max<Eigen::Index>(1, d - r))));
    out = static_cast<float>(overlap) * out + static_cast<float>(std::sqrt(1.0 - overlap * overlap)) * complement * g;
}

std::vector<ParamDesc> subspaceParams()
{
    return {
        {"basis", "subspace basis",
         "How the subspace sits in the coordinates: Haar-random (incoherent with the Hadamard basis), the first r "
         "coordinate axes, or r axes chosen by the seed.",
         ParamDesc::Kind::Choice, 0, 0, 0, false, {"haar", "axis", "random_axes"}, "haar"},
        {"decay", "latent decay",
         "Latent variances lambda_i proportional to i^-decay (summing to d): 0 is isotropic in the subspace.",
         ParamDesc::Kind::Real, 0.0, 0.0, 4.0, false, {}, {}},
        {"query_overlap", "query overlap",
         "Cosine between a query and the key subspace: 1 draws queries in it, 0 orthogonal to it.",
         ParamDesc::Kind::Real, 1.0, 0.0, 1.0, false, {}, {}},
    };
}

} // namespace kvlens
