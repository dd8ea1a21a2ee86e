// SPDX-License-Identifier: GPL-3.0-or-later
// Routing recall, KL distributions and the theory scatter, built from FigureData without drawing anything.
#include "widgets/figures/basic_figures.h"

#include "widgets/plot_widget.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace kvlens::widgets {

namespace {

SeriesSpec lineSeries(const QString& name, const QColor& color, Marker marker, int panel = 0)
{
    SeriesSpec s;
    s.name = name;
    s.panel = panel;
    s.pen = QPen(color, 1.5, Qt::SolidLine);
    s.marker = MarkerStyle{marker, QPen(color), QBrush(Qt::white), 6.0};
    return s;
}

SeriesSpec scatterSeries(const QString& name, const QColor& color, Marker marker, double size)
{
    SeriesSpec s;
    s.name = name;
    s.line = SeriesSpec::Line::None;
    QColor fill = color;
    fill.setAlpha(110);
    s.marker = MarkerStyle{marker, QPen(color), QBrush(fill), size};
    s.pen = QPen(color);
    s.adaptiveSampling = false; // dense clouds must show every point, live and in exports
    return s;
}

} // namespace

FigureSpec recallFigure(const ViewData& data, int point)
{
    const int k = data.results ? data.results->spec.metrics.topK : 5;
    // Two panels sharing the budget axis: recall above, argmax-shift rate below.
    FigureSpec f;
    f.panels.resize(2);
    f.panels[1].row = 1;
    f.marginGroups = 1;
    for (PanelSpec& p : f.panels) {
        p.minimumSize = QSize(20, 20);
        p.marginGroup = 0;
        p.marginSides = margin::kLeft | margin::kRight;
    }
    PanelSpec& top = f.panels[0];
    PanelSpec& bottom = f.panels[1];
    top.x.tickLabels = false;
    // The nominal n: what each scheme really spends differs (the Rate–distortion view's x axis).
    bottom.x.label = QStringLiteral("nominal budget n (bits)");
    top.y.label = QStringLiteral("top-%1 recall").arg(k);
    bottom.y.label = QStringLiteral("argmax shift");
    f.linked.push_back({{0, Side::Bottom}, {1, Side::Bottom}});
    if (data.empty() || !data.figures)
        return f;
    std::map<int, std::vector<const RecallPoint*>> byScheme;
    for (const RecallPoint& p : data.figures->recall)
        if (p.point == point)
            byScheme[p.scheme].push_back(&p);
    QVector<double> budgets;
    for (const auto& [scheme, points] : byScheme) {
        const QColor color = seriesColor(scheme);
        SeriesSpec recall = lineSeries(schemeLabel(data.results.get(), scheme), color, seriesMarker(scheme), 0);
        SeriesSpec shift = lineSeries(QStringLiteral("%1 argmax shift").arg(schemeLabel(data.results.get(), scheme)), color,
                                      seriesMarker(scheme), 1);
        shift.legend = -1; // one legend entry per scheme: same colour and marker in both panels
        for (const RecallPoint* p : points) {
            recall.x.push_back(p->budget);
            recall.y.push_back(p->recall.mean);
            recall.errorMinus.push_back(p->recall.mean - p->recall.low);
            recall.errorPlus.push_back(p->recall.high - p->recall.mean);
            shift.y.push_back(p->argmaxShift.mean);
            shift.errorMinus.push_back(p->argmaxShift.mean - p->argmaxShift.low);
            shift.errorPlus.push_back(p->argmaxShift.high - p->argmaxShift.mean);
        }
        shift.x = recall.x;
        budgets += recall.x;
        recall.errorBars = shift.errorBars = true;
        recall.errorPen = shift.errorPen = QPen(color);
        f.series.push_back(std::move(recall));
        f.series.push_back(std::move(shift));
    }
    if (!budgets.isEmpty()) {
        for (PanelSpec* p : {&top, &bottom}) {
            p->x.ticks = AxisSpec::Ticks::Integer;
            p->x.integerLow = *std::min_element(budgets.begin(), budgets.end());
            p->x.integerHigh = *std::max_element(budgets.begin(), budgets.end());
        }
    }
    // Recall and the argmax depend on the keys alone: schemes with one key path draw one curve.
    noteCoincidences(f, QStringLiteral("identical curves (same keys), drawn dashed over each other: "));
    using R = RangeSpec;
    top.y.range = R::fixed(0.0, 1.05);
    bottom.y.range = R::data({R::setLower(0.0), R::scaleUpper(1.15), R::atMostUpper(1.05), R::atLeastUpper(0.05)});
    // The legend in one row along the foot of the recall panel, where recall rarely goes (below 0.2);
    // a row of its own under two panels would leave them too little height at a single column.
    LegendSpec& legend = f.legends.front();
    legend.columns = std::min(4, std::max(1, static_cast<int>(byScheme.size())));
    legend.columnsFirst = true;
    legend.alignment = Qt::AlignBottom | Qt::AlignRight;
    return f;
}

