// SPDX-License-Identifier: GPL-3.0-or-later
// Formula labels (p̂, φ_K, SNR_K, ε_dir^K) laid out and painted with real sub/superscripts and a
// drawn hat, so they read the same in the window, PNG, PDF and SVG (QCustomPlot draws plain text,
// and the fonts' combining circumflex lands away from its letter in Qt's PDF and raster output).
#pragma once

#include <QFont>
#include <QPainterPath>
#include <QRectF>
#include <QString>

#include <vector>

class QPainter;

namespace kvlens::widgets {

/// Whether `label` uses formula markup: `_x` or `_{xy}` (subscript), `^x` or `^{xy}`
/// (superscript, stacked over a subscript just before it), or a letter followed by U+0302 (hat).
bool isFormula(const QString& label);

/// `label` without markup, the hat dropped ("SNR_K" -> "SNRK", "p̂" -> "p"): for widths and tooltips.
QString formulaPlainText(const QString& label);

/// A formula laid out from its left end on the baseline (y grows downwards, as in Qt).
struct FormulaLayout {
    struct Piece {
        QString text;
        QFont font;
        QPointF origin;  ///< where drawText puts its baseline start
        QRectF box;      ///< the piece's ink-free box: advance x (ascent + descent)
    };
    std::vector<Piece> pieces;
    /// Hats: the path (a chevron stroked with `hatPen` width) and the box of the letter under it.
    struct Hat {
        QPainterPath path;
        QRectF letter;
        double penWidth = 0.0;
    };
    std::vector<Hat> hats;
    double width = 0.0, ascent = 0.0, descent = 0.0;
};

/// Lays out `label` in `font`; sub- and superscripts at 3/4 of its size, never below
/// `minimumPointSize` (0: no floor). Metrics are those of `font` on the given paint device
/// (null: the screen's).
FormulaLayout layoutFormula(const QString& label, const QFont& font, double minimumPointSize = 0.0,
                            QPaintDevice* device = nullptr);

/// Paints a layout with its left baseline point at `origin`.
void paintFormula(QPainter& painter, const FormulaLayout& layout, QPointF origin, const QColor& color);

} // namespace kvlens::widgets
