// SPDX-License-Identifier: GPL-3.0-or-later
// Shared figure style, hover read-out, and the CSV of the plotted points.
#include "widgets/plot_widget.h"

#include <QHash>

#include "widgets/formula_label.h"

#include <map>

#include <QPointer>
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

QColor shadeForLevel(const QColor& base, int level, int levels)
{
    if (levels <= 1)
        return base;
    const double t = std::clamp(static_cast<double>(level) / (levels - 1), 0.0, 1.0); // 0 lightest
    float h = 0, s = 0, l = 0, a = 0;
    base.getHslF(&h, &s, &l, &a);
    // From 0.16 lighter (and a fifth less saturated, so light shades do not glow) to 0.12 darker
    // than the palette colour, kept within [0.2, 0.8].
    const double shaded = std::clamp(l + 0.16 - 0.28 * t, 0.2, 0.8);
    const double saturation = s * (0.8 + 0.2 * t);
    return QColor::fromHslF(h, static_cast<float>(saturation), static_cast<float>(shaded), a);
}

namespace {

/// Draws the plot's formula axis labels (on the overlay layer, after the axes have laid out theirs).
class FormulaLabels final : public QCPLayerable {
public:
    explicit FormulaLabels(PlotWidget* plot) : QCPLayerable(plot, QStringLiteral("overlay")), m_plot(plot) {}

protected:
    void applyDefaultAntialiasingHint(QCPPainter* painter) const override
    {
        applyAntialiasingHint(painter, true, QCP::aeOther);
    }
    void draw(QCPPainter* painter) override { m_plot->drawFormulaLabels(*painter); }

private:
    PlotWidget* m_plot;
};

/// The rectangle QCustomPlot drew an axis's label in, found by asking the axis which part lies
/// along a line out from the middle of its axis rect (null when the label is not drawn).
QRectF labelBox(const QCPAxis* axis)
{
    const QCPAxisRect* rect = axis->axisRect();
    const QRect r = rect->rect();
    const QMargins m = rect->margins();
    double lo = 1e9, hi = -1e9;
    auto probe = [&](QPointF at, double coordinate) {
        if (axis->getPartAt(at) == QCPAxis::spAxisLabel) {
            lo = std::min(lo, coordinate);
            hi = std::max(hi, coordinate);
        }
    };
    switch (axis->axisType()) {
    case QCPAxis::atBottom:
        for (int y = r.bottom(); y <= r.bottom() + m.bottom() + 1; ++y)
            probe(QPointF(r.center().x(), y), y);
        return hi >= lo ? QRectF(r.left(), lo, r.width(), hi - lo + 1) : QRectF();
    case QCPAxis::atTop:
        for (int y = r.top(); y >= r.top() - m.top() - 1; --y)
            probe(QPointF(r.center().x(), y), y);
        return hi >= lo ? QRectF(r.left(), lo, r.width(), hi - lo + 1) : QRectF();
    case QCPAxis::atLeft:
        for (int x = r.left(); x >= r.left() - m.left() - 1; --x)
            probe(QPointF(x, r.center().y()), x);
        return hi >= lo ? QRectF(lo, r.top(), hi - lo + 1, r.height()) : QRectF();
    case QCPAxis::atRight:
        for (int x = r.right(); x <= r.right() + m.right() + 1; ++x)
            probe(QPointF(x, r.center().y()), x);
        return hi >= lo ? QRectF(lo, r.top(), hi - lo + 1, r.height()) : QRectF();
    }
    return QRectF();
}

} // namespace

