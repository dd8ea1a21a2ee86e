// SPDX-License-Identifier: GPL-3.0-or-later
// Quantizing rows into any dequantizable ggml type, for tests and scripts that write GGUF files: the KV
// types through ggml's reference quantizers, the K types through a simple valid encoding.
#include "core/io/ggml_kernels.h"
#include "core/io/ggml_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvlens::ggml {

namespace {

using Bytes = std::span<std::uint8_t>;

void storeU16(std::uint8_t* p, std::uint16_t v)
{
    p[0] = static_cast<std::uint8_t>(v & 0xff);
    p[1] = static_cast<std::uint8_t>(v >> 8);
}

/// A super-block scale as fp16, refused when binary16 cannot hold it.
Result<std::uint16_t> superScale(float value, GgmlType type, std::size_t block, const char* what)
{
    const std::uint16_t bits = floatToHalfBits(value);
    if ((bits & 0x7c00u) == 0x7c00u)
        return Error{std::string(ggmlName(type)), "super-block " + std::to_string(block) + ": " + what
                                                      + " does not fit fp16 (the values are too large)"};
    return bits;
}

/// The 6-bit code c with c * step >= value (value >= 0), so a rounded-up scale still covers the range.
int coverCode(float value, float step, int top)
{
    if (!(step > 0.0f))
        return 0;
    return std::clamp(static_cast<int>(std::ceil(value / step)), 0, top);
}

/// Packs the eight 6-bit scales and minimums of a q4_K / q5_K block as get_scale_min_k4 reads them.
void packScalesK4(const int* sc, const int* m, std::uint8_t* out)
{
    std::memset(out, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            out[j] = static_cast<std::uint8_t>(sc[j]);
            out[j + 4] = static_cast<std::uint8_t>(m[j]);
        } else {
            out[j + 4] = static_cast<std::uint8_t>((sc[j] & 0xf) | ((m[j] & 0xf) << 4));
            out[j - 4] |= static_cast<std::uint8_t>((sc[j] >> 4) << 6);
            out[j] |= static_cast<std::uint8_t>((m[j] >> 4) << 6);
        }
    }
}

/// One q4_K (Fifth = false) or q5_K super-block of 256 values.
template <bool Fifth>
Status quantizeQ45KBlock(const float* x, std::uint8_t* out, std::size_t block)
{
    constexpr int kTop = Fifth ? 31 : 15;
    constexpr GgmlType kType = Fifth ? GgmlType::Q5_K : GgmlType::Q4_K;
    float scale[8], lift[8];
    float maxScale = 0.0f, maxLift = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const auto [lo, hi] = std::minmax_element(x + 32 * j, x + 32 * j + 32);
        lift[j] = -std::min(0.0f, *lo);                // the minimum is stored as d_min m >= 0, subtracted
        scale[j] = (std::max(0.0f, *hi) + lift[j]) / kTop;
        maxScale = std::max(maxScale, scale[j]);
        maxLift = std::max(maxLift, lift[j]);
    }
    const auto d = superScale(maxScale / 63.0f, kType, block, "d");
    const auto dmin = superScale(maxLift / 63.0f, kType, block, "dmin");
    if (!d || !dmin)
        return !d ? d.error() : dmin.error();
    storeU16(out, *d);
    storeU16(out + 2, *dmin);
    const float dStep = halfBitsToFloat(*d), mStep = halfBitsToFloat(*dmin);
    int sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = coverCode(scale[j], dStep, 63);
        m[j] = coverCode(lift[j], mStep, 63);
    }
    packScalesK4(sc, m, out + 4);
    std::uint8_t* qh = out + 16;
    std::uint8_t* qs = out + (Fifth ? 48 : 16);
    if (Fifth)
        std::memset(qh, 0, 32);
    for (int j = 0; j < 8; ++j) {
        const float d1 = dStep * static_cast<float>(sc[j]), m1 = mStep * static_cast<float>(m[j]);
        for (int l = 0; l < 32; ++l) {
            const int q = d1 > 0.0f ? std::clamp(static_cast<int>(std::nearbyint((x[32 * j + l] + m1) / d1)), 0, kTop) : 0;
            std::uint8_t& byte = qs[32 * (j / 2) + l];
            byte = j % 2 == 0 ? static_cast<std::uint8_t>(q & 0xf) : static_cast<std::uint8_t>(byte | ((q & 0xf) << 4));
            if (Fifth && q > 15)
                qh[l] = static_cast<std::uint8_t>(qh[l] | (1u << j));
        }
    }
    return Ok{};
}

