// SPDX-License-Identifier: GPL-3.0-or-later
// The one Boost.Math error policy of the project: report through return values, never throw.
#pragma once

#include <boost/math/policies/policy.hpp>

namespace kvlens {

/// Domain, pole, overflow and evaluation errors set errno and return NaN/inf instead of
/// throwing (callers turn them into Result errors); doubles are not promoted to long
/// double, which keeps Lloyd-Max design fast at no loss the tests can see.
using MathPolicy = boost::math::policies::policy<
    boost::math::policies::domain_error<boost::math::policies::errno_on_error>,
    boost::math::policies::pole_error<boost::math::policies::errno_on_error>,
    boost::math::policies::overflow_error<boost::math::policies::errno_on_error>,
    boost::math::policies::evaluation_error<boost::math::policies::errno_on_error>,
    boost::math::policies::promote_double<false>>;

inline constexpr MathPolicy kMathPolicy{};

} // namespace kvlens
