// SPDX-License-Identifier: GPL-3.0-or-later
// The one QCustomPlot subclass that owns how every KVLens figure looks, reads out points, and lists its data.
#pragma once

#include "widgets/formula_label.h"

#include <qcustomplot.h>

#include <QColor>
#include <QSet>
#include <QString>
#include <QVector>

#include <functional>
#include <memory>
#include <vector>

namespace kvlens::widgets {

/// Okabe & Ito (2008) colour-blind-safe palette, in its canonical order (black last:
/// it is kept for reference lines).
const QVector<QColor>& okabeItoPalette();
/// The i-th series colour (cycles through the palette without black).
QColor seriesColor(int i);
/// The i-th marker shape (circle, square, triangle, diamond, ...), e.g. one per budget.
QCPScatterStyle::ScatterShape seriesShape(int i);
/// `base` shaded for level `level` of `levels` (e.g. a scheme's colour by budget): the lowest
/// level lightest, the highest darkest, the hue kept; one level returns `base` unchanged.
QColor shadeForLevel(const QColor& base, int level, int levels);

/// Base of every plot: fonts, colours, zoom/pan, legend, a hover read-out of the point under
/// the cursor, and a light "paper" style used for export whatever the live theme. Views only
/// feed data. Series added through addSeries() are the view's data (listed in dataCsv());
/// other graphs and items are decoration (reference lines, labels).
class PlotWidget : public QCustomPlot {
    Q_OBJECT
public:
    explicit PlotWidget(QWidget* parent = nullptr);

    /// Applies the print style (white background, black axes, given base font size in pt); no
    /// text, 10^k exponents included, is set below `minimumPointSize`.
    void applyPaperStyle(double basePointSize = 9.0, double minimumPointSize = 0.0,
                         const QString& family = QStringLiteral("DejaVu Sans"));
    /// QCustomPlot's size for the exponent of a 10^k tick label, relative to the tick font.
    static constexpr double kExponentScale = 0.75;
    /// Whether the axis draws 10^k tick labels (number format "eb").
    static bool hasExponents(const QCPAxis* axis);
    /// Chooses each axis's tick count from its length at the given print size (in points), so
    /// labels never crowd: linear axes get at most one label per label width plus an em, log
    /// axes one per decade while they fit (with minor ticks), fewer otherwise.
    void fitTicksToPrint(int widthPoints, int heightPoints);
    /// Where each tick label of an axis lies along it (pixels of the last layout), left to right
    /// or bottom to top, as QCustomPlot lays them out (a 10^k label: base, then a 3/4-size exponent).
    struct TickSpan {
        double from = 0.0, to = 0.0;
        QString label;
        double value = 0.0;
    };
    static std::vector<TickSpan> tickLabelSpans(const QCPAxis* axis);
    /// Neighbouring tick labels of the axis with less than a point between them ("x axis: "0.04" and "0.05"").
    static QStringList tickOverlaps(const QCPAxis* axis);
    /// Paints the axis labels written in formula markup (formula_label.h), where QCustomPlot
    /// laid out their room; called by the plot's overlay layer.
    void drawFormulaLabels(QPainter& painter);
    /// How an axis's formula label is laid out in its current font (for tests and drawing).
    FormulaLayout formulaLayout(const QCPAxis* axis, QPaintDevice* device = nullptr) const;
    /// Every axis that may carry a label: the axis rects' and the colour scales'.
    QList<QCPAxis*> labelledAxes() const;
    /// Puts back the tick counts fitTicksToPrint changed.
    void restoreLiveTicks();

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
    /// Picks log tick labels for the axis's current range: 10^k powers (every decade, minor
    /// ticks between) when it spans three decades or more, plain 1-2-5 numbers (0.005, 0.01,
    /// 0.02) inside a narrower range.
    static void tuneLogAxis(QCPAxis* axis);
    /// An axis of whole numbers (budgets, ranks, layers) over [lo, hi]: ticks only at integers
    /// (every one while they fit, else every 2nd, 5th...), and half a step of room either side, so
    /// a single value sits in the middle instead of on a span of fractional ticks.
    static void setIntegerAxis(QCPAxis* axis, double lo, double hi);
    /// Whether every value is a whole number (an integer axis fits them).
    static bool allIntegers(const QVector<double>& values);
    /// On log value axes, error bars whose lower end is at or below 0 would fall to the axis floor:
    /// their downward half is dropped and a ▼ marker ("interval reaches 0") is drawn under the
    /// point instead. Call after the axes are made logarithmic. Returns the points so marked.
    int clipLogErrorBars();
    /// Moves the legend out of the plot area into a row below it, `columns` entries wide.
    void placeLegendBelow(int columns);

