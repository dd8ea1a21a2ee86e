// SPDX-License-Identifier: GPL-3.0-or-later
// The table of ggml's types, and ggml's reference KV-cache block quantizers and dequantizers, rewritten
// step for step so every rounding matches.
//
// Bit-exactness depends on each float operation being rounded on its own, as in ggml's C built
// without FMA. core/io/io.cmake compiles this file with -ffp-contract=off. Under -march=native,
// GCC would otherwise fuse x * id + 8.5f and the iq4_nl weighted sums into FMAs. On random Gaussian
// blocks that changes about one q4_0 block in 700 000, one q5_0 block in 170 000 and one iq4_nl block
// in 8 000. tests/data/ggml_blocks holds such blocks.
#include "core/io/ggml_types.h"

#include "core/common/fp16.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace kvlens::ggml {

namespace {

constexpr std::size_t kHalf = kBlockSize / 2;

std::string blockLabel(std::size_t block)
{
    return "block " + std::to_string(block) + " (x[" + std::to_string(block * kBlockSize) + ".."
        + std::to_string(block * kBlockSize + kBlockSize - 1) + "])";
}

std::string number(double value)
{
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6g", value);
    return buffer;
}

bool halfIsFinite(std::uint16_t bits) { return (bits & 0x7c00u) != 0x7c00u; }

std::uint16_t readHalf(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

void writeHalf(std::uint8_t* p, std::uint16_t bits)
{
    p[0] = static_cast<std::uint8_t>(bits & 0xffu);
    p[1] = static_cast<std::uint8_t>(bits >> 8);
}

/// C's float -> int8_t conversion (truncation toward zero) for the values ggml produces, which lie in
/// [-127.5, 127.5]. Only when 1/d overflows to inf (max |x| below about 1e-36, where ggml's conversion
/// is undefined) can v leave that range: it is then clamped to +-127, and NaN (0 * inf) gives 0.
int truncToInt8(float v)
{
    if (std::isnan(v))
        return 0;
    return static_cast<int>(std::clamp(v, -127.0f, 127.0f));
}

/// The fp16 scale of a block, or a refusal naming it when binary16 cannot hold it.
Result<std::uint16_t> storeHalf(float value, const char* what, std::string_view type, std::size_t block)
{
    const std::uint16_t bits = floatToHalfBits(value);
    if (!halfIsFinite(bits))
        return Error{std::string(type), blockLabel(block) + ": " + what + " = " + number(value)
                                            + " does not fit fp16 (finite, |" + what + "| < 65520)"};
    return bits;
}

// --- one block each; x points at 32 floats, b at the block's bytes ---------------------------------

Status quantizeQ8_0(const float* x, std::uint8_t* b, std::size_t block)
{
    float amax = 0.0f;
    for (std::size_t j = 0; j < kBlockSize; ++j)
        amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f; // ((1 << 7) - 1)
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const auto dBits = storeHalf(d, "d", "q8_0", block);
    if (!dBits)
        return dBits.error();
    writeHalf(b, *dBits);
    for (std::size_t j = 0; j < kBlockSize; ++j) {
        const float scaled = x[j] * id;
        // roundf: half away from zero; ggml stores the float straight into an int8_t.
        b[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(truncToInt8(std::round(scaled))));
    }
    return Ok{};
}

/// q4_0 and q5_0: d = (the value of largest magnitude, with its sign) / -2^(bits-1), so that value
/// gets code 0; code = min(2^bits - 1, trunc(x / d + 2^(bits-1) + 0.5)).
template <int Bits>
Status quantizeSymmetric(const float* x, std::uint8_t* b, std::size_t block)
{
    constexpr int kOffset = 1 << (Bits - 1);
    constexpr int kTop = (1 << Bits) - 1;
    constexpr std::string_view kName = Bits == 4 ? "q4_0" : "q5_0";
    float amax = 0.0f;
    float max = 0.0f;
    for (std::size_t j = 0; j < kBlockSize; ++j) { // the first value of largest |x| wins a tie
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    const float d = max / static_cast<float>(-kOffset);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const auto dBits = storeHalf(d, "d", kName, block);
    if (!dBits)
        return dBits.error();
    writeHalf(b, *dBits);
    constexpr float kAdd = static_cast<float>(kOffset) + 0.5f;
    std::uint32_t qh = 0;
    std::uint8_t* qs = b + (Bits == 4 ? 2 : 6);
    for (std::size_t j = 0; j < kHalf; ++j) {
        const float x0 = x[j] * id;
        const float x1 = x[j + kHalf] * id;
        const float t0 = x0 + kAdd;
        const float t1 = x1 + kAdd;
        const int q0 = std::clamp(truncToInt8(t0), 0, kTop);
        const int q1 = std::clamp(truncToInt8(t1), 0, kTop);
        qs[j] = static_cast<std::uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= static_cast<std::uint32_t>((q0 >> 4) & 1) << j;
        qh |= static_cast<std::uint32_t>((q1 >> 4) & 1) << (j + kHalf);
    }
    if constexpr (Bits == 5)
        for (int k = 0; k < 4; ++k)
            b[2 + k] = static_cast<std::uint8_t>(qh >> (8 * k));
    return Ok{};
}

/// q4_1 and q5_1: m = min, d = (max - min) / (2^bits - 1), code = trunc((x - m) / d + 0.5).
template <int Bits>
Status quantizeAffine(const float* x, std::uint8_t* b, std::size_t block)
{
    constexpr int kTop = (1 << Bits) - 1;
    constexpr std::string_view kName = Bits == 4 ? "q4_1" : "q5_1";
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (std::size_t j = 0; j < kBlockSize; ++j) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    const float d = (max - min) / static_cast<float>(kTop);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const auto dBits = storeHalf(d, "d", kName, block);
    if (!dBits)
        return dBits.error();
    const auto mBits = storeHalf(min, "m", kName, block);
    if (!mBits)
        return mBits.error();
    writeHalf(b, *dBits);
    writeHalf(b + 2, *mBits);
    std::uint32_t qh = 0;
    std::uint8_t* qs = b + (Bits == 4 ? 4 : 8);
    for (std::size_t j = 0; j < kHalf; ++j) {
        const float x0 = (x[j] - min) * id;
        const float x1 = (x[j + kHalf] - min) * id;
        const float t0 = x0 + 0.5f;
        const float t1 = x1 + 0.5f;
        // ggml caps q4_1 at 15 and leaves q5_1 uncapped (its codes cannot exceed 31); both capped here.
        const int q0 = std::clamp(truncToInt8(t0), 0, kTop);
        const int q1 = std::clamp(truncToInt8(t1), 0, kTop);
        qs[j] = static_cast<std::uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= static_cast<std::uint32_t>((q0 >> 4) & 1) << j;
        qh |= static_cast<std::uint32_t>((q1 >> 4) & 1) << (j + kHalf);
    }
    if constexpr (Bits == 5)
        for (int k = 0; k < 4; ++k)
            b[4 + k] = static_cast<std::uint8_t>(qh >> (8 * k));
    return Ok{};
}

/// The iq4_nl level nearest to v; a tie goes to the upper level (ggml's best_index_int8).
int nearestIq4nl(float v)
{
    const auto level = [](int i) { return static_cast<float>(kIq4nlValues[static_cast<std::size_t>(i)]); };
    if (v <= level(0))
        return 0;
    if (v >= level(15))
        return 15;
    int lo = 0;
    int hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < level(mid))
            hi = mid;
        else
            lo = mid;
    }
    const float below = v - level(hi - 1);
    const float above = level(hi) - v;
    return below < above ? hi - 1 : hi;
}

/// iq4_nl as quantize_row_iq4_nl_ref runs it (quantize_row_iq4_nl_impl, one 32-value block, no
/// importance weights, ntry = -1): codes from the scale max / -127, which maps the value of largest
/// magnitude to level -127; then the least-squares scale for those codes with weights x^2,
/// d = sum(w q x) / sum(w q q). The codes are not searched again for that d.
Status quantizeIq4nl(const float* x, std::uint8_t* b, std::size_t block)
{
    constexpr float kGroupMaxEps = 1e-15f; // ggml's GROUP_MAX_EPS
    float amax = 0.0f;
    float max = 0.0f;
    for (std::size_t j = 0; j < kBlockSize; ++j) {
        const float ax = std::fabs(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    int codes[kBlockSize];
    float d = 0.0f;
    if (amax < kGroupMaxEps) {
        // d = 0. ggml-org/ggml d99724f2 then packs an index buffer it never filled for this block;
        // llama.cpp 01243c58 clears it first, so the codes are 0 (and y = 0 * -127 = -0).
        for (int& c : codes)
            c = 0;
    } else {
        const float d0 = max / static_cast<float>(kIq4nlValues[0]);
        const float id = 1.0f / d0;
        float sumqx = 0.0f;
        float sumq2 = 0.0f;
        for (std::size_t j = 0; j < kBlockSize; ++j) {
            const float w = x[j] * x[j];
            const float al = id * x[j];
            codes[j] = nearestIq4nl(al);
            const float q = static_cast<float>(kIq4nlValues[static_cast<std::size_t>(codes[j])]);
            const float wq = w * q;
            const float wqx = wq * x[j];
            sumqx = sumqx + wqx;
            const float wqq = wq * q;
            sumq2 = sumq2 + wqq;
        }
        d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    }
    const auto dBits = storeHalf(d, "d", "iq4_nl", block);
    if (!dBits)
        return dBits.error();
    writeHalf(b, *dBits);
    for (std::size_t j = 0; j < kHalf; ++j)
        b[2 + j] = static_cast<std::uint8_t>(codes[j] | (codes[j + kHalf] << 4));
    return Ok{};
}

Status quantizeBlock(Type type, const float* x, std::uint8_t* b, std::size_t block)
{
    switch (type) {
    case Type::Q8_0: return quantizeQ8_0(x, b, block);
    case Type::Q4_0: return quantizeSymmetric<4>(x, b, block);
    case Type::Q5_0: return quantizeSymmetric<5>(x, b, block);
    case Type::Q4_1: return quantizeAffine<4>(x, b, block);
    case Type::Q5_1: return quantizeAffine<5>(x, b, block);
    case Type::IQ4_NL: return quantizeIq4nl(x, b, block);
    }
    return Error{"ggml type", "unknown type"};
}

/// Every product below is exact in float (a code of at most 8 bits times an 11-bit fp16 scale), so
/// the result does not depend on FMA contraction; q4_1/q5_1 round once, in the addition of m.
void dequantizeBlock(Type type, const std::uint8_t* b, float* y)
{
    const float d = halfBitsToFloat(readHalf(b));
    switch (type) {
    case Type::Q8_0:
        for (std::size_t j = 0; j < kBlockSize; ++j)
            y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
        return;
    case Type::Q4_0:
        for (std::size_t j = 0; j < kHalf; ++j) {
            y[j] = static_cast<float>((b[2 + j] & 0x0f) - 8) * d;
            y[j + kHalf] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
        }
        return;
    case Type::IQ4_NL:
        for (std::size_t j = 0; j < kHalf; ++j) {
            y[j] = d * static_cast<float>(kIq4nlValues[b[2 + j] & 0x0fu]);
            y[j + kHalf] = d * static_cast<float>(kIq4nlValues[b[2 + j] >> 4]);
        }
        return;
    case Type::Q4_1: {
        const float m = halfBitsToFloat(readHalf(b + 2));
        for (std::size_t j = 0; j < kHalf; ++j) {
            const float p0 = static_cast<float>(b[4 + j] & 0x0f) * d;
            const float p1 = static_cast<float>(b[4 + j] >> 4) * d;
            y[j] = p0 + m;
            y[j + kHalf] = p1 + m;
        }
        return;
    }
    case Type::Q5_0:
    case Type::Q5_1: {
        const bool affine = type == Type::Q5_1;
        const std::uint8_t* h = b + (affine ? 4 : 2);
        const std::uint32_t qh = static_cast<std::uint32_t>(h[0]) | (static_cast<std::uint32_t>(h[1]) << 8)
            | (static_cast<std::uint32_t>(h[2]) << 16) | (static_cast<std::uint32_t>(h[3]) << 24);
        const std::uint8_t* qs = h + 4;
        const float m = affine ? halfBitsToFloat(readHalf(b + 2)) : 0.0f;
        const int offset = affine ? 0 : 16;
        for (std::size_t j = 0; j < kHalf; ++j) {
            const int q0 = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
            const int q1 = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kHalf)) & 1u) << 4);
            const float p0 = static_cast<float>(q0 - offset) * d;
            const float p1 = static_cast<float>(q1 - offset) * d;
            if (affine) {
                y[j] = p0 + m;
                y[j + kHalf] = p1 + m;
            } else { // no "+ 0": it would turn a -0 product into +0 where ggml keeps -0
                y[j] = p0;
                y[j + kHalf] = p1;
            }
        }
        return;
    }
    }
}

