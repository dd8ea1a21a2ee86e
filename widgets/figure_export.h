// SPDX-License-Identifier: GPL-3.0-or-later
// Figure export for papers: PDF and SVG (vector, text as text), PNG at a chosen DPI, with data and spec beside.
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <functional>
#include <vector>

namespace kvlens::widgets {

class ResultView;

/// Physical size and formats of an exported figure.
struct ExportOptions {
    double widthInches = 3.5;  ///< 3.5 in: single column; 7 in: double column
    double aspect = 0.75;      ///< height / width
    int dpi = 300;             ///< PNG resolution
    bool pdf = true;
    bool svg = true;
    bool png = true;
    double basePointSize = 0.0; ///< font size in pt; 0 picks 8 pt up to 4 in wide, 9 pt beyond

    /// Width and height in points (1/72 in), the unit of the PDF and SVG page.
    int widthPoints() const;
    int heightPoints() const;
    /// PNG height in pixels: the height in inches times dpi (the width is widthInches x dpi).
    int pngHeightPixels() const;
};

/// What an export wrote, or the first error (naming the path).
struct ExportOutcome {
    QStringList written;
    QString error;
    bool ok() const { return error.isEmpty(); }
};

/// Writes `stem`.pdf/.svg/.png of the view's figure into `dir` in the print style, plus
/// `stem`.csv (the view's data) and `stem`.spec.json (`specJson`). Every file is written to a
/// temporary beside it and renamed into place, so a failure leaves any older file intact.
ExportOutcome exportView(ResultView& view, const QString& dir, const QString& stem, const ExportOptions& options,
                         const QByteArray& specJson);

/// Exports several views into `dir` as one set (the window's Export all, and Export view): every
/// file is written into a staging folder inside `dir` first, and only when all of them are written
/// are they renamed into place. A failure (a full disk, a view still computing) leaves the files
/// already in `dir` as they were and names the file and the reason. `stemFor(view)` gives each
/// view's file stem.
ExportOutcome exportViews(const std::vector<ResultView*>& views, const QString& dir,
                          const std::function<QString(const ResultView&)>& stemFor, const ExportOptions& options,
                          const QByteArray& specJson);

} // namespace kvlens::widgets
