// SPDX-License-Identifier: GPL-3.0-or-later
// Forest plots of scheme pairs and of two runs, built from core's comparison rows without drawing anything.
#include "widgets/figures/forest_figures.h"

#include "widgets/plot_widget.h"

#include <QFileInfo>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvlens::widgets {

namespace {

/// The rows of a forest: the significant, the not significant and the identical, each with its
/// x, y and interval, and the labels of the y axis.
struct Rows {
    QVector<double> sigX, sigY, sigLow, sigHigh, nsX, nsY, nsLow, nsHigh, idX, idY;
    QVector<double> tickAt;
    QStringList tickText;
    QStringList undrawn;
    int row = 0;

    void label(double y, const QString& text)
    {
        tickAt << y;
        tickText << text;
    }
    void add(bool significant, double x, double y, double low, double high)
    {
        (significant ? sigX : nsX).push_back(x);
        (significant ? sigY : nsY).push_back(y);
        (significant ? sigLow : nsLow).push_back(low);
        (significant ? sigHigh : nsHigh).push_back(high);
    }
};

SeriesSpec diamonds(const QString& name, const QColor& color)
{
    SeriesSpec s;
    s.name = name;
    s.line = SeriesSpec::Line::None;
    QColor fill = color;
    fill.setAlpha(110);
    s.pen = QPen(color);
    s.marker = MarkerStyle{Marker::Diamond, QPen(color), QBrush(fill), 8.0};
    s.adaptiveSampling = false;
    s.feed = SeriesSpec::Feed::OneByOne;
    s.keyErrors = true;
    s.errorPen = QPen(color, 1.2);
    return s;
}

SeriesSpec rings(const QString& name, const QVector<double>& x, const QVector<double>& y)
{
    SeriesSpec s = diamonds(name, QColor(0x55, 0x55, 0x55));
    s.marker.shape = Marker::Circle;
    s.keyErrors = false;
    s.x = x;
    s.y = y;
    return s;
}

/// The order QCustomPlot keeps a forest's points in (by x, ties as given).
QVector<int> byX(const QVector<double>& x)
{
    QVector<int> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] < x[b]; });
    return order;
}

ItemSpec verticalLine(double x)
{
    ItemSpec line;
    line.kind = ItemSpec::Kind::StraightLine;
    line.a = QPointF(x, 0.0);
    line.b = QPointF(x, 1.0);
    line.pen = QPen(Qt::black, 0, Qt::DashLine);
    return line;
}

/// The y axis of a forest: a label per row, no sub ticks, no zero line (the rows sit at y = 0,
/// -1, ...: QCustomPlot's solid zero line would run through the first like an interval without ends).
void rowAxis(AxisSpec& y, const Rows& rows)
{
    y.ticks = AxisSpec::Ticks::Text;
    y.tickAt = rows.tickAt;
    y.tickText = rows.tickText;
    y.subTicks = false;
    y.zeroLine = false;
}

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

