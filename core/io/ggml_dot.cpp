// SPDX-License-Identifier: GPL-3.0-or-later
// The query conversion and the key-row score product of llama.cpp's x86 CPU attention, reproduced step
// for step (formulas and sources in ggml_dot.h). Built with -ffp-contract=off (core/io/io.cmake): the
// FMAs ggml's vector code executes are written out as std::fma, and no other operation may be fused.
#include "core/io/ggml_dot.h"

#include "core/io/ggml_kernels.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvlens::ggml {

namespace {

/// One 32-value block of a query row as quantize_row_q8_0 / q8_1 (x86) store it.
struct QueryBlock {
    std::array<std::int8_t, 32> q{};
    std::uint16_t d = 0; ///< fp16 bits
    std::uint16_t s = 0; ///< fp16 bits of d * sum(q), q8_1 only
};

/// _mm256_cvtps_epi32 of a value already rounded: out of int32's range (or NaN) gives INT_MIN.
std::int32_t convertLikeCvtps(float v)
{
    if (!(std::fabs(v) < 2147483648.0f))
        return INT32_MIN;
    return static_cast<std::int32_t>(v);
}

QueryBlock quantizeQueryBlock(const float* x)
{
    QueryBlock b;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j)
        amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    b.d = floatToHalfBits(d);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    std::uint32_t sum = 0; // int32 lanes added with wrap-around, as _mm256_add_epi32 does
    for (int j = 0; j < 32; ++j) {
        const float product = x[j] * id;
        const std::int32_t code = convertLikeCvtps(std::nearbyint(product)); // round half to even
        sum += static_cast<std::uint32_t>(code);
        b.q[static_cast<std::size_t>(j)] = static_cast<std::int8_t>(std::clamp(code, -128, 127)); // packs: saturate
    }
    const float sumD = d * static_cast<float>(static_cast<std::int32_t>(sum));
    b.s = floatToHalfBits(sumD);
    return b;
}

std::vector<QueryBlock> quantizeQuery(const float* q, std::int64_t n)
{
    std::vector<QueryBlock> blocks(static_cast<std::size_t>(n / 32));
    for (std::size_t b = 0; b < blocks.size(); ++b)
        blocks[b] = quantizeQueryBlock(q + 32 * b);
    return blocks;
}

/// A key block's 32 integer codes as the vec_dot multiplies them, its scale d and (q4_1, q5_1) minimum m.
struct KeyBlock {
    std::array<int, 32> code{};
    float d = 0.0f;
    float m = 0.0f;
};

KeyBlock decodeKeyBlock(GgmlType type, const std::uint8_t* b)
{
    KeyBlock k;
    k.d = halfBitsToFloat(detail::loadU16(b));
    if (type == GgmlType::Q8_0) {
        for (int j = 0; j < 32; ++j)
            k.code[static_cast<std::size_t>(j)] = static_cast<std::int8_t>(b[2 + j]);
        return k;
    }
    const bool affine = type == GgmlType::Q4_1 || type == GgmlType::Q5_1;
    const bool fifth = type == GgmlType::Q5_0 || type == GgmlType::Q5_1;
    if (affine)
        k.m = halfBitsToFloat(detail::loadU16(b + 2));
    const std::uint8_t* h = b + (affine ? 4 : 2);
    std::uint32_t qh = 0;
    if (fifth)
        std::memcpy(&qh, h, 4);
    const std::uint8_t* qs = h + (fifth ? 4 : 0);
    for (int j = 0; j < 32; ++j) {
        const int nibble = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
        const int q = nibble | (fifth ? static_cast<int>((qh >> j) & 1u) << 4 : 0);
        int& c = k.code[static_cast<std::size_t>(j)];
        if (type == GgmlType::IQ4_NL)
            c = kIq4nlValues[static_cast<std::size_t>(q)];
        else
            c = affine ? q : q - (fifth ? 16 : 8);
    }
    return k;
}

/// The eight lane sums p_L = sum of code_k * q_k over k = 4L .. 4L+3, exact, as floats.
std::array<float, 8> laneProducts(const KeyBlock& key, const QueryBlock& query)
{
    std::array<float, 8> p{};
    for (std::size_t lane = 0; lane < 8; ++lane) {
        int sum = 0;
        for (std::size_t k = 4 * lane; k < 4 * lane + 4; ++k)
            sum += key.code[k] * query.q[k];
        p[lane] = static_cast<float>(sum);
    }
    return p;
}

/// hsum_float_8: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
float hsum8(const std::array<float, 8>& a)
{
    const float r0 = a[4] + a[0], r1 = a[5] + a[1], r2 = a[6] + a[2], r3 = a[7] + a[3];
    return (r0 + r2) + (r1 + r3);
}

float quantizedKeyDot(GgmlType type, const std::uint8_t* key, const float* query, std::int64_t n)
{
    const std::size_t bytes = ggmlTraits(type).bytesPerBlock;
    const std::vector<QueryBlock> y = quantizeQuery(query, n);
    const std::size_t nb = y.size();
    const bool iq4 = type == GgmlType::IQ4_NL;
    const std::size_t paired = iq4 ? nb - nb % 2 : nb; // iq4_nl: pairs in the vector loop, the rest after
    std::array<float, 8> even{}, odd{};
    float minSum = 0.0f;
    for (std::size_t b = 0; b < paired; ++b) {
        const KeyBlock x = decodeKeyBlock(type, key + b * bytes);
        const float dd = x.d * halfBitsToFloat(y[b].d);
        const std::array<float, 8> p = laneProducts(x, y[b]);
        std::array<float, 8>& acc = iq4 && b % 2 == 1 ? odd : even;
        for (std::size_t l = 0; l < 8; ++l)
            acc[l] = std::fma(dd, p[l], acc[l]);
        if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1)
            minSum = minSum + x.m * halfBitsToFloat(y[b].s);
    }
    if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1)
        return hsum8(even) + minSum;
    if (!iq4)
        return hsum8(even);
    std::array<float, 8> both{};
    for (std::size_t l = 0; l < 8; ++l)
        both[l] = even[l] + odd[l];
    float score = hsum8(both);
    if (paired < nb) {
        const KeyBlock x = decodeKeyBlock(type, key + paired * bytes);
        int sum = 0;
        for (std::size_t k = 0; k < 32; ++k)
            sum += x.code[k] * y[paired].q[k];
        score = std::fma(halfBitsToFloat(y[paired].d) * x.d, static_cast<float>(sum), score);
    }
    return score;
}

