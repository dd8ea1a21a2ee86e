// SPDX-License-Identifier: GPL-3.0-or-later
// Routing recall view.
#include "widgets/recall_view.h"

#include <map>

namespace kvlens::widgets {

RecallView::RecallView(QWidget* parent)
    : ResultView(parent)
{
    setToolTip(viewDescription());
}

QString RecallView::viewDescription() const
{
    return QStringLiteral("Fraction of each query's top-k keys that the quantized attention still ranks in its top-k "
                          "(solid, left axis), and how often the single most-attended key changes (dashed, right axis).");
}

void RecallView::redraw()
{
    m_plot->resetPlot();
    const int k = data().results ? data().results->spec.metrics.topK : 5;
    m_plot->xAxis->setLabel(QStringLiteral("bit budget n (bits per coordinate)"));
    m_plot->yAxis->setLabel(QStringLiteral("top-%1 routing recall").arg(k));
    m_plot->yAxis2->setVisible(true);
    m_plot->yAxis2->setLabel(QStringLiteral("argmax-shift rate"));
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(1.0);
    m_plot->xAxis->setTicker(ticker);
    if (data().empty() || !data().figures) {
        m_plot->replot();
        return;
    }
    std::map<int, std::vector<const RecallPoint*>> byScheme;
    for (const RecallPoint& p : data().figures->recall)
        if (p.point == currentPoint())
            byScheme[p.scheme].push_back(&p);
    for (const auto& [scheme, points] : byScheme) {
        const QColor color = seriesColor(scheme);
        QVector<double> x, recall, rLow, rHigh, shift, sLow, sHigh;
        for (const RecallPoint* p : points) {
            x.push_back(p->budget);
            recall.push_back(p->recall.mean);
            rLow.push_back(p->recall.mean - p->recall.low);
            rHigh.push_back(p->recall.high - p->recall.mean);
            shift.push_back(p->argmaxShift.mean);
            sLow.push_back(p->argmaxShift.mean - p->argmaxShift.low);
            sHigh.push_back(p->argmaxShift.high - p->argmaxShift.mean);
        }
        QCPGraph* g = m_plot->addLineSeries(QStringLiteral("%1 recall").arg(schemeName(scheme)), color,
                                            seriesShape(scheme));
        g->setData(x, recall);
        auto* bars = new QCPErrorBars(m_plot->xAxis, m_plot->yAxis);
        bars->removeFromLegend();
        bars->setDataPlottable(g);
        bars->setData(rLow, rHigh);
        bars->setPen(QPen(color));
        QCPGraph* s = m_plot->addGraph(m_plot->xAxis, m_plot->yAxis2);
        s->setName(QStringLiteral("%1 argmax shift").arg(schemeName(scheme)));
        s->setPen(QPen(color, 1.2, Qt::DashLine));
        s->setScatterStyle(QCPScatterStyle(seriesShape(scheme), color, Qt::white, 5));
        s->setData(x, shift);
        m_plot->markSeries(s);
        auto* shiftBars = new QCPErrorBars(m_plot->xAxis, m_plot->yAxis2);
        shiftBars->removeFromLegend();
        shiftBars->setDataPlottable(s);
        shiftBars->setData(sLow, sHigh);
        shiftBars->setPen(QPen(color));
    }
    m_plot->xAxis->rescale();
    const QCPRange xr = m_plot->xAxis->range();
    m_plot->xAxis->setRange(xr.lower - 0.4, xr.upper + 0.4);
    m_plot->yAxis->setRange(0.0, 1.05);
    m_plot->yAxis2->setRange(0.0, 1.05);
    m_plot->placeLegendBelow(2);
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