PlotWidget::PlotWidget(QWidget* parent)
    : QCustomPlot(parent)
{
    new FormulaLabels(this);
    addLayer(QString::fromLatin1(kUiLayer), layer(QStringLiteral("legend")), QCustomPlot::limBelow);
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

QList<QCPAxis*> PlotWidget::labelledAxes() const
{
    QList<QCPAxis*> out;
    for (QCPAxisRect* rect : axisRects())
        out << rect->axes();
    for (QCPLayoutElement* e : plotLayout()->elements(true))
        if (auto* scale = qobject_cast<QCPColorScale*>(e); scale && scale->axis())
            out << scale->axis();
    return out;
}

void PlotWidget::drawFormulaLabels(QPainter& painter)
{
    for (QCPAxis* axis : labelledAxes()) {
        if (!axis->visible() || !isFormula(axis->label()))
            continue;
        const QRectF box = labelBox(axis);
        if (box.isNull())
            continue;
        const FormulaLayout layout = formulaLayout(axis, painter.device());
        const bool vertical = axis->orientation() == Qt::Vertical;
        painter.save();
        painter.translate(box.center());
        if (vertical)
            painter.rotate(axis->axisType() == QCPAxis::atLeft ? -90.0 : 90.0);
        paintFormula(painter, layout, QPointF(-layout.width / 2.0, (layout.ascent - layout.descent) / 2.0), Qt::black);
        painter.restore();
    }
    // Text items in formula markup (the 6D matrix's diagonal names), centred on their position.
    for (int i = 0; i < itemCount(); ++i) {
        auto* text = qobject_cast<QCPItemText*>(item(i));
        if (!text || !text->visible() || !isFormula(text->text()))
            continue;
        const FormulaLayout layout = layoutFormula(text->text(), text->font(), m_minimumPointSize, painter.device());
        const QPointF at = text->position->pixelPosition();
        paintFormula(painter, layout, at + QPointF(-layout.width / 2.0, (layout.ascent - layout.descent) / 2.0),
                     Qt::black);
    }
}

FormulaLayout PlotWidget::formulaLayout(const QCPAxis* axis, QPaintDevice* device) const
{
    return layoutFormula(axis->label(), axis->labelFont(), m_minimumPointSize, device);
}

void PlotWidget::applyHidden()
{
    // Formula labels: QCustomPlot keeps their room (drawn transparent), FormulaLabels paints them.
    for (QCPAxis* axis : labelledAxes())
        axis->setLabelColor(isFormula(axis->label()) ? QColor(0, 0, 0, 0) : QColor(Qt::black));
    for (int i = 0; i < itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(item(i)); text && isFormula(text->text()))
            text->setColor(QColor(0, 0, 0, 0));
    for (QCPAbstractPlottable* p : m_series) {
        const bool hidden = !m_showAll && m_hidden.contains(p->name());
        p->setVisible(!hidden);
        for (int i = 0; i < legend->itemCount(); ++i)
            if (auto* entry = qobject_cast<QCPPlottableLegendItem*>(legend->item(i)); entry && entry->plottable() == p)
                entry->setTextColor(hidden ? QColor(0xAA, 0xAA, 0xAA) : Qt::black);
    }
}

void PlotWidget::applyPaperStyle(double basePointSize, double minimumPointSize, const QString& family)
{
    m_minimumPointSize = minimumPointSize;
    QFont font(family);
    font.setPointSizeF(std::max(basePointSize, minimumPointSize));
    setFont(font);
    setBackground(Qt::white);
    {
        for (QCPAxis* axis : labelledAxes()) {
            // QCustomPlot draws a 10^k exponent at 3/4 of the tick font: that one sets the floor there.
            QFont tickFont = font;
            const double floor = hasExponents(axis) ? minimumPointSize / kExponentScale : minimumPointSize;
            tickFont.setPointSizeF(std::max(basePointSize * 0.85, floor));
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
    legendFont.setPointSizeF(std::max(basePointSize * 0.8, minimumPointSize));
    // Legend geometry follows the font, so small print sizes get a compact legend.
    const int em = std::max(4, static_cast<int>(std::lround(basePointSize)));
    // Panels may carry their own legends, in their inset layouts or in the plot's layout (the
    // teaching view); style them alike. One inside a panel gets a box over the data; one in the
    // layout, outside every panel, needs none.
    QList<QCPLegend*> legends{legend};
    QSet<QCPLegend*> inLayout;
    for (QCPLayoutElement* e : plotLayout()->elements(true))
        if (auto* l = qobject_cast<QCPLegend*>(e)) {
            inLayout.insert(l);
            if (!legends.contains(l))
                legends << l;
        }
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
        // An entry is as tall as its font's integer metrics at screen resolution, which at print
        // sizes fall short of the descenders as a PDF or PNG draws them (the "p" of "envelope" was
        // cut at its baseline): a little room under each entry.
        for (int i = 0; i < l->itemCount(); ++i)
            if (QCPAbstractLegendItem* entry = l->item(i))
                entry->setMargins(QMargins(0, 0, 0, std::max(1, (em + 2) / 3)));
        l->setBrush(inLayout.contains(l) ? QBrush(Qt::NoBrush) : QBrush(QColor(255, 255, 255, 220)));
        l->setBorderPen(inLayout.contains(l) ? QPen(Qt::NoPen) : QPen(QColor(0xAA, 0xAA, 0xAA), 0));
    }
    for (int i = 0; i < itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(item(i)))
            text->setFont(legendFont);
    for (QCPLayoutElement* e : plotLayout()->elements(true))
        if (auto* note = qobject_cast<QCPTextElement*>(e); note && note->objectName() == QLatin1String(kNoteName))
            note->setFont(legendFont);
}

QCPTextElement* PlotWidget::addFootnote(const QString& text)
{
    QStringList lines;
    for (const QString& paragraph : text.split(QLatin1Char('\n'))) {
        QString line;
        for (const QString& word : paragraph.split(QLatin1Char(' '))) {
            if (!line.isEmpty() && line.size() + 1 + word.size() > kFootnoteChars) {
                lines << line;
                line.clear();
            }
            line += (line.isEmpty() ? QString() : QStringLiteral(" ")) + word;
        }
        lines << line;
    }
    auto* note = new QCPTextElement(this, lines.join(QLatin1Char('\n')), legend ? legend->font() : font());
    note->setObjectName(QString::fromLatin1(kNoteName));
    note->setTextColor(QColor(0x33, 0x33, 0x33));
    note->setTextFlags(Qt::AlignLeft | Qt::AlignVCenter);
    note->setMargins(QMargins(4, 0, 4, 4)); // air under descenders, as the legend row keeps
    const int row = plotLayout()->rowCount();
    plotLayout()->addElement(row, 0, note);
    plotLayout()->setRowStretchFactor(row, 0.001);
    return note;
}

QStringList PlotWidget::footnotes() const
{
    QStringList out;
    for (QCPLayoutElement* e : plotLayout()->elements(true))
        if (auto* note = qobject_cast<QCPTextElement*>(e); note && note->objectName() == QLatin1String(kNoteName))
            out << note->text();
    return out;
}

struct PlotWidget::StyleState {
    QFont font;
    QBrush background;
    double minimumPointSize = 0.0;
    struct Axis {
        QPointer<QCPAxis> axis;
        QFont labelFont, tickLabelFont;
        QPen basePen, tickPen, subTickPen, gridPen;
        bool subGrid = false;
    };
    QList<Axis> axes;
    struct Legend {
        QPointer<QCPLegend> legend;
        QFont font;
        QSize iconSize;
        int iconTextPadding = 0, rowSpacing = 0, columnSpacing = 0;
        QMargins margins;
        QBrush brush;
        QPen borderPen;
    };
    QList<Legend> legends;
    QList<QPair<QPointer<QCPItemText>, QFont>> texts;
    QList<QPair<QPointer<QCPTextElement>, QFont>> notes;
};

std::shared_ptr<PlotWidget::StyleState> PlotWidget::saveStyle()
{
    auto s = std::make_shared<StyleState>();
    s->font = font();
    s->background = QBrush(Qt::white);
    s->minimumPointSize = m_minimumPointSize;
    for (QCPAxis* axis : labelledAxes())
        s->axes.push_back({axis, axis->labelFont(), axis->tickLabelFont(), axis->basePen(), axis->tickPen(),
                           axis->subTickPen(), axis->grid()->pen(), axis->grid()->subGridVisible()});
    QList<QCPLegend*> legends{legend};
    for (QCPLayoutElement* e : plotLayout()->elements(true))
        if (auto* l = qobject_cast<QCPLegend*>(e); l && !legends.contains(l))
            legends << l;
    for (QCPAxisRect* rect : axisRects())
        for (int i = 0; i < rect->insetLayout()->elementCount(); ++i)
            if (auto* l = qobject_cast<QCPLegend*>(rect->insetLayout()->elementAt(i)); l && !legends.contains(l))
                legends << l;
    for (QCPLegend* l : legends)
        if (l)
            s->legends.push_back({l, l->font(), l->iconSize(), l->iconTextPadding(), l->rowSpacing(), l->columnSpacing(),
                                  l->margins(), l->brush(), l->borderPen()});
    for (int i = 0; i < itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(item(i)))
            s->texts.push_back({text, text->font()});
    for (QCPLayoutElement* e : plotLayout()->elements(true))
        if (auto* note = qobject_cast<QCPTextElement*>(e))
            s->notes.push_back({note, note->font()});
    return s;
}

void PlotWidget::restoreStyle(const StyleState& s)
{
    setFont(s.font);
    setBackground(s.background);
    m_minimumPointSize = s.minimumPointSize;
    for (const StyleState::Axis& a : s.axes) {
        if (!a.axis)
            continue;
        a.axis->setLabelFont(a.labelFont);
        a.axis->setTickLabelFont(a.tickLabelFont);
        a.axis->setBasePen(a.basePen);
        a.axis->setTickPen(a.tickPen);
        a.axis->setSubTickPen(a.subTickPen);
        a.axis->grid()->setPen(a.gridPen);
        a.axis->grid()->setSubGridVisible(a.subGrid);
    }
    for (const StyleState::Legend& l : s.legends) {
        if (!l.legend)
            continue;
        l.legend->setFont(l.font);
        l.legend->setIconSize(l.iconSize);
        l.legend->setIconTextPadding(l.iconTextPadding);
        l.legend->setRowSpacing(l.rowSpacing);
        l.legend->setColumnSpacing(l.columnSpacing);
        l.legend->setMargins(l.margins);
        l.legend->setBrush(l.brush);
        l.legend->setBorderPen(l.borderPen);
    }
    for (const auto& [text, font] : s.texts)
        if (text)
            text->setFont(font);
    for (const auto& [note, font] : s.notes)
        if (note)
            note->setFont(font);
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

bool PlotWidget::hasExponents(const QCPAxis* axis)
{
    return axis->numberFormat().contains(QLatin1Char('b'));
}

std::vector<PlotWidget::TickSpan> PlotWidget::tickLabelSpans(const QCPAxis* axis)
{
    std::vector<TickSpan> spans;
    if (!axis->visible() || !axis->tickLabels())
        return spans;
    const bool horizontal = axis->orientation() == Qt::Horizontal;
    const bool exponents = hasExponents(axis);
    QFont expFont = axis->tickLabelFont();
    expFont.setPointSizeF(expFont.pointSizeF() * kExponentScale);
    const QFontMetricsF fm(axis->tickLabelFont()), fe(expFont);
    const QVector<double> ticks = axis->tickVector();
    const QVector<QString> labels = axis->tickVectorLabels();
    for (int i = 0; i < ticks.size() && i < labels.size(); ++i) {
        if (!axis->range().contains(ticks[i]) || labels[i].isEmpty())
            continue;
        const QString& label = labels[i];
        double extent = fm.height();
        if (horizontal) {
            // A 10^k label is laid out as its base, then the exponent at 3/4 size.
            const int at = exponents ? label.indexOf(QStringLiteral("10")) : -1;
            extent = at >= 0 ? fm.horizontalAdvance(label.left(at + 2))
                                   + fe.horizontalAdvance(QString::number(std::round(std::log10(ticks[i]))))
                             : fm.horizontalAdvance(label);
        }
        const double centre = axis->coordToPixel(ticks[i]);
        spans.push_back({centre - extent / 2.0, centre + extent / 2.0, label, ticks[i]});
    }
    std::sort(spans.begin(), spans.end(), [](const TickSpan& a, const TickSpan& b) { return a.from < b.from; });
    return spans;
}

QStringList PlotWidget::tickOverlaps(const QCPAxis* axis)
{
    QStringList out;
    const std::vector<TickSpan> spans = tickLabelSpans(axis);
    for (std::size_t k = 1; k < spans.size(); ++k)
        if (spans[k].from < spans[k - 1].to + 1.0) // a point of air between neighbours
            out << QStringLiteral("%1 axis: \"%2\" and \"%3\"")
                       .arg(axis->orientation() == Qt::Horizontal ? QStringLiteral("x") : QStringLiteral("y"),
                            spans[k - 1].label, spans[k].label);
    return out;
}

void PlotWidget::fitTicksToPrint(int widthPoints, int heightPoints)
{
    // Lay the figure out at its print size (the page is in points) to learn each axis's length.
    const QRect live = viewport();
    m_liveTicks.clear();
    setViewport(QRect(0, 0, widthPoints, heightPoints));
    replot(QCustomPlot::rpImmediateRefresh);
    QList<QCPAxis*> crowded;
    for (QCPAxisRect* rect : axisRects()) {
        for (QCPAxis* axis : rect->axes()) {
            if (!axis->visible() || !axis->tickLabels() || axis->ticker().dynamicCast<QCPAxisTickerText>())
                continue;
            if (auto fixed = axis->ticker().dynamicCast<QCPAxisTickerFixed>()) {
                // Whole-number axes thin themselves (1, 2, 5...) from the tick count.
                m_liveTicks.push_back({axis->ticker(), axis->ticker()->tickCount(), 0});
                const double length = axis->orientation() == Qt::Horizontal ? rect->width() : rect->height();
                const QFontMetricsF fm(axis->tickLabelFont());
                fixed->setTickCount(std::max(2, static_cast<int>(length / (fm.horizontalAdvance(QStringLiteral("00")) + fm.height()))));
                crowded << axis;
                continue;
            }
            const bool horizontal = axis->orientation() == Qt::Horizontal;
            const double length = horizontal ? rect->width() : rect->height();
            const QFontMetricsF fm(axis->tickLabelFont());
            // Room per label: a typical label's extent along the axis plus an em of air.
            const double label = horizontal ? fm.horizontalAdvance(QStringLiteral("0.000")) + fm.height()
                                            : 2.2 * fm.height();
            const int room = std::max(2, static_cast<int>(length / label));
            const auto log = axis->ticker().dynamicCast<QCPAxisTickerLog>();
            m_liveTicks.push_back({axis->ticker(), axis->ticker()->tickCount(), log ? log->subTickCount() : 0});
            if (log) {
                // Every decade the range spans gets its label while they fit; minor ticks between.
                const QCPRange r = axis->range();
                const int decades = r.lower > 0.0 && r.upper > r.lower
                                        ? static_cast<int>(std::ceil(std::log10(r.upper / r.lower) - 1e-9))
                                        : 1;
                log->setTickCount(std::max(1, std::min(decades, room)));
                log->setSubTickCount(decades <= room ? 8 : 0);
            } else {
                axis->ticker()->setTickCount(std::min(room, horizontal ? 6 : 5));
            }
            crowded << axis;
        }
    }
    // Then fewer ticks wherever labels still touch (a plain ticker on a log axis crowds one end).
    for (int pass = 0; pass < 6 && !crowded.isEmpty(); ++pass) {
        replot(QCustomPlot::rpImmediateRefresh);
        QList<QCPAxis*> still;
        for (QCPAxis* axis : crowded)
            if (!tickOverlaps(axis).isEmpty() && axis->ticker()->tickCount() > 1) {
                axis->ticker()->setTickCount(axis->ticker()->tickCount() - 1);
                still << axis;
            }
        crowded = still;
    }
    setViewport(live);
}

void PlotWidget::restoreLiveTicks()
{
    for (const LiveTicks& t : m_liveTicks) {
        t.ticker->setTickCount(t.tickCount);
        if (auto log = t.ticker.dynamicCast<QCPAxisTickerLog>())
            log->setSubTickCount(t.subTickCount);
    }
    m_liveTicks.clear();
}

void PlotWidget::setLogAxis(QCPAxis* axis)
{
    axis->setScaleType(QCPAxis::stLogarithmic);
    QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
    axis->setTicker(ticker);
    axis->setNumberFormat(QStringLiteral("eb"));
    axis->setNumberPrecision(0);
}

namespace {

/// Log-axis ticks inside a few decades: the densest of 1-2-...-9, 1-2-5, 1-3 or 1 per decade whose
/// label count fits the ticker's tick count, labelled as plain numbers (0.005, 0.01, 0.02), with
/// minor ticks at every other integer multiple of a power of ten.
class LogMantissaTicker final : public QCPAxisTicker {
public:
    void generate(const QCPRange& range, const QLocale& locale, QChar formatChar, int precision, QVector<double>& ticks,
                  QVector<double>* subTicks, QVector<QString>* tickLabels) override
    {
        ticks.clear();
        if (subTicks)
            subTicks->clear();
        if (tickLabels)
            tickLabels->clear();
        if (!(range.lower > 0.0) || !(range.upper > range.lower))
            return;
        static const std::vector<std::vector<int>> sets = {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 5}, {1, 3}, {1}};
        const int k0 = static_cast<int>(std::floor(std::log10(range.lower))) - 1;
        const int k1 = static_cast<int>(std::ceil(std::log10(range.upper))) + 1;
        auto inRange = [&](const std::vector<int>& mantissas) {
            QVector<double> out;
            for (int k = k0; k <= k1; ++k)
                for (int m : mantissas) {
                    const double v = m * std::pow(10.0, k);
                    if (v >= range.lower * (1 - 1e-12) && v <= range.upper * (1 + 1e-12))
                        out.push_back(v);
                }
            return out;
        };
        for (const auto& set : sets) {
            ticks = inRange(set);
            if (ticks.size() <= std::max(1, tickCount()) || &set == &sets.back())
                break;
        }
        if (subTicks)
            for (double v : inRange(sets.front()))
                if (!ticks.contains(v))
                    subTicks->push_back(v);
        if (tickLabels)
            for (double v : ticks)
                tickLabels->push_back(locale.toString(v, formatChar.toLatin1(), precision));
    }
};

} // namespace

void PlotWidget::tuneLogAxis(QCPAxis* axis)
{
    const QCPRange r = axis->range();
    const bool decades = r.lower > 0.0 && r.upper / r.lower >= 1000.0;
    if (decades) {
        // One label per decade the data span (as many as fit), minor ticks at 2..9 between.
        QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
        ticker->setTickCount(std::max(2, static_cast<int>(std::ceil(std::log10(r.upper / r.lower) - 1e-9))));
        ticker->setSubTickCount(8);
        axis->setTicker(ticker);
        axis->setNumberFormat(QStringLiteral("eb"));
        axis->setNumberPrecision(0);
    } else {
        // Within three decades, power-of-ten ticks leave the axis nearly unlabelled: 1-2-5 steps.
        axis->setTicker(QSharedPointer<QCPAxisTicker>(new LogMantissaTicker));
        axis->setNumberFormat(QStringLiteral("g"));
        axis->setNumberPrecision(3);
    }
}

void PlotWidget::setIntegerAxis(QCPAxis* axis, double lo, double hi)
{
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(1.0);
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples); // 1, 2, 5, 10... when crowded
    axis->setTicker(ticker);
    axis->setNumberFormat(QStringLiteral("g"));
    axis->setNumberPrecision(6);
    axis->setScaleType(QCPAxis::stLinear);
    axis->setRange(std::floor(lo) - 0.5, std::ceil(hi) + 0.5);
}

bool PlotWidget::allIntegers(const QVector<double>& values)
{
    if (values.isEmpty())
        return false;
    for (double v : values)
        if (!std::isfinite(v) || v != std::round(v))
            return false;
    return true;
}

int PlotWidget::clipLogErrorBars()
{
    std::map<std::pair<QCPAxis*, QCPAxis*>, std::pair<QVector<double>, QVector<double>>> marks;
    for (int i = 0; i < plottableCount(); ++i) {
        auto* bars = qobject_cast<QCPErrorBars*>(plottable(i));
        if (!bars || bars->errorType() != QCPErrorBars::etValueError || !bars->valueAxis()
            || bars->valueAxis()->scaleType() != QCPAxis::stLogarithmic)
            continue;
        auto* points = qobject_cast<QCPGraph*>(bars->dataPlottable());
        if (!points)
            continue;
        QSharedPointer<QCPErrorBarsDataContainer> errors = bars->data();
        auto& [xs, ys] = marks[{bars->keyAxis(), bars->valueAxis()}];
        for (int k = 0; k < errors->size() && k < points->dataCount(); ++k) {
            const double y = (points->data()->constBegin() + k)->value;
            QCPErrorBarsData& e = (*errors)[k];
            if (y > 0.0 && y - e.errorMinus <= 0.0) {
                e.errorMinus = 0.0;
                xs << (points->data()->constBegin() + k)->key;
                ys << y / 1.5;
            }
        }
    }
    int marked = 0;
    for (const auto& [axes, points] : marks) {
        if (points.first.isEmpty())
            continue;
        QCPGraph* g = addGraph(axes.first, axes.second);
        g->setName(QStringLiteral("interval reaches 0"));
        g->setLineStyle(QCPGraph::lsNone);
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangleInverted, Qt::black, Qt::black, 5));
        g->setData(points.first, points.second);
        marked += static_cast<int>(points.first.size());
    }
    return marked;
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
    // One place decides what the cursor is over: a point of a graph, else what the view's hover
    // provider says (a heatmap cell). A view that showed its own tooltip from the mouseMove signal
    // would have it hidden here the same instant, since the signal fires before this runs.
    QString text;
    if (bestGraph)
        text = describePoint(bestGraph, bestIndex);
    else if (m_hoverProvider)
        text = m_hoverProvider(pos);
    m_hoverText = text;
    if (!text.isEmpty())
        QToolTip::showText(event->globalPosition().toPoint(), text, this);
    else
        QToolTip::hideText();
    emit hovered(text);
}

} // namespace kvlens::widgets