Status checkLength(Type type, std::size_t length)
{
    if (length == 0 || length % kBlockSize != 0)
        return Error{std::string(traits(type).name), "row length " + std::to_string(length)
                                                         + " is not a positive multiple of the block size "
                                                         + std::to_string(kBlockSize)};
    return Ok{};
}

} // namespace

const GgmlTypeTraits* findGgmlType(std::uint32_t id)
{
    for (const GgmlTypeTraits& t : kGgmlTypes)
        if (static_cast<std::uint32_t>(t.type) == id)
            return &t;
    return nullptr;
}

const GgmlTypeTraits& ggmlTraits(GgmlType type)
{
    const GgmlTypeTraits* t = findGgmlType(static_cast<std::uint32_t>(type));
    assert(t && "ggmlTraits: a GgmlType outside the table");
    return *t;
}

Result<std::uint64_t> rowBytes(GgmlType type, std::int64_t n)
{
    const GgmlTypeTraits& t = ggmlTraits(type);
    if (n < 0 || n % t.blockSize != 0)
        return Error{std::string(t.name), "row length " + std::to_string(n) + " is not a multiple of the block size "
                                              + std::to_string(t.blockSize) + " (0 or more values)"};
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(n) / t.blockSize, std::uint64_t{t.bytesPerBlock}, &bytes)
        || bytes > static_cast<std::uint64_t>(INT64_MAX))
        return Error{std::string(t.name), "a row of " + std::to_string(n) + " values takes more than 2^63 - 1 bytes"};
    return bytes;
}

