// SPDX-License-Identifier: GPL-3.0-or-later
// The run comparison's forest plot.
#include "widgets/run_compare_view.h"

#include <QComboBox>
#include <QFileInfo>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvlens::widgets {

namespace {

/// The last part of a directory, for the footnote naming A and B ("runs/base/" gives "base").
QString shortName(const std::string& dir)
{
    QString d = QString::fromStdString(dir);
    while (d.size() > 1 && d.endsWith(QLatin1Char('/')))
        d.chop(1);
    const QString name = QFileInfo(d).fileName();
    return name.isEmpty() ? d : name;
}

/// What an axis calls a metric (formula markup: formula_label.h).
QString metricLabel(const std::string& metric)
{
    static const std::pair<const char*, const char*> names[] = {
        {"kl_mean", "mean KL(p‖p̂)"},   {"kl_median", "median KL(p‖p̂)"}, {"recall", "top-k recall"},
        {"argmax_shift", "argmax-shift rate"}, {"rel_mse_t", "output relMSE_T"}, {"snr_k", "SNR_K (dB)"},
        {"phi_k", "φ_K"},                     {"snr_v", "SNR_V (dB)"},        {"phi_v", "φ_V"},
        {"snr_t", "SNR_T (dB)"},              {"phi_t", "φ_T"},
    };
    for (const auto& n : names)
        if (metric == n.first)
            return QString::fromUtf8(n.second);
    return QString::fromStdString(metric);
}

bool isOnly(const RunCompareRow& r)
{
    return r.status == RunRowStatus::OnlyInA || r.status == RunRowStatus::OnlyInB;
}

} // namespace

RunCompareView::RunCompareView(QWidget* parent)
    : ResultView(parent)
{
    m_metric = new QComboBox(this);
    for (const RunMetric& m : runMetrics())
        m_metric->addItem(QString::fromLatin1(m.name), QString::fromLatin1(m.name));
    m_metric->setToolTip(QStringLiteral("The per-seed metric drawn."));
    addOption(QStringLiteral("Metric:"), m_metric);
    connect(m_metric, &QComboBox::currentIndexChanged, this, [this] {
        redraw();
        updateEmptyState();
    });
    setPointSelectable(false); // every grid point is drawn, labelled
    setToolTip(viewDescription());
}

QString RunCompareView::viewDescription() const
{
    return QStringLiteral("Run B against run A, per scheme and budget: the change of a per-seed metric with its 95% "
                          "interval, the seed as the unit (paired when both runs drew the same data).");
}

void RunCompareView::setComparison(std::shared_ptr<const RunComparison> comparison)
{
    m_comparison = std::move(comparison);
    redraw();
    updateEmptyState();
}

bool RunCompareView::setMetric(const QString& name)
{
    const int at = m_metric->findData(name);
    if (at < 0)
        return false;
    m_metric->setCurrentIndex(at);
    return true;
}

QString RunCompareView::dataCsv() const
{
    return m_comparison ? QString::fromStdString(runComparisonCsv(*m_comparison)) : QString();
}

QString RunCompareView::emptyText() const
{
    if (!m_comparison)
        return QStringLiteral("No comparison: kvlens compare DIR_A DIR_B --out DIR compares two finished runs.");
    return QString();
}

double RunCompareView::printAspect(double widthInches) const
{
    // An axis with its label, the legend row and the footnotes, then a row per configuration.
    const double inches = 1.2 + 0.19 * std::max(1, m_rows) + 0.13 * m_footnoteLines;
    return std::clamp(inches / widthInches, 0.35, 2.5);
}

