// SPDX-License-Identifier: GPL-3.0-or-later
// The one QCustomPlot subclass that owns how every KVLens figure looks, reads out points, and lists its data.
#pragma once

#include <qcustomplot.h>

#include <QColor>
#include <QSet>
#include <QString>
#include <QVector>

namespace kvlens::widgets {

/// Okabe & Ito (2008) colour-blind-safe palette, in its canonical order (black last:
/// it is kept for reference lines).
const QVector<QColor>& okabeItoPalette();
/// The i-th series colour (cycles through the palette without black).
QColor seriesColor(int i);
/// The i-th marker shape (circle, square, triangle, diamond, ...), e.g. one per budget.
QCPScatterStyle::ScatterShape seriesShape(int i);

/// Base of every plot: fonts, colours, zoom/pan, legend, a hover read-out of the point under
/// the cursor, and a light "paper" style used for export whatever the live theme. Views only
/// feed data. Series added through addSeries() are the view's data (listed in dataCsv());
/// other graphs and items are decoration (reference lines, labels).
class PlotWidget : public QCustomPlot {
    Q_OBJECT
public:
    explicit PlotWidget(QWidget* parent = nullptr);

    /// Applies the print style (white background, black axes, given base font size in pt).
    void applyPaperStyle(double basePointSize = 9.0);

    /// Removes every graph, plottable, item and extra axis rect, keeping one axis rect.
    void resetPlot();

    /// A scatter series (no line) on `rect` (default: the main axis rect).
    QCPGraph* addScatterSeries(const QString& name, const QColor& color, QCPScatterStyle::ScatterShape shape,
                               double size = 5.0, QCPAxisRect* rect = nullptr);
    /// A line series with markers.
    QCPGraph* addLineSeries(const QString& name, const QColor& color, QCPScatterStyle::ScatterShape shape,
                            Qt::PenStyle style = Qt::SolidLine, QCPAxisRect* rect = nullptr);
    /// Marks a graph as data (counted by seriesCount, written by dataCsv).
    void markSeries(QCPAbstractPlottable* plottable);

    /// Number of data series that hold at least one point.
    int seriesCount() const;
    /// Every data point drawn: panel, series, x, y, and the error bars when there are any.
    QString dataCsv() const;

    /// Makes an axis logarithmic (call tuneLogAxis once its range is known).
    static void setLogAxis(QCPAxis* axis);
    /// Picks log tick labels for the axis's current range: 10^k powers when it spans two
    /// decades or more, plain numbers (0.3, 0.5, 1) inside a narrower range.
    static void tuneLogAxis(QCPAxis* axis);
    /// Moves the legend out of the plot area into a row below it, `columns` entries wide.
    void placeLegendBelow(int columns);

    /// Hides or shows the data series called `name` (what a click on its legend entry does); the
    /// choice survives redraws with new data, and a hidden series' legend entry turns grey.
    void toggleSeries(const QString& name);
    bool seriesHidden(const QString& name) const { return m_hidden.contains(name); }

signals:
    /// Emitted with the read-out text whenever the cursor is over a data point ("" otherwise).
    void hovered(const QString& text);

protected:
    void mouseMoveEvent(QMouseEvent* event) override;
    /// Read-out of point `index` of a series; views may say more (seed, scheme details).
    virtual QString describePoint(const QCPGraph* graph, int index) const;

private:
    void applyHidden();

    QList<QCPAbstractPlottable*> m_series;
    QSet<QString> m_hidden;
};

} // namespace kvlens::widgets
