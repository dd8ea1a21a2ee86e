// SPDX-License-Identifier: GPL-3.0-or-later
// Figures as data: what a view draws (panels, axes, series, notes) as plain values. Pure functions build
// it from a view's inputs; one drawer puts it on a PlotWidget, for the window and every export alike.
#pragma once

#include <QBrush>
#include <QColor>
#include <QMargins>
#include <QPair>
#include <QPen>
#include <QPointF>
#include <QSize>
#include <QString>
#include <QStringList>
#include <QVector>

#include <optional>
#include <vector>

class QCPAxisRect;

namespace kvlens::widgets {

class PlotWidget;

/// Marker shapes, in QCustomPlot's order (QCPScatterStyle::ScatterShape).
enum class Marker { None, Dot, Cross, Plus, Circle, Disc, Square, Diamond, Star, Triangle, TriangleInverted };
/// The i-th marker of the house sequence (circle, square, triangle, diamond, ...), as seriesShape(i).
Marker seriesMarker(int i);

struct MarkerStyle {
    Marker shape = Marker::None;
    QPen pen;
    QBrush brush;
    double size = 6.0;
};

/// The sides of a panel, and bit flags of them (QCustomPlot's QCP::MarginSide values).
enum class Side { Bottom, Left, Top, Right };
namespace margin {
inline constexpr int kLeft = 0x01, kRight = 0x02, kTop = 0x04, kBottom = 0x08, kAll = 0x0f;
}

/// How an axis finds its range. Fixed: [lower, upper]. Data: the range of what is drawn on it (every
/// series' values and intervals; positive ones only on a log axis), then `steps` in order. SameAs:
/// the resolved range of another panel's axis. Default: left as it is (an integer axis sets its own).
struct RangeSpec {
    enum class Mode { Default, Fixed, Data, SameAs };
    struct Step {
        enum class Op {
            LogPad,       ///< a log axis whose lower end is > 0: [lower / a, upper * a]
            LinearPad,    ///< a linear axis: lower -= a * max(size, c), upper += b * max(size, c)
            ScaleUpper,   ///< upper *= a
            SetLower,     ///< lower = a
            AtMostLower,  ///< lower = min(lower, a)
            AtLeastUpper, ///< upper = max(upper, a)
            AtMostUpper,  ///< upper = min(upper, a)
        };
        Op op = Op::LogPad;
        double a = 1.0, b = 0.0, c = 0.0;
    };
    Mode mode = Mode::Default;
    double lower = 0.0, upper = 0.0;
    std::vector<Step> steps;
    int samePanel = -1;
    Side sameSide = Side::Bottom;

    static RangeSpec fixed(double lower, double upper);
    static RangeSpec data(std::vector<Step> steps = {});
    static RangeSpec sameAs(int panel, Side side);
    static Step logPad(double factor) { return {Step::Op::LogPad, factor}; }
    static Step linearPad(double below, double above, double minSize = 0.0) { return {Step::Op::LinearPad, below, above, minSize}; }
    static Step scaleUpper(double factor) { return {Step::Op::ScaleUpper, factor}; }
    static Step setLower(double v) { return {Step::Op::SetLower, v}; }
    static Step atMostLower(double v) { return {Step::Op::AtMostLower, v}; }
    static Step atLeastUpper(double v) { return {Step::Op::AtLeastUpper, v}; }
    static Step atMostUpper(double v) { return {Step::Op::AtMostUpper, v}; }
};

/// An axis: its label, scale, ticks and range.
struct AxisSpec {
    /// Auto: QCustomPlot's linear ticks. Log: 10^k at every decade (PlotWidget::setLogAxis). LogTuned: a
    /// log axis whose labels are chosen for its final range (PlotWidget::tuneLogAxis). LogPlain: 10^k
    /// ticks labelled as plain numbers (1000, not 1e+03). Integer: whole numbers over [integerLow,
    /// integerHigh], half a step of room either side (PlotWidget::setIntegerAxis). Step: a tick every
    /// `step` (never scaled). Text: a label at each of `tickAt`.
    enum class Ticks { Auto, Log, LogTuned, LogPlain, Integer, Step, Text };
    std::optional<bool> visible; ///< unset: QCustomPlot's (bottom and left shown)
    QString label;
    Ticks ticks = Ticks::Auto;
    double integerLow = 0.0, integerHigh = 0.0;
    double step = 1.0;
    QVector<double> tickAt;
    QStringList tickText;
    int tickCount = 0; ///< 0: the ticker's default
    RangeSpec range;
    bool reversed = false;
    bool tickLabels = true;
    bool tickMarks = true;
    bool subTicks = true;
    bool grid = true;
    bool zeroLine = true;
    double tickLabelRotation = 0.0;

