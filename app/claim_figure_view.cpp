// SPDX-License-Identifier: GPL-3.0-or-later
#include "app/claim_figure_view.h"

#include "widgets/plot_widget.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvlens::app {

void ClaimFigureView::draw()
{
    widgets::PlotWidget* plot = m_plot;
    plot->resetPlot();
    int colour = 0, shape = 0;
    for (const claims::Series& s : m_figure.series) {
        // QCPGraph keeps its points sorted by x; sort here so the error bars stay with their points.
        std::vector<std::size_t> order(s.x.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.x[a] < s.x[b]; });
        QVector<double> x, y, minus, plus;
        const bool bars = s.low.size() == s.x.size() && s.high.size() == s.x.size() && !s.x.empty();
        for (std::size_t i : order) {
            if (!std::isfinite(s.y[i]) || (m_figure.logY && s.y[i] <= 0.0))
                continue;
            x << s.x[i];
            y << s.y[i];
            if (bars) {
                // On a log axis a lower end at or below 0 is marked by clipLogErrorBars, not drawn to the floor.
                minus << std::max(0.0, s.y[i] - (std::isfinite(s.low[i]) ? s.low[i] : s.y[i]));
                plus << std::max(0.0, (std::isfinite(s.high[i]) ? s.high[i] : s.y[i]) - s.y[i]);
            }
        }
        const QString name = QString::fromStdString(s.name);
        QCPGraph* g = nullptr;
        if (s.reference) {
            g = plot->addGraph();
            g->setName(name);
            QPen pen(Qt::black, 1.0, shape % 2 == 0 ? Qt::DashLine : Qt::DotLine);
            g->setPen(pen);
            ++shape;
        } else if (s.steps) {
            g = plot->addLineSeries(name, widgets::seriesColor(colour++), QCPScatterStyle::ssNone);
            g->setLineStyle(QCPGraph::lsStepCenter);
        } else if (!s.line) {
            g = plot->addScatterSeries(name, widgets::seriesColor(colour), widgets::seriesShape(colour), 6.0);
            ++colour;
        } else {
            g = plot->addLineSeries(name, widgets::seriesColor(colour), widgets::seriesShape(colour));
            ++colour;
        }
        g->setData(x, y, true);
        if (bars && !s.reference) {
            auto* errors = new QCPErrorBars(plot->xAxis, plot->yAxis);
            errors->removeFromLegend();
            errors->setDataPlottable(g);
            errors->setData(minus, plus);
            errors->setPen(g->pen().color());
        }
    }
    plot->xAxis->setLabel(QString::fromStdString(m_figure.xLabel));
    plot->yAxis->setLabel(QString::fromStdString(m_figure.yLabel));
    if (m_figure.logX)
        widgets::PlotWidget::setLogAxis(plot->xAxis);
    if (m_figure.logY)
        widgets::PlotWidget::setLogAxis(plot->yAxis);
    if (!m_figure.categories.empty()) {
        QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
        for (std::size_t i = 0; i < m_figure.categories.size(); ++i)
            ticks->addTick(static_cast<double>(i), QString::fromStdString(m_figure.categories[i]));
        plot->xAxis->setTicker(ticks);
        // Rotated labels end at their tick (negative angle), so the last ones stay on the page.
        plot->xAxis->setTickLabelRotation(m_figure.categories.size() > 4 ? -45 : 0);
    }
    plot->clipLogErrorBars(); // before the ranges are fitted, so its markers are inside them
    plot->rescaleAxes();
    // Room around the points: a decade fraction on log axes, 5% on linear ones.
    for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
        const QCPRange r = axis->range();
        if (axis->scaleType() == QCPAxis::stLogarithmic && r.lower > 0.0) {
            axis->setRange(r.lower / 1.3, r.upper * 1.3);
            widgets::PlotWidget::tuneLogAxis(axis);
        } else {
            const double pad = 0.05 * std::max(r.size(), 1e-12);
            axis->setRange(r.lower - pad, r.upper + pad);
        }
    }
    if (!m_figure.categories.empty())
        plot->xAxis->setRange(-0.6, static_cast<double>(m_figure.categories.size()) - 0.4);
    // Budgets and other whole-number x: integer ticks only.
    QVector<double> xs;
    for (const claims::Series& s : m_figure.series)
        if (!s.reference)
            xs.append(QVector<double>(s.x.begin(), s.x.end()));
    if (m_figure.categories.empty() && !m_figure.logX && widgets::PlotWidget::allIntegers(xs))
        widgets::PlotWidget::setIntegerAxis(plot->xAxis, *std::min_element(xs.begin(), xs.end()),
                                            *std::max_element(xs.begin(), xs.end()));
    plot->legend->setVisible(true);
    plot->placeLegendBelow(m_figure.series.size() > 4 ? 3 : 2);
    plot->replot();
}

} // namespace kvlens::app
