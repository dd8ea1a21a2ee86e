// SPDX-License-Identifier: GPL-3.0-or-later
// Dequantizing rows of ggml's weight types: the scalar code (ggml's dequantize_row_* step for step) and
// the run-time choice of the AVX2 / AVX-512 kernels, which must give the same bits.
#include "core/io/ggml_kernels.h"
#include "core/io/ggml_types.h"

#include <cassert>
#include <cstring>

namespace kvlens::ggml {

namespace {

using detail::loadU16;

void scalarF16(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i)
        dst[i] = detail::halfToFloatAsF16c(loadU16(src + 2 * i));
}

void scalarBf16(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t i = 0; i < n; ++i)
        dst[i] = bfloat16BitsToFloat(loadU16(src + 2 * i));
}

void scalarQ8_0(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 32; ++b, src += 34, dst += 32) {
        const float d = halfBitsToFloat(loadU16(src));
        for (int j = 0; j < 32; ++j)
            dst[j] = static_cast<float>(static_cast<std::int8_t>(src[2 + j])) * d;
    }
}

/// q4_0 and iq4_nl share the layout (fp16 d, 16 bytes of nibbles); `levels` maps a nibble to its code.
template <class Level>
void scalarNibbles(const std::uint8_t* src, float* dst, std::int64_t n, Level level)
{
    for (std::int64_t b = 0; b < n / 32; ++b, src += 18, dst += 32) {
        const float d = halfBitsToFloat(loadU16(src));
        for (int j = 0; j < 16; ++j) {
            dst[j] = static_cast<float>(level(src[2 + j] & 0x0f)) * d;
            dst[j + 16] = static_cast<float>(level(src[2 + j] >> 4)) * d;
        }
    }
}

/// q4_1, q5_0, q5_1: `hasMin` adds the fp16 minimum after the product; `fifth` reads the qh word.
template <bool HasMin, bool Fifth>
void scalarSmall(const std::uint8_t* src, float* dst, std::int64_t n)
{
    constexpr int kBytes = 2 + (HasMin ? 2 : 0) + (Fifth ? 4 : 0) + 16;
    constexpr int kOffset = HasMin ? 0 : (Fifth ? 16 : 8);
    for (std::int64_t b = 0; b < n / 32; ++b, src += kBytes, dst += 32) {
        const float d = halfBitsToFloat(loadU16(src));
        const float m = HasMin ? halfBitsToFloat(loadU16(src + 2)) : 0.0f;
        const std::uint8_t* h = src + (HasMin ? 4 : 2);
        std::uint32_t qh = 0;
        if constexpr (Fifth)
            std::memcpy(&qh, h, 4); // little-endian, as ggml's memcpy reads it on x86
        const std::uint8_t* qs = h + (Fifth ? 4 : 0);
        for (int j = 0; j < 16; ++j) {
            const int q0 = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
            const int q1 = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
            const float p0 = static_cast<float>(q0 - kOffset) * d;
            const float p1 = static_cast<float>(q1 - kOffset) * d;
            if constexpr (HasMin) {
                dst[j] = p0 + m;
                dst[j + 16] = p1 + m;
            } else { // no "+ 0": it would turn a -0 product into +0 where ggml keeps -0
                dst[j] = p0;
                dst[j + 16] = p1;
            }
        }
    }
}

