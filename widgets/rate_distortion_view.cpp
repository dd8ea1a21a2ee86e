// SPDX-License-Identifier: GPL-3.0-or-later
// Rate–distortion view.
#include "widgets/rate_distortion_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QSignalBlocker>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace kvlens::widgets {

RateDistortionView::RateDistortionView(QWidget* parent)
    : ResultView(parent)
{
    m_metric = new QComboBox(this);
    m_metric->addItem(QStringLiteral("mean KL(exact ‖ quantized)"), static_cast<int>(DamageMetric::MeanKl));
    m_metric->addItem(QStringLiteral("output error ‖T−T̂‖²/‖T‖²"), static_cast<int>(DamageMetric::OutputError));
    m_metric->setToolTip(QStringLiteral("The damage on y. KL(p‖p̂) sees the keys only (a value error never moves the "
                                        "weights); the output's relative error sees keys and values."));
    m_logY = new QCheckBox(QStringLiteral("log y"), this);
    m_logY->setChecked(true);
    m_logY->setToolTip(QStringLiteral("Logarithmic damage axis (damage spans decades across budgets)."));
    m_pool = new QCheckBox(QStringLiteral("pool grid points"), this);
    m_pool->setToolTip(QStringLiteral("One point per scheme and budget over every grid point (each seed: the mean over "
                                      "the points), as for a whole model's layers and heads; off: the grid point chosen."));
    m_pool->setVisible(false);
    addOption(QStringLiteral("Damage:"), m_metric);
    addOption(QString(), m_logY);
    addOption(QString(), m_pool);
    setToolTip(viewDescription());
}

QString RateDistortionView::viewDescription() const
{
    return QStringLiteral("Schemes at equal bits: each scheme's damage against the exact bits per coordinate it spends "
                          "(K and V, overheads included), one point per nominal budget n: the mean over seeds of each "
                          "seed's mean damage, with a 95% t-interval over seeds (the seed is the unit of replication); "
                          "the grey line is the lower envelope, the points no other point beats on both bits and damage.");
}

void RateDistortionView::setMetric(DamageMetric metric)
{
    m_metric->setCurrentIndex(m_metric->findData(static_cast<int>(metric)));
}

void RateDistortionView::setPooled(bool pooled)
{
    m_pool->setChecked(pooled);
}

QString RateDistortionView::dataCsv() const
{
    if (!data().results)
        return QString();
    return QString::fromStdString(rateDistortionCsv(*data().results, m_rd));
}

double RateDistortionView::printAspect(double widthInches) const
{
    // At a single column the legend rows and the notes under the plot need more height.
    return widthInches < 5.0 ? 0.95 : 0.62;
}

