// SPDX-License-Identifier: GPL-3.0-or-later
// Normal tails in log space: Boost.Math complement() in the body, Mills' ratio in the far tail.
#include "core/stats/p_value.h"

#include <cstdio>

#include "core/common/math_policy.h"

#include <boost/math/distributions/normal.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

namespace kvlens::stats {

namespace {

/// Above this z the tail is evaluated in log space (Q(10) = 7.6e-24, far from underflow,
/// so both branches agree to ~1e-14 in log Q where they meet).
constexpr double kLogTailFrom = 10.0;
/// Terms of Laplace's continued fraction; 40 are exact to rounding for z >= 8.
constexpr int kMillsTerms = 40;

/// log Q(z) for z >= kLogTailFrom, through Mills' ratio.
double logUpperTailFar(double z)
{
    double t = z;
    for (int k = kMillsTerms; k >= 1; --k)
        t = z + k / t;
    // R(z) = 1 / t.
    return -0.5 * z * z - 0.5 * std::log(2.0 * std::numbers::pi) - std::log(t);
}

/// Q(z) for z < kLogTailFrom through Boost.Math's complement (no 1 - cdf cancellation).
double upperTail(double z)
{
    const boost::math::normal_distribution<double, MathPolicy> standard(0.0, 1.0);
    return boost::math::cdf(boost::math::complement(standard, z));
}

} // namespace

PValue pFromLog(double logP)
{
    assert(!std::isnan(logP) && logP <= 0.0 && "pFromLog: logP must be a number <= 0");
    return {std::exp(logP), logP};
}

PValue normalUpper(double z)
{
    assert(std::isfinite(z) && "normalUpper: z must be finite");
    if (z >= kLogTailFrom)
        return pFromLog(logUpperTailFar(z));
    if (z < -kLogTailFrom) {
        // Q(z) = 1 - Q(-z) with Q(-z) < 7.6e-24: log1p keeps the tiny log exact.
        const PValue mirror = normalUpper(-z);
        return {1.0 - mirror.p, std::log1p(-mirror.p)};
    }
    const double q = upperTail(z);
    return {q, std::log(q)};
}

PValue normalTwoSided(double z)
{
    assert(std::isfinite(z) && "normalTwoSided: z must be finite");
    const double a = std::abs(z);
    if (a >= kLogTailFrom)
        return pFromLog(std::numbers::ln2 + logUpperTailFar(a));
    // Doubling is exact in floating point; clamp only guards the z = 0 rounding of Q.
    const double p = std::min(1.0, 2.0 * upperTail(a));
    return {p, std::log(p)};
}

std::string_view pMethodName(PMethod m)
{
    switch (m) {
    case PMethod::Asymptotic: return "asymptotic";
    case PMethod::Exact: return "exact";
    case PMethod::Floor: return "floor";
    }
    return "asymptotic";
}

double logSeparationTail(std::size_t n1, std::size_t n2)
{
    const double a = static_cast<double>(n1), b = static_cast<double>(n2);
    const double logChoose = std::lgamma(a + b + 1.0) - std::lgamma(a + 1.0) - std::lgamma(b + 1.0);
    return std::min(0.0, std::log(2.0) - logChoose);
}

PValue atLeast(PValue p, double logFloor)
{
    if (!(p.logP < logFloor))
        return p;
    PValue floor = pFromLog(logFloor);
    floor.method = PMethod::Floor;
    return floor;
}

std::string formatPValue(const PValue& p, int digits)
{
    if (!(p.p >= 1e-300))
        return "< 1e-300";
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, p.p);
    return buffer;
}

} // namespace kvlens::stats
