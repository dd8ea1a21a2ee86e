// SPDX-License-Identifier: GPL-3.0-or-later
// The one QCustomPlot subclass that owns how every KVLens figure looks.
#pragma once

#include <qcustomplot.h>

#include <QColor>
#include <QVector>

namespace kvlens::widgets {

/// Okabe & Ito (2008) colour-blind-safe palette, in its canonical order (black last:
/// it is kept for reference lines).
const QVector<QColor>& okabeItoPalette();
/// The i-th series colour (cycles through the palette without black).
QColor seriesColor(int i);

/// Base of every plot view: fonts, colours, zoom/pan, a legend, and a light "paper"
/// style used for export whatever the live theme. Views only feed data.
class PlotWidget : public QCustomPlot {
    Q_OBJECT
public:
    explicit PlotWidget(QWidget* parent = nullptr);

    /// Applies the print style (white background, black axes, given base font size in pt).
    void applyPaperStyle(double basePointSize = 9.0);
};

} // namespace kvlens::widgets
