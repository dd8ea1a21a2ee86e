// SPDX-License-Identifier: GPL-3.0-or-later
// Decisions of a quantizer that lie within float rounding of a boundary: where two correct
// implementations (the CPU and an OpenCL device, summing in another order) may decide apart.
#pragma once

#include "core/common/types.h"
#include "core/spec/result.h"
#include "core/quant/path.h"

namespace kvlens {

/// Relative margin under which a decision counts as on a boundary: float sums over d <= 16384
/// terms in another order differ by well under 1e-5 relative.
inline constexpr double kBoundaryMargin = 1e-5;

/// How many decisions of `plan` on the rows of `x` sit within `margin` of a boundary, each of
/// which another correct implementation may take the other way:
///  - a stored norm within `margin` (relative) of an fp16/bf16 rounding midpoint (the decoded
///    row then differs by one ulp of the format, about 1e-3, and so does its residual);
///  - a normalized coordinate within `margin` of a codebook threshold;
///  - a QJL sign whose projection <r, S_i> is within `margin` |r| |S_i| of zero.
/// Each part counts its own (QuantizerPlan / ResidualPlan::boundaryDecisions); parts without a
/// model of their boundaries (uniform, spectral, kvquant, ggml) count 0.
int boundaryDecisions(const PathPlan& plan, const RowMatrixXf& x, double margin = kBoundaryMargin);

/// boundaryDecisions of both paths of one trial of a normalized spec, recomputed on the CPU from
/// the trial's draw (the same data and random parts as the run): what --validate uses to tell a
/// decision that fell the other way from an implementation difference.
int trialBoundaryDecisions(const ExperimentSpec& spec, const TrialKey& key);

} // namespace kvlens
