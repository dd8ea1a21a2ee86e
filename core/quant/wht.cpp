// SPDX-License-Identifier: GPL-3.0-or-later
// The butterfly loops are written out directly: an Eigen-expression WHT measured 40x slower.
#include "core/quant/wht.h"

#include "core/common/simd.h"

#include <cassert>
#include <cmath>

namespace kvlens {

std::size_t paddedDimension(std::size_t d)
{
    std::size_t p = 1;
    while (p < d)
        p <<= 1;
    return p;
}

std::vector<float> randomSigns(std::size_t dp, Rng& rng)
{
    std::vector<float> signs(dp);
    for (auto& s : signs)
        s = rng.sign();
    return signs;
}

namespace {

/// The transform of kBlocks x 8 values held in registers: the same butterflies, in the same stage
/// order, as the loop below (so the same floats), without a store and reload per stage.
template <std::size_t kBlocks>
void fwhtInRegisters(float* x)
{
    using namespace simd;
    const Float8 s1 = {1, -1, 1, -1, 1, -1, 1, -1};
    const Float8 s2 = {1, 1, -1, -1, 1, 1, -1, -1};
    const Float8 s4 = {1, 1, 1, 1, -1, -1, -1, -1};
    Float8 v[kBlocks];
    for (std::size_t i = 0; i < kBlocks; ++i) {
        Float8 w = load(x + 8 * i);
        w = __builtin_shufflevector(w, w, 0, 0, 2, 2, 4, 4, 6, 6) + s1 * __builtin_shufflevector(w, w, 1, 1, 3, 3, 5, 5, 7, 7);
        w = __builtin_shufflevector(w, w, 0, 1, 0, 1, 4, 5, 4, 5) + s2 * __builtin_shufflevector(w, w, 2, 3, 2, 3, 6, 7, 6, 7);
        w = __builtin_shufflevector(w, w, 0, 1, 2, 3, 0, 1, 2, 3) + s4 * __builtin_shufflevector(w, w, 4, 5, 6, 7, 4, 5, 6, 7);
        v[i] = w;
    }
    for (std::size_t h = 1; h < kBlocks; h <<= 1)
        for (std::size_t i = 0; i < kBlocks; i += 2 * h)
            for (std::size_t j = i; j < i + h; ++j) {
                const Float8 a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
    for (std::size_t i = 0; i < kBlocks; ++i)
        store(x + 8 * i, v[i]);
}

} // namespace

void fwhtInPlace(float* x, std::size_t n)
{
    assert((n & (n - 1)) == 0 && "fwhtInPlace: length must be a power of two");
    // Head dimensions of real models: the whole vector in registers.
    switch (n) {
    case 64: fwhtInRegisters<8>(x); return;
    case 128: fwhtInRegisters<16>(x); return;
    case 256: fwhtInRegisters<32>(x); return;
    default: break;
    }
    if (n < 8) {
        for (std::size_t h = 1; h < n; h <<= 1)
            for (std::size_t i = 0; i < n; i += 2 * h)
                for (std::size_t j = i; j < i + h; ++j) {
                    const float a = x[j], b = x[j + h];
                    x[j] = a + b;
                    x[j + h] = a - b;
                }
        return;
    }
    using namespace simd;
    // Stages h = 1, 2, 4 inside each block of eight with lane shuffles, then whole blocks.
    // An Eigen-expression WHT measured 40x slower than a butterfly loop (PERF-NOTES).
    const Float8 s1 = {1, -1, 1, -1, 1, -1, 1, -1};
    const Float8 s2 = {1, 1, -1, -1, 1, 1, -1, -1};
    const Float8 s4 = {1, 1, 1, 1, -1, -1, -1, -1};
    for (std::size_t i = 0; i < n; i += 8) {
        Float8 v = load(x + i);
        v = __builtin_shufflevector(v, v, 0, 0, 2, 2, 4, 4, 6, 6) + s1 * __builtin_shufflevector(v, v, 1, 1, 3, 3, 5, 5, 7, 7);
        v = __builtin_shufflevector(v, v, 0, 1, 0, 1, 4, 5, 4, 5) + s2 * __builtin_shufflevector(v, v, 2, 3, 2, 3, 6, 7, 6, 7);
        v = __builtin_shufflevector(v, v, 0, 1, 2, 3, 0, 1, 2, 3) + s4 * __builtin_shufflevector(v, v, 4, 5, 6, 7, 4, 5, 6, 7);
        store(x + i, v);
    }
    for (std::size_t h = 8; h < n; h <<= 1) {
        for (std::size_t i = 0; i < n; i += 2 * h) {
            for (std::size_t j = i; j < i + h; j += 8) {
                const Float8 a = load(x + j), b = load(x + j + h);
                store(x + j, a + b);
                store(x + j + h, a - b);
            }
        }
    }
}

void rotateRows(const Eigen::Ref<const RowMatrixXf>& in, const std::vector<float>& signs, RowMatrixXf& out)
{
    const auto n = static_cast<std::size_t>(in.rows());
    const auto d = static_cast<std::size_t>(in.cols());
    const std::size_t dp = signs.size();
    assert(d <= dp && "rotateRows: more columns than signs");
    const float scale = 1.0f / std::sqrt(static_cast<float>(dp));
    out.resize(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(dp));
    for (std::size_t r = 0; r < n; ++r) {
        const float* src = in.data() + r * static_cast<std::size_t>(in.outerStride());
        float* dst = out.data() + r * dp;
        for (std::size_t j = 0; j < d; ++j)
            dst[j] = src[j] * signs[j] * scale;
        for (std::size_t j = d; j < dp; ++j)
            dst[j] = 0.0f;
        fwhtInPlace(dst, dp);
    }
}

void unrotateRows(const Eigen::Ref<const RowMatrixXf>& in, const std::vector<float>& signs, std::size_t d,
                  RowMatrixXf& out)
{
    const auto n = static_cast<std::size_t>(in.rows());
    const std::size_t dp = signs.size();
    assert(static_cast<std::size_t>(in.cols()) == dp && "unrotateRows: width must equal the sign count");
    assert(d <= dp);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dp));
    std::vector<float> buffer(dp);
    out.resize(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(d));
    for (std::size_t r = 0; r < n; ++r) {
        const float* src = in.data() + r * static_cast<std::size_t>(in.outerStride());
        for (std::size_t j = 0; j < dp; ++j)
            buffer[j] = src[j];
        fwhtInPlace(buffer.data(), dp);
        float* dst = out.data() + r * d;
        for (std::size_t j = 0; j < d; ++j)
            dst[j] = buffer[j] * signs[j] * scale;
    }
}

} // namespace kvlens
