// SPDX-License-Identifier: GPL-3.0-or-later
// Sweep view.
#include "widgets/sweep_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QSignalBlocker>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <numeric>
#include <tuple>

namespace kvlens::widgets {

namespace {

enum Metric { KlMean, KlP99, Recall, ArgmaxShift, SnrK, PhiK, SnrV, PhiV, SnrT, PhiT, Bits, MetricCount };

const char* const kMetricLabels[MetricCount] = {
    "mean KL (nats)",  "p99 KL (nats)", "top-k recall", "argmax-shift rate", "SNR_K (dB)", "φ_K (rad)",
    "SNR_V (dB)",      "φ_V (rad)",     "SNR_T (dB)",   "φ_T (rad)",         "exact bits per coordinate (K and V)"};

Interval metricOf(const SweepCell& c, int metric)
{
    switch (metric) {
    case KlMean: return c.klMean;
    case KlP99: return c.klP99;
    case Recall: return c.recall;
    case ArgmaxShift: return c.argmaxShift;
    case Bits: return Interval{c.bitsTotal, c.bitsTotal, c.bitsTotal, 1};
    default: return c.sixD[static_cast<std::size_t>(metric - SnrK)];
    }
}

QString axisLabel(const QString& parameter)
{
    if (parameter.startsWith(QLatin1String("regime.")))
        return parameter.mid(7);
    return parameter;
}

} // namespace

SweepView::SweepView(QWidget* parent)
    : ResultView(parent)
{
    setPointSelectable(false); // every grid point is on the x axis
    m_x = new QComboBox(this);
    m_x->setToolTip(QStringLiteral("Parameter on the x axis: a swept parameter, or the nominal bit budget n."));
    m_metric = new QComboBox(this);
    m_metric->addItems(metricNames());
    m_metric->setToolTip(QStringLiteral("Metric on the y axis, with 95% intervals over seeds."));
    m_budget = new QComboBox(this);
    m_budget->setToolTip(QStringLiteral("Budget drawn (all: one line per scheme and budget)."));
    m_logY = new QCheckBox(QStringLiteral("log y"), this);
    m_logY->setChecked(true);
    m_logY->setToolTip(QStringLiteral("Logarithmic y axis (KL spans decades)."));
    addOption(QStringLiteral("x:"), m_x);
    addOption(QStringLiteral("y:"), m_metric);
    addOption(QStringLiteral("Budget:"), m_budget);
    addOption(QString(), m_logY);
    setToolTip(viewDescription());
}

QString SweepView::viewDescription() const
{
    return QStringLiteral("A metric against a swept parameter, one line per scheme, with 95% intervals over seeds: "
                          "where each scheme holds up and where it breaks.");
}

QStringList SweepView::metricNames()
{
    QStringList names;
    for (const char* label : kMetricLabels)
        names << QString::fromUtf8(label);
    return names;
}

void SweepView::setMetric(int index)
{
    m_metric->setCurrentIndex(index);
}

bool SweepView::setXParameter(const QString& parameter)
{
    const int i = m_x->findData(parameter);
    if (i >= 0)
        m_x->setCurrentIndex(i);
    return i >= 0;
}

void SweepView::redraw()
{
    m_plot->resetPlot();
    if (data().empty() || !data().figures) {
        m_plot->replot();
        return;
    }
    const ExperimentSpec& spec = data().results->spec;
    const auto axes = spec.gridAxes();
    {
        // x choices: the swept parameters first (the point of a sweep), then the budget.
        const QVariant current = m_x->currentData();
        const QSignalBlocker block(m_x);
        m_x->clear();
        for (const SweepAxis* a : axes)
            m_x->addItem(axisLabel(QString::fromStdString(a->name())), QString::fromStdString(a->name()));
        m_x->addItem(QStringLiteral("nominal budget n"), QStringLiteral("budget"));
        const int at = m_x->findData(current);
        m_x->setCurrentIndex(at >= 0 ? at : 0);
        const QVariant budget = m_budget->currentData();
        const QSignalBlocker blockBudget(m_budget);
        m_budget->clear();
        m_budget->addItem(QStringLiteral("all"), 0);
        for (int n : spec.budgets)
            m_budget->addItem(QStringLiteral("n = %1").arg(n), n);
        const int b = m_budget->findData(budget);
        m_budget->setCurrentIndex(b >= 0 ? b : 0);
    }
    const QString xParameter = m_x->currentData().toString();
    const bool xIsBudget = xParameter == QLatin1String("budget");
    int xAxisIndex = -1;
    for (std::size_t i = 0; i < axes.size(); ++i)
        if (QString::fromStdString(axes[i]->name()) == xParameter)
            xAxisIndex = static_cast<int>(i);
    m_budget->setEnabled(!xIsBudget);
    int budgetFilter = xIsBudget ? 0 : m_budget->currentData().toInt();
    const int metric = m_metric->currentIndex();

    // A figure with dozens of lines says nothing (a model's map sweeps layers x heads: 5 schemes x
    // 3 budgets x 8 heads = 120 lines). Above kMaxLines, the other swept parameters are averaged
    // over (each point the mean of their values), and with "all" budgets only the middle one is
    // drawn; a footnote says both.
    constexpr std::size_t kMaxLines = 12;
    std::set<std::vector<double>> otherCombos;
    std::set<int> schemesSeen;
    for (const SweepCell& c : data().figures->sweep) {
        const std::vector<double> values = spec.pointValues(c.point);
        std::vector<double> others;
        for (std::size_t i = 0; i < values.size(); ++i)
            if (static_cast<int>(i) != xAxisIndex)
                others.push_back(values[i]);
        otherCombos.insert(others);
        schemesSeen.insert(c.scheme);
    }
    const std::size_t budgetLines = xIsBudget || budgetFilter != 0 ? 1 : spec.budgets.size();
    const bool averageOthers = schemesSeen.size() * budgetLines * otherCombos.size() > kMaxLines && otherCombos.size() > 1;
    QStringList notes;
    if (averageOthers) {
        QStringList names;
        for (std::size_t i = 0; i < axes.size(); ++i)
            if (static_cast<int>(i) != xAxisIndex)
                names << axisLabel(QString::fromStdString(axes[i]->name()));
        notes << QStringLiteral("each point: the mean over %1 (%2 values), its bar the mean of their intervals").arg(names.join(QStringLiteral(", "))).arg(otherCombos.size());
    }
    if (!xIsBudget && budgetFilter == 0 && schemesSeen.size() * spec.budgets.size() > kMaxLines && !spec.budgets.empty()) {
        budgetFilter = spec.budgets[spec.budgets.size() / 2];
        notes << QStringLiteral("n = %1 only (choose the budget in the view)").arg(budgetFilter);
    }

    // One line per (scheme, budget unless on x, values of the other swept parameters).
    struct Line {
        QString name;
        int scheme = 0;
        QVector<double> x, y, low, high;
        std::map<double, std::array<double, 4>> sums; ///< x -> sum of mean, low, high, count
    };
    std::map<std::tuple<int, int, std::vector<double>>, Line> lines;
    for (const SweepCell& c : data().figures->sweep) {
        if (budgetFilter != 0 && c.budget != budgetFilter)
            continue;
        const std::vector<double> values = spec.pointValues(c.point);
        std::vector<double> others;
        QString otherLabel;
        for (std::size_t i = 0; i < values.size() && !averageOthers; ++i)
            if (static_cast<int>(i) != xAxisIndex) {
                others.push_back(values[i]);
                otherLabel += QStringLiteral(" %1=%2").arg(axisLabel(QString::fromStdString(axes[i]->name())))
                                  .arg(values[i]);
            }
        const int lineBudget = xIsBudget ? 0 : c.budget;
        Line& line = lines[{c.scheme, lineBudget, others}];
        line.scheme = c.scheme;
        line.name = schemeName(c.scheme) + (xIsBudget ? QString() : QStringLiteral(" n=%1").arg(c.budget)) + otherLabel;
        const Interval v = metricOf(c, metric);
        auto& sum = line.sums[xIsBudget ? c.budget : values[static_cast<std::size_t>(xAxisIndex)]];
        sum[0] += v.mean;
        sum[1] += v.low;
        sum[2] += v.high;
        sum[3] += 1.0;
    }
    for (auto& [key, line] : lines)
        for (const auto& [x, sum] : line.sums) {
            // The mean of the means (and of the interval ends) over the averaged parameters.
            const double mean = sum[0] / sum[3], low = sum[1] / sum[3], high = sum[2] / sum[3];
            line.x.push_back(x);
            line.y.push_back(mean);
            line.low.push_back(mean - low);
            line.high.push_back(high - mean);
        }
    double xMin = INFINITY, xMax = -INFINITY;
    std::map<int, int> perScheme;
    const bool logY = m_logY->isChecked() && (metric == KlMean || metric == KlP99);
    for (auto& [key, line] : lines) {
        // A log axis has no place for 0 (a scheme that quantizes only V: its KL is 0 exactly):
        // such points are left out and the legend entry says so.
        if (logY) {
            int zeros = 0;
            for (int i = line.y.size() - 1; i >= 0; --i)
                if (!(line.y[i] > 0.0)) {
                    ++zeros;
                    line.x.remove(i);
                    line.y.remove(i);
                    line.low.remove(i);
                    line.high.remove(i);
                }
            if (zeros > 0 && line.y.isEmpty())
                line.name += QStringLiteral(": KL = 0 exactly");
            else if (zeros > 0)
                line.name += QStringLiteral(" (KL = 0 at %1 points, not drawn)").arg(zeros);
        }
        // Sort by x so the line and its error bars agree with QCPGraph's key order.
        QVector<int> order(line.x.size());
        std::iota(order.begin(), order.end(), 0);
        const QVector<double>& lineX = line.x; // Clang 14 cannot capture structured bindings
        std::sort(order.begin(), order.end(), [&lineX](int a, int b) { return lineX[a] < lineX[b]; });
        QVector<double> x, y, lo, hi;
        for (int i : order) {
            x << line.x[i];
            y << line.y[i];
            lo << line.low[i];
            hi << line.high[i];
            xMin = std::min(xMin, line.x[i]);
            xMax = std::max(xMax, line.x[i]);
        }
        const int variant = perScheme[line.scheme]++;
        QCPGraph* g = m_plot->addLineSeries(line.name, seriesColor(line.scheme), seriesShape(variant),
                                            variant == 0 ? Qt::SolidLine : Qt::DashLine);
        g->setData(x, y, true);
        auto* bars = new QCPErrorBars(m_plot->xAxis, m_plot->yAxis);
        bars->removeFromLegend();
        bars->setDataPlottable(g);
        bars->setData(lo, hi);
        bars->setPen(QPen(seriesColor(line.scheme)));
    }
    m_plot->xAxis->setLabel(xIsBudget ? QStringLiteral("nominal budget n (bits)") : axisLabel(xParameter));
    m_plot->yAxis->setLabel(QString::fromUtf8(kMetricLabels[metric]));
    const bool logX = xMin > 0.0 && xMax / xMin >= 10.0;
    if (logX)
        PlotWidget::setLogAxis(m_plot->xAxis);
    m_logY->setEnabled(metric == KlMean || metric == KlP99);
    if (logY)
        PlotWidget::setLogAxis(m_plot->yAxis);
    for (const QString& note : notes)
        m_plot->addFootnote(note);
    m_plot->noteCoincidences(QStringLiteral("identical lines, drawn dashed over each other: "));
    m_plot->clipLogErrorBars(); // lower ends at or below 0 on a log axis: a marker, not a bar to the floor
    m_plot->rescaleAxes();
    const QCPRange xr = m_plot->xAxis->range();
    if (logX)
        m_plot->xAxis->setRange(xr.lower / 1.2, xr.upper * 1.2);
    else
        m_plot->xAxis->setRange(xr.lower - 0.05 * std::max(xr.size(), 1.0), xr.upper + 0.05 * std::max(xr.size(), 1.0));
    if (logX)
        PlotWidget::tuneLogAxis(m_plot->xAxis);
    // Budgets (and any whole-number parameter): integer ticks, a single value centred.
    QVector<double> xs;
    for (int i = 0; i < m_plot->graphCount(); ++i)
        for (auto it = m_plot->graph(i)->data()->constBegin(); it != m_plot->graph(i)->data()->constEnd(); ++it)
            xs.push_back(it->key);
    if (!logX && (xIsBudget || PlotWidget::allIntegers(xs)) && !xs.isEmpty())
        PlotWidget::setIntegerAxis(m_plot->xAxis, *std::min_element(xs.begin(), xs.end()),
                                   *std::max_element(xs.begin(), xs.end()));
    if (logY) {
        const QCPRange yr = m_plot->yAxis->range();
        m_plot->yAxis->setRange(yr.lower / 1.5, yr.upper * 1.5);
        PlotWidget::tuneLogAxis(m_plot->yAxis);
    }
    m_plot->placeLegendBelow(std::max(1, std::min(4, static_cast<int>(perScheme.size()))));
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