FigureSpec klDistributionFigure(const ViewData& data, int point, int budget, bool histogram)
{
    FigureSpec f;
    PanelSpec& panel = f.panels.front();
    panel.x.label = QStringLiteral("KL(p‖p̂) per query (nats)");
    panel.y.label = histogram ? QStringLiteral("fraction of queries") : QStringLiteral("fraction of queries ≤ KL");
    panel.x.ticks = AxisSpec::Ticks::Log;
    if (data.empty() || !data.figures)
        return f;
    const FigureData& fig = *data.figures;
    // Histogram height, so the markers can sit just above it.
    double yMax = 1.0;
    if (histogram) {
        yMax = 0.0;
        for (const KlDistribution& k : fig.kl)
            if (k.budget == budget && k.point == point)
                for (double v : k.density)
                    yMax = std::max(yMax, v);
    }
    const double markerHeight = histogram ? yMax * 1.08 : 0.0;
    for (const KlDistribution& k : fig.kl) {
        if (k.point != point || k.budget != budget || k.ecdfX.empty())
            continue;
        const QColor color = seriesColor(k.scheme);
        const QString name = schemeLabel(data.results.get(), k.scheme);
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
        SeriesSpec curve = lineSeries(entry, color, Marker::None);
        if (allZero) {
            curve.pen = QPen(color, 1.5, Qt::DotLine);
            f.series.push_back(std::move(curve));
            continue;
        }
        curve.feed = SeriesSpec::Feed::Sorted;
        if (histogram) {
            // Step lines rather than bars: bars of several schemes overlap illegibly on a log axis.
            curve.line = SeriesSpec::Line::StepCenter;
            for (std::size_t b = 0; b + 1 < fig.klBinEdges.size(); ++b) {
                curve.x.push_back(std::sqrt(fig.klBinEdges[b] * fig.klBinEdges[b + 1])); // geometric bin centre
                curve.y.push_back(k.density[b]);
            }
        } else {
            curve.line = SeriesSpec::Line::StepLeft;
            for (std::size_t i = 0; i < k.ecdfX.size(); ++i) {
                if (k.ecdfX[i] <= 0.0)
                    continue; // log axis
                curve.x.push_back(k.ecdfX[i]);
                curve.y.push_back(k.ecdfY[i]);
            }
        }
        f.series.push_back(std::move(curve));
        // Mean, p99 and worst query, at the height of the ECDF (or on top of the histogram).
        auto ecdfAt = [&](double v) {
            const auto it = std::upper_bound(k.ecdfX.begin(), k.ecdfX.end(), v);
            const auto i = it - k.ecdfX.begin();
            return i == 0 ? 0.0 : k.ecdfY[static_cast<std::size_t>(i - 1)];
        };
        struct Mark {
            const char* label;
            double value;
            Marker shape;
        };
        const Mark marks[] = {{"mean", k.mean, Marker::Circle}, {"p99", k.p99, Marker::Triangle}, {"worst", k.max, Marker::Cross}};
        for (const Mark& m : marks) {
            if (m.value <= 0.0)
                continue;
            SeriesSpec s = scatterSeries(QStringLiteral("%1 %2").arg(name, QLatin1String(m.label)), color, m.shape, 9.0);
            s.x = {m.value};
            s.y = {histogram ? markerHeight : ecdfAt(m.value)};
            s.legend = -1;
            f.series.push_back(std::move(s));
        }
    }
    // Schemes with the same key path (K-only, TQ-KV, KQV) have the same weights and so the same
    // KL, query by query: their curves lie on each other.
    noteCoincidences(f, QStringLiteral("identical distributions, drawn dashed over each other: "));
    panel.x.ticks = AxisSpec::Ticks::LogTuned;
    panel.x.range = RangeSpec::data();
    panel.y.range = RangeSpec::fixed(0.0, histogram ? markerHeight * 1.06 : 1.04);
    // Curves run from bottom left to top right: the top left corner stays free for the legend.
    f.legends.front().alignment = Qt::AlignTop | Qt::AlignLeft;
    ItemSpec note;
    note.xRatio = note.yRatio = true;
    note.a = QPointF(0.98, 0.97);
    note.align = Qt::AlignRight | Qt::AlignBottom;
    note.text = QStringLiteral("○ mean  △ p99  × worst  (n = %1)").arg(budget);
    f.items.push_back(note);
    return f;
}

