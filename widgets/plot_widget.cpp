// SPDX-License-Identifier: GPL-3.0-or-later
// Shared figure style, hover read-out, and the CSV of the plotted points.
#include "widgets/plot_widget.h"

#include <QToolTip>

#include <algorithm>
#include <cmath>

#include <limits>

namespace kvlens::widgets {

const QVector<QColor>& okabeItoPalette()
{
    static const QVector<QColor> palette = {
        QColor(0xE6, 0x9F, 0x00), // orange
        QColor(0x56, 0xB4, 0xE9), // sky blue
        QColor(0x00, 0x9E, 0x73), // bluish green
        QColor(0xF0, 0xE4, 0x42), // yellow
        QColor(0x00, 0x72, 0xB2), // blue
        QColor(0xD5, 0x5E, 0x00), // vermillion
        QColor(0xCC, 0x79, 0xA7), // reddish purple
        QColor(0x00, 0x00, 0x00), // black
    };
    return palette;
}

QColor seriesColor(int i)
{
    // Blue, vermillion and green first: the three schemes of paper A stay clearly apart.
    static const int order[] = {4, 5, 2, 0, 6, 1, 3};
    const auto& palette = okabeItoPalette();
    return palette[order[((i % 7) + 7) % 7]];
}

QCPScatterStyle::ScatterShape seriesShape(int i)
{
    static const QCPScatterStyle::ScatterShape shapes[] = {
        QCPScatterStyle::ssCircle, QCPScatterStyle::ssSquare, QCPScatterStyle::ssTriangle,
        QCPScatterStyle::ssDiamond, QCPScatterStyle::ssTriangleInverted, QCPScatterStyle::ssCross,
        QCPScatterStyle::ssPlus, QCPScatterStyle::ssStar};
    return shapes[((i % 8) + 8) % 8];
}

PlotWidget::PlotWidget(QWidget* parent)
    : QCustomPlot(parent)
{
    setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    setMouseTracking(true);
    legend->setVisible(true);
    // Merge bursts of updates from progressive results into one repaint.
    setPlottingHint(QCP::phImmediateRefresh, false);
    applyPaperStyle();
    // A click on a legend entry hides or shows its series, as in every plotting tool.
    connect(this, &QCustomPlot::legendClick, this, [this](QCPLegend*, QCPAbstractLegendItem* item, QMouseEvent*) {
        if (auto* entry = qobject_cast<QCPPlottableLegendItem*>(item); entry && m_series.contains(entry->plottable()))
            toggleSeries(entry->plottable()->name());
    });
    connect(this, &QCustomPlot::beforeReplot, this, &PlotWidget::applyHidden);
}

void PlotWidget::toggleSeries(const QString& name)
{
    if (!m_hidden.remove(name))
        m_hidden.insert(name);
    replot(QCustomPlot::rpQueuedReplot);
}

void PlotWidget::applyHidden()
{
    for (QCPAbstractPlottable* p : m_series) {
        const bool hidden = m_hidden.contains(p->name());
        p->setVisible(!hidden);
        for (int i = 0; i < legend->itemCount(); ++i)
            if (auto* entry = qobject_cast<QCPPlottableLegendItem*>(legend->item(i)); entry && entry->plottable() == p)
                entry->setTextColor(hidden ? QColor(0xAA, 0xAA, 0xAA) : Qt::black);
    }
}

void PlotWidget::applyPaperStyle(double basePointSize)
{
    QFont font(QStringLiteral("DejaVu Sans"));
    font.setPointSizeF(basePointSize);
    setFont(font);
    setBackground(Qt::white);
    QFont tickFont = font;
    tickFont.setPointSizeF(basePointSize * 0.85);
    for (QCPAxisRect* rect : axisRects()) {
        for (QCPAxis* axis : rect->axes()) {
            axis->setLabelFont(font);
            axis->setTickLabelFont(tickFont);
            axis->setBasePen(QPen(Qt::black, 0));
            axis->setTickPen(QPen(Qt::black, 0));
            axis->setSubTickPen(QPen(Qt::black, 0));
            axis->grid()->setPen(QPen(QColor(0xDD, 0xDD, 0xDD), 0, Qt::DotLine));
            axis->grid()->setSubGridVisible(false);
        }
    }
    QFont legendFont = font;
    legendFont.setPointSizeF(basePointSize * 0.8);
    // Legend geometry follows the font, so small print sizes get a compact legend.
    const int em = std::max(4, static_cast<int>(std::lround(basePointSize)));
    // Panels may carry their own legends in their inset layouts (the teaching view); style them alike.
    QList<QCPLegend*> legends{legend};
    for (QCPAxisRect* rect : axisRects())
        for (int i = 0; i < rect->insetLayout()->elementCount(); ++i)
            if (auto* l = qobject_cast<QCPLegend*>(rect->insetLayout()->elementAt(i)); l && !legends.contains(l))
                legends << l;
    for (QCPLegend* l : legends) {
        if (!l)
            continue;
        l->setFont(legendFont);
        l->setIconSize(QSize(2 * em, em));
        l->setIconTextPadding(em / 2);
        l->setRowSpacing(0);
        l->setColumnSpacing(em);
        l->setMargins(QMargins(em / 2, em / 4, em / 2, em / 4));
        l->setBrush(QColor(255, 255, 255, 220));
        l->setBorderPen(QPen(QColor(0xAA, 0xAA, 0xAA), 0));
    }
    for (int i = 0; i < itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(item(i)))
            text->setFont(legendFont);
}

void PlotWidget::resetPlot()
{
    m_series.clear();
    clearItems();
    clearPlottables();
    plotLayout()->clear();
    auto* rect = new QCPAxisRect(this);
    plotLayout()->addElement(0, 0, rect);
    xAxis = rect->axis(QCPAxis::atBottom);
    yAxis = rect->axis(QCPAxis::atLeft);
    xAxis2 = rect->axis(QCPAxis::atTop);
    yAxis2 = rect->axis(QCPAxis::atRight);
    // The legend lives in the main axis rect's inset layout.
    legend = new QCPLegend;
    rect->insetLayout()->addElement(legend, Qt::AlignTop | Qt::AlignRight);
    legend->setLayer(QStringLiteral("legend"));
    legend->setVisible(true);
    applyPaperStyle(font().pointSizeF() > 0 ? font().pointSizeF() : 9.0);
}

QCPGraph* PlotWidget::addScatterSeries(const QString& name, const QColor& color, QCPScatterStyle::ScatterShape shape,
                                       double size, QCPAxisRect* rect)
{
    QCPAxisRect* r = rect ? rect : axisRect();
    QCPGraph* g = addGraph(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
    g->setName(name);
    g->setLineStyle(QCPGraph::lsNone);
    QColor fill = color;
    fill.setAlpha(110);
    g->setScatterStyle(QCPScatterStyle(shape, color, fill, size));
    g->setPen(QPen(color));
    // Dense clouds must show every point, live and in exports.
    g->setAdaptiveSampling(false);
    markSeries(g);
    return g;
}

QCPGraph* PlotWidget::addLineSeries(const QString& name, const QColor& color, QCPScatterStyle::ScatterShape shape,
                                    Qt::PenStyle style, QCPAxisRect* rect)
{
    QCPAxisRect* r = rect ? rect : axisRect();
    QCPGraph* g = addGraph(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
    g->setName(name);
    g->setPen(QPen(color, 1.5, style));
    g->setScatterStyle(QCPScatterStyle(shape, color, Qt::white, 6));
    markSeries(g);
    return g;
}

void PlotWidget::markSeries(QCPAbstractPlottable* plottable)
{
    if (!m_series.contains(plottable))
        m_series.append(plottable);
}

int PlotWidget::seriesCount() const
{
    int count = 0;
    for (QCPAbstractPlottable* p : m_series)
        if (p->interface1D() && p->interface1D()->dataCount() > 0)
            ++count;
    return count;
}

void PlotWidget::setLogAxis(QCPAxis* axis)
{
    axis->setScaleType(QCPAxis::stLogarithmic);
    QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
    axis->setTicker(ticker);
    axis->setNumberFormat(QStringLiteral("eb"));
    axis->setNumberPrecision(0);
}

void PlotWidget::tuneLogAxis(QCPAxis* axis)
{
    const QCPRange r = axis->range();
    const bool decades = r.lower > 0.0 && r.upper / r.lower >= 100.0;
    if (decades) {
        axis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
        axis->setNumberFormat(QStringLiteral("eb"));
        axis->setNumberPrecision(0);
    } else {
        // Inside a decade, power-of-ten ticks leave the axis nearly unlabelled.
        axis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
        axis->setNumberFormat(QStringLiteral("g"));
        axis->setNumberPrecision(3);
    }
}

void PlotWidget::placeLegendBelow(int columns)
{
    if (auto* inset = axisRect()->insetLayout(); inset->take(legend))
        inset->simplify();
    legend->setWrap(columns);
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true); // re-flows the existing entries
    legend->setBorderPen(Qt::NoPen);
    plotLayout()->addElement(plotLayout()->rowCount(), 0, legend);
    plotLayout()->setRowStretchFactor(plotLayout()->rowCount() - 1, 0.001);
    // The layout sizes the legend row from its entries' minimum heights, which leave no room
    // below the last row for descenders: keep a few points of air under it.
    legend->setMinimumMargins(QMargins(0, 0, 0, 4));
}

namespace {

QString csvField(const QString& s)
{
    if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) && !s.contains(QLatin1Char('\n')))
        return s;
    QString q = s;
    q.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    return QLatin1Char('"') + q + QLatin1Char('"');
}

QString number(double v)
{
    return QString::number(v, 'g', 10);
}

} // namespace