/// q4_K and q5_K (dequantize_row_q4_K / _q5_K): 4 chunks of 64 values, low nibbles then high nibbles.
template <bool Fifth>
void scalarQ45K(const std::uint8_t* src, float* dst, std::int64_t n)
{
    constexpr int kBytes = Fifth ? 176 : 144;
    for (std::int64_t b = 0; b < n / 256; ++b, src += kBytes) {
        const float d = halfBitsToFloat(loadU16(src));
        const float dmin = halfBitsToFloat(loadU16(src + 2));
        const std::uint8_t* scales = src + 4;
        const std::uint8_t* qh = src + 16;
        const std::uint8_t* q = src + (Fifth ? 48 : 16);
        for (int c = 0; c < 4; ++c, q += 32) {
            std::uint8_t sc = 0, m = 0;
            detail::scaleMinK4(2 * c, scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            detail::scaleMinK4(2 * c + 1, scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            const unsigned lowBit = 1u << (2 * c), highBit = 2u << (2 * c);
            for (int l = 0; l < 32; ++l) {
                const int hi = Fifth && (qh[l] & lowBit) ? 16 : 0;
                *dst++ = d1 * static_cast<float>((q[l] & 0x0f) + hi) - m1;
            }
            for (int l = 0; l < 32; ++l) {
                const int hi = Fifth && (qh[l] & highBit) ? 16 : 0;
                *dst++ = d2 * static_cast<float>((q[l] >> 4) + hi) - m2;
            }
        }
    }
}

void scalarQ6K(const std::uint8_t* src, float* dst, std::int64_t n)
{
    for (std::int64_t b = 0; b < n / 256; ++b, src += 210) {
        const float d = halfBitsToFloat(loadU16(src + 208));
        const std::uint8_t* ql = src;
        const std::uint8_t* qh = src + 128;
        const auto* sc = reinterpret_cast<const std::int8_t*>(src + 192);
        for (int half = 0; half < 2; ++half, dst += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
                dst[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                dst[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                dst[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

detail::DequantKernel scalarKernel(GgmlType type)
{
    switch (type) {
    case GgmlType::F32: return [](const std::uint8_t* s, float* d, std::int64_t n) { std::memcpy(d, s, 4 * std::size_t(n)); };
    case GgmlType::F16: return scalarF16;
    case GgmlType::BF16: return scalarBf16;
    case GgmlType::Q8_0: return scalarQ8_0;
    case GgmlType::Q4_0: return [](const std::uint8_t* s, float* d, std::int64_t n) {
            scalarNibbles(s, d, n, [](int q) { return q - 8; });
        };
    case GgmlType::IQ4_NL: return [](const std::uint8_t* s, float* d, std::int64_t n) {
            scalarNibbles(s, d, n, [](int q) { return int(kIq4nlValues[static_cast<std::size_t>(q)]); });
        };
    case GgmlType::Q4_1: return scalarSmall<true, false>;
    case GgmlType::Q5_0: return scalarSmall<false, true>;
    case GgmlType::Q5_1: return scalarSmall<true, true>;
    case GgmlType::Q4_K: return scalarQ45K<false>;
    case GgmlType::Q5_K: return scalarQ45K<true>;
    case GgmlType::Q6_K: return scalarQ6K;
    default: return nullptr;
    }
}

detail::DequantKernel vectorKernel(const detail::DequantKernels& k, GgmlType type)
{
    switch (type) {
    case GgmlType::F16: return k.f16;
    case GgmlType::BF16: return k.bf16;
    case GgmlType::Q8_0: return k.q8_0;
    case GgmlType::Q4_K: return k.q4K;
    case GgmlType::Q6_K: return k.q6K;
    default: return nullptr;
    }
}

} // namespace

std::string_view simdLevelName(SimdLevel level)
{
    switch (level) {
    case SimdLevel::Scalar: return "scalar";
    case SimdLevel::Avx2: return "avx2";
    case SimdLevel::Avx512: return "avx512";
    }
    return "scalar";
}

bool simdLevelSupported(SimdLevel level)
{
    switch (level) {
    case SimdLevel::Scalar: return true;
    case SimdLevel::Avx2: return detail::cpuRunsAvx2();
    case SimdLevel::Avx512: return detail::cpuRunsAvx2() && detail::cpuRunsAvx512();
    }
    return false;
}

SimdLevel bestSimdLevel()
{
    static const SimdLevel best = simdLevelSupported(SimdLevel::Avx512) ? SimdLevel::Avx512
        : simdLevelSupported(SimdLevel::Avx2)                          ? SimdLevel::Avx2
                                                                        : SimdLevel::Scalar;
    return best;
}

void dequantizeRowAt(SimdLevel level, GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n)
{
    assert(ggmlTraits(type).dequantizable && "dequantizeRow: a type without a dequantizer");
    assert(n >= 0 && n % ggmlTraits(type).blockSize == 0 && "dequantizeRow: n is not a multiple of the block size");
    assert(simdLevelSupported(level) && "dequantizeRowAt: a level this CPU does not run");
    detail::DequantKernel kernel = nullptr;
    if (level == SimdLevel::Avx512)
        kernel = vectorKernel(detail::avx512Kernels(), type);
    else if (level == SimdLevel::Avx2)
        kernel = vectorKernel(detail::avx2Kernels(), type);
    if (!kernel)
        kernel = scalarKernel(type);
    if (kernel && n > 0)
        kernel(src, dst, n);
}

void dequantizeRow(GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n)
{
    dequantizeRowAt(bestSimdLevel(), type, src, dst, n);
}

} // namespace kvlens::ggml