FigureSpec theoryFigure(const ViewData& data, int point)
{
    FigureSpec f;
    PanelSpec& panel = f.panels.front();
    panel.x.label = QStringLiteral("predicted Var(ŝ−s)");
    panel.y.label = QStringLiteral("measured Var(ŝ−s)");
    panel.x.ticks = panel.y.ticks = AxisSpec::Ticks::Log;
    if (data.empty() || !data.figures)
        return f;
    const auto& budgets = data.results->spec.budgets;
    double lo = INFINITY, hi = 0.0;
    for (std::size_t bi = 0; bi < budgets.size(); ++bi)
        for (std::size_t s = 0; s < data.results->schemes.size(); ++s) {
            SeriesSpec series = scatterSeries(QStringLiteral("%1 n=%2").arg(schemeLabel(data.results.get(), static_cast<int>(s))).arg(budgets[bi]),
                                              seriesColor(static_cast<int>(s)), seriesMarker(static_cast<int>(bi)), 8.0);
            for (const TheoryRow& t : data.figures->theory) {
                if (t.point != point || t.scheme != static_cast<int>(s) || t.budget != budgets[bi] || !(t.predicted > 0.0)
                    || !(t.measured > 0.0))
                    continue;
                series.x.push_back(t.predicted);
                series.y.push_back(t.measured);
                lo = std::min({lo, t.predicted, t.measured});
                hi = std::max({hi, t.predicted, t.measured});
            }
            if (!series.x.isEmpty())
                f.series.push_back(std::move(series));
        }
    if (hi > 0.0) {
        lo /= 2.0;
        hi *= 2.0;
        panel.x.range = panel.y.range = RangeSpec::fixed(lo, hi);
        ItemSpec identity;
        identity.kind = ItemSpec::Kind::StraightLine;
        identity.a = QPointF(lo, lo);
        identity.b = QPointF(hi, hi);
        identity.pen = QPen(Qt::black, 0, Qt::DashLine);
        f.items.push_back(identity);
    }
    panel.x.ticks = panel.y.ticks = AxisSpec::Ticks::LogTuned;
    f.legends.front().place = LegendSpec::Place::Below;
    f.legends.front().columns = static_cast<int>(data.results->schemes.size());
    f.below.push_back(BelowRow{0, {}});
    // Schemes with one key path have one score error: their points lie on each other.
    noteCoincidences(f, QStringLiteral("identical points, drawn as rings: "));
    return f;
}

FigureSpec validationFigure(const ResultSet* reference, const stats::ValidationReport* report)
{
    FigureSpec f;
    PanelSpec& panel = f.panels.front();
    panel.x.label = QStringLiteral("scheme, budget and metric");
    panel.y.label = QStringLiteral("max relative difference CPU vs OpenCL");
    panel.y.ticks = AxisSpec::Ticks::Log;
    if (!report || !reference)
        return f;
    SeriesSpec agree = scatterSeries(QStringLiteral("agree"), seriesColor(0), Marker::Circle, 6);
    SeriesSpec differ = scatterSeries(QStringLiteral("implementation difference"), seriesColor(1), Marker::Cross, 9);
    panel.x.ticks = AxisSpec::Ticks::Text;
    int i = 0;
    for (const auto& row : report->rows) {
        // Exact agreement has no place on a log axis: draw it at a floor of 1e-12.
        const double value = std::max(row.implMaxRelDiff, 1e-12);
        SeriesSpec& s = row.verdict == "implementation difference" ? differ : agree;
        s.x.push_back(i);
        s.y.push_back(value);
        if (row.metric == "kl_mean") {
            panel.x.tickAt << i;
            panel.x.tickText << QStringLiteral("%1 n=%2").arg(schemeLabel(reference, row.scheme)).arg(row.budget);
        }
        ++i;
    }
    panel.x.tickLabelRotation = 45;
    if (report->implementationRan) {
        for (SeriesSpec* s : {&agree, &differ})
            if (!s->x.isEmpty())
                f.series.push_back(*s);
        ItemSpec tolerance;
        tolerance.kind = ItemSpec::Kind::StraightLine;
        tolerance.a = QPointF(0, report->tolerance);
        tolerance.b = QPointF(1, report->tolerance);
        tolerance.pen = QPen(Qt::black, 0, Qt::DashLine);
        f.items.push_back(tolerance);
        panel.x.range = RangeSpec::fixed(-1, i);
        panel.y.range = RangeSpec::fixed(1e-13, 1.0);
    }
    return f;
}

} // namespace kvlens::widgets
