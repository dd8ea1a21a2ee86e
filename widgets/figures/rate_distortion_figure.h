// SPDX-License-Identifier: GPL-3.0-or-later
// The Rate–distortion view's figure as data: each scheme's damage against the exact bits it spends.
#pragma once

#include "core/analysis/rate_distortion.h"
#include "core/spec/result.h"
#include "widgets/figure_spec.h"

namespace kvlens::widgets {

/// What the Rate–distortion view's controls choose.
struct RateDistortionChoice {
    DamageMetric metric = DamageMetric::MeanKl;
    bool logY = true;
    bool pooled = false; ///< `rd` pools the grid points (its points sit at point 0)
    int point = 0;       ///< the grid point drawn (0 when pooled)
};

/// The envelope's legend entry and series name.
QString rateDistortionEnvelopeName();

/// The figure of `rd` (core's points of `results`): per scheme a line through its budgets, ascending
/// in bits, each point the mean over seeds with its 95% t-interval; the lower envelope as a grey band
/// under them; on a log axis a damage of 0 is left out and the legend entry says so. `results` may be
/// null (an empty figure with its axis labels).
FigureSpec rateDistortionFigure(const ResultSet* results, const RateDistortion& rd, const RateDistortionChoice& choice);

} // namespace kvlens::widgets
