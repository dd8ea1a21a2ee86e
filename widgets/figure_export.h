// SPDX-License-Identifier: GPL-3.0-or-later
// Figure export for papers: PDF and SVG (vector, text as text), PNG at a chosen DPI, with data and spec beside.
#pragma once

#include "core/common/result.h"

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <functional>
#include <vector>

namespace kvlens::widgets {

class ResultView;

/// Physical size and formats of an exported figure.
/// No text of an exported figure is smaller than this, exponents included (in pt on paper).
inline constexpr double kMinimumPrintPoints = 6.0;

struct ExportOptions {
    double widthInches = 3.5;  ///< 3.5 in: single column; 7 in: double column
    double aspect = 0.75;      ///< height / width
    int dpi = 300;             ///< PNG resolution
    bool pdf = true;
    bool svg = true;
    bool png = true;
    double basePointSize = 0.0; ///< font size in pt; 0 picks 8 pt up to 4 in wide, 9 pt beyond
    QString fontFamily = QStringLiteral("DejaVu Sans"); ///< embedded in the PDF as a subset

    /// Width and height in points (1/72 in), the unit of the PDF and SVG page.
    int widthPoints() const;
    int heightPoints() const;
    /// PNG height in pixels: the height in inches times dpi (the width is widthInches x dpi).
    int pngHeightPixels() const;
};

/// What an export wrote, or the first error (naming the path).
struct ExportOutcome {
    QStringList written;
    /// Views not written because they had nothing to draw: "Model map: not a model run ...".
    QStringList skipped;
    QString error;
    bool ok() const { return error.isEmpty(); }
};

/// What an export of a view says about the run its figure comes from (ResultView::figureResults).
struct FigureProvenance {
    QByteArray specJson;  ///< core's exportedSpecJson: the spec, with a "partial" block for a partial run
    bool partial = false; ///< the run holds fewer trials than its grid
    QString partialNote;  ///< "partial run: 32 of 72 trials; each scheme on the same seeds" ("" if whole)
    /// Why the figure must not be exported (a partial run whose schemes hold different seeds), or "".
    QString refusal;
};
FigureProvenance figureProvenance(const ResultView& view);

/// Writes `stem`.pdf/.svg/.png of the view's figure into `dir` in the print style, plus
/// `stem`.csv (the view's data) and `stem`.spec.json. Every file is written to a temporary beside
/// it and renamed into place, so a failure leaves any older file intact.
/// - The spec is that of the result set the figure is drawn from (ResultView::figureResults),
///   whoever calls; `specJson` is written only for a view drawn from no single result set (the
///   report's claim figures, made from several runs), and no spec file when both are missing.
/// - A partial run (fewer trials than its grid: a cancelled run) is marked in all three: the
///   spec gets a "partial" block listing the seeds held, the CSV a first line "# partial run: N
///   of M trials ...", the figure a note across its top. A partial run whose schemes hold
///   different seeds is refused (the error says why): its figures would compare them on
///   different draws.
/// - What only the window shows (the layer PlotWidget::kUiLayer, selections, series hidden by a
///   legend click) is left out, and the view is put back exactly as it was after.
/// - A view with nothing to draw (ResultView::noFigureReason) writes nothing: it is listed in
///   `skipped` with the reason, and the outcome is still ok.
ExportOutcome exportView(ResultView& view, const QString& dir, const QString& stem, const ExportOptions& options,
                         const QByteArray& specJson = {});

/// Exports several views into `dir` as one set (the window's Export all, and Export view): every
/// file is written into a staging folder inside `dir` first, and only when all of them are written
/// are they renamed into place. A failure (a full disk, a view still computing) leaves the files
/// already in `dir` as they were and names the file and the reason. `stemFor(view)` gives each
/// view's file stem.
ExportOutcome exportViews(const std::vector<ResultView*>& views, const QString& dir,
                          const std::function<QString(const ResultView&)>& stemFor, const ExportOptions& options,
                          const QByteArray& specJson = {});

/// A text of a figure as printed: what it is, its text and its size on paper in points.
struct PrintedText {
    QString what; ///< "axis label", "tick label", "tick exponent", "legend", "text", "title"
    QString text;
    double points = 0.0;
};
/// The legibility of a view exported with `options`: every text it prints with its size, the
/// smallest size, each pair of neighbouring tick labels whose extents along their axis overlap
/// (laid out as QCustomPlot lays them out at the print size), and what else collides: an axis
/// label over 15% longer than its axis (it runs into the next panel or off the page), two legends whose
/// boxes intersect, a legend outside the page.
struct PrintCheck {
    std::vector<PrintedText> texts;
    double smallest = 0.0;
    QStringList overlaps;
    QStringList collisions;
};
PrintCheck checkPrint(ResultView& view, const ExportOptions& options);

/// Figure options from the command line: `width` "single" (3.5 in), "double" (7 in) or inches in
/// [1, 20]; `dpi` in [72, 1200]; `fontSize` in pt in [5, 24]; `fontFamily` an installed family.
/// Empty strings keep the defaults. Errors name the option and its allowed values.
Result<ExportOptions> figureOptionsFrom(const QString& width, const QString& dpi, const QString& fontFamily,
                                        const QString& fontSize);

} // namespace kvlens::widgets
