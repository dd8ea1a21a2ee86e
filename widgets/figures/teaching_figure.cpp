// SPDX-License-Identifier: GPL-3.0-or-later
// The Teaching figure, built from a TeachingResult without drawing anything.
#include "widgets/figures/teaching_figure.h"

#include "widgets/plot_widget.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace kvlens::widgets {

namespace {

// Short: at single-column export width each panel is barely over an inch wide.
const char* const kPanelTitles[] = {"score error δs", "top-10 weights", "weight inflation", "KL divergence",
                                    "output error", "values vs keys"};

QString fmt(double v, int precision = 4)
{
    return std::isfinite(v) ? QString::number(v, 'g', precision) : QStringLiteral("n/a");
}

QColor withAlpha(QColor c, int alpha)
{
    c.setAlpha(alpha);
    return c;
}

/// Category ticks (1, 2, ...) labelled with names.
void categoryTicks(AxisSpec& axis, const QStringList& names)
{
    axis.ticks = AxisSpec::Ticks::Text;
    for (int i = 0; i < names.size(); ++i)
        axis.tickAt << i + 1;
    axis.tickText = names;
    axis.range = RangeSpec::fixed(0.4, names.size() + 0.6);
    axis.grid = false;
}

SeriesSpec bars(int panel, const QString& name, const QColor& color, double width)
{
    SeriesSpec b;
    b.kind = SeriesSpec::Kind::Bars;
    b.panel = panel;
    b.legend = panel;
    b.name = name;
    b.pen = QPen(color.darker(130), 0);
    b.brush = withAlpha(color, 200);
    b.barWidth = width;
    return b;
}

SeriesSpec line(int panel, const QString& name, const QColor& color, Marker marker)
{
    SeriesSpec s;
    s.panel = panel;
    s.legend = panel;
    s.name = name;
    s.pen = QPen(color, 1.5, Qt::SolidLine);
    s.marker = MarkerStyle{marker, QPen(color), QBrush(Qt::white), 6.0};
    return s;
}

ItemSpec placeholder(int panel, const QString& text)
{
    ItemSpec label;
    label.panel = panel;
    label.clip = false;
    label.xRatio = label.yRatio = true;
    label.a = QPointF(0.5, 0.5);
    label.text = text;
    label.color = QColor(0x77, 0x77, 0x77);
    return label;
}

/// The six cells (a panel over its legend), three a row, or two at a narrow print width.
FigureSpec layout(double printInches)
{
    const bool narrow = printInches > 0.0 && printInches < kTeachingWidePrintInches;
    const int columns = narrow ? 2 : 3;
    FigureSpec f;
    const int count = static_cast<int>(TeachingPanel::Count);
    f.panels.assign(static_cast<std::size_t>(count), PanelSpec{});
    f.legends.assign(static_cast<std::size_t>(count), LegendSpec{});
    for (int i = 0; i < count; ++i) {
        GridSpec cell;
        cell.row = i / columns;
        cell.column = i % columns;
        cell.rowStretch = {{1, 0.001}};
        cell.rowSpacing = 0;
        f.grids.push_back(cell);
        PanelSpec& p = f.panels[static_cast<std::size_t>(i)];
        p.grid = i;
        // The top axis carries the panel title.
        p.top.visible = true;
        p.top.tickMarks = false;
        p.top.tickLabels = false;
        p.top.label = QString::fromUtf8(kPanelTitles[i]);
        // Each cell: the panel, and its legend under it (outside the data, where it cannot cover bars
        // or another legend), one entry a row.
        LegendSpec& l = f.legends[static_cast<std::size_t>(i)];
        l.place = LegendSpec::Place::Cell;
        l.grid = i;
        l.row = 1;
        l.frameless = true;
        l.columnsFirst = true;
        l.columns = 1;
    }
    return f;
}

void scoreHistogram(FigureSpec& f, const TeachingResult& r, const QStringList& names)
{
    const int panel = static_cast<int>(TeachingPanel::ScoreHistogram);
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.x.label = QStringLiteral("δs (score units)");
    p.y.label = QStringLiteral("density");
    QVector<double> centres;
    for (std::size_t b = 0; b + 1 < r.binEdges.size(); ++b)
        centres << 0.5 * (r.binEdges[b] + r.binEdges[b + 1]);
    for (int s = 0; s < 2; ++s) {
        const TeachingScheme& t = r.schemes[static_cast<std::size_t>(s)];
        SeriesSpec g = line(panel, QStringLiteral("%1: Var δs = %2").arg(names[s], fmt(t.chain.varianceDeltaS, 3)), seriesColor(s),
                            Marker::None);
        g.line = SeriesSpec::Line::StepCenter;
        g.brush = withAlpha(seriesColor(s), 50);
        g.x = centres;
        g.y = QVector<double>(t.histogram.begin(), t.histogram.end());
        f.series.push_back(std::move(g));
    }
    p.x.range = RangeSpec::data();
    p.y.range = RangeSpec::data({RangeSpec::setLower(0.0), RangeSpec::scaleUpper(1.1)});
}

void topWeights(FigureSpec& f, const TeachingResult& r, const QStringList& names, double printInches)
{
    const int panel = static_cast<int>(TeachingPanel::TopWeights);
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.x.label = QStringLiteral("token (rank by p)");
    p.y.label = QStringLiteral("weight");
    QStringList tokens;
    QVector<double> keys, probs;
    for (std::size_t k = 0; k < r.topTokens.size(); ++k) {
        // Every rank live; in print ranks 1, 5, 10, ... (ten labels crowd a panel a third of a page wide).
        const bool labelled = printInches <= 0.0 || k == 0 || (k + 1) % 5 == 0;
        tokens << (labelled ? QString::number(k + 1) : QString());
        keys << static_cast<double>(k + 1);
        probs << r.probs[static_cast<std::size_t>(r.topTokens[k])];
    }
    categoryTicks(p.x, tokens);
    f.barGroups.push_back(BarGroupSpec{});
    const int group = static_cast<int>(f.barGroups.size()) - 1;
    SeriesSpec exact = bars(panel, QStringLiteral("p (exact)"), QColor(0x99, 0x99, 0x99), 0.27);
    exact.x = keys;
    exact.y = probs;
    exact.barGroup = group;
    f.series.push_back(std::move(exact));
    for (int s = 0; s < 2; ++s) {
        SeriesSpec b = bars(panel, QStringLiteral("%1 weights").arg(names[s]), seriesColor(s), 0.27);
        for (int j : r.topTokens)
            b.y << r.schemes[static_cast<std::size_t>(s)].chain.probsHat[static_cast<std::size_t>(j)];
        b.x = keys;
        b.barGroup = group;
        f.series.push_back(std::move(b));
    }
    p.y.range = RangeSpec::data({RangeSpec::setLower(0.0), RangeSpec::scaleUpper(1.1)});
}

void jensen(FigureSpec& f, const TeachingResult& r, const QStringList& names)
{
    const int panel = static_cast<int>(TeachingPanel::Jensen);
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.y.label = QStringLiteral("mean factor");
    categoryTicks(p.x, names);
    f.barGroups.push_back(BarGroupSpec{});
    SeriesSpec predicted = bars(panel, QStringLiteral("Jensen exp(σ²/2)"), seriesColor(3), 0.35);
    SeriesSpec measured = bars(panel, QStringLiteral("measured"), seriesColor(5), 0.35);
    double top = 1.0;
    for (int s = 0; s < 2; ++s) {
        const ScoreNoiseChain& k = r.schemes[static_cast<std::size_t>(s)].chain;
        // Bars run from the base value to base + value: the excess over 1.
        predicted.x << s + 1;
        predicted.y << k.jensenFactor - 1.0;
        measured.x << s + 1;
        measured.y << k.measuredInflation - 1.0;
        top = std::max({top, k.jensenFactor, k.measuredInflation});
    }
    for (SeriesSpec* b : {&predicted, &measured}) {
        b->feed = SeriesSpec::Feed::OneByOne;
        b->barGroup = static_cast<int>(f.barGroups.size()) - 1;
        b->barBase = 1.0; // the factor starts at 1: no inflation
        f.series.push_back(std::move(*b));
    }
    p.y.range = RangeSpec::fixed(1.0, 1.0 + std::max(1e-4, (top - 1.0) * 1.5));
}

void klPanel(FigureSpec& f, const TeachingResult& r, const QStringList& names)
{
    const int panel = static_cast<int>(TeachingPanel::Kl);
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.y.label = QStringLiteral("KL (nats)");
    categoryTicks(p.x, names);
    double top = 0.0;
    for (int s = 0; s < 2; ++s) {
        const double kl = r.schemes[static_cast<std::size_t>(s)].chain.kl;
        SeriesSpec b = bars(panel, names[s], seriesColor(s), 0.5);
        b.legend = -1; // the KL bars are labelled by their ticks
        b.feed = SeriesSpec::Feed::OneByOne;
        b.x << s + 1;
        b.y << kl;
        f.series.push_back(std::move(b));
        top = std::max(top, kl);
    }
    p.y.range = RangeSpec::fixed(0.0, top > 0.0 ? top * 1.2 : 1e-6);
}

void outputPanel(FigureSpec& f, const TeachingResult& r, const QStringList& names)
{
    const int panel = static_cast<int>(TeachingPanel::Output);
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.y.label = QStringLiteral("‖o − ô‖ / ‖o‖");
    categoryTicks(p.x, names);
    f.barGroups.push_back(BarGroupSpec{});
    const std::array<QString, 3> paths = {QStringLiteral("both paths"), QStringLiteral("key path only"),
                                          QStringLiteral("value path only")};
    // Not the schemes' colours: these bars are paths, the ticks name the schemes.
    const std::array<QColor, 3> colors = {QColor(0x66, 0x66, 0x66), seriesColor(4), seriesColor(5)};
    double top = 0.0;
    for (std::size_t c = 0; c < 3; ++c) {
        SeriesSpec b = bars(panel, paths[c], colors[c], 0.25);
        b.feed = SeriesSpec::Feed::OneByOne;
        b.barGroup = static_cast<int>(f.barGroups.size()) - 1;
        for (int s = 0; s < 2; ++s) {
            const ScoreNoiseChain& k = r.schemes[static_cast<std::size_t>(s)].chain;
            const double v = c == 0 ? k.outputError : (c == 1 ? k.keyOutputError : k.valueOutputError);
            b.x << s + 1;
            b.y << v;
            top = std::max(top, v);
        }
        f.series.push_back(std::move(b));
    }
    p.y.range = RangeSpec::fixed(0.0, top > 0.0 ? top * 1.5 : 1e-6);
}

void valuePath(FigureSpec& f, const TeachingResult& r)
{
    const int panel = static_cast<int>(TeachingPanel::ValuePath);
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.x.label = QStringLiteral("N_eff = 1/Σp²");
    p.y.label = QStringLiteral("error");
    // Plain-number labels at the powers of ten: the ranges span one to three decades.
    p.x.ticks = p.y.ticks = AxisSpec::Ticks::LogPlain;
    SeriesSpec values = line(panel, QStringLiteral("values, slope %1").arg(r.valuePath.valueSlope, 0, 'f', 2), seriesColor(2),
                             Marker::Circle);
    SeriesSpec keys = line(panel, QStringLiteral("keys, slope %1").arg(r.valuePath.keySlope, 0, 'f', 2), seriesColor(1),
                           Marker::Square);
    // Decoration, not data: the 1/sqrt(N_eff) law the value path should follow.
    SeriesSpec reference;
    reference.panel = panel;
    reference.legend = panel;
    reference.name = QStringLiteral("slope −1/2");
    reference.data = false;
    reference.pen = QPen(Qt::black, 1, Qt::DashLine);
    double lo = INFINITY, hi = 0.0;
    for (const ValuePathPoint& v : r.valuePath.points) {
        const double law = 1.0 / std::sqrt(v.effectiveTokens);
        for (SeriesSpec* s : {&values, &keys, &reference})
            s->x << v.effectiveTokens;
        values.y << v.valueError;
        keys.y << v.keyMassMoved;
        reference.y << law;
    }
    for (const SeriesSpec* s : {&values, &keys, &reference})
        for (double d : s->y)
            if (d > 0.0) {
                lo = std::min(lo, d);
                hi = std::max(hi, d);
            }
    if (hi > 0.0)
        p.y.range = RangeSpec::fixed(lo / 1.5, hi * 1.5);
    p.x.range = RangeSpec::data({RangeSpec::logPad(1.3)});
    f.series.push_back(std::move(values));
    f.series.push_back(std::move(keys));
    f.series.push_back(std::move(reference));
}

} // namespace

