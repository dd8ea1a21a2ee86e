// SPDX-License-Identifier: GPL-3.0-or-later
// P-values carried in log space, and the normal tails every rank test ends in.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvlens::stats {

/// How a p-value was obtained (the `p_method` column of the tables).
enum class PMethod {
    Asymptotic, ///< the test's normal (or Kolmogorov) approximation
    Exact,      ///< the exact permutation tail (at complete separation, a closed form)
    Floor,      ///< the approximation fell below the smallest p the test can produce: that p is reported
};
std::string_view pMethodName(PMethod m); ///< "asymptotic", "exact", "floor"

/// A p-value carried with its natural log, so that p = 1e-300 and far smaller stay
/// representable: `logP` is exact where `p = exp(logP)` has underflowed to 0.
/// A test that cannot be computed (empty or fully tied samples) reports p = 1, logP = 0.
struct PValue {
    double p = 1.0;
    double logP = 0.0;
    PMethod method = PMethod::Asymptotic;
};

/// p for people, with `digits` significant digits ("0.0032", "1.3e-24"), or "< 1e-300" below
/// what a double holds: that far out the tails' approximations bound p but give no digit of it
/// (the exact value stays in the tables' log10 columns). Every table, view and report prints p so.
std::string formatPValue(const PValue& p, int digits = 2);

/// PValue from its log: p = exp(logP), which underflows to 0 below logP ~ -745 while
/// logP stays exact. logP must be <= 0 and not NaN.
PValue pFromLog(double logP);

/// Upper normal tail Q(z) = P(Z > z), Z ~ N(0, 1), any finite z.
/// For z < 10 through Boost.Math (`cdf(complement(normal, z))`: no 1 - cdf cancellation, so
/// Q keeps its relative precision down to Q(10) = 7.6e-24); for z >= 10 in log space as
/// log Q(z) = -z^2/2 - log sqrt(2 pi) + log R(z), with Mills' ratio R(z) from Laplace's
/// continued fraction R(z) = 1/(z + 1/(z + 2/(z + 3/(z + ...)))) (Abramowitz & Stegun
/// 26.2.14), 40 terms evaluated backwards: full double precision for z >= 8.
/// Example: log Q(40) = -804.6084.
PValue normalUpper(double z);

/// log(2 / C(n1 + n2, n1)): the exact two-sided tail of the Mann-Whitney and two-sample KS tests
/// at complete separation (every x below every y, or above), and the smallest p either can
/// produce. Example: n1 = n2 = 5 gives 2/252.
double logSeparationTail(std::size_t n1, std::size_t n2);

/// Below this p (log) a rank test's normal tail is replaced by the exact tail where it can be
/// counted: the approximation's relative error grows without bound in the far tail (at W = 0
/// with 512 pairs it says 10^-84.9 where the exact tail is 10^-153.8), while above it the
/// approximation is what scipy's 'asymptotic' methods report.
inline constexpr double kLogExactBelow = -13.815510557964274; // log(1e-6)

/// `p`, unless it lies below exp(logFloor), the smallest p the test can produce: then that
/// floor, marked PMethod::Floor (an approximation far outside its validity is never printed).
PValue atLeast(PValue p, double logFloor);

/// Two-sided normal tail 2 Q(|z|) (= erfc(|z|/sqrt 2)), computed as normalUpper(|z|) with
/// log 2 added, so it is never above 1. Example: log(2 Q(40)) = -803.9153.
PValue normalTwoSided(double z);

} // namespace kvlens::stats
