// SPDX-License-Identifier: GPL-3.0-or-later
// The forest plots as data: scheme pairs of one run (Comparisons) and one run against another (Run comparison).
#pragma once

#include "core/analysis/run_compare.h"
#include "widgets/figure_spec.h"
#include "widgets/view_data.h"

#include <string>

namespace kvlens::widgets {

/// A forest plot and its size: rows drawn, and lines of footnote (what a printed page needs).
struct ForestFigure {
    FigureSpec figure;
    int rows = 0;
    int footnoteLines = 0;
};

/// Every compared pair of schemes at `budget` (0: all) and `point`: the median-KL ratio A/B with its
/// 95% interval resampling seeds (log axis, a dashed line at 1), significant after Holm coloured,
/// identical pairs at 1 as rings, pairs with a KL of 0 named, not drawn; past 14 rows only the
/// tested ones are drawn (a footnote counts the rest).
ForestFigure comparisonFigure(const ViewData& data, int point, int budget);

/// Run B against run A in `metric` (runMetrics' names), a row per configuration both hold: the
/// ratio of geometric means on a log axis for ratio-scale metrics, else the difference B − A, with
/// 95% intervals; significant after Holm coloured; rows in one run only named in a footnote.
/// `comparison` may be null (an empty figure).
ForestFigure runCompareFigure(const RunComparison* comparison, const std::string& metric);

} // namespace kvlens::widgets
