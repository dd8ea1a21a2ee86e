// SPDX-License-Identifier: GPL-3.0-or-later
// binary16 / bfloat16 conversions by bit manipulation (no hardware or compiler intrinsics).
#include "core/common/fp16.h"

#include <bit>
#include <cstring>

namespace kvlens {

std::uint16_t floatToHalfBits(float value)
{
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    const std::uint32_t sign = (f >> 16) & 0x8000u;
    const std::uint32_t absf = f & 0x7fffffffu;

    if (absf >= 0x7f800000u) { // inf or NaN
        const bool nan = absf > 0x7f800000u;
        return static_cast<std::uint16_t>(sign | 0x7c00u | (nan ? 0x200u : 0u));
    }
    if (absf >= 0x477ff000u) // rounds to >= 65520: overflow to inf
        return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (absf < 0x38800000u) { // below the smallest normal half (2^-14): subnormal or zero
        if (absf < 0x33000000u) // below half of the smallest subnormal (2^-25): rounds to zero
            return static_cast<std::uint16_t>(sign);
        const std::uint32_t exponent = absf >> 23;
        const std::uint32_t mantissa = (absf & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - exponent; // so that the result is in units of 2^-24
        std::uint32_t half = mantissa >> shift;
        const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
        const std::uint32_t halfway = 1u << (shift - 1u);
        if (remainder > halfway || (remainder == halfway && (half & 1u)))
            ++half;
        return static_cast<std::uint16_t>(sign | half);
    }
    // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
    std::uint32_t half = ((absf >> 13) - ((127u - 15u) << 10));
    const std::uint32_t remainder = absf & 0x1fffu;
    if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u)))
        ++half; // a carry into the exponent is the correct rounding
    return static_cast<std::uint16_t>(sign | half);
}

float halfBitsToFloat(std::uint16_t bits)
{
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1fu;
    std::uint32_t mantissa = bits & 0x3ffu;
    std::uint32_t f;
    if (exponent == 0x1fu) {
        f = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        f = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        f = sign;
    } else { // subnormal: normalise
        std::uint32_t e = 113u;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            --e;
        }
        f = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
    }
    return std::bit_cast<float>(f);
}

std::uint16_t floatToBfloat16Bits(float value)
{
    const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
    if ((f & 0x7fffffffu) > 0x7f800000u)
        return static_cast<std::uint16_t>((f >> 16) | 0x40u);
    const std::uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
    return static_cast<std::uint16_t>((f + rounding) >> 16);
}

float bfloat16BitsToFloat(std::uint16_t bits)
{
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

} // namespace kvlens