QString PlotWidget::dataCsv() const
{
    QString out = QStringLiteral("panel,series,x_axis,x,y_axis,y,y_error_minus,y_error_plus\n");
    // Error bars are attached to their data plottable; index them first.
    QHash<const QCPAbstractPlottable*, const QCPErrorBars*> errors;
    auto* self = const_cast<PlotWidget*>(this); // QCustomPlot's accessors are not const
    for (int i = 0; i < self->plottableCount(); ++i)
        if (auto* e = qobject_cast<QCPErrorBars*>(self->plottable(i)); e && e->dataPlottable())
            errors.insert(e->dataPlottable(), e);
    const auto rects = self->axisRects();
    for (const QCPAbstractPlottable* p : m_series) {
        const auto* graph = qobject_cast<const QCPGraph*>(p);
        if (!graph)
            continue;
        const QCPAxisRect* rect = graph->keyAxis()->axisRect();
        const QString panel = rects.size() > 1 ? QString::number(rects.indexOf(const_cast<QCPAxisRect*>(rect))) : QString();
        const QCPErrorBars* e = errors.value(graph, nullptr);
        int index = 0;
        for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it, ++index) {
            out += csvField(panel) + QLatin1Char(',') + csvField(graph->name()) + QLatin1Char(',')
                   + csvField(graph->keyAxis()->label()) + QLatin1Char(',') + number(it->key) + QLatin1Char(',')
                   + csvField(graph->valueAxis()->label()) + QLatin1Char(',') + number(it->value) + QLatin1Char(',');
            if (e && index < e->dataCount()) {
                const QCPErrorBarsData& d = *(e->data()->begin() + index);
                out += number(d.errorMinus) + QLatin1Char(',') + number(d.errorPlus);
            } else {
                out += QLatin1Char(',');
            }
            out += QLatin1Char('\n');
        }
    }
    return out;
}