void RunCompareView::redraw()
{
    m_plot->resetPlot();
    m_rows = 0;
    m_footnoteLines = 0;
    m_plot->yAxis->setLabel(QString());
    if (!m_comparison) {
        m_plot->replot();
        return;
    }
    const std::string metric = m_metric->currentData().toString().toStdString();
    const auto& metrics = runMetrics();
    const auto it = std::find_if(metrics.begin(), metrics.end(), [&](const RunMetric& m) { return metric == m.name; });
    const bool ratioMetric = it != metrics.end() && it->ratioScale;
    std::vector<const RunCompareRow*> rows;
    QStringList only;
    bool anyPaired = false, anyUnpaired = false, anyPoint = false;
    for (const RunCompareRow& r : m_comparison->rows) {
        anyPoint = anyPoint || !r.pointLabel.empty();
        if (isOnly(r)) {
            only << QStringLiteral("%1 n=%2 (%3)")
                        .arg(QString::fromStdString(r.scheme))
                        .arg(r.budget)
                        .arg(r.status == RunRowStatus::OnlyInA ? QStringLiteral("A") : QStringLiteral("B"));
            continue;
        }
        if (r.metric != metric)
            continue;
        rows.push_back(&r);
        (r.paired ? anyPaired : anyUnpaired) = true;
    }
    // Ratios where the metric is ratio-scale and a row has one; differences otherwise.
    const bool ratio = ratioMetric
                       && std::any_of(rows.begin(), rows.end(), [](const RunCompareRow* r) { return r->hasLogRatio; });
    const QString name = metricLabel(metric);
    m_plot->xAxis->setLabel(ratio ? QStringLiteral("%1, ratio B / A (95% interval)").arg(name)
                                  : QStringLiteral("%1, B − A (95% interval)").arg(name));
    if (ratio)
        PlotWidget::setLogAxis(m_plot->xAxis);

    QVector<double> sigX, sigY, sigLow, sigHigh, nsX, nsY, nsLow, nsHigh, idX, idY;
    QSharedPointer<QCPAxisTickerText> labels(new QCPAxisTickerText);
    QStringList undrawn;
    int row = 0;
    for (const RunCompareRow* r : rows) {
        const double y = -row++; // the first configuration on top
        QString label = QStringLiteral("%1, n=%2").arg(QString::fromStdString(r->scheme)).arg(r->budget);
        if (anyPoint)
            label = QStringLiteral("[%1] ").arg(QString::fromStdString(r->pointLabel)) + label;
        if (anyPaired && anyUnpaired && !r->paired)
            label += QStringLiteral(" (unpaired)");
        if (r->status == RunRowStatus::Identical) {
            labels->addTick(y, label + QStringLiteral(" (identical)"));
            idX.push_back(ratio ? 1.0 : 0.0);
            idY.push_back(y);
            continue;
        }
        if (r->status == RunRowStatus::Untestable)
            label += QStringLiteral(" (untested)");
        labels->addTick(y, label);
        double x = r->difference, low = r->diffLow, high = r->diffHigh;
        if (ratio) {
            if (!r->hasLogRatio) {
                undrawn << label;
                continue;
            }
            x = std::exp(r->logRatio);
            low = std::exp(r->logLow);
            high = std::exp(r->logHigh);
        }
        if (!std::isfinite(x)) {
            undrawn << label;
            continue;
        }
        const bool significant = r->status == RunRowStatus::Tested && r->pHolm.p < 0.05;
        (significant ? sigX : nsX).push_back(x);
        (significant ? sigY : nsY).push_back(y);
        (significant ? sigLow : nsLow).push_back(std::isfinite(low) ? std::max(0.0, x - low) : 0.0);
        (significant ? sigHigh : nsHigh).push_back(std::isfinite(high) ? std::max(0.0, high - x) : 0.0);
    }
    m_rows = row;
    m_plot->yAxis->setTicker(labels);
    m_plot->yAxis->setSubTicks(false);
    m_plot->yAxis->grid()->setZeroLinePen(Qt::NoPen); // the rows sit at y = 0, -1, ...
    auto add = [&](const QString& series, const QColor& color, QVector<double>& x, QVector<double>& y,
                   QVector<double>& low, QVector<double>& high) {
        if (x.isEmpty())
            return;
        QCPGraph* g = m_plot->addScatterSeries(series, color, QCPScatterStyle::ssDiamond, 8.0);
        // QCPGraph sorts its data by key (the x values here): the error bars follow the same order.
        QVector<int> order(x.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] < x[b]; });
        QVector<double> lo, hi;
        g->data()->clear();
        for (int i : order) {
            g->addData(x[i], y[i]);
            lo.push_back(low[i]);
            hi.push_back(high[i]);
        }
        auto* bars = new QCPErrorBars(m_plot->xAxis, m_plot->yAxis);
        bars->removeFromLegend();
        bars->setDataPlottable(g);
        bars->setErrorType(QCPErrorBars::etKeyError);
        bars->setData(lo, hi);
        bars->setPen(QPen(color, 1.2));
    };
    add(QStringLiteral("Holm p < 0.05 (seeds)"), seriesColor(0), sigX, sigY, sigLow, sigHigh);
    add(QStringLiteral("not significant"), QColor(0x88, 0x88, 0x88), nsX, nsY, nsLow, nsHigh);
    if (!idX.isEmpty()) {
        QCPGraph* g = m_plot->addScatterSeries(QStringLiteral("identical (not tested)"), QColor(0x55, 0x55, 0x55),
                                               QCPScatterStyle::ssCircle, 8.0);
        g->data()->clear();
        for (int i = 0; i < idX.size(); ++i)
            g->addData(idX[i], idY[i]);
    }
    // The x range holds every interval and the no-change line.
    const double none = ratio ? 1.0 : 0.0;
    double lo = none, hi = none;
    for (const auto* set : {&sigX, &nsX})
        for (int i = 0; i < set->size(); ++i) {
            const bool sig = set == &sigX;
            const double x = (*set)[i];
            lo = std::min(lo, x - (sig ? sigLow : nsLow)[i]);
            hi = std::max(hi, x + (sig ? sigHigh : nsHigh)[i]);
        }
    if (ratio) {
        lo = std::max(lo, hi * 1e-6); // a lower end at 0 cannot sit on a log axis
        // Nothing but the line (identical runs): a factor of 2 either side, labelled 0.5, 1, 2.
        const double room = hi > lo ? 1.25 : 2.0;
        m_plot->xAxis->setRange(lo / room, hi * room);
        PlotWidget::tuneLogAxis(m_plot->xAxis);
    } else {
        // Nothing but the line (identical runs): a unit either side rather than a range of 1e-12.
        const double pad = hi > lo ? 0.08 * (hi - lo) : 1.0;
        m_plot->xAxis->setRange(lo - pad, hi + pad);
    }
    m_plot->yAxis->setRange(-std::max(1, row) + 0.5, 0.5);
    auto* line = new QCPItemStraightLine(m_plot);
    line->point1->setCoords(none, 0.0);
    line->point2->setCoords(none, 1.0);
    line->setPen(QPen(Qt::black, 0, Qt::DashLine));
    m_plot->legend->setVisible(true);
    m_plot->placeLegendBelow(3);

    QStringList notes;
    notes << QStringLiteral("A: %1, B: %2").arg(shortName(m_comparison->dirA), shortName(m_comparison->dirB));
    if (anyUnpaired && !anyPaired)
        notes << QStringLiteral("unpaired (the runs' seeds are not the same units): Mann-Whitney over seeds, Welch "
                                "intervals");
    else if (anyPaired && !anyUnpaired)
        notes << QStringLiteral("paired by seed: Wilcoxon signed-rank, t intervals");
    if (!undrawn.isEmpty())
        notes << QStringLiteral("not drawn (a value of 0: no ratio): ") + undrawn.mid(0, 3).join(QStringLiteral("; "))
                     + (undrawn.size() > 3 ? QStringLiteral(" and %1 more").arg(undrawn.size() - 3) : QString());
    if (!only.isEmpty())
        notes << QStringLiteral("in one run only: ") + only.mid(0, 4).join(QStringLiteral(", "))
                     + (only.size() > 4 ? QStringLiteral(" and %1 more").arg(only.size() - 4) : QString());
    // One footnote element: separate ones each take a row of the layout with its own margins.
    m_plot->addFootnote(notes.join(QLatin1Char('\n')));
    for (const QString& note : notes)
        m_footnoteLines += 1 + static_cast<int>(note.size()) / PlotWidget::kFootnoteChars;
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