void RateDistortionView::redraw()
{
    m_plot->resetPlot();
    const auto metric = static_cast<DamageMetric>(m_metric->currentData().toInt());
    const bool logY = m_logY->isChecked();
    const bool kl = metric == DamageMetric::MeanKl;
    m_plot->xAxis->setLabel(QStringLiteral("exact bits per coordinate (K and V)"));
    m_plot->yAxis->setLabel(kl ? QStringLiteral("mean KL(p‖p̂) (nats)") : QStringLiteral("output error ‖T−T̂‖²/‖T‖²"));
    m_rd = RateDistortion{};
    if (data().empty()) {
        m_plot->replot();
        return;
    }
    const ResultSet& r = *data().results;
    const bool severalPoints = r.spec.pointCount() > 1;
    if (m_shownRun != &r) {
        // A new run: a model's cells are pooled by default (the whole model), other grids are not.
        m_shownRun = &r;
        const QSignalBlocker block(m_pool);
        m_pool->setChecked(r.spec.regime == "model");
    }
    m_pool->setVisible(severalPoints);
    const bool pooled = severalPoints && m_pool->isChecked();
    const std::shared_ptr<const RateDistortion> computed = kl ? data().rateDistortionKl : data().rateDistortionOutput;
    m_rd = pooled ? rateDistortionPooled(r, metric) : computed ? *computed : rateDistortion(r, metric);
    const int point = pooled ? 0 : currentPoint();
    const QString zeroText = kl ? QStringLiteral("KL = 0 exactly") : QStringLiteral("error = 0 exactly");

    // One line per scheme through its budgets, ascending in bits.
    std::set<int> seedCounts;
    QStringList notDrawn;
    bool nAscending = true;
    std::set<int> budgetsDrawn;
    for (std::size_t s = 0; s < r.schemes.size(); ++s) {
        std::vector<const RateDistortionPoint*> pts;
        for (const RateDistortionPoint& p : m_rd.points)
            if (p.point == point && p.scheme == static_cast<int>(s))
                pts.push_back(&p);
        if (pts.empty())
            continue;
        std::sort(pts.begin(), pts.end(), [](const RateDistortionPoint* a, const RateDistortionPoint* b) {
            return a->bits != b->bits ? a->bits < b->bits : a->budget < b->budget;
        });
        for (std::size_t i = 1; i < pts.size(); ++i)
            nAscending = nAscending && pts[i]->budget > pts[i - 1]->budget;
        QVector<double> x, y, lo, hi;
        int zeros = 0;
        for (const RateDistortionPoint* p : pts) {
            if (!p->finite) {
                notDrawn << QStringLiteral("%1 n=%2").arg(schemeName(p->scheme)).arg(p->budget);
                continue;
            }
            if (logY && !(p->damage > 0.0)) {
                ++zeros;
                continue;
            }
            seedCounts.insert(p->seeds);
            budgetsDrawn.insert(p->budget);
            x << p->bits;
            y << p->damage;
            lo << (std::isfinite(p->low) ? std::max(0.0, p->damage - p->low) : 0.0);
            hi << (std::isfinite(p->high) ? std::max(0.0, p->high - p->damage) : 0.0);
        }
        QString name = schemeName(static_cast<int>(s));
        if (zeros > 0 && x.isEmpty())
            name += QStringLiteral(": ") + zeroText;
        else if (zeros > 0)
            name += QStringLiteral(" (%1 at %2 budgets, not drawn)").arg(zeroText).arg(zeros);
        const QColor color = seriesColor(static_cast<int>(s));
        QCPGraph* g = m_plot->addLineSeries(name, color, seriesShape(static_cast<int>(s)));
        g->setPen(QPen(color, 1.0));
        g->setData(x, y, true);
        if (x.isEmpty())
            continue;
        auto* bars = new QCPErrorBars(m_plot->xAxis, m_plot->yAxis);
        bars->removeFromLegend();
        bars->setDataPlottable(g);
        bars->setData(lo, hi);
        bars->setPen(QPen(color, 1.0));
        bars->setWhiskerWidth(4); // narrower than the marker: a bar on y, not a mark on x
    }
    m_plot->noteCoincidences(QStringLiteral("identical points, drawn as rings: "));
    // The envelope: a broad grey band under the points (on the grid's layer, below the data),
    // added after the schemes' lines so that passing through their points is not a coincidence.
    QCPGraph* envelope = nullptr;
    {
        QVector<double> x, y;
        for (int i : m_rd.envelope(point)) {
            const RateDistortionPoint& p = m_rd.points[static_cast<std::size_t>(i)];
            if (logY && !(p.damage > 0.0))
                continue; // no place on a log axis (named in its scheme's legend entry)
            x << p.bits;
            y << p.damage;
        }
        if (!x.isEmpty()) {
            envelope = m_plot->addLineSeries(envelopeName(), QColor(0x99, 0x99, 0x99), QCPScatterStyle::ssNone);
            envelope->setPen(QPen(QColor(0x99, 0x99, 0x99, 110), 5.0, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
            envelope->setData(x, y, true);
            envelope->setLayer(QStringLiteral("grid"));
        }
    }
    if (logY)
        PlotWidget::setLogAxis(m_plot->yAxis);
    m_plot->clipLogErrorBars(); // intervals reaching 0 on a log axis: a marker, not a bar to the floor
    m_plot->rescaleAxes();
    const QCPRange xr = m_plot->xAxis->range();
    const double pad = 0.06 * std::max(xr.size(), 0.5);
    m_plot->xAxis->setRange(xr.lower - pad, xr.upper + pad);
    if (logY) {
        const QCPRange yr = m_plot->yAxis->range();
        if (yr.lower > 0.0)
            m_plot->yAxis->setRange(yr.lower / 1.6, yr.upper * 1.6);
        PlotWidget::tuneLogAxis(m_plot->yAxis);
    } else {
        const QCPRange yr = m_plot->yAxis->range();
        m_plot->yAxis->setRange(std::min(0.0, yr.lower), yr.upper + 0.08 * std::max(yr.size(), 1e-12));
    }
    m_plot->placeLegendBelow(std::max(1, std::min(3, static_cast<int>(r.schemes.size()) + 1)));
    // What a point and a bar are, and which budget is which point.
    QStringList budgets;
    for (int n : budgetsDrawn)
        budgets << QString::number(n);
    const QString seeds = seedCounts.size() == 1 ? QString::number(*seedCounts.begin())
                          : seedCounts.empty()   ? QStringLiteral("0")
                                                 : QStringLiteral("%1–%2").arg(*seedCounts.begin()).arg(*seedCounts.rbegin());
    const QString order = budgets.size() > 1 && nAscending
                              ? QStringLiteral("Lines: a scheme at n = %1 (left to right); ").arg(budgets.join(QStringLiteral(", ")))
                              : budgets.size() == 1 ? QStringLiteral("Each scheme at n = %1; ").arg(budgets.front())
                                                    : QString();
    const bool oneSeed = seedCounts.size() == 1 && *seedCounts.begin() == 1;
    const QString scope = pooled ? QStringLiteral("%1 grid points pooled. ").arg(m_rd.pooledPoints) : QString();
    m_plot->addFootnote(scope + order + (oneSeed ? QStringLiteral("one seed: its mean over queries, no interval.")
                                                 : QStringLiteral("points: mean of the %1 seeds' means, bars: 95% "
                                                                  "t-interval over seeds.").arg(seeds)));
    if (!notDrawn.isEmpty())
        m_plot->addFootnote(QStringLiteral("not drawn (a seed's damage is not finite): ") + notDrawn.join(QStringLiteral(", ")));
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
