// SPDX-License-Identifier: GPL-3.0-or-later
// One trial: quantize K and V with a scheme at a budget, attend, and measure the damage.
#pragma once

#include "core/experiment/backend.h"
#include "core/spec/result.h"
#include "core/quant/spectral.h"
#include "core/regimes/regime.h"

namespace kvlens {

/// What every trial of one (grid point, seed) shares: the draw and its exact attention.
struct TrialGroup {
    int point = 0;
    int seedIndex = 0;
    std::uint64_t seed = 0;
    Dataset data;                    ///< queries already multiplied by the score scale
    RowMatrixXf scores, probs, output;
    std::vector<double> logSumExp;
    double meanQueryNorm2 = 0.0;     ///< for the score-error theory
    double meanKeyNorm2 = 0.0;
    /// Eigen-decompositions of the calibration sets, shared by every scheme and budget of the
    /// group (key site: keys, queries; value site: values, queries). Filled on first use; a
    /// group is only ever used by one thread.
    mutable std::shared_ptr<const SpectralAnalysis> keySpectra[2], valueSpectra[2];
};

/// The score a key in a query's future gets under causal attention: finite (so differences of
/// two masked scores are 0, never NaN) and far below any real score, so its weight is exactly 0.
inline constexpr float kMaskedScore = -1e30f;

/// Under causal attention (data.causal()), sets scores(i, j) to kMaskedScore wherever key j's
/// position is after query i's; no-op otherwise.
void applyCausalMask(const Dataset& data, RowMatrixXf& scores);

/// Draws the data of one (point, seed) and computes its exact attention on `backend`. With
/// `fixedData` (a seed-independent regime's data, read once for the run), copies it instead of
/// drawing.
Result<TrialGroup> prepareTrialGroup(const ExperimentSpec& spec, int point, int seedIndex, ComputeBackend& backend,
                                     const Dataset* fixedData = nullptr);

/// Runs scheme `schemeIndex` of the spec at `budget` on a prepared group.
TrialResult runTrial(const ExperimentSpec& spec, const TrialGroup& group, int schemeIndex, int budget,
                     ComputeBackend& backend);


} // namespace kvlens