ForestFigure comparisonFigure(const ViewData& data, int point, int budget)
{
    ForestFigure out;
    FigureSpec& f = out.figure;
    PanelSpec& panel = f.panels.front();
    panel.x.label = QStringLiteral("median KL ratio A/B");
    panel.x.ticks = AxisSpec::Ticks::Log;
    if (data.empty() || !data.comparisons)
        return out;
    const ResultSet* r = data.results.get();
    Rows rows;
    // A forest of dozens of rows is unreadable (a model run: 10 pairs x 3 budgets per cell, most of
    // them identical key paths or V-only's KL of 0). Past kMaxRows, only tested rows are drawn;
    // a footnote counts the others, which the table and comparisons.csv keep.
    constexpr int kMaxRows = 14;
    int candidates = 0;
    for (const stats::ComparisonRow& c : *data.comparisons)
        candidates += c.point == point && (budget == 0 || c.budget == budget);
    const bool testedOnly = candidates > kMaxRows;
    int identicalLeftOut = 0, degenerateLeftOut = 0;
    for (const stats::ComparisonRow& c : *data.comparisons) {
        if (c.point != point || (budget != 0 && c.budget != budget))
            continue;
        const bool degenerate = c.status == stats::ComparisonStatus::Degenerate || !(c.medianKlRatio > 0.0);
        if (testedOnly && (c.status == stats::ComparisonStatus::Identical || degenerate)) {
            ++(c.status == stats::ComparisonStatus::Identical ? identicalLeftOut : degenerateLeftOut);
            continue;
        }
        const double y = -rows.row++; // first comparison on top
        const QString n = c.kind == stats::ComparisonKind::EqualBits ? QStringLiteral("%1/%2").arg(c.budget).arg(c.budgetB)
                                                                      : QString::number(c.budget);
        QString label = QStringLiteral("%1 vs %2, n=%3").arg(schemeLabel(r, c.schemeA), schemeLabel(r, c.schemeB), n);
        // Not a test: identical pairs sit at 1 as open circles, degenerate ones are named, not drawn.
        if (c.status == stats::ComparisonStatus::Identical) {
            rows.label(y, label + QStringLiteral(" (identical)"));
            rows.idX.push_back(1.0);
            rows.idY.push_back(y);
            continue;
        }
        if (degenerate) {
            rows.label(y, label + QStringLiteral(" (KL = 0)"));
            rows.undrawn << label;
            continue;
        }
        if (c.status == stats::ComparisonStatus::Untestable)
            label += QStringLiteral(" (1 seed)");
        rows.label(y, label);
        rows.add(c.status == stats::ComparisonStatus::Tested && c.pHolm.p < 0.05, c.medianKlRatio, y,
                 c.medianKlRatio - std::max(c.ratioLow, c.medianKlRatio * 1e-3), std::max(0.0, c.ratioHigh - c.medianKlRatio));
    }
    rowAxis(panel.y, rows);
    auto add = [&](const QString& name, const QColor& color, const QVector<double>& x, const QVector<double>& y,
                   const QVector<double>& low, const QVector<double>& high) {
        if (x.isEmpty())
            return;
        SeriesSpec s = diamonds(name, color);
        s.x = x;
        s.y = y;
        // The graph keeps its points sorted by key (the ratios): the intervals follow that order.
        for (int i : byX(x)) {
            s.errorMinus.push_back(low[i]);
            s.errorPlus.push_back(high[i]);
        }
        f.series.push_back(std::move(s));
    };
    add(QStringLiteral("Holm p < 0.05 (seeds)"), seriesColor(0), rows.sigX, rows.sigY, rows.sigLow, rows.sigHigh);
    add(QStringLiteral("not significant"), QColor(0x88, 0x88, 0x88), rows.nsX, rows.nsY, rows.nsLow, rows.nsHigh);
    if (!rows.idX.isEmpty())
        f.series.push_back(rings(QStringLiteral("identical KL (not tested)"), rows.idX, rows.idY));
    using R = RangeSpec;
    panel.x.ticks = AxisSpec::Ticks::LogTuned;
    panel.x.range = R::data({R::atMostLower(1.0), R::atLeastUpper(1.0), R::logPad(1.5)});
    panel.y.range = R::fixed(-rows.row + 0.5, 0.5);
    f.items.push_back(verticalLine(1.0));
    out.rows = rows.row;
    if (rows.row > 0)
        f.addFootnote(QStringLiteral("bars: 95% intervals resampling seeds; dashed: a ratio of 1"));
    if (identicalLeftOut + degenerateLeftOut > 0)
        f.addFootnote(QStringLiteral("%1 rows, so only the tested ones are drawn: %2 identical pairs (the same "
                                     "key path) and %3 with a KL of 0 are in the table")
                          .arg(candidates)
                          .arg(identicalLeftOut)
                          .arg(degenerateLeftOut));
    if (!rows.undrawn.isEmpty())
        f.addFootnote(QStringLiteral("not drawn, the ratio is 0 or undefined (a median KL of 0):\n")
                      + rows.undrawn.mid(0, 4).join(QStringLiteral("\n"))
                      + (rows.undrawn.size() > 4 ? QStringLiteral("\nand %1 more (in the table)").arg(rows.undrawn.size() - 4)
                                                 : QString()));
    return out;
}

namespace {

/// The run comparison's rows of one metric, placed on the forest; `ratio`: drawn as ratios B / A.
Rows runRows(const std::vector<const RunCompareRow*>& rows, bool ratio, bool anyPoint, bool mixedPairing)
{
    Rows out;
    for (const RunCompareRow* r : rows) {
        const double y = -out.row++; // the first configuration on top
        QString label = QStringLiteral("%1, n=%2").arg(QString::fromStdString(r->scheme)).arg(r->budget);
        if (anyPoint)
            label = QStringLiteral("[%1] ").arg(QString::fromStdString(r->pointLabel)) + label;
        if (mixedPairing && !r->paired)
            label += QStringLiteral(" (unpaired)");
        if (r->status == RunRowStatus::Identical) {
            out.label(y, label + QStringLiteral(" (identical)"));
            out.idX.push_back(ratio ? 1.0 : 0.0);
            out.idY.push_back(y);
            continue;
        }
        if (r->status == RunRowStatus::Untestable)
            label += QStringLiteral(" (untested)");
        out.label(y, label);
        double x = r->difference, low = r->diffLow, high = r->diffHigh;
        if (ratio) {
            if (!r->hasLogRatio) {
                out.undrawn << label;
                continue;
            }
            x = std::exp(r->logRatio);
            low = std::exp(r->logLow);
            high = std::exp(r->logHigh);
        }
        if (!std::isfinite(x)) {
            out.undrawn << label;
            continue;
        }
        out.add(r->status == RunRowStatus::Tested && r->pHolm.p < 0.05, x, y, std::isfinite(low) ? std::max(0.0, x - low) : 0.0,
                std::isfinite(high) ? std::max(0.0, high - x) : 0.0);
    }
    return out;
}

} // namespace

