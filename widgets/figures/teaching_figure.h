// SPDX-License-Identifier: GPL-3.0-or-later
// The Teaching view's figure as data: one query's chain from score noise to output error, a stage at a time.
#pragma once

#include "core/metrics/teaching.h"
#include "widgets/figure_spec.h"

#include <QString>

namespace kvlens::widgets {

/// The chain's stages, in the order they are revealed.
enum class TeachingStage { ScoreNoise = 0, Softmax, Kl, Output, Count };
/// The figure's panels (FigureSpec::panels, in this order).
enum class TeachingPanel { ScoreHistogram = 0, TopWeights, Jensen, Kl, Output, ValuePath, Count };

/// The stage at which a panel is revealed.
int teachingPanelStage(TeachingPanel panel);

/// Below this export width the six panels re-flow into two columns of three rows.
inline constexpr double kTeachingWidePrintInches = 5.0;

/// Six panels (score-error histograms with their variances, the top ten weights p against p^,
/// Jensen's exp(sigma^2/2) against the measured inflation, KL(p||p^), the output error of both paths
/// and each path alone, and the value-path panel: value error and moved key mass against N_eff),
/// those of stages after `stage` as placeholders. Without a result every panel says `error` or
/// "computing…". `printInches` > 0: laid out for an export that wide (two columns below
/// kTeachingWidePrintInches, fewer rank labels).
FigureSpec teachingFigure(const TeachingResult* result, const QString& error, int stage, double printInches);

} // namespace kvlens::widgets
