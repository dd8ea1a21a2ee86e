// SPDX-License-Identifier: GPL-3.0-or-later
// The Sweep view's figure, built from the run's sweep cells without drawing anything.
#include "widgets/figures/sweep_figure.h"

#include "widgets/plot_widget.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
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

/// One line: a scheme (and budget, and values of the other swept parameters) across x.
struct Line {
    QString name;
    int scheme = 0;
    QVector<double> x, y, low, high;
    std::map<double, std::array<double, 4>> sums; ///< x -> sum of mean, low, high, count
};

/// What the sweep draws: which parameter is on x, which budget, and whether the other parameters
/// are averaged (with the footnotes that say so).
struct Plan {
    bool xIsBudget = false;
    int xAxisIndex = -1;
    int budgetFilter = 0;
    bool averageOthers = false;
    QStringList notes;
};

Plan plan(const ViewData& data, const SweepChoice& choice)
{
    const ExperimentSpec& spec = data.results->spec;
    const auto axes = spec.gridAxes();
    Plan p;
    p.xIsBudget = choice.xParameter == QLatin1String("budget");
    for (std::size_t i = 0; i < axes.size(); ++i)
        if (QString::fromStdString(axes[i]->name()) == choice.xParameter)
            p.xAxisIndex = static_cast<int>(i);
    p.budgetFilter = p.xIsBudget ? 0 : choice.budget;
    // A figure with dozens of lines says nothing (a model's map sweeps layers x heads: 5 schemes x
    // 3 budgets x 8 heads = 120 lines). Above kMaxLines, the other swept parameters are averaged
    // over (each point the mean of their values), and with "all" budgets only the middle one is
    // drawn; a footnote says both.
    constexpr std::size_t kMaxLines = 12;
    std::set<std::vector<double>> otherCombos;
    std::set<int> schemesSeen;
    for (const SweepCell& c : data.figures->sweep) {
        const std::vector<double> values = spec.pointValues(c.point);
        std::vector<double> others;
        for (std::size_t i = 0; i < values.size(); ++i)
            if (static_cast<int>(i) != p.xAxisIndex)
                others.push_back(values[i]);
        otherCombos.insert(others);
        schemesSeen.insert(c.scheme);
    }
    const std::size_t budgetLines = p.xIsBudget || p.budgetFilter != 0 ? 1 : spec.budgets.size();
    p.averageOthers = schemesSeen.size() * budgetLines * otherCombos.size() > kMaxLines && otherCombos.size() > 1;
    if (p.averageOthers) {
        QStringList names;
        for (std::size_t i = 0; i < axes.size(); ++i)
            if (static_cast<int>(i) != p.xAxisIndex)
                names << sweepAxisLabel(QString::fromStdString(axes[i]->name()));
        p.notes << QStringLiteral("each point: the mean over %1 (%2 values), its bar the mean of their intervals")
                       .arg(names.join(QStringLiteral(", ")))
                       .arg(otherCombos.size());
    }
    if (!p.xIsBudget && p.budgetFilter == 0 && schemesSeen.size() * spec.budgets.size() > kMaxLines && !spec.budgets.empty()) {
        p.budgetFilter = spec.budgets[spec.budgets.size() / 2];
        p.notes << QStringLiteral("n = %1 only (choose the budget in the view)").arg(p.budgetFilter);
    }
    return p;
}

