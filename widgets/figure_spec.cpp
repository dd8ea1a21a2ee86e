// SPDX-License-Identifier: GPL-3.0-or-later
// The one drawer of figure descriptions, and the pure rules every figure shares (coincident series,
// intervals a log axis cannot show).
#include "widgets/figure_spec.h"

#include "widgets/plot_widget.h"

#include <QHash>

#include <algorithm>
#include <cmath>
#include <map>

namespace kvlens::widgets {

Marker seriesMarker(int i)
{
    static const Marker shapes[] = {Marker::Circle, Marker::Square,           Marker::Triangle, Marker::Diamond,
                                    Marker::TriangleInverted, Marker::Cross, Marker::Plus,     Marker::Star};
    return shapes[((i % 8) + 8) % 8];
}

RangeSpec RangeSpec::fixed(double lower, double upper)
{
    RangeSpec r;
    r.mode = Mode::Fixed;
    r.lower = lower;
    r.upper = upper;
    return r;
}

RangeSpec RangeSpec::data(std::vector<Step> steps)
{
    RangeSpec r;
    r.mode = Mode::Data;
    r.steps = std::move(steps);
    return r;
}

RangeSpec RangeSpec::sameAs(int panel, Side side)
{
    RangeSpec r;
    r.mode = Mode::SameAs;
    r.samePanel = panel;
    r.sameSide = side;
    return r;
}

AxisSpec& PanelSpec::axis(Side side)
{
    switch (side) {
    case Side::Bottom: return x;
    case Side::Left: return y;
    case Side::Top: return top;
    case Side::Right: return right;
    }
    return x;
}

const AxisSpec& PanelSpec::axis(Side side) const
{
    return const_cast<PanelSpec*>(this)->axis(side);
}

int FigureSpec::findSeries(const QString& name) const
{
    for (std::size_t i = 0; i < series.size(); ++i)
        if (series[i].name == name)
            return static_cast<int>(i);
    return -1;
}

std::vector<const SeriesSpec*> FigureSpec::dataSeries(int panel) const
{
    std::vector<const SeriesSpec*> out;
    for (const SeriesSpec& s : series)
        if (s.data && (panel < 0 || s.panel == panel))
            out.push_back(&s);
    return out;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Pure rules on the description

struct Point {
    double key = 0.0, value = 0.0;
};

/// The points of a graph in the order QCustomPlot keeps them: sorted by key (std::sort, as its data
/// container sorts), as given when already sorted, or inserted one by one.
std::vector<Point> storedPoints(const SeriesSpec& s)
{
    std::vector<Point> p;
    const int n = std::min(s.size(), static_cast<int>(s.y.size()));
    if (s.feed == SeriesSpec::Feed::OneByOne) {
        for (int i = 0; i < n; ++i) {
            const Point q{s.x[i], s.y[i]};
            // An append when not before the last key, else before the first of its equals.
            if (p.empty() || !(q.key < p.back().key))
                p.push_back(q);
            else
                p.insert(std::lower_bound(p.begin(), p.end(), q, [](const Point& a, const Point& b) { return a.key < b.key; }), q);
        }
        return p;
    }
    for (int i = 0; i < n; ++i)
        p.push_back({s.x[i], s.y[i]});
    if (s.feed == SeriesSpec::Feed::Unsorted)
        std::sort(p.begin(), p.end(), [](const Point& a, const Point& b) { return a.key < b.key; });
    return p;
}

/// Whether series `index` is listed in legend `legend`.
bool listedIn(const FigureSpec& figure, int legend, int index)
{
    if (legend < 0 || legend >= static_cast<int>(figure.legends.size()))
        return false;
    const LegendSpec& l = figure.legends[static_cast<std::size_t>(legend)];
    if (!l.entries.empty())
        return std::find(l.entries.begin(), l.entries.end(), index) != l.entries.end();
    return figure.series[static_cast<std::size_t>(index)].legend == legend;
}

bool valueAxisIsLog(const FigureSpec& figure, const SeriesSpec& s)
{
    const PanelSpec& p = figure.panels[static_cast<std::size_t>(s.panel)];
    return (s.transposed ? p.x : p.y).isLog();
}

} // namespace

std::vector<QPair<int, int>> markCoincidentSeries(FigureSpec& figure)
{
    std::vector<int> graphs;
    std::vector<std::vector<Point>> stored;
    for (std::size_t i = 0; i < figure.series.size(); ++i) {
        const SeriesSpec& s = figure.series[i];
        if (s.kind == SeriesSpec::Kind::Graph && s.data && s.size() > 0) {
            graphs.push_back(static_cast<int>(i));
            stored.push_back(storedPoints(s));
        }
    }
    auto same = [&](std::size_t a, std::size_t b) {
        const SeriesSpec& sa = figure.series[static_cast<std::size_t>(graphs[a])];
        const SeriesSpec& sb = figure.series[static_cast<std::size_t>(graphs[b])];
        if (sa.panel != sb.panel || sa.transposed != sb.transposed || stored[a].size() != stored[b].size())
            return false;
        for (std::size_t k = 0; k < stored[a].size(); ++k)
            if (stored[a][k].key != stored[b][k].key || stored[a][k].value != stored[b][k].value)
                return false;
        return true;
    };
    std::vector<QPair<int, int>> out;
    std::vector<bool> marked(graphs.size(), false);
    for (std::size_t i = 0; i < graphs.size(); ++i)
        for (std::size_t j = 0; j < i; ++j) {
            if (marked[j] || !same(i, j))
                continue;
            SeriesSpec& later = figure.series[static_cast<std::size_t>(graphs[i])];
            const SeriesSpec& earlier = figure.series[static_cast<std::size_t>(graphs[j])];
            const QColor color = later.pen.color();
            // Hollow rings larger than the markers under them, and a dashed line whose gaps show
            // the line beneath: both series stay visible where they lie on each other.
            later.marker = MarkerStyle{Marker::Circle, QPen(color, 1.2), QBrush(Qt::NoBrush),
                                       std::max(6.0, earlier.marker.size) + 4.0};
            if (later.line != SeriesSpec::Line::None) {
                later.pen.setStyle(Qt::CustomDashLine);
                later.pen.setDashPattern({3.0, 3.0});
            }
            marked[i] = true;
            out.push_back(qMakePair(graphs[i], graphs[j]));
            break;
        }
    return out;
}

QStringList noteCoincidences(FigureSpec& figure, const QString& lead, bool legendOnly)
{
    QStringList pairs;
    // The note groups the series each one coincides with ("B = A = D") and names at most
    // kMaxCoincidenceGroups groups: a model run's dozens of identical clouds would otherwise fill
    // the page below the figure (the returned pairs, and the CSV, keep every one).
    QStringList order;
    QHash<QString, QStringList> groups;
    for (const auto& [later, earlier] : markCoincidentSeries(figure)) {
        if (legendOnly && !listedIn(figure, 0, later))
            continue;
        const QString laterName = figure.series[static_cast<std::size_t>(later)].name;
        const QString earlierName = figure.series[static_cast<std::size_t>(earlier)].name;
        const QString text = QStringLiteral("%1 = %2").arg(laterName, earlierName);
        if (pairs.contains(text))
            continue;
        pairs << text;
        if (!groups.contains(earlierName))
            order << earlierName;
        groups[earlierName] << laterName;
    }
    if (!pairs.isEmpty()) {
        constexpr int kMaxCoincidenceGroups = 4;
        QStringList shown;
        for (int i = 0; i < order.size() && i < kMaxCoincidenceGroups; ++i)
            shown << groups[order[i]].join(QStringLiteral(" = ")) + QStringLiteral(" = ") + order[i];
        QString text = lead + shown.join(QStringLiteral("; "));
        if (order.size() > kMaxCoincidenceGroups)
            text += QStringLiteral("; %1 more groups").arg(order.size() - kMaxCoincidenceGroups);
        figure.addFootnote(text);
    }
    return pairs;
}

int clipLogIntervals(FigureSpec& figure)
{
    std::map<std::pair<int, bool>, std::pair<QVector<double>, QVector<double>>> marks;
    for (SeriesSpec& s : figure.series) {
        if (s.kind != SeriesSpec::Kind::Graph || !s.hasErrors() || s.keyErrors || !valueAxisIsLog(figure, s))
            continue;
        // The k-th interval belongs to the k-th point as the graph stores it (sorted by key).
        const std::vector<Point> points = storedPoints(s);
        auto& [xs, ys] = marks[{s.panel, s.transposed}];
        const int n = std::min(static_cast<int>(points.size()), static_cast<int>(std::max(s.errorMinus.size(), s.errorPlus.size())));
        s.errorMinus.resize(std::max(s.errorMinus.size(), s.errorPlus.size()));
        for (int k = 0; k < n; ++k) {
            const double y = points[static_cast<std::size_t>(k)].value;
            if (y > 0.0 && y - s.errorMinus[k] <= 0.0) {
                s.errorMinus[k] = 0.0;
                xs << points[static_cast<std::size_t>(k)].key;
                ys << y / 1.5;
            }
        }
    }
    int marked = 0;
    for (const auto& [axes, points] : marks) {
        if (points.first.isEmpty())
            continue;
        SeriesSpec g;
        g.name = QStringLiteral("interval reaches 0");
        g.panel = axes.first;
        g.transposed = axes.second;
        g.data = false;
        g.line = SeriesSpec::Line::None;
        g.pen = QPen(Qt::blue, 0);
        g.marker = MarkerStyle{Marker::TriangleInverted, QPen(Qt::black), QBrush(Qt::black), 5.0};
        g.x = points.first;
        g.y = points.second;
        figure.series.push_back(g);
        marked += static_cast<int>(points.first.size());
    }
    return marked;
}

// ---------------------------------------------------------------------------------------------
// The drawer

namespace {

QCPAxis::AxisType axisType(Side side)
{
    switch (side) {
    case Side::Bottom: return QCPAxis::atBottom;
    case Side::Left: return QCPAxis::atLeft;
    case Side::Top: return QCPAxis::atTop;
    case Side::Right: return QCPAxis::atRight;
    }
    return QCPAxis::atBottom;
}

QCP::MarginSides marginSides(int flags)
{
    return QCP::MarginSides(flags);
}

QCPScatterStyle scatterStyle(const MarkerStyle& m)
{
    return QCPScatterStyle(static_cast<QCPScatterStyle::ScatterShape>(m.shape), m.pen, m.brush, m.size);
}

/// What drawFigure has made of a description, to look parts up by index.
struct Drawn {
    PlotWidget& plot;
    std::vector<QCPLayoutGrid*> grids;
    std::vector<QCPAxisRect*> panels;
    std::vector<QCPAbstractPlottable*> series;
    std::vector<QCPBarsGroup*> barGroups;
    std::vector<QCPMarginGroup*> marginGroups;
    std::vector<QCPLegend*> legends;