/// ggml_vec_dot_f16 with the query rounded to fp16: four accumulators of `lanes` lanes, folded.
float f16KeyDot(const std::uint8_t* key, const float* query, std::int64_t n, GgmlBuild build)
{
    const std::int64_t lanes = build == GgmlBuild::Avx2 ? 8 : 16;
    const std::int64_t step = 4 * lanes;
    const std::int64_t full = n - n % step;
    std::array<std::array<float, 16>, 4> s{};
    for (std::int64_t i = 0; i < full; i += step)
        for (std::int64_t j = 0; j < 4; ++j)
            for (std::int64_t l = 0; l < lanes; ++l) {
                const std::int64_t k = i + j * lanes + l;
                const float x = detail::halfToFloatAsF16c(detail::loadU16(key + 2 * k));
                float& acc = s[static_cast<std::size_t>(j)][static_cast<std::size_t>(l)];
                acc = std::fma(x, roundToHalf(query[k]), acc);
            }
    for (std::size_t l = 0; l < 16; ++l) {
        s[0][l] = s[0][l] + s[2][l];
        s[1][l] = s[1][l] + s[3][l];
    }
    for (std::size_t l = 0; l < 16; ++l)
        s[0][l] = s[0][l] + s[1][l];
    const auto& a = s[0];
    float h = 0.0f;
    if (build == GgmlBuild::Avx2) {
        const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
        h = (t0 + t1) + (t2 + t3);
    } else {
        std::array<float, 8> u{};
        for (std::size_t l = 0; l < 8; ++l)
            u[l] = a[l + 8] + a[l];
        const float v0 = u[4] + u[0], v1 = u[5] + u[1], v2 = u[6] + u[2], v3 = u[7] + u[3];
        h = (v0 + v2) + (v1 + v3);
    }
    double sum = h;
    for (std::int64_t k = full; k < n; ++k)
        sum += static_cast<double>(detail::halfToFloatAsF16c(detail::loadU16(key + 2 * k)) * roundToHalf(query[k]));
    return static_cast<float>(sum);
}

} // namespace

Result<GgmlType> vecDotType(GgmlType keyType)
{
    switch (keyType) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::IQ4_NL: return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: return GgmlType::Q8_1;
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::F32: return keyType;
    default: break;
    }
    return Error{std::string(ggmlName(keyType)), "not a KV-cache key type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)"};
}

Status convertQueryRow(GgmlType vecDotType, const float* q, float* out, std::int64_t n, float* blockSums)
{
    const GgmlTypeTraits& t = ggmlTraits(vecDotType);
    const bool quantized = vecDotType == GgmlType::Q8_0 || vecDotType == GgmlType::Q8_1;
    if (!quantized && vecDotType != GgmlType::F16 && vecDotType != GgmlType::BF16 && vecDotType != GgmlType::F32)
        return Error{std::string(t.name), "not a vec_dot type of a KV cache (f32, f16, bf16, q8_0, q8_1)"};
    if (n < 0 || n % t.blockSize != 0)
        return Error{std::string(t.name), "row length " + std::to_string(n) + " is not a multiple of "
                                              + std::to_string(t.blockSize)};
    if (!quantized) {
        for (std::int64_t i = 0; i < n; ++i)
            out[i] = vecDotType == GgmlType::F16 ? roundToHalf(q[i]) : vecDotType == GgmlType::BF16 ? roundToBfloat16(q[i]) : q[i];
        return Ok{};
    }
    for (std::int64_t b = 0; b < n / 32; ++b) {
        const QueryBlock block = quantizeQueryBlock(q + 32 * b);
        const float d = halfBitsToFloat(block.d);
        for (std::size_t j = 0; j < 32; ++j)
            out[32 * b + static_cast<std::int64_t>(j)] = static_cast<float>(block.q[j]) * d;
        if (blockSums && vecDotType == GgmlType::Q8_1)
            blockSums[b] = halfBitsToFloat(block.s);
    }
    return Ok{};
}

double ggmlKeyDot(GgmlType keyType, const std::uint8_t* keyBlocks, const float* query, std::int64_t n, GgmlBuild build)
{
    assert(n >= 0 && n % 32 == 0 && "ggmlKeyDot: n must be a multiple of 32");
    if (keyType == GgmlType::F16)
        return f16KeyDot(keyBlocks, query, n, build);
    assert((keyType == GgmlType::Q8_0 || keyType == GgmlType::Q4_0 || keyType == GgmlType::Q5_0 || keyType == GgmlType::IQ4_NL
            || keyType == GgmlType::Q4_1 || keyType == GgmlType::Q5_1)
           && "ggmlKeyDot: not a quantized KV-cache type");
    return quantizedKeyDot(keyType, keyBlocks, query, n);
}

} // namespace kvlens::ggml