int teachingPanelStage(TeachingPanel panel)
{
    switch (panel) {
    case TeachingPanel::ScoreHistogram: return static_cast<int>(TeachingStage::ScoreNoise);
    case TeachingPanel::TopWeights:
    case TeachingPanel::Jensen: return static_cast<int>(TeachingStage::Softmax);
    case TeachingPanel::Kl: return static_cast<int>(TeachingStage::Kl);
    case TeachingPanel::Output:
    case TeachingPanel::ValuePath: return static_cast<int>(TeachingStage::Output);
    case TeachingPanel::Count: break;
    }
    return static_cast<int>(TeachingStage::Count);
}

FigureSpec teachingFigure(const TeachingResult* result, const QString& error, int stage, double printInches)
{
    FigureSpec f = layout(printInches);
    const int count = static_cast<int>(TeachingPanel::Count);
    if (!result) {
        for (int i = 0; i < count; ++i)
            f.items.push_back(placeholder(i, error.isEmpty() ? QStringLiteral("computing…") : error));
        return f;
    }
    const TeachingResult& r = *result;
    QStringList names;
    for (const TeachingScheme& t : r.schemes)
        names << QString::fromStdString(t.name);
    for (int i = 0; i < count; ++i) {
        const auto panel = static_cast<TeachingPanel>(i);
        if (teachingPanelStage(panel) > stage) {
            PanelSpec& p = f.panels[static_cast<std::size_t>(i)];
            p.x.tickLabels = p.y.tickLabels = false;
            f.items.push_back(placeholder(i, QStringLiteral("Next ▸ reveals stage %1").arg(teachingPanelStage(panel) + 1)));
            continue;
        }
        switch (panel) {
        case TeachingPanel::ScoreHistogram: scoreHistogram(f, r, names); break;
        case TeachingPanel::TopWeights: topWeights(f, r, names, printInches); break;
        case TeachingPanel::Jensen: jensen(f, r, names); break;
        case TeachingPanel::Kl: klPanel(f, r, names); break;
        case TeachingPanel::Output: outputPanel(f, r, names); break;
        case TeachingPanel::ValuePath: valuePath(f, r); break;
        case TeachingPanel::Count: break;
        }
    }
    return f;
}

} // namespace kvlens::widgets
