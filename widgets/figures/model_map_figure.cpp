// SPDX-License-Identifier: GPL-3.0-or-later
// The Model map's figure, built from the map's cells without drawing anything.
#include "widgets/figures/model_map_figure.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace kvlens::widgets {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

QVector<QPair<double, QColor>> stops(std::initializer_list<const char*> colours)
{
    QVector<QPair<double, QColor>> out;
    const int n = static_cast<int>(colours.size());
    int i = 0;
    for (const char* c : colours)
        out.push_back({static_cast<double>(i++) / (n - 1), QColor(QLatin1String(c))});
    return out;
}

/// Viridis (perceptually uniform, readable in greyscale and by the colour-blind), nine stops.
QVector<QPair<double, QColor>> viridis()
{
    return stops({"#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"});
}

/// Blue-white-red for a signed log ratio (ColorBrewer RdBu, colour-blind safe).
QVector<QPair<double, QColor>> diverging()
{
    return stops({"#2166ac", "#67a9cf", "#d1e5f0", "#f7f7f7", "#fddbc7", "#ef8a62", "#b2182b"});
}

/// The cells of the chosen metric, scheme and budget (a log10 ratio against `versus`), layer-major.
struct Cells {
    int layers = 0, heads = 0;
    std::vector<double> values;
    int blank = 0, zeros = 0; ///< cells the colours cannot show, and of them those at 0 exactly
};

Cells collectCells(const std::vector<MapValue>& map, const ModelMapChoice& c)
{
    const ModelMapMetric& m = modelMapMetrics()[static_cast<std::size_t>(c.metric)];
    std::map<std::pair<int, int>, double> value, other;
    std::set<int> layers, heads;
    for (const MapValue& v : map) {
        layers.insert(v.layer);
        heads.insert(v.head);
        if (v.metric != m.key || v.budget != c.budget)
            continue;
        if (v.scheme == c.scheme)
            value[{v.layer, v.head}] = v.value;
        if (v.scheme == c.versus)
            other[{v.layer, v.head}] = v.value;
    }
    Cells out;
    out.layers = *layers.rbegin() + 1;
    out.heads = *heads.rbegin() + 1;
    out.values.assign(static_cast<std::size_t>(out.layers * out.heads), kNaN);
    const bool difference = c.versus >= 0;
    for (const auto& [cell, v] : value) {
        double shown = v;
        if (difference) {
            const auto it = other.find(cell);
            shown = it != other.end() && it->second > 0.0 && v > 0.0 ? std::log10(v / it->second) : kNaN;
        }
        out.values[static_cast<std::size_t>(cell.first * out.heads + cell.second)] = shown;
        // Cells the colours cannot show: a log scale has no place for 0 (V-only's KL: a value error
        // never moves the weights), and a ratio none for a cell where either scheme is 0.
        if (!std::isfinite(shown) || (m.logScale && !difference && !(shown > 0.0))) {
            ++out.blank;
            out.zeros += v == 0.0 ? 1 : 0;
        }
    }
    return out;
}

/// The heatmap on panel 0 with its colour scale at cell (0, 1) of grid 0.
void addHeatmap(ModelMapFigure& out, const Cells& cells, const ResultSet& r, const ModelMapChoice& c)
{
    FigureSpec& f = out.figure;
    const bool difference = c.versus >= 0;
    const bool useLog = modelMapMetrics()[static_cast<std::size_t>(c.metric)].logScale && !difference;
    ColorMapSpec map;
    map.columns = cells.heads;
    map.rows = cells.layers;
    map.xLast = cells.heads - 1;
    map.yLast = cells.layers - 1;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (int l = 0; l < cells.layers; ++l)
        for (int h = 0; h < cells.heads; ++h) {
            const double v = cells.values[static_cast<std::size_t>(l * cells.heads + h)];
            const double shown = useLog ? (v > 0.0 ? std::log10(v) : kNaN) : v;
            map.cells << shown;
            if (std::isfinite(shown)) {
                lo = std::min(lo, shown);
                hi = std::max(hi, shown);
            }
        }
    map.name = schemeLabel(&r, c.scheme);
    map.scaleGrid = 0;
    map.scaleColumn = 1;
    if (difference) {
        const double m = std::max({std::abs(lo), std::abs(hi), 1e-3});
        map.gradient = diverging();
        map.lower = -m;
        map.upper = m;
    } else {
        map.gradient = viridis();
        map.lower = std::isfinite(lo) ? lo : 0.0;
        map.upper = std::isfinite(lo) ? (hi > lo ? hi : lo + 1e-9) : 1.0;
    }
    map.scaleLabel = out.colourLabel;
    map.marginGroup = 0;
    map.marginSides = margin::kBottom | margin::kTop;
    f.colorMaps.push_back(map);
    PanelSpec& p = f.panels.front();
    p.grid = 0;
    p.marginGroup = 0;
    p.marginSides = margin::kBottom | margin::kTop;
    p.x.label = QStringLiteral("query head");
    p.y.label = QStringLiteral("layer");
    p.x.range = RangeSpec::fixed(-0.5, cells.heads - 0.5);
    p.y.range = RangeSpec::fixed(-0.5, cells.layers - 0.5);
    p.y.reversed = true; // layer 0 on top, as models are drawn
    p.x.ticks = p.y.ticks = AxisSpec::Ticks::Step;
    p.x.step = std::max(1, cells.heads / 8);
    p.y.step = std::max(1, cells.layers / 8);
    if (c.selectedLayer >= 0) {
        // The window's mark of the cell being studied: on the UI layer, which no export draws.
        ItemSpec mark;
        mark.kind = ItemSpec::Kind::Rect;
        mark.a = QPointF(c.selectedHead - 0.5, c.selectedLayer - 0.5);
        mark.b = QPointF(c.selectedHead + 0.5, c.selectedLayer + 0.5);
        mark.pen = QPen(Qt::red, 2.0);
        mark.brush = Qt::NoBrush;
        mark.windowOnly = true;
        f.items.push_back(mark);
    }
}

