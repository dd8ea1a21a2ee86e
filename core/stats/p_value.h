// SPDX-License-Identifier: GPL-3.0-or-later
// P-values carried in log space, and the normal tails every rank test ends in.
#pragma once

namespace kvlens::stats {

/// A p-value carried with its natural log, so that p = 1e-300 and far smaller stay
/// representable: `logP` is exact where `p = exp(logP)` has underflowed to 0.
/// A test that cannot be computed (empty or fully tied samples) reports p = 1, logP = 0.
struct PValue {
    double p = 1.0;
    double logP = 0.0;
};

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

/// Two-sided normal tail 2 Q(|z|) (= erfc(|z|/sqrt 2)), computed as normalUpper(|z|) with
/// log 2 added, so it is never above 1. Example: log(2 Q(40)) = -803.9153.
PValue normalTwoSided(double z);

} // namespace kvlens::stats
