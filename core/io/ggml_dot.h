// SPDX-License-Identifier: GPL-3.0-or-later
// What llama.cpp's CPU attention computes for a quantized K cache: the query row converted to the key
// type's vec_dot_type, and ggml's score product of a key row with it, reproduced as an oracle for tests.
#pragma once

#include "core/common/result.h"
#include "core/io/ggml_types.h"

#include <cstdint>

namespace kvlens::ggml {

/// The type ggml converts a query row to before a score product with keys of `keyType`
/// (type_traits_cpu[type].vec_dot_type in ggml/src/ggml-cpu/ggml-cpu.c): q8_0 for q8_0, q4_0, q5_0
/// and iq4_nl keys; q8_1 for q4_1 and q5_1; f16 for f16; bf16 for bf16; f32 for f32. Both CPU
/// attention paths convert this way: flash attention (ggml_compute_forward_flash_attn_ext_f16:
/// q_to_vec_dot = type_traits_cpu[k_vec_dot_type].from_float, then kq_vec_dot per key row) and the
/// plain product (ggml_compute_forward_mul_mat converts src1, the query, with the same from_float).
/// Refused for the other types, naming the type.
Result<GgmlType> vecDotType(GgmlType keyType);

/// The query row as ggml's x86 converter to `vecDotType` stores it, dequantized: `out[j]` is the value
/// the score product uses for q[j]; n a multiple of 32 for q8_0 / q8_1.
///
/// What ggml-cpu computes (ggml/src/ggml-cpu/ggml-cpu-quants.c; ggml/src/ggml-cpu/arch/x86/quants.c in
/// later trees, the same code), quantize_row_q8_0 and quantize_row_q8_1 in their `__AVX2__ || __AVX__`
/// branch, which every x86-64 build with AVX compiles (AVX-512 builds define __AVX2__ too), per block
/// of 32 values:
///   amax = max |x_j| (andnot of the sign bit, _mm256_max_ps, then a max tree)
///   d    = amax / 127.f, stored as fp16 (GGML_FP32_TO_FP16: F16C _cvtss_sh, round to nearest even)
///   id   = amax != 0 ? 127.f / amax : 0     (not 1 / d as the reference quantize_row_q8_0_ref does)
///   q_j  = _mm256_round_ps(x_j * id, _MM_ROUND_NEAREST): round half to EVEN (the reference C code's
///          roundf rounds half away from zero), converted with _mm256_cvtps_epi32 and packed to int8
///          with signed saturation; a lane whose product is not finite or beyond 2^31 (amax below
///          about 3.7e-37, where 127/amax overflows) converts to INT_MIN and saturates to -128.
///   q8_1 also stores s = fp16(d * sum_j q_j), with the float d (not its fp16 rounding) and the int32
///          sum of the codes before packing: two roundings, to float and then to fp16.
/// The value used is then q_j * fp16(d). For f16 the value is fp16(x_j) (F16C, nearest even; ggml
/// _cpu_fp32_to_fp16_row); for bf16, bf16(x_j) nearest even (AVX512-BF16 machines flush subnormal
/// inputs to zero there; not reproduced); for f32, x_j itself.
/// `blockSums`, when not null, receives n / 32 values for q8_1: each block's s as the vec_dot reads it
/// (fp16 to float). Refused: a type vecDotType never returns, n not a multiple of the block size.
Status convertQueryRow(GgmlType vecDotType, const float* q, float* out, std::int64_t n, float* blockSums = nullptr);

/// Which of llama.cpp's x86 builds the oracle reproduces. They differ only in the f16 product: AVX2
/// builds run 8-lane vectors, AVX-512 builds 16-lane ones. The quantized products run the same
/// `__AVX2__` code in both (AVX-512 VNNI only replaces the integer instructions, whose sums are exact).
enum class GgmlBuild { Avx2, Avx512 };

/// The score ggml computes for one key row (`keyBlocks`: rowBytes(keyType, n) bytes as the cache holds
/// them) and the float query row `query` (n values), converted as convertQueryRow does; the float ggml
/// returns, widened. keyType: q8_0, q4_0, q5_0, iq4_nl, q4_1, q5_1 or f16 (assert); n a multiple of 32.
///
/// The x86 vec_dot functions (ggml-cpu-quants.c, `__AVX2__` branches), per 32-value block b of key x
/// and converted query y. Let p_L (lane L = 0..7) be the exact integer sum of x_k y_k over the block's
/// values k = 4L .. 4L+3 (_mm256_maddubs_epi16 then _mm256_madd_epi16, or _mm256_dpbusd_epi32 with
/// VNNI, whose partial sums all fit; converted to float exactly), with x_k the key's signed code
/// (q8_0: q; q4_0: q - 8; q5_0: q - 16; iq4_nl: kIq4nlValues[q]) or, for q4_1 / q5_1, its unsigned
/// code q. D_b = fp32(x.d) * fp32(y.d), exact (two 11-bit significands). Then
///   vec_dot_q8_0_q8_0, vec_dot_q4_0_q8_0, vec_dot_q5_0_q8_0:
///       a_L = fma(D_b, p_L, a_L) over b in order, from a_L = 0; score = H(a)
///   vec_dot_iq4_nl_q8_0: blocks in pairs: a_L = fma(D_b, p_L, a_L) for even b, a'_L likewise for odd b,
///       score = H(a + a') (lane-wise sum first); with an odd count the last block is added after:
///       score = fma(D_last, float(sum_k x_k y_k), score) (ggml's scalar tail `sumf += d * sumi`,
///       contracted to an FMA as GCC and Clang do with FMA enabled)
///   vec_dot_q4_1_q8_1, vec_dot_q5_1_q8_1: a_L = fma(D_b, p_L, a_L); m_s += fp32(x.m) * fp32(y.s) (the
///       product is exact, so contraction does not matter), in block order from 0;
///       score = H(a) + m_s
/// where H(a) = ((a_0 + a_4) + (a_2 + a_6)) + ((a_1 + a_5) + (a_3 + a_7)) (hsum_float_8).
///   ggml_vec_dot_f16 (ggml-cpu.c; the query rounded to fp16, products of two fp16 values exact in
///       float): AVX2 builds: four 8-lane accumulators s_j, for each step of 32 values i,
///       s_j[l] = fma(x[i + 8j + l], y[i + 8j + l], s_j[l]); then s_0 += s_2, s_1 += s_3, s_0 += s_1;
///       t_l = s_0[l] + s_0[l + 4]; H16 = (t_0 + t_1) + (t_2 + t_3) (GGML_F32x8_REDUCE's hadds).
///       AVX-512 builds: four 16-lane accumulators over steps of 64, the same pairwise folding, then
///       GCC's _mm512_reduce_add_ps: u_l = s_0[l] + s_0[l + 8], v_l = u_l + u_{l+4} (l < 4),
///       H16 = (v_0 + v_2) + (v_1 + v_3). The values past the last full step are added in double:
///       score = float(double(H16) + sum of double(x_i * y_i)), in order.
/// Flash attention then multiplies the score by the softmax scale. The plain product (no flash
/// attention) may instead run llamafile's tinyBLAS (GGML_USE_LLAMAFILE) for some types and shapes; its
/// summation order is not reproduced here: this oracle follows vec_dot.
double ggmlKeyDot(GgmlType keyType, const std::uint8_t* keyBlocks, const float* query, std::int64_t n,
                  GgmlBuild build = GgmlBuild::Avx2);

} // namespace kvlens::ggml