ForestFigure runCompareFigure(const RunComparison* comparison, const std::string& metric)
{
    ForestFigure out;
    FigureSpec& f = out.figure;
    PanelSpec& panel = f.panels.front();
    if (!comparison)
        return out;
    const auto& metrics = runMetrics();
    const auto it = std::find_if(metrics.begin(), metrics.end(), [&](const RunMetric& m) { return metric == m.name; });
    const bool ratioMetric = it != metrics.end() && it->ratioScale;
    std::vector<const RunCompareRow*> rows;
    QStringList only;
    bool anyPaired = false, anyUnpaired = false, anyPoint = false;
    for (const RunCompareRow& r : comparison->rows) {
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
    const bool ratio = ratioMetric && std::any_of(rows.begin(), rows.end(), [](const RunCompareRow* r) { return r->hasLogRatio; });
    const QString name = metricLabel(metric);
    panel.x.label = ratio ? QStringLiteral("%1, ratio B / A (95% interval)").arg(name)
                          : QStringLiteral("%1, B − A (95% interval)").arg(name);
    const Rows placed = runRows(rows, ratio, anyPoint, anyPaired && anyUnpaired);
    out.rows = placed.row;
    rowAxis(panel.y, placed);
    auto add = [&](const QString& series, const QColor& color, const QVector<double>& x, const QVector<double>& y,
                   const QVector<double>& low, const QVector<double>& high) {
        if (x.isEmpty())
            return;
        SeriesSpec s = diamonds(series, color);
        // The graph sorts its points by key (the x values here): the error bars follow the same order.
        for (int i : byX(x)) {
            s.x.push_back(x[i]);
            s.y.push_back(y[i]);
            s.errorMinus.push_back(low[i]);
            s.errorPlus.push_back(high[i]);
        }
        f.series.push_back(std::move(s));
    };
    add(QStringLiteral("Holm p < 0.05 (seeds)"), seriesColor(0), placed.sigX, placed.sigY, placed.sigLow, placed.sigHigh);
    add(QStringLiteral("not significant"), QColor(0x88, 0x88, 0x88), placed.nsX, placed.nsY, placed.nsLow, placed.nsHigh);
    if (!placed.idX.isEmpty())
        f.series.push_back(rings(QStringLiteral("identical (not tested)"), placed.idX, placed.idY));
    // The x range holds every interval and the no-change line.
    const double none = ratio ? 1.0 : 0.0;
    double lo = none, hi = none;
    for (int i = 0; i < placed.sigX.size(); ++i) {
        lo = std::min(lo, placed.sigX[i] - placed.sigLow[i]);
        hi = std::max(hi, placed.sigX[i] + placed.sigHigh[i]);
    }
    for (int i = 0; i < placed.nsX.size(); ++i) {
        lo = std::min(lo, placed.nsX[i] - placed.nsLow[i]);
        hi = std::max(hi, placed.nsX[i] + placed.nsHigh[i]);
    }
    if (ratio) {
        lo = std::max(lo, hi * 1e-6); // a lower end at 0 cannot sit on a log axis
        // Nothing but the line (identical runs): a factor of 2 either side, labelled 0.5, 1, 2.
        const double room = hi > lo ? 1.25 : 2.0;
        panel.x.ticks = AxisSpec::Ticks::LogTuned;
        panel.x.range = RangeSpec::fixed(lo / room, hi * room);
    } else {
        // Nothing but the line (identical runs): a unit either side rather than a range of 1e-12.
        const double pad = hi > lo ? 0.08 * (hi - lo) : 1.0;
        panel.x.range = RangeSpec::fixed(lo - pad, hi + pad);
    }
    panel.y.range = RangeSpec::fixed(-std::max(1, placed.row) + 0.5, 0.5);
    f.items.push_back(verticalLine(none));
    f.legends.front().place = LegendSpec::Place::Below;
    f.legends.front().columns = 3;
    f.below.push_back(BelowRow{0, {}});
    QStringList notes;
    notes << QStringLiteral("A: %1, B: %2").arg(shortName(comparison->dirA), shortName(comparison->dirB));
    if (anyUnpaired && !anyPaired)
        notes << QStringLiteral("unpaired (the runs' seeds are not the same units): Mann-Whitney over seeds, Welch "
                                "intervals");
    else if (anyPaired && !anyUnpaired)
        notes << QStringLiteral("paired by seed: Wilcoxon signed-rank, t intervals");
    if (!placed.undrawn.isEmpty())
        notes << QStringLiteral("not drawn (a value of 0: no ratio): ") + placed.undrawn.mid(0, 3).join(QStringLiteral("; "))
                     + (placed.undrawn.size() > 3 ? QStringLiteral(" and %1 more").arg(placed.undrawn.size() - 3) : QString());
    if (!only.isEmpty())
        notes << QStringLiteral("in one run only: ") + only.mid(0, 4).join(QStringLiteral(", "))
                     + (only.size() > 4 ? QStringLiteral(" and %1 more").arg(only.size() - 4) : QString());
    // One footnote element: separate ones each take a row of the layout with its own margins.
    f.addFootnote(notes.join(QLatin1Char('\n')));
    for (const QString& note : notes)
        out.footnoteLines += 1 + static_cast<int>(note.size()) / PlotWidget::kFootnoteChars;
    return out;
}

} // namespace kvlens::widgets
