// SPDX-License-Identifier: GPL-3.0-or-later
// Energy distance from pairwise distances; permutations reuse one pooled distance matrix.
#include "core/stats/energy.h"

#include "core/rng/rng.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvlens::stats {

namespace {

/// Splits evaluated per matrix product: enough columns for Eigen's blocked product to pay off.
constexpr Eigen::Index kSplitBlock = 64;
/// Relative slack when comparing a permuted statistic to the observed one.
constexpr double kTieSlack = 1e-12;

/// Sum over all ordered pairs (i, j) of ||a_i - b_j||.
double pairDistanceSum(const Eigen::Ref<const Eigen::MatrixXd>& a, const Eigen::Ref<const Eigen::MatrixXd>& b)
{
    double sum = 0.0;
    for (Eigen::Index i = 0; i < a.rows(); ++i)
        for (Eigen::Index j = 0; j < b.rows(); ++j)
            sum += (a.row(i) - b.row(j)).norm();
    return sum;
}

/// E from the within-x sum sXX, the x-row sum sX = sum_{i in x} sum_all D_ij and the total T:
/// sXY = sX - sXX and sYY = T - 2 sX + sXX.
double energyFromSums(double sXX, double sX, double total, double n, double m)
{
    const double sXY = sX - sXX;
    const double sYY = total - 2.0 * sX + sXX;
    return 2.0 * sXY / (n * m) - sXX / (n * n) - sYY / (m * m);
}

} // namespace

double energyDistance(const Eigen::Ref<const Eigen::MatrixXd>& x, const Eigen::Ref<const Eigen::MatrixXd>& y)
{
    assert(x.cols() == y.cols() && "energyDistance: clouds must have the same dimension");
    assert(x.allFinite() && y.allFinite() && "energyDistance: coordinates must be finite");
    if (x.rows() == 0 || y.rows() == 0)
        return 0.0;
    const auto n = static_cast<double>(x.rows());
    const auto m = static_cast<double>(y.rows());
    return 2.0 * pairDistanceSum(x, y) / (n * m) - pairDistanceSum(x, x) / (n * n) - pairDistanceSum(y, y) / (m * m);
}

EnergyTestResult energyTest(const Eigen::Ref<const Eigen::MatrixXd>& x, const Eigen::Ref<const Eigen::MatrixXd>& y,
                            int permutations, std::uint64_t seed, const CancelToken& cancel)
{
    assert(x.cols() == y.cols() && "energyTest: clouds must have the same dimension");
    assert(x.allFinite() && y.allFinite() && "energyTest: coordinates must be finite");
    EnergyTestResult out;
    out.seed = seed;
    const Eigen::Index n = x.rows();
    const Eigen::Index m = y.rows();
    if (n == 0 || m == 0)
        return out;

    const Eigen::Index total = n + m;
    Eigen::MatrixXd pooled(total, x.cols());
    pooled.topRows(n) = x;
    pooled.bottomRows(m) = y;
    Eigen::MatrixXd distances(total, total);
    for (Eigen::Index j = 0; j < total; ++j) {
        cancel.check();
        distances(j, j) = 0.0;
        for (Eigen::Index i = j + 1; i < total; ++i)
            distances(i, j) = distances(j, i) = (pooled.row(i) - pooled.row(j)).norm();
    }
    const Eigen::VectorXd rowSums = distances.rowwise().sum();
    const double sumAll = rowSums.sum();
    const auto nd = static_cast<double>(n);
    const auto md = static_cast<double>(m);

    // Every statistic, the observed one included, goes through the same product so that a
    // split equal to the observed one gives the same value up to rounding.
    auto statistics = [&](const Eigen::MatrixXd& indicators) {
        const Eigen::MatrixXd within = distances * indicators;
        Eigen::VectorXd e(indicators.cols());
        for (Eigen::Index c = 0; c < indicators.cols(); ++c) {
            const double sXX = indicators.col(c).dot(within.col(c));
            const double sX = indicators.col(c).dot(rowSums);
            e(c) = energyFromSums(sXX, sX, sumAll, nd, md);
        }
        return e;
    };

    Eigen::MatrixXd observed = Eigen::MatrixXd::Zero(total, 1);
    observed.topRows(n).setOnes();
    out.statistic = statistics(observed)(0);
    if (permutations <= 0)
        return out;
    out.permutations = permutations;

    // Slack relative to |E| and to the mean pairwise distance, the scale E is cancelled from.
    const double meanDistance = sumAll / (static_cast<double>(total) * static_cast<double>(total));
    const double threshold = out.statistic - kTieSlack * (std::abs(out.statistic) + meanDistance);
    Rng rng(EngineKind::Pcg64, seed);
    std::vector<Eigen::Index> order(static_cast<std::size_t>(total));
    std::iota(order.begin(), order.end(), Eigen::Index{0});
    long long atLeast = 0;
    Eigen::MatrixXd indicators;
    for (int done = 0; done < permutations;) {
        cancel.check();
        const auto block = static_cast<Eigen::Index>(std::min<long long>(kSplitBlock, permutations - done));
        indicators.setZero(total, block);
        for (Eigen::Index c = 0; c < block; ++c) {
            // Partial Fisher-Yates: positions 0..n-1 end up a uniform random n-subset.
            for (Eigen::Index k = 0; k < n; ++k) {
                const auto pick = k + static_cast<Eigen::Index>(rng.below(static_cast<std::uint64_t>(total - k)));
                std::swap(order[static_cast<std::size_t>(k)], order[static_cast<std::size_t>(pick)]);
                indicators(order[static_cast<std::size_t>(k)], c) = 1.0;
            }
        }
        const Eigen::VectorXd e = statistics(indicators);
        atLeast += (e.array() >= threshold).count();
        done += static_cast<int>(block);
    }
    out.pValue = static_cast<double>(atLeast + 1) / (static_cast<double>(permutations) + 1.0);
    return out;
}

} // namespace kvlens::stats