const TypeTraits& traits(Type type)
{
    return kTypes[static_cast<std::size_t>(type)];
}

GgmlType ggmlType(Type type)
{
    switch (type) {
    case Type::Q8_0: return GgmlType::Q8_0;
    case Type::Q4_0: return GgmlType::Q4_0;
    case Type::Q4_1: return GgmlType::Q4_1;
    case Type::Q5_0: return GgmlType::Q5_0;
    case Type::Q5_1: return GgmlType::Q5_1;
    case Type::IQ4_NL: return GgmlType::IQ4_NL;
    }
    return GgmlType::Q8_0;
}

std::string ggmlTypeNames()
{
    std::string names;
    for (const TypeTraits& t : kTypes)
        names += (names.empty() ? "" : ", ") + std::string(t.name);
    return names;
}

Result<Type> parseGgmlType(std::string_view name)
{
    for (const TypeTraits& t : kTypes)
        if (t.name == name)
            return t.type;
    // The name is shown only when it is short printable ASCII, so a message stays one clean line.
    bool printable = name.size() <= 32;
    for (const char c : name)
        printable = printable && c >= 0x20 && c < 0x7f;
    return Error{"ggml type", (printable ? "unknown type '" + std::string(name) + "'" : std::string("unknown type"))
                                  + "; allowed: " + ggmlTypeNames()};
}

