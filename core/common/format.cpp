// SPDX-License-Identifier: GPL-3.0-or-later
// Shortest round-trip number formatting.
#include "core/common/format.h"

#include <charconv>
#include <cmath>

namespace kvlens {

namespace {

template <class T>
std::string shortest(T value)
{
    if (std::isnan(value))
        return "nan";
    if (std::isinf(value))
        return value > 0 ? "inf" : "-inf";
    // Whole numbers print as integers (100000, not 1e+05): friendlier in messages and tables.
    if (value == std::floor(value) && std::abs(value) < static_cast<T>(1e15))
        return std::to_string(static_cast<long long>(value));
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}

} // namespace

std::string formatNumber(double value)
{
    return shortest(value);
}

std::string formatNumber(float value)
{
    return shortest(value);
}

} // namespace kvlens