/// The lines, each point the mean of its cells (several when other parameters are averaged).
std::map<std::tuple<int, int, std::vector<double>>, Line> collectLines(const ViewData& data, const Plan& p, int metric)
{
    const ExperimentSpec& spec = data.results->spec;
    const auto axes = spec.gridAxes();
    std::map<std::tuple<int, int, std::vector<double>>, Line> lines;
    for (const SweepCell& c : data.figures->sweep) {
        if (p.budgetFilter != 0 && c.budget != p.budgetFilter)
            continue;
        const std::vector<double> values = spec.pointValues(c.point);
        std::vector<double> others;
        QString otherLabel;
        for (std::size_t i = 0; i < values.size() && !p.averageOthers; ++i)
            if (static_cast<int>(i) != p.xAxisIndex) {
                others.push_back(values[i]);
                otherLabel += QStringLiteral(" %1=%2").arg(sweepAxisLabel(QString::fromStdString(axes[i]->name()))).arg(values[i]);
            }
        const int lineBudget = p.xIsBudget ? 0 : c.budget;
        Line& line = lines[{c.scheme, lineBudget, others}];
        line.scheme = c.scheme;
        line.name = schemeLabel(data.results.get(), c.scheme) + (p.xIsBudget ? QString() : QStringLiteral(" n=%1").arg(c.budget))
                    + otherLabel;
        const Interval v = metricOf(c, metric);
        auto& sum = line.sums[p.xIsBudget ? c.budget : values[static_cast<std::size_t>(p.xAxisIndex)]];
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
    return lines;
}

/// A log axis has no place for 0 (a scheme that quantizes only V: its KL is 0 exactly): such points
/// are left out and the legend entry says so.
void dropZeros(Line& line)
{
    int zeros = 0;
    for (int i = static_cast<int>(line.y.size()) - 1; i >= 0; --i)
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

} // namespace

QStringList sweepMetricNames()
{
    QStringList names;
    for (const char* label : kMetricLabels)
        names << QString::fromUtf8(label);
    return names;
}

bool sweepMetricIsKl(int index)
{
    return index == KlMean || index == KlP99;
}

QString sweepAxisLabel(const QString& parameter)
{
    if (parameter.startsWith(QLatin1String("regime.")))
        return parameter.mid(7);
    return parameter;
}

FigureSpec sweepFigure(const ViewData& data, const SweepChoice& choice)
{
    FigureSpec f;
    if (data.empty() || !data.figures)
        return f;
    const Plan p = plan(data, choice);
    const int metric = std::clamp(choice.metric, 0, MetricCount - 1);
    const bool logY = choice.logY && sweepMetricIsKl(metric);
    auto lines = collectLines(data, p, metric);
    double xMin = INFINITY, xMax = -INFINITY;
    std::map<int, int> perScheme;
    for (auto& [key, line] : lines) {
        if (logY)
            dropZeros(line);
        // Sort by x so the line and its error bars agree with the graph's key order.
        QVector<int> order(line.x.size());
        std::iota(order.begin(), order.end(), 0);
        const QVector<double>& lineX = line.x; // Clang 14 cannot capture structured bindings
        std::sort(order.begin(), order.end(), [&lineX](int a, int b) { return lineX[a] < lineX[b]; });
        SeriesSpec s;
        for (int i : order) {
            s.x << line.x[i];
            s.y << line.y[i];
            s.errorMinus << line.low[i];
            s.errorPlus << line.high[i];
            xMin = std::min(xMin, line.x[i]);
            xMax = std::max(xMax, line.x[i]);
        }
        const int variant = perScheme[line.scheme]++;
        const QColor color = seriesColor(line.scheme);
        s.name = line.name;
        s.feed = SeriesSpec::Feed::Sorted;
        s.pen = QPen(color, 1.5, variant == 0 ? Qt::SolidLine : Qt::DashLine);
        s.marker = MarkerStyle{seriesMarker(variant), QPen(color), QBrush(Qt::white), 6.0};
        s.errorPen = QPen(color);
        s.errorBars = true;
        f.series.push_back(std::move(s));
    }
    PanelSpec& panel = f.panels.front();
    panel.x.label = p.xIsBudget ? QStringLiteral("nominal budget n (bits)") : sweepAxisLabel(choice.xParameter);
    panel.y.label = QString::fromUtf8(kMetricLabels[metric]);
    const bool logX = xMin > 0.0 && xMax / xMin >= 10.0;
    if (logY)
        panel.y.ticks = AxisSpec::Ticks::LogTuned;
    for (const QString& note : p.notes)
        f.addFootnote(note);
    noteCoincidences(f, QStringLiteral("identical lines, drawn dashed over each other: "));
    clipLogIntervals(f); // lower ends at or below 0 on a log axis: a marker, not a bar to the floor
    // Budgets (and any whole-number parameter): integer ticks, a single value centred.
    QVector<double> xs;
    for (const SeriesSpec& s : f.series)
        xs << s.x;
    if (logX) {
        panel.x.ticks = AxisSpec::Ticks::LogTuned;
        panel.x.range = RangeSpec::data({RangeSpec::logPad(1.2)});
    } else if ((p.xIsBudget || PlotWidget::allIntegers(xs)) && !xs.isEmpty()) {
        panel.x.ticks = AxisSpec::Ticks::Integer;
        panel.x.integerLow = *std::min_element(xs.begin(), xs.end());
        panel.x.integerHigh = *std::max_element(xs.begin(), xs.end());
    } else {
        panel.x.range = RangeSpec::data({RangeSpec::linearPad(0.05, 0.05, 1.0)});
    }
    if (logY) {
        panel.y.range = RangeSpec::data({RangeSpec::logPad(1.5)});
    } else {
        panel.y.range = RangeSpec::data();
    }
    f.legends.front().place = LegendSpec::Place::Below;
    f.legends.front().columns = std::max(1, std::min(4, static_cast<int>(perScheme.size())));
    f.below.push_back(BelowRow{0, {}});
    return f;
}

} // namespace kvlens::widgets
