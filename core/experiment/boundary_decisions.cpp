// SPDX-License-Identifier: GPL-3.0-or-later
// Norm-rounding midpoints, codebook thresholds and QJL zero crossings within a margin.
#include "core/experiment/boundary_decisions.h"

#include "core/common/fp16.h"
#include "core/experiment/backend.h"
#include "core/experiment/trial.h"
#include "core/quant/norm_quantizer.h"
#include "core/quant/wht.h"

#include <cmath>

namespace kvlens {

namespace {

/// Distance (relative) from `value` to the nearest rounding midpoint of `format`; infinity for fp32.
double midpointDistance(float value, ScalarFormat format)
{
    if (format == ScalarFormat::Fp32 || !(value > 0.0f))
        return INFINITY;
    const bool half = format == ScalarFormat::Fp16;
    const std::uint16_t bits = half ? floatToHalfBits(value) : floatToBfloat16Bits(value);
    auto toFloat = [&](std::uint16_t b) { return half ? halfBitsToFloat(b) : bfloat16BitsToFloat(b); };
    const double rounded = toFloat(bits);
    double best = INFINITY;
    for (const std::uint16_t neighbour : {static_cast<std::uint16_t>(bits + 1), static_cast<std::uint16_t>(bits - 1)}) {
        const double other = toFloat(neighbour);
        if (std::isfinite(other))
            best = std::min(best, std::abs(value - 0.5 * (rounded + other)) / value);
    }
    return best;
}

} // namespace

int boundaryDecisions(const PathPlan& plan, const RowMatrixXf& x, double margin)
{
    const QuantizerKind kind = plan.config.quantizer;
    if (!plan.codebook || kind == QuantizerKind::Uniform || kind == QuantizerKind::Spectral)
        return 0;
    RowMatrixXf rotated;
    if (!plan.signs.empty())
        rotateRows(permutedColumns(plan, x), plan.signs, rotated);
    else
        rotated = x;
    int count = 0;
    for (Eigen::Index r = 0; r < rotated.rows(); ++r) {
        const float norm = rotated.row(r).norm();
        if (midpointDistance(norm, plan.config.normFormat) < margin)
            ++count;
        if (!(norm > 0.0f))
            continue;
        for (Eigen::Index c = 0; c < rotated.cols(); ++c) {
            const double u = rotated(r, c) / norm;
            for (const float t : plan.codebook->thresholdsF)
                if (std::abs(u - t) < margin)
                    ++count;
        }
    }
    if (plan.config.residual == ResidualKind::Qjl && plan.sketch.rows() > 0) {
        const NormQuantizer quantizer(plan.codebook, plan.config.normFormat);
        NormCodes codes;
        RowMatrixXf decoded;
        quantizer.encode(rotated, codes);
        quantizer.decode(codes, decoded);
        const RowMatrixXf residual = rotated - decoded;
        const RowMatrixXf projections = residual * plan.sketch.transpose();
        for (Eigen::Index r = 0; r < projections.rows(); ++r) {
            const double rNorm = residual.row(r).norm();
            for (Eigen::Index i = 0; i < projections.cols(); ++i)
                if (std::abs(projections(r, i)) < margin * rNorm * plan.sketch.row(i).norm())
                    ++count;
        }
    }
    return count;
}

int trialBoundaryDecisions(const ExperimentSpec& spec, const TrialKey& key)
{
    const ExperimentSpec point = spec.pointSpec(key.point);
    CpuBackend cpu(1);
    auto group = prepareTrialGroup(point, key.point, key.seedIndex, cpu);
    if (!group)
        return 0;
    const SchemeConfig& scheme = point.schemes[static_cast<std::size_t>(key.scheme)];
    const Dataset& data = group->data;
    auto rowsOrNull = [](const RowMatrixXf& m) { return m.rows() > 0 ? &m : nullptr; };
    const PlanInputs keyInputs{rowsOrNull(data.calibrationKeys), rowsOrNull(data.calibrationQueries), group->keySpectra};
    const PlanInputs valueInputs{rowsOrNull(data.calibrationValues), rowsOrNull(data.calibrationQueries),
                                 group->valueSpectra};
    const PathPlan keyPlan = planPath(scheme.key, key.budget, point.d, PathSite::Keys, keyInputs, point.engine, group->seed);
    const PathPlan valuePlan =
        planPath(scheme.value, key.budget, point.d, PathSite::Values, valueInputs, point.engine, group->seed);
    return boundaryDecisions(keyPlan, data.keys) + boundaryDecisions(valuePlan, data.values);
}

} // namespace kvlens