    /// Hides or shows the data series called `name` (what a click on its legend entry does); the
    /// choice survives redraws with new data, and a hidden series' legend entry turns grey.
    void toggleSeries(const QString& name);
    bool seriesHidden(const QString& name) const { return m_hidden.contains(name); }
    /// While set, every data series is drawn and every legend entry black, whatever was hidden:
    /// hiding is a way of looking, and an exported figure shows what its CSV holds (every series).
    void setShowAllSeries(bool all) { m_showAll = all; }

    /// The layer of what only the live window shows (a selected cell's outline, markers of the
    /// user's choices): above the data, and hidden while a figure is exported.
    static constexpr const char* kUiLayer = "kvlens-ui";
    QCPLayer* uiLayer() { return layer(QString::fromLatin1(kUiLayer)); }

    /// A line (or lines, separated by '\n') of small text in a row of its own under the figure:
    /// what a reader must know about what it draws (identical curves, a series a log axis cannot
    /// show). Styled with the legend's font; part of every export.
    QCPTextElement* addFootnote(const QString& text);
    /// The footnotes added since the last resetPlot (their texts).
    QStringList footnotes() const;
    /// Object name of the footnote rows (and of the note an export of a partial run adds on top).
    static constexpr const char* kNoteName = "kvlens-note";
    /// Footnote lines are wrapped to this many characters: what fits a single column (3.5 in) in 6-7 pt.
    static constexpr int kFootnoteChars = 60;


    /// Everything applyPaperStyle sets (fonts, pens, legend geometry and frames, text fonts), to
    /// put a plot back exactly as it was after a print style was applied for an export.
    struct StyleState;
    std::shared_ptr<StyleState> saveStyle();
    void restoreStyle(const StyleState& state);

    /// Read-out for places that are not a graph's point (a heatmap's cells, a bar): called on every
    /// mouse move the graphs do not answer; an empty string means nothing is under the cursor. The
    /// text shows as the tooltip and in hovered(), like a point's.
    void setHoverProvider(std::function<QString(const QPointF&)> provider) { m_hoverProvider = std::move(provider); }
    /// The read-out shown for the last mouse move ("" when nothing was under the cursor).
    QString hoverText() const { return m_hoverText; }

signals:
    /// Emitted with the read-out text whenever the cursor is over a data point or a place the
    /// hover provider describes ("" otherwise).
    void hovered(const QString& text);

protected:
    void mouseMoveEvent(QMouseEvent* event) override;
    /// Read-out of point `index` of a series; views may say more (seed, scheme details).
    virtual QString describePoint(const QCPGraph* graph, int index) const;

private:
    void applyHidden();

    QList<QCPAbstractPlottable*> m_series;
    std::function<QString(const QPointF&)> m_hoverProvider;
    QString m_hoverText;
    QSet<QString> m_hidden;
    bool m_showAll = false;
    double m_minimumPointSize = 0.0;
    struct LiveTicks {
        QSharedPointer<QCPAxisTicker> ticker;
        int tickCount = 5, subTickCount = 0;
    };
    QList<LiveTicks> m_liveTicks;
};

} // namespace kvlens::widgets