/// Below the map: per layer, the output error with only K and only V quantized at the budget.
void addSensitivity(FigureSpec& f, const std::vector<SensitivityRow>& rows, int layers, int budget)
{
    PanelSpec below;
    below.row = 1;
    SeriesSpec k, v;
    const int panel = static_cast<int>(f.panels.size());
    for (SeriesSpec* s : {&k, &v}) {
        s->panel = panel;
        s->legend = 1;
        s->feed = SeriesSpec::Feed::OneByOne;
    }
    k.name = QStringLiteral("only K quantized");
    k.pen = QPen(QColor(0xd9, 0x5f, 0x02), 1.5, Qt::SolidLine);
    k.marker = MarkerStyle{Marker::Circle, QPen(QColor(0xd9, 0x5f, 0x02)), QBrush(Qt::white), 6.0};
    v.name = QStringLiteral("only V quantized");
    v.pen = QPen(QColor(0x1b, 0x9e, 0x77), 1.5, Qt::DashLine);
    v.marker = MarkerStyle{Marker::Square, QPen(QColor(0x1b, 0x9e, 0x77)), QBrush(Qt::white), 6.0};
    double yMin = std::numeric_limits<double>::infinity(), yMax = 0.0;
    for (const SensitivityRow& s : rows) {
        if (s.budget != budget)
            continue;
        if (s.kOnlyRelMseT > 0) {
            k.x << s.layer;
            k.y << s.kOnlyRelMseT;
        }
        if (s.vOnlyRelMseT > 0) {
            v.x << s.layer;
            v.y << s.vOnlyRelMseT;
        }
        for (double y : {s.kOnlyRelMseT, s.vOnlyRelMseT})
            if (y > 0) {
                yMin = std::min(yMin, y);
                yMax = std::max(yMax, y);
            }
    }
    below.x.label = QStringLiteral("layer");
    below.y.label = QStringLiteral("output rel. error");
    below.y.ticks = AxisSpec::Ticks::LogTuned;
    if (std::isfinite(yMin))
        below.y.range = RangeSpec::fixed(yMin / 2, yMax * 2);
    below.x.range = RangeSpec::fixed(-0.5, layers - 0.5);
    below.x.ticks = AxisSpec::Ticks::Step;
    below.x.step = std::max(1, layers / 8);
    below.marginGroup = 0;
    below.marginSides = margin::kLeft | margin::kRight;
    f.panels.front().marginSides = margin::kAll;
    f.rowStretch = {{0, 2.0}, {1, 1.0}};
    f.panels.push_back(below);
    f.series.push_back(std::move(k));
    f.series.push_back(std::move(v));
    LegendSpec legend;
    legend.panel = panel;
    f.legends.push_back(legend);
}