    QCPLayoutGrid* grid(int index) const
    {
        return index < 0 ? plot.plotLayout() : grids[static_cast<std::size_t>(index)];
    }
    QCPAxis* axis(int panel, Side side) const { return panels[static_cast<std::size_t>(panel)]->axis(axisType(side)); }
};

void setupAxis(QCPAxis* axis, const AxisSpec& a)
{
    if (a.visible)
        axis->setVisible(*a.visible);
    axis->setLabel(a.label);
    switch (a.ticks) {
    case AxisSpec::Ticks::Auto: break;
    case AxisSpec::Ticks::Log:
    case AxisSpec::Ticks::LogTuned:
    case AxisSpec::Ticks::LogPlain: PlotWidget::setLogAxis(axis); break;
    case AxisSpec::Ticks::Integer: PlotWidget::setIntegerAxis(axis, a.integerLow, a.integerHigh); break;
    case AxisSpec::Ticks::Step: {
        QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
        ticker->setTickStep(a.step);
        ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
        axis->setTicker(ticker);
        break;
    }
    case AxisSpec::Ticks::Text: {
        QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
        for (int i = 0; i < a.tickAt.size() && i < a.tickText.size(); ++i)
            ticker->addTick(a.tickAt[i], a.tickText[i]);
        axis->setTicker(ticker);
        break;
    }
    }
    if (a.tickCount > 0)
        axis->ticker()->setTickCount(a.tickCount);
    if (a.range.mode == RangeSpec::Mode::Fixed)
        axis->setRange(a.range.lower, a.range.upper);
    if (a.reversed)
        axis->setRangeReversed(true);
    if (!a.tickMarks)
        axis->setTicks(false);
    if (!a.tickLabels)
        axis->setTickLabels(false);
    if (!a.subTicks)
        axis->setSubTicks(false);
    if (!a.grid)
        axis->grid()->setVisible(false);
    if (!a.zeroLine)
        axis->grid()->setZeroLinePen(Qt::NoPen);
    if (a.tickLabelRotation != 0.0)
        axis->setTickLabelRotation(a.tickLabelRotation);
}

void layOut(Drawn& d, const FigureSpec& f)
{
    PlotWidget& plot = d.plot;
    QCPAxisRect* main = plot.axisRect();
    const PanelSpec& first = f.panels.front();
    if (first.grid >= 0 || first.row != 0 || first.column != 0)
        plot.plotLayout()->take(main); // leaves its cell empty for whatever the description puts there
    for (const GridSpec& g : f.grids) {
        auto* grid = new QCPLayoutGrid;
        d.grid(g.parent)->addElement(g.row, g.column, grid);
        d.grids.push_back(grid);
    }
    for (std::size_t i = 0; i < f.panels.size(); ++i) {
        const PanelSpec& p = f.panels[i];
        QCPAxisRect* rect = i == 0 ? main : new QCPAxisRect(&plot);
        if (i > 0 || p.grid >= 0 || p.row != 0 || p.column != 0)
            d.grid(p.grid)->addElement(p.row, p.column, rect);
        d.panels.push_back(rect);
    }
    for (int g = 0; g < f.marginGroups; ++g)
        d.marginGroups.push_back(new QCPMarginGroup(&plot));
    for (std::size_t i = 0; i < f.panels.size(); ++i) {
        const PanelSpec& p = f.panels[i];
        QCPAxisRect* rect = d.panels[i];
        if (p.autoMargins)
            rect->setAutoMargins(marginSides(*p.autoMargins));
        if (p.minimumMargins)
            rect->setMinimumMargins(*p.minimumMargins);
        if (p.margins)
            rect->setMargins(*p.margins);
        if (p.minimumSize)
            rect->setMinimumSize(*p.minimumSize);
        for (Side side : {Side::Bottom, Side::Left, Side::Top, Side::Right})
            setupAxis(rect->axis(axisType(side)), p.axis(side));
        if (p.marginGroup >= 0)
            rect->setMarginGroup(marginSides(p.marginSides), d.marginGroups[static_cast<std::size_t>(p.marginGroup)]);
    }
    for (const BarGroupSpec& g : f.barGroups) {
        auto* group = new QCPBarsGroup(&plot);
        group->setSpacingType(g.absolute ? QCPBarsGroup::stAbsolute : QCPBarsGroup::stPlotCoords);
        group->setSpacing(g.spacing);
        d.barGroups.push_back(group);
    }
}

QCPAbstractPlottable* drawGraph(Drawn& d, const SeriesSpec& s, QCPAxis* key, QCPAxis* value)
{
    auto* g = new QCPGraph(key, value);
    g->setName(s.name);
    switch (s.line) {
    case SeriesSpec::Line::None: g->setLineStyle(QCPGraph::lsNone); break;
    case SeriesSpec::Line::Straight: g->setLineStyle(QCPGraph::lsLine); break;
    case SeriesSpec::Line::StepLeft: g->setLineStyle(QCPGraph::lsStepLeft); break;
    case SeriesSpec::Line::StepCenter: g->setLineStyle(QCPGraph::lsStepCenter); break;
    }
    g->setPen(s.pen);
    g->setBrush(s.brush);
    g->setScatterStyle(scatterStyle(s.marker));
    g->setAdaptiveSampling(s.adaptiveSampling);
    if (s.data)
        d.plot.markSeries(g);
    switch (s.feed) {
    case SeriesSpec::Feed::Unsorted: g->setData(s.x, s.y); break;
    case SeriesSpec::Feed::Sorted: g->setData(s.x, s.y, true); break;
    case SeriesSpec::Feed::OneByOne:
        for (int i = 0; i < s.size() && i < s.y.size(); ++i)
            g->addData(s.x[i], s.y[i]);
        break;
    }
    if (s.underGrid)
        g->setLayer(QStringLiteral("grid"));
    return g;
}

QCPAbstractPlottable* drawBars(Drawn& d, const SeriesSpec& s, QCPAxis* key, QCPAxis* value)
{
    auto* bars = new QCPBars(key, value);
    bars->setName(s.name);
    bars->setWidth(s.barWidth);
    if (s.barGroup >= 0)
        bars->setBarsGroup(d.barGroups[static_cast<std::size_t>(s.barGroup)]);
    bars->setPen(s.pen);
    bars->setBrush(s.brush);
    bars->setBaseValue(s.barBase);
    if (s.data)
        d.plot.markSeries(bars);
    if (s.feed == SeriesSpec::Feed::OneByOne) {
        for (int i = 0; i < s.size() && i < s.y.size(); ++i)
            bars->addData(s.x[i], s.y[i]);
    } else {
        bars->setData(s.x, s.y, s.feed == SeriesSpec::Feed::Sorted);
    }
    return bars;
}

QCPAbstractPlottable* drawBox(Drawn& d, const SeriesSpec& s, QCPAxis* key, QCPAxis* value)
{
    auto* box = new QCPStatisticalBox(key, value);
    box->setName(s.name);
    box->setPen(s.pen);
    box->setBrush(s.brush);
    box->setMedianPen(s.medianPen);
    box->setWhiskerPen(s.whiskerPen);
    box->setWhiskerBarPen(s.whiskerBarPen);
    box->setWidth(s.boxWidth);
    box->setWhiskerWidth(s.boxWhiskerWidth);
    if (s.data)
        d.plot.markSeries(box);
    for (int i = 0; i < s.size(); ++i)
        box->addData(s.x[i], s.boxMin.value(i), s.boxQ1.value(i), s.boxMedian.value(i), s.boxQ3.value(i), s.boxMax.value(i));
    return box;
}

void drawSeries(Drawn& d, const FigureSpec& f)
{
    for (const SeriesSpec& s : f.series) {
        QCPAxis* bottom = d.axis(s.panel, Side::Bottom);
        QCPAxis* left = d.axis(s.panel, Side::Left);
        QCPAxis* key = s.transposed ? left : bottom;
        QCPAxis* value = s.transposed ? bottom : left;
        QCPAbstractPlottable* p = nullptr;
        switch (s.kind) {
        case SeriesSpec::Kind::Graph: p = drawGraph(d, s, key, value); break;
        case SeriesSpec::Kind::Bars: p = drawBars(d, s, key, value); break;
        case SeriesSpec::Kind::Box: p = drawBox(d, s, key, value); break;
        }
        d.series.push_back(p);
        if (!s.hasErrors())
            continue;
        auto* errors = new QCPErrorBars(key, value);
        errors->setDataPlottable(p);
        if (s.keyErrors)
            errors->setErrorType(QCPErrorBars::etKeyError);
        errors->setData(s.errorMinus, s.errorPlus);
        errors->setPen(s.errorPen);
        if (s.whiskerWidth >= 0.0)
            errors->setWhiskerWidth(s.whiskerWidth);
        if (s.symbolGap >= 0.0)
            errors->setSymbolGap(s.symbolGap);
    }
}

void drawColorMaps(Drawn& d, const FigureSpec& f)
{
    for (const ColorMapSpec& c : f.colorMaps) {
        auto* map = new QCPColorMap(d.axis(c.panel, Side::Bottom), d.axis(c.panel, Side::Left));
        map->data()->setSize(c.columns, c.rows);
        map->data()->setRange(QCPRange(c.xFirst, c.xLast), QCPRange(c.yFirst, c.yLast));
        for (int row = 0; row < c.rows; ++row)
            for (int column = 0; column < c.columns; ++column)
                map->data()->setCell(column, row, c.cell(column, row));
        map->setInterpolate(false);
        map->setName(c.name);
        auto* scale = new QCPColorScale(&d.plot);
        d.grid(c.scaleGrid)->addElement(c.scaleRow, c.scaleColumn, scale);
        scale->setType(QCPAxis::atRight);
        map->setColorScale(scale);
        QCPColorGradient gradient;
        gradient.clearColorStops();
        for (const auto& [at, colour] : c.gradient)
            gradient.setColorStopAt(at, colour);
        gradient.setNanHandling(QCPColorGradient::nhTransparent);
        map->setGradient(gradient);
        map->setDataRange(QCPRange(c.lower, c.upper));
        scale->axis()->setLabel(c.scaleLabel);
        if (c.marginGroup >= 0)
            scale->setMarginGroup(marginSides(c.marginSides), d.marginGroups[static_cast<std::size_t>(c.marginGroup)]);
    }
}

void placePosition(Drawn& d, QCPItemPosition* position, const ItemSpec& item, QPointF at)
{
    QCPAxisRect* rect = d.panels[static_cast<std::size_t>(item.panel)];
    position->setAxisRect(rect);
    position->setAxes(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    position->setTypeX(item.xRatio ? QCPItemPosition::ptAxisRectRatio : QCPItemPosition::ptPlotCoords);
    position->setTypeY(item.yRatio ? QCPItemPosition::ptAxisRectRatio : QCPItemPosition::ptPlotCoords);
    position->setCoords(at);
}

void drawItems(Drawn& d, const FigureSpec& f)
{
    for (const ItemSpec& item : f.items) {
        QCPAbstractItem* made = nullptr;
        switch (item.kind) {
        case ItemSpec::Kind::Text: {
            auto* text = new QCPItemText(&d.plot);
            placePosition(d, text->position, item, item.a);
            text->setPositionAlignment(item.align);
            text->setTextAlignment(item.textAlign);
            text->setText(item.text);
            text->setColor(item.color);
            made = text;
            break;
        }
        case ItemSpec::Kind::StraightLine: {
            auto* line = new QCPItemStraightLine(&d.plot);
            placePosition(d, line->point1, item, item.a);
            placePosition(d, line->point2, item, item.b);
            line->setPen(item.pen);
            made = line;
            break;
        }
        case ItemSpec::Kind::Segment: {
            auto* line = new QCPItemLine(&d.plot);
            placePosition(d, line->start, item, item.a);
            placePosition(d, line->end, item, item.b);
            line->setPen(item.pen);
            made = line;
            break;
        }
        case ItemSpec::Kind::Rect: {
            auto* rect = new QCPItemRect(&d.plot);
            placePosition(d, rect->topLeft, item, item.a);
            placePosition(d, rect->bottomRight, item, item.b);
            rect->setPen(item.pen);
            rect->setBrush(item.brush);
            made = rect;
            break;
        }
        }
        made->setClipToAxisRect(item.clip);
        made->setClipAxisRect(d.panels[static_cast<std::size_t>(item.clipPanel >= 0 ? item.clipPanel : item.panel)]);
        if (item.windowOnly)
            made->setLayer(d.plot.uiLayer());
    }
}

void fillLegends(Drawn& d, const FigureSpec& f)
{
    for (std::size_t i = 0; i < f.legends.size(); ++i) {
        const LegendSpec& l = f.legends[i];
        std::vector<int> entries = l.entries;
        if (entries.empty())
            for (std::size_t s = 0; s < f.series.size(); ++s)
                if (f.series[s].legend == static_cast<int>(i))
                    entries.push_back(static_cast<int>(s));
        // An empty legend in a cell of its own would take the room of its margins: none is placed.
        if (i > 0 && (l.place == LegendSpec::Place::Hidden || (l.place == LegendSpec::Place::Cell && entries.empty()))) {
            d.legends.push_back(nullptr);
            continue;
        }
        QCPLegend* legend = i == 0 ? d.plot.legend : new QCPLegend;
        d.legends.push_back(legend);
        // Arranged before its entries go in, which then fill it in this order.
        if (l.frameless) {
            legend->setBorderPen(Qt::NoPen);
            legend->setBrush(Qt::NoBrush);
        }
        if (l.columnsFirst && l.place != LegendSpec::Place::Below)
            legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
        if (l.columns > 0 && l.place != LegendSpec::Place::Below) // placeLegendBelow arranges its own
            legend->setWrap(l.columns);
        QCPLayoutInset* home = d.panels[0]->insetLayout();
        switch (l.place) {
        case LegendSpec::Place::Hidden: legend->setVisible(false); break;
        case LegendSpec::Place::Below: break; // placed in its row under the figure (finishLayout)
        case LegendSpec::Place::Inset:
            if (i == 0 && l.panel == 0) {
                home->setInsetAlignment(0, l.alignment);
                break;
            }
            if (i == 0 && home->take(legend))
                home->simplify();
            d.panels[static_cast<std::size_t>(l.panel)]->insetLayout()->addElement(legend, l.alignment);
            legend->setLayer(QStringLiteral("legend"));
            break;
        case LegendSpec::Place::Cell:
            if (entries.empty()) { // the main legend stays in its panel, hidden
                legend->setVisible(false);
                break;
            }
            if (home->take(legend))
                home->simplify();
            legend->setVisible(true);
            d.grid(l.grid)->addElement(l.row, l.column, legend);
            legend->setLayer(QStringLiteral("legend"));
            break;
        }
        for (int s : entries)
            legend->addItem(new QCPPlottableLegendItem(legend, d.series[static_cast<std::size_t>(s)]));
    }
}

void finishLayout(Drawn& d, const FigureSpec& f)
{
    for (const auto& [row, factor] : f.rowStretch)
        if (row < d.plot.plotLayout()->rowCount())
            d.plot.plotLayout()->setRowStretchFactor(row, factor);
    for (const BelowRow& row : f.below) {
        if (row.legend == 0)
            d.plot.placeLegendBelow(std::max(1, f.legends.front().columns));
        else if (row.legend < 0)
            d.plot.addFootnote(row.text);
    }
    if (!f.title.isEmpty()) {
        d.plot.plotLayout()->insertRow(0);
        auto* title = new QCPTextElement(&d.plot, f.title, d.plot.font());
        title->setObjectName(QString::fromLatin1(PlotWidget::kNoteName)); // styled with the notes
        title->setTextColor(Qt::black);
        d.plot.plotLayout()->addElement(0, 0, title);
        d.plot.plotLayout()->setRowStretchFactor(0, 0.001);
    }
    // Stretch factors once every element is in place (a row an empty legend left is gone).
    for (std::size_t g = 0; g < f.grids.size(); ++g) {
        QCPLayoutGrid* grid = d.grids[g];
        grid->simplify();
        for (const auto& [row, factor] : f.grids[g].rowStretch)
            if (row < grid->rowCount())
                grid->setRowStretchFactor(row, factor);
        for (const auto& [column, factor] : f.grids[g].columnStretch)
            if (column < grid->columnCount())
                grid->setColumnStretchFactor(column, factor);
        if (f.grids[g].rowSpacing)
            grid->setRowSpacing(*f.grids[g].rowSpacing);
    }
    for (const auto& [a, b] : f.linked) {
        QCPAxis* x = d.axis(a.first, a.second);
        QCPAxis* y = d.axis(b.first, b.second);
        QObject::connect(x, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), y, qOverload<const QCPRange&>(&QCPAxis::setRange));
        QObject::connect(y, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), x, qOverload<const QCPRange&>(&QCPAxis::setRange));
    }
}

void applySteps(QCPAxis* axis, const std::vector<RangeSpec::Step>& steps)
{
    const bool log = axis->scaleType() == QCPAxis::stLogarithmic;
    for (const RangeSpec::Step& s : steps) {
        const QCPRange r = axis->range();
        switch (s.op) {
        case RangeSpec::Step::Op::LogPad:
            if (log && r.lower > 0.0)
                axis->setRange(r.lower / s.a, r.upper * s.a);
            break;
        case RangeSpec::Step::Op::LinearPad:
            if (!log) {
                const double size = std::max(r.size(), s.c);
                axis->setRange(r.lower - s.a * size, r.upper + s.b * size);
            }
            break;
        case RangeSpec::Step::Op::ScaleUpper: axis->setRangeUpper(r.upper * s.a); break;
        case RangeSpec::Step::Op::SetLower: axis->setRangeLower(s.a); break;
        case RangeSpec::Step::Op::AtMostLower: axis->setRangeLower(std::min(r.lower, s.a)); break;
        case RangeSpec::Step::Op::AtLeastUpper: axis->setRangeUpper(std::max(r.upper, s.a)); break;
        case RangeSpec::Step::Op::AtMostUpper: axis->setRangeUpper(std::min(r.upper, s.a)); break;
        }
    }
}

void resolveRanges(Drawn& d, const FigureSpec& f)
{
    for (std::size_t i = 0; i < f.panels.size(); ++i)
        for (Side side : {Side::Bottom, Side::Left, Side::Top, Side::Right}) {
            const AxisSpec& a = f.panels[i].axis(side);
            if (a.range.mode != RangeSpec::Mode::Data)
                continue;
            QCPAxis* axis = d.axis(static_cast<int>(i), side);
            axis->rescale();
            applySteps(axis, a.range.steps);
        }
    for (std::size_t i = 0; i < f.panels.size(); ++i)
        for (Side side : {Side::Bottom, Side::Left, Side::Top, Side::Right}) {
            const AxisSpec& a = f.panels[i].axis(side);
            QCPAxis* axis = d.axis(static_cast<int>(i), side);
            if (a.range.mode == RangeSpec::Mode::SameAs)
                axis->setRange(d.axis(a.range.samePanel, a.range.sameSide)->range());
            if (a.ticks == AxisSpec::Ticks::LogTuned) {
                PlotWidget::tuneLogAxis(axis);
            } else if (a.ticks == AxisSpec::Ticks::LogPlain) {
                // Plain-number labels at the powers of ten: ranges of one to three decades.
                QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
                ticker->setSubTickCount(8);
                axis->setTicker(ticker);
                axis->setNumberFormat(QStringLiteral("g"));
                axis->setNumberPrecision(5); // 1000, not 1e+03
            }
        }
}

} // namespace

std::vector<QCPAxisRect*> drawFigure(PlotWidget& plot, const FigureSpec& figure)
{
    plot.resetPlot();
    // Legends list what the description says, in its order, nothing else.
    plot.setAutoAddPlottableToLegend(false);
    Drawn d{plot, {}, {}, {}, {}, {}, {}};
    layOut(d, figure);
    drawSeries(d, figure);
    drawColorMaps(d, figure);
    drawItems(d, figure);
    fillLegends(d, figure);
    finishLayout(d, figure);
    resolveRanges(d, figure);
    plot.applyPaperStyle(plot.font().pointSizeF());
    plot.replot(figure.layoutNow ? QCustomPlot::rpRefreshHint : QCustomPlot::rpQueuedReplot);
    return d.panels;
}

} // namespace kvlens::widgets
