// SPDX-License-Identifier: GPL-3.0-or-later
// KL distribution view.
#include "widgets/kl_distribution_view.h"

#include <QComboBox>
#include <QSignalBlocker>

#include <algorithm>
#include <cmath>

namespace kvlens::widgets {

KlDistributionView::KlDistributionView(QWidget* parent)
    : ResultView(parent)
{
    m_budget = new QComboBox(this);
    m_budget->setToolTip(QStringLiteral("Nominal bit budget n whose KL distributions are shown."));
    m_mode = new QComboBox(this);
    m_mode->addItems({QStringLiteral("ECDF"), QStringLiteral("histogram")});
    addOption(QStringLiteral("Budget:"), m_budget);
    addOption(QStringLiteral("Show:"), m_mode);
    setToolTip(viewDescription());
}

QString KlDistributionView::viewDescription() const
{
    return QStringLiteral("How far each query's quantized attention p^ is from the exact p, as KL(p‖p^) in nats; "
                          "the tail (p99, worst) shows failures the mean hides.");
}

void KlDistributionView::setHistogram(bool histogram)
{
    m_mode->setCurrentIndex(histogram ? 1 : 0);
}

void KlDistributionView::setBudget(int budget)
{
    const int i = m_budget->findData(budget);
    if (i >= 0)
        m_budget->setCurrentIndex(i);
}

void KlDistributionView::redraw()
{
    m_plot->resetPlot();
    const bool histogram = m_mode->currentIndex() == 1;
    m_plot->xAxis->setLabel(QStringLiteral("KL(p‖p̂) per query (nats)"));
    m_plot->yAxis->setLabel(histogram ? QStringLiteral("fraction of queries") : QStringLiteral("fraction of queries ≤ KL"));
    PlotWidget::setLogAxis(m_plot->xAxis);
    if (data().empty() || !data().figures) {
        m_plot->replot();
        return;
    }
    // Keep the budget list in step with the run, preserving the selection.
    const auto& budgets = data().results->spec.budgets;
    {
        const QVariant current = m_budget->currentData();
        const QSignalBlocker block(m_budget);
        m_budget->clear();
        for (int n : budgets)
            m_budget->addItem(QStringLiteral("n = %1").arg(n), n);
        const int at = m_budget->findData(current);
        m_budget->setCurrentIndex(at >= 0 ? at : m_budget->count() - 1);
    }
    const int budget = m_budget->currentData().toInt();
    const FigureData& f = *data().figures;
    // Histogram height, so the markers can sit just above it.
    double yMax = 1.0;
    if (histogram) {
        yMax = 0.0;
        for (const KlDistribution& k : f.kl)
            if (k.budget == budget && k.point == currentPoint())
                for (double v : k.density)
                    yMax = std::max(yMax, v);
    }
    const double markerHeight = histogram ? yMax * 1.08 : 0.0;
    for (const KlDistribution& k : f.kl) {
        if (k.point != currentPoint() || k.budget != budget || k.ecdfX.empty())
            continue;
        const QColor color = seriesColor(k.scheme);
        const QString name = schemeName(k.scheme);
        // A log axis has no place for KL = 0: a scheme that quantizes only V (a value error never
        // moves the weights) has nothing to draw, and its legend entry says so; where some queries
        // are 0, the entry says how many the curve leaves out of the axis.
        const bool allZero = k.ecdfX.back() <= 0.0;
        double binned = 0.0;
        for (double v : k.density)
            binned += v;
        const double zeroShare = allZero ? 1.0 : std::clamp(1.0 - binned, 0.0, 1.0);
        const QString entry = allZero ? QStringLiteral("%1: KL = 0 exactly").arg(name)
                              : k.zeros > 0 ? QStringLiteral("%1 (%2% of queries at KL = 0)").arg(name).arg(100.0 * zeroShare, 0, 'g', 2)
                                            : name;
        if (allZero) {
            QCPGraph* g = m_plot->addLineSeries(entry, color, QCPScatterStyle::ssNone);
            g->setPen(QPen(color, 1.5, Qt::DotLine));
            continue;
        }
        if (histogram) {
            // Step lines rather than QCPBars: bars of several schemes overlap illegibly on a log axis.
            QCPGraph* g = m_plot->addLineSeries(entry, color, QCPScatterStyle::ssNone);
            g->setLineStyle(QCPGraph::lsStepCenter);
            QVector<double> x, y;
            for (std::size_t b = 0; b + 1 < f.klBinEdges.size(); ++b) {
                x.push_back(std::sqrt(f.klBinEdges[b] * f.klBinEdges[b + 1])); // geometric bin centre
                y.push_back(k.density[b]);
            }
            g->setData(x, y, true);
        } else {
            QCPGraph* g = m_plot->addLineSeries(entry, color, QCPScatterStyle::ssNone);
            g->setLineStyle(QCPGraph::lsStepLeft);
            QVector<double> x, y;
            for (std::size_t i = 0; i < k.ecdfX.size(); ++i) {
                if (k.ecdfX[i] <= 0.0)
                    continue; // log axis
                x.push_back(k.ecdfX[i]);
                y.push_back(k.ecdfY[i]);
            }
            g->setData(x, y, true);
        }
        // Mean, p99 and worst query, at the height of the ECDF (or on top of the histogram).
        auto ecdfAt = [&](double v) {
            const auto it = std::upper_bound(k.ecdfX.begin(), k.ecdfX.end(), v);
            const auto i = it - k.ecdfX.begin();
            return i == 0 ? 0.0 : k.ecdfY[static_cast<std::size_t>(i - 1)];
        };
        struct Marker {
            const char* label;
            double value;
            QCPScatterStyle::ScatterShape shape;
        };
        const Marker markers[] = {{"mean", k.mean, QCPScatterStyle::ssCircle},
                                  {"p99", k.p99, QCPScatterStyle::ssTriangle},
                                  {"worst", k.max, QCPScatterStyle::ssCross}};
        for (const Marker& m : markers) {
            if (m.value <= 0.0)
                continue;
            QCPGraph* g = m_plot->addScatterSeries(QStringLiteral("%1 %2").arg(name, QLatin1String(m.label)), color,
                                                   m.shape, 9.0);
            g->setData(QVector<double>{m.value}, QVector<double>{histogram ? markerHeight : ecdfAt(m.value)});
            g->removeFromLegend();
        }
    }
    // Schemes with the same key path (K-only, TQ-KV, KQV) have the same weights and so the same
    // KL, query by query: their curves lie on each other.
    m_plot->noteCoincidences(QStringLiteral("identical distributions, drawn dashed over each other: "));
    m_plot->rescaleAxes();
    m_plot->yAxis->setRange(0.0, histogram ? markerHeight * 1.06 : 1.04);
    PlotWidget::tuneLogAxis(m_plot->xAxis);
    // Curves run from bottom left to top right: the top left corner stays free for the legend.
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
    auto* legendNote = new QCPItemText(m_plot);
    legendNote->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
    legendNote->position->setType(QCPItemPosition::ptAxisRectRatio);
    legendNote->position->setCoords(0.98, 0.97);
    legendNote->setText(QStringLiteral("○ mean  △ p99  × worst  (n = %1)").arg(budget));
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