/// Beside the map, on its layer axis: the next token's KLD with only that layer's K, V or both
/// quantized (95% intervals), for the map's scheme and budget. Returns the points drawn.
int addAttribution(FigureSpec& f, const eval::EvalResult& e, const QString& scheme, int layers, int budget)
{
    struct Path {
        eval::AttributionPath path;
        const char* name;
        QColor colour;
        Marker shape;
        double offset;
    };
    const Path paths[] = {{eval::AttributionPath::K, "K", QColor(0xd9, 0x5f, 0x02), Marker::Circle, -0.22},
                          {eval::AttributionPath::V, "V", QColor(0x1b, 0x9e, 0x77), Marker::Square, 0.0},
                          {eval::AttributionPath::Both, "both", QColor(0x75, 0x70, 0xb3), Marker::Diamond, 0.22}};
    std::vector<const eval::AttributionRow*> rows;
    for (const eval::AttributionRow& a : e.attribution) {
        const eval::ConfigurationResult& c = e.configurations[static_cast<std::size_t>(a.configuration)];
        if (QString::fromStdString(c.name) == scheme && c.budget == budget && c.seedIndex == 0 && a.kvHead < 0
            && a.kld.mean > 0.0 && std::isfinite(a.kld.mean))
            rows.push_back(&a);
    }
    if (rows.empty())
        return 0;
    const int panel = static_cast<int>(f.panels.size());
    PanelSpec p;
    p.grid = 0;
    p.column = 2;
    p.y.range = RangeSpec::fixed(-0.5, layers - 0.5);
    p.y.reversed = true;
    p.y.ticks = AxisSpec::Ticks::Step; // the map's ticks, on the same rows
    p.y.step = std::max(1, layers / 8);
    p.y.tickLabels = false; // the map's layer labels, on the same rows
    p.y.subTicks = false;
    p.y.zeroLine = false;
    p.x.label = QStringLiteral("output KLD\n(nats)");
    p.x.ticks = AxisSpec::Ticks::LogTuned;
    p.marginGroup = 0;
    p.marginSides = margin::kTop | margin::kBottom;
    const int legend = static_cast<int>(f.legends.size());
    LegendSpec l;
    l.panel = panel;
    f.legends.push_back(l);
    double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
    int drawn = 0;
    for (const Path& path : paths) {
        SeriesSpec g;
        g.name = QString::fromLatin1(path.name);
        g.panel = panel;
        g.transposed = true;
        g.data = false;
        g.line = SeriesSpec::Line::None;
        g.pen = QPen(path.colour, 1.2);
        g.marker = MarkerStyle{path.shape, QPen(path.colour), QBrush(path.colour), 5.0};
        g.errorBars = true;
        g.errorPen = QPen(path.colour, 1.0);
        g.feed = SeriesSpec::Feed::Sorted;
        for (const eval::AttributionRow* a : rows) {
            if (a->path != path.path)
                continue;
            const double low = std::max(a->kldLow, a->kld.mean * 1e-3); // a log axis has no place for <= 0
            g.x << a->layer + path.offset;
            g.y << a->kld.mean;
            g.errorMinus << a->kld.mean - low;
            g.errorPlus << std::max(0.0, a->kldHigh - a->kld.mean);
            lo = std::min(lo, low);
            hi = std::max(hi, std::max(a->kldHigh, a->kld.mean));
        }
        g.legend = g.x.isEmpty() ? -1 : legend;
        drawn += static_cast<int>(g.x.size());
        f.series.push_back(std::move(g));
    }
    // Room on the right, above every point, for the legend in the top corner.
    if (std::isfinite(lo))
        p.x.range = RangeSpec::fixed(lo / 1.5, hi * 12.0);
    f.panels.push_back(p);
    f.grids.front().columnStretch = {{0, 2.5}, {2, 1.3}};
    return drawn;
}

} // namespace

const std::vector<ModelMapMetric>& modelMapMetrics()
{
    static const std::vector<ModelMapMetric> metrics = {
        {"kl_mean", "mean KL(exact ‖ quantized) (nats)", "mean KL", "nats", true},
        {"kl_p99", "p99 KL (nats)", "p99 KL", "nats", true},
        {"recall", "top-k recall", "top-k recall", "fraction", false},
        {"argmax_shift", "argmax-shift rate", "argmax-shift rate", "fraction", false},
        {"rel_mse_t", "output relative error ‖T−T̂‖²/‖T‖²", "output rel. error", "relative", true},
        {"score_err_var", "score-error variance (measured)", "score-error var.", "score units²", true},
        {"score_err_var_pred", "score-error variance (predicted)", "predicted score-error var.", "score units²", true},
        {"entropy", "attention entropy (nats)", "attention entropy", "nats", false},
    };
    return metrics;
}

QString modelMapColourLabel(const ResultSet& results, const ModelMapChoice& choice)
{
    const ModelMapMetric& m = modelMapMetrics()[static_cast<std::size_t>(std::max(0, choice.metric))];
    const QString budget = QStringLiteral("n = %1").arg(choice.budget);
    const QString scheme = schemeLabel(&results, choice.scheme);
    if (choice.versus >= 0)
        return QStringLiteral("log10 ratio of %1, %2 / %3, %4")
            .arg(QString::fromUtf8(m.quantity), scheme, schemeLabel(&results, choice.versus), budget);
    return QStringLiteral("%1%2 (%3), %4, %5")
        .arg(m.logScale ? QStringLiteral("log10 ") : QString(), QString::fromUtf8(m.quantity), QString::fromUtf8(m.unit),
             scheme, budget);
}

