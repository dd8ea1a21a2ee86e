// SPDX-License-Identifier: GPL-3.0-or-later
// The figures of one plot each as data: routing recall, the KL distributions, the theory scatter, the validation.
#pragma once

#include "core/analysis/validation.h"
#include "widgets/figure_spec.h"
#include "widgets/view_data.h"

namespace kvlens::widgets {

/// Top-k recall (above) and the argmax-shift rate (below) against the budget at `point`, one line
/// per scheme with 95% intervals over seeds; one legend entry per scheme (same colour and marker in
/// both panels), the budget axes shared.
FigureSpec recallFigure(const ViewData& data, int point);

/// Per scheme at `budget` and `point`, the per-query KL(p‖p̂) as an ECDF (or a log-binned
/// histogram), with its mean, p99 and worst query marked; a KL of 0 has no place on the log axis
/// and the legend entry says how much of the distribution sits there.
FigureSpec klDistributionFigure(const ViewData& data, int point, int budget, bool histogram);

/// Measured against predicted score-error variance at `point`, a point per trial, one series per
/// scheme and budget, with the identity line.
FigureSpec theoryFigure(const ViewData& data, int point);

/// Paper B's validation: per scheme, budget and metric the largest relative difference between the
/// CPU and OpenCL runs of the same draws (log axis; 0 drawn at 1e-12), with the tolerance line.
/// `reference` names the schemes; either may be null (an empty figure).
FigureSpec validationFigure(const ResultSet* reference, const stats::ValidationReport* report);

} // namespace kvlens::widgets