/// One q6_K super-block: 16 sub-blocks of 16 values, codes -32..31 on a signed 8-bit scale.
Status quantizeQ6KBlock(const float* x, std::uint8_t* out, std::size_t block)
{
    float scale[16];
    float maxScale = 0.0f;
    for (int i = 0; i < 16; ++i) {
        float amax = 0.0f;
        for (int l = 0; l < 16; ++l)
            amax = std::max(amax, std::fabs(x[16 * i + l]));
        scale[i] = amax / 31.0f; // codes -31..31 cover [-amax, amax]; -32 is left to rounding
        maxScale = std::max(maxScale, scale[i]);
    }
    const auto d = superScale(maxScale / 127.0f, GgmlType::Q6_K, block, "d");
    if (!d)
        return d.error();
    const float dStep = halfBitsToFloat(*d);
    std::memset(out, 0, 210);
    auto* sc = reinterpret_cast<std::int8_t*>(out + 192);
    for (int i = 0; i < 16; ++i)
        sc[i] = static_cast<std::int8_t>(coverCode(scale[i], dStep, 127));
    storeU16(out + 208, *d);
    for (int k = 0; k < 256; ++k) {
        // Value k: half h, position l within its 32-run, run r (0..3) choosing nibble and qh bits.
        const int h = k / 128, r = (k % 128) / 32, l = k % 32;
        const float step = dStep * static_cast<float>(sc[8 * h + l / 16 + 2 * r]);
        const int q = step > 0.0f ? std::clamp(static_cast<int>(std::nearbyint(x[k] / step)), -32, 31) + 32 : 32;
        std::uint8_t& nib = out[64 * h + l + (r % 2 == 1 ? 32 : 0)];
        nib = static_cast<std::uint8_t>(nib | (r < 2 ? (q & 0xf) : ((q & 0xf) << 4)));
        out[128 + 32 * h + l] = static_cast<std::uint8_t>(out[128 + 32 * h + l] | ((q >> 4) << (2 * r)));
    }
    return Ok{};
}

Status quantizeKRow(GgmlType type, std::span<const float> x, Bytes out)
{
    const std::size_t blockBytes = ggmlTraits(type).bytesPerBlock;
    for (std::size_t b = 0; b < x.size() / 256; ++b) {
        const float* xb = x.data() + 256 * b;
        std::uint8_t* ob = out.data() + blockBytes * b;
        const Status s = type == GgmlType::Q4_K ? quantizeQ45KBlock<false>(xb, ob, b)
            : type == GgmlType::Q5_K            ? quantizeQ45KBlock<true>(xb, ob, b)
                                                : quantizeQ6KBlock(xb, ob, b);
        if (!s)
            return s;
    }
    return Ok{};
}

Status quantizePlain(GgmlType type, std::span<const float> x, Bytes out)
{
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (type == GgmlType::F32) {
            std::memcpy(out.data() + 4 * i, &x[i], 4);
            continue;
        }
        const std::uint16_t bits = type == GgmlType::F16 ? floatToHalfBits(x[i]) : floatToBfloat16Bits(x[i]);
        if ((bits & 0x7f80u) == 0x7f80u && type == GgmlType::BF16)
            return Error{"bf16", "x[" + std::to_string(i) + "] overflows bf16"};
        if ((bits & 0x7c00u) == 0x7c00u && type == GgmlType::F16)
            return Error{"f16", "x[" + std::to_string(i) + "] = " + std::to_string(x[i]) + " overflows fp16 (|x| < 65520)"};
        storeU16(out.data() + 2 * i, bits);
    }
    return Ok{};
}

Result<Type> kvType(GgmlType type)
{
    for (const TypeTraits& t : kTypes)
        if (ggmlType(t.type) == type)
            return t.type;
    return Error{"ggml type", "not a KV-cache block type"};
}

} // namespace

Status quantizeRow(GgmlType type, std::span<const float> x, std::span<std::uint8_t> out)
{
    const GgmlTypeTraits& t = ggmlTraits(type);
    if (!t.dequantizable)
        return Error{std::string(t.name), "KVLens has no quantizer for this type"};
    if (x.size() > static_cast<std::size_t>(INT64_MAX))
        return Error{std::string(t.name), "row too long"};
    const auto bytes = rowBytes(type, static_cast<std::int64_t>(x.size()));
    if (!bytes)
        return bytes.error();
    if (out.size() != *bytes)
        return Error{std::string(t.name), "output holds " + std::to_string(out.size()) + " bytes; a row of "
                                              + std::to_string(x.size()) + " values needs " + std::to_string(*bytes)};
    for (std::size_t i = 0; i < x.size(); ++i)
        if (!std::isfinite(x[i]))
            return Error{std::string(t.name), "x[" + std::to_string(i) + "] is not finite"};
    if (const auto kv = kvType(type))
        return quantizeRow(*kv, x, out);
    if (t.blockSize == 1)
        return quantizePlain(type, x, out);
    return quantizeKRow(type, x, out);
}

} // namespace kvlens::ggml
