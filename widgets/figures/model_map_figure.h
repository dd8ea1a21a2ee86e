// SPDX-License-Identifier: GPL-3.0-or-later
// The Model map's figure as data: a model's damage per layer and head, K against V per layer, and the
// end-to-end attribution beside it.
#pragma once

#include "core/analysis/eval_analysis.h"
#include "widgets/figure_spec.h"
#include "widgets/view_data.h"

#include <QString>
#include <QStringList>

#include <string>
#include <vector>

namespace kvlens::widgets {

/// A metric the map offers: its key (model_lens.h), the metric box's entry, what the colour bar names,
/// its unit, and whether the colours are log10 of it.
struct ModelMapMetric {
    const char* key;
    const char* label;
    const char* quantity;
    const char* unit;
    bool logScale;
};
/// The map's metrics, in the metric box's order.
const std::vector<ModelMapMetric>& modelMapMetrics();

/// What the map's controls choose.
struct ModelMapChoice {
    int metric = 0;            ///< index into modelMapMetrics()
    int scheme = 0;            ///< the scheme drawn
    int versus = -1;           ///< >= 0: draw log10(scheme / versus) per cell
    int budget = 0;            ///< the budget n drawn
    int selectedLayer = -1, selectedHead = -1; ///< the cell being studied (marked in the window only)
    bool withAttribution = true; ///< draw the evaluation's attribution beside the map (not at a single column)
};

/// The map, and what a view needs to read it back.
struct ModelMapFigure {
    FigureSpec figure;
    bool hasMap = false;
    int layers = 0, heads = 0;
    std::vector<double> values; ///< layer-major, what the cells show (a log ratio against `versus`)
    int attributionPoints = 0;
    QString colourLabel;
};

/// The colour bar's label: "log10 mean KL (nats), K-only, n = 2", or the log10 ratio of two schemes.
QString modelMapColourLabel(const ResultSet& results, const ModelMapChoice& choice);
/// A map measure's name in words (eval::OutputVsAttention::measure).
QString modelMapMeasureLabel(const std::string& measure);
/// The row of `level` ("layer", "head") with the highest finite rho, or null.
const eval::OutputVsAttention* bestJudgement(const std::vector<eval::OutputVsAttention>& rows, const std::string& level);
/// "ρ = 0.93 [0.81, 0.98]".
QString rhoText(const eval::OutputVsAttention& row);

/// The figure of `map` (a model run's ViewData; `anyRun`: whether some run is shown at all, for the
/// note of an empty map): a layers x heads heatmap of the metric (viridis, log10 where the metric is;
/// a ratio on a diverging scale), under it the output error per layer with only K and only V
/// quantized, beside it `evaluation`'s per-layer KLD with one layer quantized, and the judgement
/// `rows` in a footnote.
ModelMapFigure modelMapFigure(const ViewData& map, bool anyRun, const ModelMapChoice& choice,
                              const eval::EvalResult* evaluation, const std::vector<eval::OutputVsAttention>& rows);

} // namespace kvlens::widgets
