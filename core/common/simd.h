// SPDX-License-Identifier: GPL-3.0-or-later
// Eight-lane float and int vectors through the GCC/Clang vector extension: portable to every
// target those compilers support (lowered to SSE/AVX/NEON or scalar code), no intrinsics.
#pragma once

#include <bit>
#include <cstring>

namespace kvlens::simd {

typedef float Float8 __attribute__((vector_size(32)));
typedef double Double8 __attribute__((vector_size(64)));
typedef int Int8 __attribute__((vector_size(32)));
typedef unsigned char Bytes32 __attribute__((vector_size(32)));
typedef unsigned char Bytes16 __attribute__((vector_size(16)));

inline Float8 load(const float* p)
{
    Float8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline void store(float* p, Float8 v)
{
    std::memcpy(p, &v, sizeof v);
}

inline Float8 broadcast(float x)
{
    return Float8{x, x, x, x, x, x, x, x};
}

inline float sum(Float8 v)
{
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/// Lanes widened to double.
inline Double8 widen(Float8 v)
{
    return __builtin_convertvector(v, Double8);
}

inline Double8 broadcastDouble(double x)
{
    return Double8{x, x, x, x, x, x, x, x};
}

/// The lanes summed in a fixed tree order (the same whatever the thread count).
inline double sum(Double8 v)
{
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/// e^x lane by lane (Cephes' single-precision polynomial after a Cody-Waite reduction): within
/// 2 ulp of the correctly rounded value for x in [-87.33, 88]; 0 below (where e^x < 1.2e-38),
/// +inf above, NaN for NaN. Branch-free, so it vectorizes where std::exp is a call per element.
inline Float8 exp(Float8 x)
{
    const Float8 hi = broadcast(88.0f), lo = broadcast(-87.3365478515625f);
    const Float8 xc = x > hi ? hi : (x < lo ? lo : x); // NaN lanes stay NaN until the end
    const Float8 fx = xc * broadcast(1.44269504088896341f) + broadcast(0.5f);
    Int8 n = __builtin_convertvector(fx, Int8);
    const Float8 nf0 = __builtin_convertvector(n, Float8);
    n = nf0 > fx ? n - 1 : n; // floor
    const Float8 nf = __builtin_convertvector(n, Float8);
    Float8 r = xc - nf * broadcast(0.693359375f);
    r = r - nf * broadcast(-2.12194440e-4f);
    Float8 y = broadcast(1.9875691500e-4f);
    y = y * r + broadcast(1.3981999507e-3f);
    y = y * r + broadcast(8.3334519073e-3f);
    y = y * r + broadcast(4.1665795894e-2f);
    y = y * r + broadcast(1.6666665459e-1f);
    y = y * r + broadcast(5.0000001201e-1f);
    y = y * (r * r) + r + broadcast(1.0f);
    const Int8 bits = (n + 127) << 23;
    Float8 scale;
    std::memcpy(&scale, &bits, sizeof scale);
    Float8 out = y * scale;
    out = x < lo ? broadcast(0.0f) : out;
    out = x > hi ? broadcast(__builtin_inff()) : out;
    return x != x ? x : out;
}

/// The low byte of each lane of two int vectors (values 0..255), as 16 bytes: a byte
/// shuffle, where a lane-by-lane conversion would extract every lane separately.
inline Bytes16 lowBytes(Int8 a, Int8 b)
{
    static_assert(std::endian::native == std::endian::little, "lowBytes assumes little-endian lanes");
    return __builtin_shufflevector(reinterpret_cast<Bytes32&>(a), reinterpret_cast<Bytes32&>(b), 0, 4, 8, 12, 16, 20,
                                   24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
}

} // namespace kvlens::simd
