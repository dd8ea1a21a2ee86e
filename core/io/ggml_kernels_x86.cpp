// SPDX-License-Identifier: GPL-3.0-or-later
// AVX2 and AVX-512F kernels for dequantizing the hot ggml types (f16, bf16, q8_0, q4_K, q6_K), compiled
// per function with target attributes so that the build's -march decides nothing: ggml_dequant.cpp picks
// them at run time from what the CPU reports.
//
// Each value is the same exact product (and single rounding) as the scalar code's, so the kernels agree
// with it bit for bit whatever their order (tests/core/tst_ggml_types.cpp checks every level this CPU runs).
#include "core/io/ggml_kernels.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define KVLENS_GGML_X86 1
#endif

namespace kvlens::ggml::detail {

#ifdef KVLENS_GGML_X86

namespace {

#define KVLENS_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KVLENS_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

/// The two 16-byte halves of 32 nibbles: low nibbles (values 0..15 of a run) and high nibbles.
KVLENS_AVX2 inline void splitNibbles(__m128i bytes, __m128i& low, __m128i& high)
{
    const __m128i mask = _mm_set1_epi8(0x0f);
    low = _mm_and_si128(bytes, mask);
    high = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
}

/// q6_K: the 16 six-bit codes minus 32 from 16 bytes of ql nibbles and two qh bits each, as int8.
/// `shift` moves qh's pair into bits 4..5 (16-bit shifts spill bits only outside the 0x30 mask).
KVLENS_AVX2 inline __m128i q6Codes(__m128i nibbles, __m128i qh, int pair)
{
    __m128i hi;
    switch (pair) {
    case 0: hi = _mm_slli_epi16(qh, 4); break;
    case 1: hi = _mm_slli_epi16(qh, 2); break;
    case 2: hi = qh; break;
    default: hi = _mm_srli_epi16(qh, 2); break;
    }
    hi = _mm_and_si128(hi, _mm_set1_epi8(0x30));
    return _mm_sub_epi8(_mm_or_si128(nibbles, hi), _mm_set1_epi8(32));
}

// --- AVX2: 8 floats a step ----------------------------------------------------------------------------

KVLENS_AVX2 void storeU8x16(float* dst, __m128i codes, __m256 scale, __m256 min)
{
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(codes));
    const __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(codes, 8)));
    _mm256_storeu_ps(dst, _mm256_sub_ps(_mm256_mul_ps(scale, a), min));
    _mm256_storeu_ps(dst + 8, _mm256_sub_ps(_mm256_mul_ps(scale, b), min));
}

KVLENS_AVX2 void storeI8x16(float* dst, __m128i codes, __m256 scale)
{
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes));
    const __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(codes, 8)));
    _mm256_storeu_ps(dst, _mm256_mul_ps(a, scale));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(b, scale));
}

KVLENS_AVX2 void avx2F16(const std::uint8_t* src, float* dst, std::int64_t n)
{
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
    for (; i < n; ++i)
        dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(loadU16(src + 2 * i))));
}

KVLENS_AVX2 void avx2Bf16(const std::uint8_t* src, float* dst, std::int64_t n)
{
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
    for (; i < n; ++i)
        dst[i] = bfloat16BitsToFloat(loadU16(src + 2 * i));
}

KVLENS_AVX2 void avx2Q8_0(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 32; ++b, src += 34, dst += 32) {
        const __m256 d = _mm256_set1_ps(halfBitsToFloat(loadU16(src)));
        storeI8x16(dst, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2)), d);
        storeI8x16(dst + 16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 18)), d);
    }
}

KVLENS_AVX2 void avx2Q4K(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 256; ++b, src += 144) {
        const float d = halfBitsToFloat(loadU16(src));
        const float dmin = halfBitsToFloat(loadU16(src + 2));
        const std::uint8_t* q = src + 16;
        for (int c = 0; c < 4; ++c, q += 32, dst += 64) {
            std::uint8_t sc = 0, m = 0;
            scaleMinK4(2 * c, src + 4, sc, m);
            const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(dmin * m);
            scaleMinK4(2 * c + 1, src + 4, sc, m);
            const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(dmin * m);
            for (int h = 0; h < 2; ++h) {
                __m128i low, high;
                splitNibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * h)), low, high);
                storeU8x16(dst + 16 * h, low, d1, m1);
                storeU8x16(dst + 32 + 16 * h, high, d2, m2);
            }
        }
    }
}

KVLENS_AVX2 void avx2Q6K(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 256; ++b, src += 210) {
        const float d = halfBitsToFloat(loadU16(src + 208));
        const auto* sc = reinterpret_cast<const std::int8_t*>(src + 192);
        const std::uint8_t* ql = src;
        const std::uint8_t* qh = src + 128;
        for (int half = 0; half < 2; ++half, dst += 128, ql += 64, qh += 32, sc += 8) {
            for (int is = 0; is < 2; ++is) {
                const int l = 16 * is;
                const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + l));
                __m128i lowA, highA, lowB, highB;
                splitNibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l)), lowA, highA);
                splitNibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l + 32)), lowB, highB);
                storeI8x16(dst + l, q6Codes(lowA, h, 0), _mm256_set1_ps(d * float(sc[is])));
                storeI8x16(dst + l + 32, q6Codes(lowB, h, 1), _mm256_set1_ps(d * float(sc[is + 2])));
                storeI8x16(dst + l + 64, q6Codes(highA, h, 2), _mm256_set1_ps(d * float(sc[is + 4])));
                storeI8x16(dst + l + 96, q6Codes(highB, h, 3), _mm256_set1_ps(d * float(sc[is + 6])));
            }
        }
    }
}

