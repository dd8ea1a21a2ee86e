// SPDX-License-Identifier: GPL-3.0-or-later
// Definitions shared by every KVLens kernel (prepended to each program by the host).
//
// Floating-point contraction is off so that element-wise arithmetic rounds exactly as the
// CPU oracle's does (GCC does not contract in ISO C++ mode); GEMM-like kernels use fma()
// explicitly, and agree with the oracle to a tolerance instead.
#pragma OPENCL FP_CONTRACT OFF

#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t; // log-sum-exp and metric sums, as the CPU oracle keeps them
#else
typedef float acc_t;
#endif

#define FORMAT_FP16 0
#define FORMAT_BF16 1
#define FORMAT_FP32 2

// binary16 round-to-nearest-even by bit manipulation, the algorithm of core/common/fp16.cpp
// (no half variables: they need cl_khr_fp16). Inputs here are finite and below 65520.
inline float round_to_half(float value)
{
    const uint f = as_uint(value);
    const uint sign = f & 0x80000000u;
    const uint absf = f & 0x7fffffffu;
    uint half_bits;
    if (absf < 0x38800000u) { // subnormal half or zero
        if (absf < 0x33000000u)
            return as_float(sign);
        const uint exponent = absf >> 23;
        const uint mantissa = (absf & 0x7fffffu) | 0x800000u;
        const uint shift = 126u - exponent;
        half_bits = mantissa >> shift;
        const uint remainder = mantissa & ((1u << shift) - 1u);
        const uint halfway = 1u << (shift - 1u);
        if (remainder > halfway || (remainder == halfway && (half_bits & 1u)))
            ++half_bits;
        // Back to float: value = half_bits * 2^-24 (exact).
        return as_float(sign | as_uint((float)half_bits * 5.9604644775390625e-8f));
    }
    half_bits = (absf >> 13) - ((127u - 15u) << 10);
    const uint remainder = absf & 0x1fffu;
    if (remainder > 0x1000u || (remainder == 0x1000u && (half_bits & 1u)))
        ++half_bits;
    const uint exponent = (half_bits >> 10) & 0x1fu;
    const uint mantissa = half_bits & 0x3ffu;
    return as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Rounds a per-vector scalar to its storage format, as core/quant/norm_quantizer.cpp does:
// fp16 round-to-nearest-even saturating at 65504, bf16 round-to-nearest-even.
inline float store_scalar(float v, int format)
{
    if (format == FORMAT_FP32)
        return v;
    if (format == FORMAT_BF16) {
        const uint u = as_uint(v);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            return as_float((u | 0x400000u) & 0xffff0000u);
        const uint rounding = 0x7fffu + ((u >> 16) & 1u);
        return as_float(((u + rounding) >> 16) << 16);
    }
    if (fabs(v) > 65504.0f)
        return copysign(65504.0f, v);
    return round_to_half(v);
}
