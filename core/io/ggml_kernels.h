// SPDX-License-Identifier: GPL-3.0-or-later
// Internal to core/io's ggml files: the vector dequantization kernels (ggml_kernels_x86.cpp) and the
// byte helpers the scalar and vector code share, so both read a block the same way.
#pragma once

#include "core/common/fp16.h"

#include <bit>
#include <cstdint>

namespace kvlens::ggml::detail {

/// Dequantizes n values (a multiple of the type's block size) from src into dst.
using DequantKernel = void (*)(const std::uint8_t* src, float* dst, std::int64_t n);

/// The vector kernels of one instruction set, for the hot types; null where a type has none.
struct DequantKernels {
    DequantKernel f16 = nullptr;
    DequantKernel bf16 = nullptr;
    DequantKernel q8_0 = nullptr;
    DequantKernel q4K = nullptr;
    DequantKernel q6K = nullptr;
};

/// The AVX2 (with FMA and F16C) and AVX-512F kernels; empty tables on a non-x86 build.
const DequantKernels& avx2Kernels();
const DequantKernels& avx512Kernels();

/// Whether the running CPU (and the OS's saved register state) supports them.
bool cpuRunsAvx2();
bool cpuRunsAvx512();

inline std::uint16_t loadU16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

/// binary16 to float as F16C's vcvtph2ps converts it: exact, and a NaN comes out quiet (bit 22 set,
/// payload kept), which a plain bit conversion would not do for a signalling NaN.
inline float halfToFloatAsF16c(std::uint16_t bits)
{
    const float f = halfBitsToFloat(bits);
    if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0)
        return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 0x00400000u);
    return f;
}

/// ggml's get_scale_min_k4: the 6-bit scale and minimum of sub-block j (0..7) of a q4_K / q5_K block.
inline void scaleMinK4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m)
{
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = static_cast<std::uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

} // namespace kvlens::ggml::detail