    bool isLog() const { return ticks == Ticks::Log || ticks == Ticks::LogTuned || ticks == Ticks::LogPlain; }
};

/// A grid of the figure's layout: a cell of the plot's own layout (parent -1) or of another grid.
struct GridSpec {
    int parent = -1, row = 0, column = 0;
    std::vector<QPair<int, double>> rowStretch, columnStretch; ///< (row or column, factor)
    std::optional<int> rowSpacing;
};

/// A panel (an axis rect) at a cell of the plot's layout (grid -1) or of one of FigureSpec::grids.
/// Panel 0 is the plot's main axis rect.
struct PanelSpec {
    int grid = -1, row = 0, column = 0;
    AxisSpec x, y;   ///< bottom and left
    AxisSpec top, right;
    std::optional<QSize> minimumSize;
    std::optional<int> autoMargins; ///< margin:: flags
    std::optional<QMargins> margins, minimumMargins;
    int marginGroup = -1; ///< index below FigureSpec::marginGroups, or -1
    int marginSides = 0;  ///< margin:: flags aligned with the group

    AxisSpec& axis(Side side);
    const AxisSpec& axis(Side side) const;
};

/// A data series (or a decoration drawn like one). Graph: points and lines; Bars; Box: a quantile box
/// per key (boxMin, boxQ1, boxMedian, boxQ3, boxMax). With intervals (errorMinus/errorPlus, in the
/// series' order) error bars are drawn about each point.
struct SeriesSpec {
    enum class Kind { Graph, Bars, Box };
    enum class Line { None, Straight, StepLeft, StepCenter };
    /// How the points go in: Unsorted (sorted by key on the way in), Sorted (already sorted by key),
    /// OneByOne (inserted one after another, equal keys keeping their order).
    enum class Feed { Unsorted, Sorted, OneByOne };
    Kind kind = Kind::Graph;
    QString name;
    int panel = 0;
    bool transposed = false; ///< keys along the left axis, values along the bottom one
    QVector<double> x, y;    ///< keys and values
    Feed feed = Feed::Unsorted;
    bool data = true;         ///< the figure's data (CSV, series count); else decoration (a reference line)
    int legend = 0;           ///< index of FigureSpec::legends it is listed in, or -1
    Line line = Line::Straight;
    QPen pen;
    QBrush brush;
    MarkerStyle marker;
    bool adaptiveSampling = true;
    bool underGrid = false; ///< drawn on the grid's layer, under the data (a band)
    // Intervals
    QVector<double> errorMinus, errorPlus;
    bool errorBars = false; ///< error bars drawn even while there is no interval (an emptied line)
    bool keyErrors = false;
    QPen errorPen;
    double whiskerWidth = -1.0; ///< < 0: QCustomPlot's default
    double symbolGap = -1.0;
    // Bars
    double barWidth = 0.75;
    int barGroup = -1; ///< index of FigureSpec::barGroups, or -1
    double barBase = 0.0;
    // Box
    QVector<double> boxMin, boxQ1, boxMedian, boxQ3, boxMax;
    QPen medianPen, whiskerPen, whiskerBarPen;
    double boxWidth = 0.5, boxWhiskerWidth = 0.2;

    bool hasErrors() const { return errorBars || !errorMinus.isEmpty() || !errorPlus.isEmpty(); }
    int size() const { return static_cast<int>(x.size()); }
};

/// Bars placed side by side at each key. Absolute spacing is in pixels, else in plot coordinates.
struct BarGroupSpec {
    bool absolute = true;
    double spacing = 4.0;
};

/// A heat map of `columns` x `rows` cells (cell centres from xFirst..xLast and yFirst..yLast), its
/// colours from `gradient` over [lower, upper] (NaN cells transparent), and its colour scale.
struct ColorMapSpec {
    int panel = 0;
    QString name;
    int columns = 0, rows = 0;
    double xFirst = 0.0, xLast = 0.0, yFirst = 0.0, yLast = 0.0;
    QVector<double> cells; ///< cells[row * columns + column]
    QVector<QPair<double, QColor>> gradient;
    double lower = 0.0, upper = 1.0;
    // The colour scale, right of the map.
    int scaleGrid = -1, scaleRow = 0, scaleColumn = 1;
    QString scaleLabel;
    int marginGroup = -1, marginSides = 0;