QString modelMapMeasureLabel(const std::string& measure)
{
    static const std::map<std::string, const char*> labels = {{"kl_mean", "mean KL"},
                                                              {"rel_mse_t", "output relative error"},
                                                              {"fisher", "Fisher score error"},
                                                              {"score_err_var", "score-error variance"},
                                                              {"entropy", "attention entropy"}};
    const auto it = labels.find(measure);
    return it != labels.end() ? QString::fromLatin1(it->second) : QString::fromStdString(measure);
}

const eval::OutputVsAttention* bestJudgement(const std::vector<eval::OutputVsAttention>& rows, const std::string& level)
{
    const eval::OutputVsAttention* best = nullptr;
    for (const eval::OutputVsAttention& r : rows)
        if (r.level == level && std::isfinite(r.rho) && (!best || r.rho > best->rho))
            best = &r;
    return best;
}

QString rhoText(const eval::OutputVsAttention& row)
{
    QString t = QStringLiteral("ρ = %1").arg(row.rho, 0, 'f', 2);
    if (std::isfinite(row.low))
        t += QStringLiteral(" [%1, %2]").arg(row.low, 0, 'f', 2).arg(row.high, 0, 'f', 2);
    return t;
}

ModelMapFigure modelMapFigure(const ViewData& map, bool anyRun, const ModelMapChoice& choice,
                              const eval::EvalResult* evaluation, const std::vector<eval::OutputVsAttention>& rows)
{
    ModelMapFigure out;
    FigureSpec& f = out.figure;
    f.legends.front().place = LegendSpec::Place::Hidden;
    f.layoutNow = true;
    if (map.empty() || !map.modelMap || map.modelMap->empty()) {
        ItemSpec note;
        note.xRatio = note.yRatio = true;
        note.a = QPointF(0.5, 0.5);
        note.text = anyRun ? QStringLiteral("Not a model run: the map needs regime \"model\" with layers and heads")
                           : QStringLiteral("Run a model dump (File → Import, or a spec with regime \"model\")…");
        f.items.push_back(note);
        f.panels.front().x.visible = f.panels.front().y.visible = false;
        return out;
    }
    const ResultSet& r = *map.results;
    const Cells cells = collectCells(*map.modelMap, choice);
    out.hasMap = true;
    out.layers = cells.layers;
    out.heads = cells.heads;
    out.values = cells.values;
    out.colourLabel = modelMapColourLabel(r, choice);
    // The map, its colour scale and (with an evaluation) the attribution on the map's layer axis
    // share one row of their own, so the footnotes under them span the whole width.
    f.grids.push_back(GridSpec{});
    f.marginGroups = 1;
    addHeatmap(out, cells, r, choice);
    if (map.sensitivity && !map.sensitivity->empty())
        addSensitivity(f, *map.sensitivity, cells.layers, choice.budget);
    if (evaluation && evaluation->layers == cells.layers && choice.withAttribution)
        out.attributionPoints = addAttribution(f, *evaluation, schemeLabel(&r, choice.scheme), cells.layers, choice.budget);
    if (const eval::OutputVsAttention* best = bestJudgement(rows, "layer"))
        f.addFootnote((out.attributionPoints > 0 ? QStringLiteral("Right: the next token's KLD with one layer's K, V or both quantized "
                                                                   "(95% intervals); %1 predicts it best per layer, %2, %3 cells")
                                                  : QStringLiteral("Output tab, one layer quantized (drawn at 7 in): %1 "
                                                                   "predicts it best per layer, %2, %3 cells"))
                          .arg(modelMapMeasureLabel(best->measure), rhoText(*best))
                          .arg(best->cells));
    const int total = cells.layers * cells.heads;
    if (cells.blank > 0)
        f.addFootnote(cells.zeros == cells.blank
                          ? QStringLiteral("%1 of %2 cells uncoloured: %3 = 0 exactly there (no place on a log scale)")
                                .arg(cells.blank)
                                .arg(total)
                                .arg(QString::fromUtf8(modelMapMetrics()[static_cast<std::size_t>(choice.metric)].quantity))
                          : QStringLiteral("%1 of %2 cells uncoloured: no finite value (0 or missing)").arg(cells.blank).arg(total));
    return out;
}

} // namespace kvlens::widgets
