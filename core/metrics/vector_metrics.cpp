// SPDX-License-Identifier: GPL-3.0-or-later
// SNR and direction error of reconstructions, in double precision.
#include "core/metrics/vector_metrics.h"

#include "core/common/simd.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kvlens {

VectorError vectorError(const float* x, const float* xHat, Eigen::Index n)
{
    // One pass for the three inner products, in double with eight lane-wise partial sums (a
    // fixed order: deterministic, and not bound by the latency of one serial sum); the error and
    // the orthogonal part follow from them, and are summed directly only when cancellation would
    // cost precision.
    using namespace simd;
    Double8 vxx{}, vhh{}, vxh{};
    Eigen::Index i = 0;
    for (; i + 8 <= n; i += 8) {
        const Double8 a = widen(load(x + i)), b = widen(load(xHat + i));
        vxx += a * a;
        vhh += b * b;
        vxh += a * b;
    }
    double xx = sum(vxx), hh = sum(vhh), xh = sum(vxh);
    for (; i < n; ++i) {
        const double a = x[i], b = xHat[i];
        xx += a * a;
        hh += b * b;
        xh += a * b;
    }
    double ee = xx + hh - 2.0 * xh;
    if (ee < 1e-6 * (xx + hh)) {
        ee = 0.0;
        for (Eigen::Index i = 0; i < n; ++i) {
            const double e = static_cast<double>(x[i]) - xHat[i];
            ee += e * e;
        }
    }
    ee = std::max(ee, 0.0);
    VectorError out;
    if (xx == 0.0) {
        out.snrDb = ee == 0.0 ? kSnrCapDb : -kSnrCapDb;
        out.phi = hh == 0.0 ? 0.0 : std::numbers::pi / 2;
        out.relErr = ee == 0.0 ? 0.0 : 1.0;
        return out;
    }
    out.norm2 = xx;
    out.relErr = ee / xx;
    out.snrDb = ee == 0.0 ? kSnrCapDb : std::min(kSnrCapDb, 10.0 * std::log10(xx / ee));
    if (hh == 0.0) {
        out.phi = std::numbers::pi / 2;
        return out;
    }
    // ||x^_perp||^2 = hh - xh^2/xx, exact by direct summation when the angle is small.
    const double along = xh / std::sqrt(xx);
    double perp2 = hh - xh * xh / xx;
    if (perp2 < 1e-6 * hh) {
        const double scale = xh / xx;
        perp2 = 0.0;
        for (Eigen::Index i = 0; i < n; ++i) {
            const double p = xHat[i] - scale * x[i];
            perp2 += p * p;
        }
    }
    out.phi = std::atan2(std::sqrt(std::max(perp2, 0.0)), along);
    return out;
}

RowErrors rowErrors(const Eigen::Ref<const RowMatrixXf>& x, const Eigen::Ref<const RowMatrixXf>& xHat)
{
    RowErrors out;
    const Eigen::Index rows = x.rows(), d = x.cols();
    out.snrDb.resize(static_cast<std::size_t>(rows));
    out.phi.resize(static_cast<std::size_t>(rows));
    out.relErr.resize(static_cast<std::size_t>(rows));
    for (Eigen::Index r = 0; r < rows; ++r) {
        const float* a = x.data() + r * x.outerStride();
        const float* b = xHat.data() + r * xHat.outerStride();
        const VectorError e = vectorError(a, b, d);
        out.snrDb[static_cast<std::size_t>(r)] = static_cast<float>(e.snrDb);
        out.phi[static_cast<std::size_t>(r)] = static_cast<float>(e.phi);
        out.relErr[static_cast<std::size_t>(r)] = static_cast<float>(e.relErr);
        out.sumNorm2 += e.norm2;
        out.sumError2 += e.relErr * e.norm2;
    }
    return out;
}

} // namespace kvlens
