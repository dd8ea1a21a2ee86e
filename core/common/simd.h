// SPDX-License-Identifier: GPL-3.0-or-later
// Eight-lane float and int vectors through the GCC/Clang vector extension: portable to every
// target those compilers support (lowered to SSE/AVX/NEON or scalar code), no intrinsics.
#pragma once

#include <bit>
#include <cstring>

namespace kvlens::simd {

typedef float Float8 __attribute__((vector_size(32)));
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

/// The low byte of each lane of two int vectors (values 0..255), as 16 bytes: a byte
/// shuffle, where a lane-by-lane conversion would extract every lane separately.
inline Bytes16 lowBytes(Int8 a, Int8 b)
{
    static_assert(std::endian::native == std::endian::little, "lowBytes assumes little-endian lanes");
    return __builtin_shufflevector(reinterpret_cast<Bytes32&>(a), reinterpret_cast<Bytes32&>(b), 0, 4, 8, 12, 16, 20,
                                   24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
}

} // namespace kvlens::simd
