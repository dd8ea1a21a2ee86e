// SPDX-License-Identifier: GPL-3.0-or-later
// A total order on doubles for every sort, rank and merge in the statistics: NaN above +inf.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace kvlens::stats {

/// Strict weak order -inf < finite < +inf < NaN, every NaN equivalent to every other. `<` alone is
/// not an order once a NaN is present: std::sort over it is undefined behaviour, and a merge that
/// advances while `a[i] == t` never advances past a NaN (the two-sample KS walk spun forever).
/// A NaN damage value (a KL computed from a non-finite estimate) thereby ranks as the worst.
inline bool totalLess(double a, double b)
{
    if (std::isnan(a))
        return false;
    if (std::isnan(b))
        return true;
    return a < b;
}

/// Equivalence under totalLess: equal values, or two NaNs.
inline bool totalEqual(double a, double b)
{
    return a == b || (std::isnan(a) && std::isnan(b));
}

/// Sorts by totalLess (NaN last).
template <class It>
void sortTotal(It first, It last)
{
    std::sort(first, last, [](double a, double b) { return totalLess(a, b); });
}

/// How many of `values` are NaN or infinite.
inline std::size_t countNonFinite(std::span<const double> values)
{
    return static_cast<std::size_t>(
        std::count_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }));
}

} // namespace kvlens::stats
