// SPDX-License-Identifier: GPL-3.0-or-later
// Routing recall view.
#include "widgets/recall_view.h"

#include <algorithm>
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
                          "(top panel), and how often the single most-attended key changes (bottom panel).");
}

void RecallView::redraw()
{
    m_plot->resetPlot();
    const int k = data().results ? data().results->spec.metrics.topK : 5;
    // Two panels sharing the budget axis: recall above, argmax-shift rate below.
    QCPAxisRect* top = m_plot->axisRect();
    auto* bottom = new QCPAxisRect(m_plot);
    m_plot->plotLayout()->addElement(1, 0, bottom);
    top->setMinimumSize(20, 20);
    bottom->setMinimumSize(20, 20);
    auto* margins = new QCPMarginGroup(m_plot);
    top->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
    bottom->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
    QCPAxis* x1 = top->axis(QCPAxis::atBottom);
    QCPAxis* x2 = bottom->axis(QCPAxis::atBottom);
    QCPAxis* recallAxis = top->axis(QCPAxis::atLeft);
    QCPAxis* shiftAxis = bottom->axis(QCPAxis::atLeft);
    x1->setTickLabels(false);
    // The nominal n: what each scheme really spends differs (the Rate–distortion view's x axis).
    x2->setLabel(QStringLiteral("nominal budget n (bits)"));
    recallAxis->setLabel(QStringLiteral("top-%1 recall").arg(k));
    shiftAxis->setLabel(QStringLiteral("argmax shift"));
    connect(x1, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), x2, qOverload<const QCPRange&>(&QCPAxis::setRange));
    connect(x2, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), x1, qOverload<const QCPRange&>(&QCPAxis::setRange));
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    if (data().empty() || !data().figures) {
        m_plot->replot();
        return;
    }
    std::map<int, std::vector<const RecallPoint*>> byScheme;
    for (const RecallPoint& p : data().figures->recall)
        if (p.point == currentPoint())
            byScheme[p.scheme].push_back(&p);
    QVector<double> budgets;
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
        budgets += x;
        QCPGraph* g = m_plot->addLineSeries(schemeName(scheme), color,
                                            seriesShape(scheme), Qt::SolidLine, top);
        g->setData(x, recall);
        auto* bars = new QCPErrorBars(x1, recallAxis);
        bars->removeFromLegend();
        bars->setDataPlottable(g);
        bars->setData(rLow, rHigh);
        bars->setPen(QPen(color));
        QCPGraph* s = m_plot->addLineSeries(QStringLiteral("%1 argmax shift").arg(schemeName(scheme)), color,
                                            seriesShape(scheme), Qt::SolidLine, bottom);
        s->setData(x, shift);
        s->removeFromLegend(); // one legend entry per scheme: same colour and marker in both panels
        auto* shiftBars = new QCPErrorBars(x2, shiftAxis);
        shiftBars->removeFromLegend();
        shiftBars->setDataPlottable(s);
        shiftBars->setData(sLow, sHigh);
        shiftBars->setPen(QPen(color));
    }
    if (!budgets.isEmpty()) {
        const double lo = *std::min_element(budgets.begin(), budgets.end());
        const double hi = *std::max_element(budgets.begin(), budgets.end());
        PlotWidget::setIntegerAxis(x1, lo, hi);
        PlotWidget::setIntegerAxis(x2, lo, hi);
    }
    // Recall and the argmax depend on the keys alone: schemes with one key path draw one curve.
    m_plot->noteCoincidences(QStringLiteral("identical curves (same keys), drawn dashed over each other: "));
    recallAxis->setRange(0.0, 1.05);
    shiftAxis->rescale();
    const QCPRange sr = shiftAxis->range();
    shiftAxis->setRange(0.0, std::max(0.05, std::min(1.05, sr.upper * 1.15)));
    // The legend in one row along the foot of the recall panel, where recall rarely goes (below 0.2);
    // a row of its own under two panels would leave them too little height at a single column.
    m_plot->legend->setWrap(std::min(4, std::max(1, static_cast<int>(byScheme.size()))));
    m_plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
    top->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
