// SPDX-License-Identifier: GPL-3.0-or-later
// IEEE 754 binary16 and bfloat16 rounding, done in the project so every compiler agrees bit for bit.
#pragma once

#include <cstdint>

namespace kvlens {

/// float -> binary16 bits, round to nearest even; overflow gives +-inf, NaN stays NaN.
std::uint16_t floatToHalfBits(float value);
/// binary16 bits -> float (exact).
float halfBitsToFloat(std::uint16_t bits);
/// Rounds a float to the nearest binary16 value (as float).
inline float roundToHalf(float value) { return halfBitsToFloat(floatToHalfBits(value)); }
/// Largest finite binary16 value.
inline constexpr float kHalfMax = 65504.0f;

/// float -> bfloat16 bits, round to nearest even; NaN stays NaN.
std::uint16_t floatToBfloat16Bits(float value);
/// bfloat16 bits -> float (exact).
float bfloat16BitsToFloat(std::uint16_t bits);
inline float roundToBfloat16(float value) { return bfloat16BitsToFloat(floatToBfloat16Bits(value)); }

} // namespace kvlens