// --- AVX-512F: 16 floats a step -----------------------------------------------------------------------

KVLENS_AVX512 void storeU8x16Wide(float* dst, __m128i codes, __m512 scale, __m512 min)
{
    const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(codes));
    _mm512_storeu_ps(dst, _mm512_sub_ps(_mm512_mul_ps(scale, a), min));
}

KVLENS_AVX512 void storeI8x16Wide(float* dst, __m128i codes, __m512 scale)
{
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), scale));
}

KVLENS_AVX512 void avx512F16(const std::uint8_t* src, float* dst, std::int64_t n)
{
    std::int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i))));
    for (; i < n; ++i)
        dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(loadU16(src + 2 * i))));
}

KVLENS_AVX512 void avx512Bf16(const std::uint8_t* src, float* dst, std::int64_t n)
{
    std::int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
    }
    for (; i < n; ++i)
        dst[i] = bfloat16BitsToFloat(loadU16(src + 2 * i));
}

KVLENS_AVX512 void avx512Q8_0(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 32; ++b, src += 34, dst += 32) {
        const __m512 d = _mm512_set1_ps(halfBitsToFloat(loadU16(src)));
        storeI8x16Wide(dst, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2)), d);
        storeI8x16Wide(dst + 16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 18)), d);
    }
}

KVLENS_AVX512 void avx512Q4K(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 256; ++b, src += 144) {
        const float d = halfBitsToFloat(loadU16(src));
        const float dmin = halfBitsToFloat(loadU16(src + 2));
        const std::uint8_t* q = src + 16;
        for (int c = 0; c < 4; ++c, q += 32, dst += 64) {
            std::uint8_t sc = 0, m = 0;
            scaleMinK4(2 * c, src + 4, sc, m);
            const __m512 d1 = _mm512_set1_ps(d * sc), m1 = _mm512_set1_ps(dmin * m);
            scaleMinK4(2 * c + 1, src + 4, sc, m);
            const __m512 d2 = _mm512_set1_ps(d * sc), m2 = _mm512_set1_ps(dmin * m);
            for (int h = 0; h < 2; ++h) {
                __m128i low, high;
                splitNibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * h)), low, high);
                storeU8x16Wide(dst + 16 * h, low, d1, m1);
                storeU8x16Wide(dst + 32 + 16 * h, high, d2, m2);
            }
        }
    }
}

KVLENS_AVX512 void avx512Q6K(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 256; ++b, src += 210) {
        const float d = halfBitsToFloat(loadU16(src + 208));
        const auto* sc = reinterpret_cast<const std::int8_t*>(src + 192);
        const std::uint8_t* ql = src;
        const std::uint8_t* qh = src + 128;
        for (int half = 0; half < 2; ++half, dst += 128, ql += 64, qh += 32, sc += 8) {
            for (int is = 0; is < 2; ++is) {
                const int l = 16 * is;
                const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + l));
                __m128i lowA, highA, lowB, highB;
                splitNibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l)), lowA, highA);
                splitNibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l + 32)), lowB, highB);
                storeI8x16Wide(dst + l, q6Codes(lowA, h, 0), _mm512_set1_ps(d * float(sc[is])));
                storeI8x16Wide(dst + l + 32, q6Codes(lowB, h, 1), _mm512_set1_ps(d * float(sc[is + 2])));
                storeI8x16Wide(dst + l + 64, q6Codes(highA, h, 2), _mm512_set1_ps(d * float(sc[is + 4])));
                storeI8x16Wide(dst + l + 96, q6Codes(highB, h, 3), _mm512_set1_ps(d * float(sc[is + 6])));
            }
        }
    }
}

#undef KVLENS_AVX2
#undef KVLENS_AVX512

} // namespace

const DequantKernels& avx2Kernels()
{
    static const DequantKernels k{avx2F16, avx2Bf16, avx2Q8_0, avx2Q4K, avx2Q6K};
    return k;
}

const DequantKernels& avx512Kernels()
{
    static const DequantKernels k{avx512F16, avx512Bf16, avx512Q8_0, avx512Q4K, avx512Q6K};
    return k;
}

bool cpuRunsAvx2()
{
    // libgcc's and compiler-rt's cpu model checks XGETBV as well: a feature counts only when the OS
    // saves its registers. Clang 14 has no "f16c" there, so F16C is read from cpuid leaf 1 (ECX bit
    // 29); it uses the same YMM state AVX2 needs.
    static const bool ok = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        const bool f16c = __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
        return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return ok;
}

bool cpuRunsAvx512()
{
    static const bool ok = __builtin_cpu_supports("avx512f");
    return ok;
}

#else

const DequantKernels& avx2Kernels()
{
    static const DequantKernels k{};
    return k;
}

const DequantKernels& avx512Kernels()
{
    static const DequantKernels k{};
    return k;
}

bool cpuRunsAvx2() { return false; }
bool cpuRunsAvx512() { return false; }

#endif

} // namespace kvlens::ggml::detail
