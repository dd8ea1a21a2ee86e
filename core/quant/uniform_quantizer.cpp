// SPDX-License-Identifier: GPL-3.0-or-later
// KIVI-style uniform quantizer with fp16 group parameters and an optional full-precision window.
#include "core/quant/uniform_quantizer.h"

#include "core/common/fp16.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace kvlens {

std::string_view uniformAxisName(UniformAxis axis)
{
    return axis == UniformAxis::PerChannel ? "per_channel" : "per_token";
}

std::optional<UniformAxis> uniformAxisFromName(std::string_view name)
{
    if (name == "per_channel")
        return UniformAxis::PerChannel;
    if (name == "per_token")
        return UniformAxis::PerToken;
    return std::nullopt;
}

namespace {

Eigen::Index ceilDiv(Eigen::Index a, Eigen::Index b) { return (a + b - 1) / b; }

} // namespace

void UniformQuantizer::encode(const Eigen::Ref<const RowMatrixXf>& x, UniformCodes& out) const
{
    assert(m_options.bits >= 1 && m_options.bits <= 8 && m_options.groupSize >= 1);
    const Eigen::Index n = x.rows(), dim = x.cols();
    const Eigen::Index window = std::min<Eigen::Index>(m_options.fullPrecisionWindow, n);
    const Eigen::Index quantRows = n - window;
    const Eigen::Index g = m_options.groupSize;
    const bool perChannel = m_options.axis == UniformAxis::PerChannel;
    out.groupRows = static_cast<int>(perChannel ? ceilDiv(quantRows, g) : quantRows);
    out.groupCols = static_cast<int>(perChannel ? dim : ceilDiv(dim, g));
    const auto groups = static_cast<std::size_t>(out.groupRows) * static_cast<std::size_t>(out.groupCols);
    out.mins.assign(groups, 0.0f);
    out.scales.assign(groups, 0.0f);
    out.codes.setZero(n, dim);
    const float maxCode = static_cast<float>((1 << m_options.bits) - 1);

    for (int gr = 0; gr < out.groupRows; ++gr) {
        for (int gc = 0; gc < out.groupCols; ++gc) {
            const Eigen::Index r0 = perChannel ? gr * g : gr;
            const Eigen::Index r1 = perChannel ? std::min(r0 + g, quantRows) : r0 + 1;
            const Eigen::Index c0 = perChannel ? gc : gc * g;
            const Eigen::Index c1 = perChannel ? c0 + 1 : std::min(c0 + g, dim);
            float lo = x(r0, c0), hi = lo;
            for (Eigen::Index r = r0; r < r1; ++r)
                for (Eigen::Index c = c0; c < c1; ++c) {
                    lo = std::min(lo, x(r, c));
                    hi = std::max(hi, x(r, c));
                }
            // Codes are computed against the stored (rounded) parameters so decode is consistent.
            const float storedMin = storeScalar(lo, m_options.scaleFormat);
            const float storedScale = storeScalar((hi - storedMin) / maxCode, m_options.scaleFormat);
            const std::size_t gi = static_cast<std::size_t>(gr) * static_cast<std::size_t>(out.groupCols)
                                   + static_cast<std::size_t>(gc);
            out.mins[gi] = storedMin;
            out.scales[gi] = storedScale;
            const float inv = storedScale > 0.0f ? 1.0f / storedScale : 0.0f;
            for (Eigen::Index r = r0; r < r1; ++r)
                for (Eigen::Index c = c0; c < c1; ++c) {
                    const float q = std::nearbyint((x(r, c) - storedMin) * inv);
                    out.codes(r, c) = static_cast<std::uint8_t>(std::clamp(q, 0.0f, maxCode));
                }
        }
    }
    out.window.resize(window, dim);
    for (Eigen::Index r = 0; r < window; ++r)
        for (Eigen::Index c = 0; c < dim; ++c)
            out.window(r, c) = roundToHalf(x(quantRows + r, c));
}

void UniformQuantizer::decode(const UniformCodes& codes, RowMatrixXf& xHat) const
{
    const Eigen::Index n = codes.codes.rows(), dim = codes.codes.cols();
    const Eigen::Index window = codes.window.rows();
    const Eigen::Index quantRows = n - window;
    const Eigen::Index g = m_options.groupSize;
    const bool perChannel = m_options.axis == UniformAxis::PerChannel;
    xHat.resize(n, dim);
    for (Eigen::Index r = 0; r < quantRows; ++r) {
        for (Eigen::Index c = 0; c < dim; ++c) {
            const Eigen::Index gr = perChannel ? r / g : r;
            const Eigen::Index gc = perChannel ? c : c / g;
            const auto gi = static_cast<std::size_t>(gr * codes.groupCols + gc);
            xHat(r, c) = codes.mins[gi] + static_cast<float>(codes.codes(r, c)) * codes.scales[gi];
        }
    }
    if (window > 0)
        xHat.bottomRows(window) = codes.window;
}

double UniformQuantizer::totalBits(Eigen::Index n, Eigen::Index dim) const
{
    const Eigen::Index window = std::min<Eigen::Index>(m_options.fullPrecisionWindow, n);
    const Eigen::Index quantRows = n - window;
    const Eigen::Index g = m_options.groupSize;
    const Eigen::Index groups = m_options.axis == UniformAxis::PerChannel ? ceilDiv(quantRows, g) * dim
                                                                          : quantRows * ceilDiv(dim, g);
    return static_cast<double>(quantRows * dim) * m_options.bits
           + static_cast<double>(groups) * 2.0 * scalarFormatBits(m_options.scaleFormat)
           + static_cast<double>(window * dim) * 16.0;
}

} // namespace kvlens