QString PlotWidget::describePoint(const QCPGraph* graph, int index) const
{
    const auto it = graph->data()->at(index);
    return QStringLiteral("%1\n%2: %3\n%4: %5")
        .arg(graph->name(), graph->keyAxis()->label(), QString::number(it->key, 'g', 5),
             graph->valueAxis()->label(), QString::number(it->value, 'g', 5));
}

void PlotWidget::mouseMoveEvent(QMouseEvent* event)
{
    QCustomPlot::mouseMoveEvent(event);
    if (event->buttons() != Qt::NoButton)
        return;
    const QPointF pos = event->position();
    double best = 8.0; // pixels
    const QCPGraph* bestGraph = nullptr;
    int bestIndex = -1;
    for (QCPAbstractPlottable* p : m_series) {
        auto* graph = qobject_cast<QCPGraph*>(p);
        if (!graph || !graph->visible() || graph->dataCount() == 0)
            continue;
        QVariant details;
        const double distance = graph->selectTest(pos, false, &details);
        if (distance >= 0.0 && distance < best) {
            const auto selection = details.value<QCPDataSelection>();
            if (!selection.isEmpty()) {
                best = distance;
                bestGraph = graph;
                bestIndex = selection.dataRange().begin();
            }
        }
    }
    if (bestGraph) {
        const QString text = describePoint(bestGraph, bestIndex);
        QToolTip::showText(event->globalPosition().toPoint(), text, this);
        emit hovered(text);
    } else {
        QToolTip::hideText();
        emit hovered(QString());
    }
}

} // namespace kvlens::widgets