Result<std::size_t> rowBytes(Type type, std::size_t length)
{
    if (Status s = checkLength(type, length); !s)
        return s.error();
    return length / kBlockSize * traits(type).bytesPerBlock;
}

Status quantizeRow(Type type, std::span<const float> x, std::span<std::uint8_t> out)
{
    const TypeTraits& t = traits(type);
    const auto bytes = rowBytes(type, x.size());
    if (!bytes)
        return bytes.error();
    if (out.size() != *bytes)
        return Error{std::string(t.name), "output holds " + std::to_string(out.size()) + " bytes; a row of "
                                              + std::to_string(x.size()) + " values needs " + std::to_string(*bytes)};
    for (std::size_t i = 0; i < x.size(); ++i)
        if (!std::isfinite(x[i]))
            return Error{std::string(t.name), "x[" + std::to_string(i) + "] is " + (std::isnan(x[i]) ? "NaN" : "infinite")
                                                  + "; ggml blocks hold finite values only"};
    const std::size_t blocks = x.size() / kBlockSize;
    for (std::size_t k = 0; k < blocks; ++k)
        if (Status s = quantizeBlock(type, x.data() + k * kBlockSize, out.data() + k * t.bytesPerBlock, k); !s)
            return s;
    return Ok{};
}

Status dequantizeRow(Type type, std::span<const std::uint8_t> in, std::span<float> y)
{
    const TypeTraits& t = traits(type);
    const auto bytes = rowBytes(type, y.size());
    if (!bytes)
        return bytes.error();
    if (in.size() != *bytes)
        return Error{std::string(t.name), "input holds " + std::to_string(in.size()) + " bytes; a row of "
                                              + std::to_string(y.size()) + " values needs " + std::to_string(*bytes)};
    const bool hasMin = type == Type::Q4_1 || type == Type::Q5_1;
    const std::size_t blocks = y.size() / kBlockSize;
    for (std::size_t k = 0; k < blocks; ++k) {
        const std::uint8_t* b = in.data() + k * t.bytesPerBlock;
        if (!halfIsFinite(readHalf(b)) || (hasMin && !halfIsFinite(readHalf(b + 2))))
            return Error{std::string(t.name), blockLabel(k) + ": the stored " + (halfIsFinite(readHalf(b)) ? "m" : "d")
                                                  + " is infinite or NaN; a finite fp16 value is required"};
    }
    for (std::size_t k = 0; k < blocks; ++k)
        dequantizeBlock(type, in.data() + k * t.bytesPerBlock, y.data() + k * kBlockSize);
    return Ok{};
}

} // namespace kvlens::ggml
