// SPDX-License-Identifier: GPL-3.0-or-later
// Energy distance between point clouds and its seeded permutation test.
#pragma once

#include "core/common/cancel.h"

#include <Eigen/Core>

#include <cstdint>

namespace kvlens::stats {

/// Energy distance between the empirical laws of two clouds (rows are points, both with the
/// same number of columns, Euclidean norm):
///   E = 2 mean_{i,j} ||x_i - y_j|| - mean_{i,i'} ||x_i - x_i'|| - mean_{j,j'} ||y_j - y_j'||,
/// every mean over ALL ordered pairs, i = i' included (the V-statistic, so E >= 0 and E = 0
/// iff the two empirical laws coincide). In 1-D, sqrt(E) is scipy.stats.energy_distance.
/// An empty cloud gives 0. O((n + m)^2 d).
/// Reference: Szekely & Rizzo (2013), "Energy statistics: a class of statistics based on
/// distances", J. Stat. Plan. Inference 143.
double energyDistance(const Eigen::Ref<const Eigen::MatrixXd>& x, const Eigen::Ref<const Eigen::MatrixXd>& y);

/// Result of the energy permutation test.
struct EnergyTestResult {
    double statistic = 0.0;  ///< E of the observed split (energyDistance(x, y))
    double pValue = 1.0;     ///< (#{b: E_b >= E_obs} + 1) / (B + 1)
    int permutations = 0;    ///< B
    std::uint64_t seed = 0;  ///< seed of the Rng(EngineKind::Pcg64, seed) that drew the splits
};

/// Permutation test of "x and y come from the same law" with statistic E. The n + m rows are
/// pooled and, B times, the first n positions of a partial Fisher-Yates shuffle drawn from
/// Rng(EngineKind::Pcg64, seed) become the new x; p = (#{E_b >= E_obs} + 1) / (B + 1), which
/// is never 0 and is exactly reproducible for a fixed seed. E_b >= E_obs is decided with a
/// relative slack of 1e-12 so that a split equal to the observed one always counts despite
/// rounding (as scipy.stats.permutation_test does). The pooled distance matrix is computed
/// once ((n + m)^2 doubles); each split then costs one matrix-vector product, done in blocks
/// of splits as a matrix product. An empty sample or B <= 0 gives pValue = 1.
/// Reference: Szekely & Rizzo (2004), "Testing for equal distributions in high dimension";
/// Phipson & Smyth (2010) for the +1 in the p-value.
/// Memory is (n + m)^2 doubles (the pooled distance matrix), so callers bound the clouds'
/// sizes (kMaxEnergyPoints). Polls `cancel` per row of distances and per block of permutations.
EnergyTestResult energyTest(const Eigen::Ref<const Eigen::MatrixXd>& x, const Eigen::Ref<const Eigen::MatrixXd>& y,
                            int permutations, std::uint64_t seed, const CancelToken& cancel = {});

/// The most points per cloud the comparison table gives energyTest: larger clouds are subsampled
/// (seeded, without replacement) so the distance matrix stays under (2 x 512)^2 x 8 B = 8 MiB.
inline constexpr int kMaxEnergyPoints = 512;

} // namespace kvlens::stats