    double cell(int column, int row) const { return cells.value(row * columns + column); }
};

/// A decoration: text, an infinite straight line through a and b, a segment from a to b, or a rectangle.
/// Coordinates are the panel's axes, or (xRatio / yRatio) fractions of its rect.
struct ItemSpec {
    enum class Kind { Text, StraightLine, Segment, Rect };
    Kind kind = Kind::Text;
    int panel = 0;
    bool xRatio = false, yRatio = false;
    QPointF a, b;
    QString text;
    QColor color = Qt::black;
    Qt::Alignment align = Qt::AlignCenter;
    Qt::Alignment textAlign = Qt::AlignTop | Qt::AlignHCenter;
    QPen pen = QPen(Qt::black);
    QBrush brush;
    bool clip = true;     ///< clipped to the rect of clipPanel (or its own panel)
    int clipPanel = -1;
    bool windowOnly = false; ///< a mark of the window's (PlotWidget::kUiLayer): never exported
};

/// A legend. Inset: inside `panel` at `alignment`. Below: a row of its own under the figure
/// (PlotWidget::placeLegendBelow; its place among the footnotes is its entry in FigureSpec::below).
/// Cell: at a cell of a grid. Entries: the series listing it, in series order, unless `entries` names them.
struct LegendSpec {
    enum class Place { Hidden, Inset, Below, Cell };
    Place place = Place::Inset;
    int panel = 0;
    Qt::Alignment alignment = Qt::AlignTop | Qt::AlignRight;
    int grid = -1, row = 0, column = 0;
    int columns = 0;        ///< entries per row (0: QCustomPlot's one column)
    bool columnsFirst = false;
    bool frameless = false; ///< no border and no fill (a legend in its own cell)
    std::vector<int> entries;
};

/// What goes under the panels, row after row: a legend placed Below, or a footnote.
struct BelowRow {
    int legend = -1; ///< >= 0: that legend; else the footnote `text`
    QString text;
};

/// A whole figure.
struct FigureSpec {
    std::vector<GridSpec> grids;
    std::vector<PanelSpec> panels{PanelSpec{}};
    std::vector<SeriesSpec> series;
    std::vector<BarGroupSpec> barGroups;
    std::vector<ColorMapSpec> colorMaps;
    std::vector<ItemSpec> items;
    std::vector<LegendSpec> legends{LegendSpec{}};
    int marginGroups = 0;
    std::vector<QPair<int, double>> rowStretch; ///< (row, factor) of the plot's own layout
    std::vector<BelowRow> below;
    QString title; ///< a row above everything (a page of several: "n = 3")
    /// Lay the figure out at once at the widget's size instead of at the next repaint. A colour scale
    /// keeps the margins of its first layout (QCustomPlot never shrinks them), so this decides the
    /// Model map's margins in every export: kept as it was.
    bool layoutNow = false;
    /// Pairs of axes that pan and zoom together: (panel, side) and (panel, side).
    std::vector<QPair<QPair<int, Side>, QPair<int, Side>>> linked;

    /// Appends a footnote row.
    void addFootnote(const QString& text) { below.push_back(BelowRow{-1, text}); }
    /// Index of the first series called `name`, or -1.
    int findSeries(const QString& name) const;
    /// The data series (SeriesSpec::data) of a panel, in order.
    std::vector<const SeriesSpec*> dataSeries(int panel = -1) const;
};

/// Graphs whose points (sorted by key) equal an earlier graph's on the same axes, each paired with
/// that earlier one, in series order (only data series with points). Each later one is restyled so
/// both show: a dashed line over the solid one, hollow rings around the markers (PlotWidget's
/// convention, now on the description). Returns the (later, earlier) pairs.
std::vector<QPair<int, int>> markCoincidentSeries(FigureSpec& figure);
/// markCoincidentSeries, then a footnote "`lead` B = A; D = C" (each pair once; with `legendOnly`,
/// only series listed in the main legend; at most four groups named). Returns the "B = A" texts.
QStringList noteCoincidences(FigureSpec& figure, const QString& lead, bool legendOnly = true);
/// On log value axes, intervals whose lower end is at or below 0 would fall to the axis floor: their
/// downward half is dropped and a decoration series "interval reaches 0" of ▼ markers (under each
/// such point) is added, listed in the main legend. Returns the points so marked.
int clipLogIntervals(FigureSpec& figure);

/// Draws `figure` on `plot` (replacing what it held): the one drawer of every figure, live and exported.
/// Returns the axis rect of each panel, in the description's order.
std::vector<QCPAxisRect*> drawFigure(PlotWidget& plot, const FigureSpec& figure);

} // namespace kvlens::widgets
