// SPDX-License-Identifier: GPL-3.0-or-later
// The butterfly loops are written out directly: an Eigen-expression WHT measured 40x slower.
#include "core/quant/wht.h"

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

void fwhtInPlace(float* x, std::size_t n)
{
    assert((n & (n - 1)) == 0 && "fwhtInPlace: length must be a power of two");
    // The first two stages fused on groups of four keep the short strides out of the
    // generic loop, whose inner loop vectorizes for h >= 4.
    if (n >= 4) {
        for (std::size_t i = 0; i < n; i += 4) {
            const float a = x[i], b = x[i + 1], c = x[i + 2], d = x[i + 3];
            const float s0 = a + b, d0 = a - b, s1 = c + d, d1 = c - d;
            x[i] = s0 + s1;
            x[i + 1] = d0 + d1;
            x[i + 2] = s0 - s1;
            x[i + 3] = d0 - d1;
        }
    } else if (n == 2) {
        const float a = x[0], b = x[1];
        x[0] = a + b;
        x[1] = a - b;
        return;
    }
    for (std::size_t h = 4; h < n; h <<= 1) {
        for (std::size_t i = 0; i < n; i += 2 * h) {
            float* __restrict lo = x + i;
            float* __restrict hi = x + i + h;
            for (std::size_t j = 0; j < h; ++j) {
                const float a = lo[j], b = hi[j];
                lo[j] = a + b;
                hi[j] = a - b;
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
