// SPDX-License-Identifier: GPL-3.0-or-later
// The figures of `kvlens eval` as data: the per-token KLD distribution, the per-layer attribution and
// KLD along the text, with the CSV of what each draws; and the pure helpers they share.
#pragma once

#include "core/eval/eval_result.h"
#include "widgets/figure_spec.h"

#include <QString>

#include <vector>

namespace kvlens::widgets {

/// The configurations of an evaluation one figure draws: all of them when they fit, else those at
/// one budget (split into parts when a budget still holds too many), so that a figure compares
/// schemes at equal bits and stays legible at a single column.
struct EvalPage {
    QString suffix;                  ///< of the file stem: "" (the only page), "_n3", "_fixed", "_n3_2"
    QString title;                   ///< shown above the figure: "" or "n = 3", "fixed width", "n = 3 (2 of 3)"
    std::vector<int> configurations; ///< indices into EvalResult::configurations, in result order
};

/// Splits `candidates` (configuration indices, in result order) into pages of at most
/// `maxPerPage` (>= 1): one page when they fit; else one per budget (fixed-width configurations
/// together), a budget with more than `maxPerPage` in near-equal parts. No candidates: one empty page.
std::vector<EvalPage> evalPages(const eval::EvalResult& result, const std::vector<int>& candidates, int maxPerPage);

/// A configuration as a figure names it: "TQ-KV n=3", "exact" (a fixed-width scheme), with
/// " seed k" when the run has several seeds.
QString evalConfigurationLabel(const eval::EvalResult& result, int configuration);

/// Order statistics of the per-token KLD of one configuration, by lm::percentileOfSorted (linear
/// interpolation at position f (n - 1)), and the mean; `zeros` counts tokens at KLD = 0 exactly.
struct KldQuantiles {
    double p5 = 0.0, p25 = 0.0, median = 0.0, p75 = 0.0, p95 = 0.0, p99 = 0.0, maximum = 0.0, mean = 0.0;
    int count = 0, zeros = 0;
};
KldQuantiles kldQuantiles(const std::vector<lm::TokenStat>& tokens);

/// The running mean of `values` over a centred window of `window` (odd) values, cut at the edges
/// of each run of equal `groups` (a chunk): out[i] = mean of values[j], |j - i| <= window / 2,
/// groups[j] == groups[i].
std::vector<double> runningMean(const std::vector<double>& values, const std::vector<int>& groups, int window);

/// The configurations with per-layer attribution that is not 0 everywhere (what the attribution figure can draw).
std::vector<int> attributedConfigurations(const eval::EvalResult& result);

/// An eval figure, the CSV of every value it draws (unclamped: zeros as 0) and what it chose.
struct EvalFigure {
    FigureSpec figure;
    QString csv;
    double floor = 0.0; ///< where a KLD of 0 (or below it) is drawn on the log axis
    int panels = 0;     ///< attribution panels drawn
    int window = 1;     ///< tokens in the running mean
};

/// Per-token KLD(base ‖ Q) of each of `shown` as a horizontal quantile box on a log axis (p25-p75
/// with the median, whiskers p5-p95) with the mean, p99 and worst token marked; zeros drawn at the
/// axis floor, a decade below the smallest positive value, and named in the footnote.
EvalFigure evalKldFigure(const eval::EvalResult* result, const std::vector<int>& shown, const QString& title);

/// One panel per configuration of `shown` with attribution: bars of the mean KLD with only that
/// layer's cache quantized (K only, V only, both), whiskers its 95% interval; configurations whose
/// every layer costs 0 exactly are named in the footnote.
EvalFigure evalLayersFigure(const eval::EvalResult* result, const std::vector<int>& shown);

/// Each scored token's KLD (log y, faint dots) with a running mean inside each chunk per
/// configuration of `shown`; dotted lines at chunk boundaries; values below the floor (the pooled
/// 1st percentile's decade), zeros included, drawn at it; identity configurations named instead.
EvalFigure evalTextFigure(const eval::EvalResult* result, const std::vector<int>& shown, const QString& title);

} // namespace kvlens::widgets
