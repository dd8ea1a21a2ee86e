// SPDX-License-Identifier: GPL-3.0-or-later
// The eval figures, built from an EvalResult without drawing anything, and the helpers they share.
#include "widgets/figures/eval_figures.h"

#include "core/eval/eval_files.h"
#include "core/lm/next_token_stats.h"
#include "widgets/plot_widget.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace kvlens::widgets {

namespace {

QString csvText(const QString& s)
{
    if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) && !s.contains(QLatin1Char('\n')))
        return s;
    QString q = s;
    q.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    return QLatin1Char('"') + q + QLatin1Char('"');
}

QString num(double v)
{
    return QString::number(v, 'g', 10);
}

/// The power of ten at or below v (> 0).
double decadeBelow(double v)
{
    return std::pow(10.0, std::floor(std::log10(v) + 1e-12));
}

QString powerText(double v)
{
    return QStringLiteral("10^%1").arg(static_cast<int>(std::lround(std::log10(v))));
}

QString configurationCsv(const eval::EvalResult& r, int index)
{
    const eval::ConfigurationResult& c = r.configurations[static_cast<std::size_t>(index)];
    return csvText(evalConfigurationLabel(r, index)) + QLatin1Char(',') + csvText(QString::fromStdString(c.name))
           + QLatin1Char(',') + QString::fromStdString(eval::budgetText(c.budget)) + QLatin1Char(',')
           + QString::number(static_cast<qulonglong>(r.spec.seed(c.seedIndex)));
}

bool allZero(const std::vector<lm::TokenStat>& tokens)
{
    return std::all_of(tokens.begin(), tokens.end(), [](const lm::TokenStat& t) { return !(t.kld > 0.0); });
}

/// Whole-layer attribution rows of one configuration (kvHead -1), by path then layer.
std::vector<const eval::AttributionRow*> layerRows(const eval::EvalResult& r, int configuration)
{
    std::vector<const eval::AttributionRow*> rows;
    for (const eval::AttributionRow& a : r.attribution)
        if (a.configuration == configuration && a.kvHead < 0)
            rows.push_back(&a);
    return rows;
}

QString joinNames(const QStringList& names, int most = 4)
{
    if (names.size() <= most)
        return names.join(QStringLiteral(", "));
    return names.mid(0, most).join(QStringLiteral(", ")) + QStringLiteral(" and %1 more").arg(names.size() - most);
}

} // namespace

std::vector<EvalPage> evalPages(const eval::EvalResult& result, const std::vector<int>& candidates, int maxPerPage)
{
    const int most = std::max(1, maxPerPage);
    if (static_cast<int>(candidates.size()) <= most)
        return {EvalPage{QString(), QString(), candidates}};
    // Budgets in the order the run first holds them (fixed-width configurations under 0).
    std::vector<int> budgets;
    std::map<int, std::vector<int>> byBudget;
    for (int c : candidates) {
        const int b = result.configurations[static_cast<std::size_t>(c)].budget;
        if (!byBudget.count(b))
            budgets.push_back(b);
        byBudget[b].push_back(c);
    }
    std::vector<EvalPage> pages;
    for (int b : budgets) {
        const std::vector<int>& group = byBudget[b];
        const QString suffix = b > 0 ? QStringLiteral("_n%1").arg(b) : QStringLiteral("_fixed");
        const QString title = b > 0 ? QStringLiteral("n = %1").arg(b) : QStringLiteral("fixed width");
        const int n = static_cast<int>(group.size());
        const int parts = (n + most - 1) / most;
        for (int p = 0; p < parts; ++p) {
            // Near-equal parts: part p holds [p n / parts, (p + 1) n / parts).
            const int from = p * n / parts, to = (p + 1) * n / parts;
            EvalPage page;
            page.suffix = parts > 1 ? suffix + QStringLiteral("_%1").arg(p + 1) : suffix;
            page.title = parts > 1 ? title + QStringLiteral(" (%1 of %2)").arg(p + 1).arg(parts) : title;
            page.configurations.assign(group.begin() + from, group.begin() + to);
            pages.push_back(std::move(page));
        }
    }
    return pages;
}

QString evalConfigurationLabel(const eval::EvalResult& result, int configuration)
{
    const eval::ConfigurationResult& c = result.configurations[static_cast<std::size_t>(configuration)];
    QString label = QString::fromStdString(c.name);
    if (c.budget > 0)
        label += QStringLiteral(" n=%1").arg(c.budget);
    if (result.spec.seedCount > 1)
        label += QStringLiteral(" seed %1").arg(static_cast<qulonglong>(result.spec.seed(c.seedIndex)));
    return label;
}

KldQuantiles kldQuantiles(const std::vector<lm::TokenStat>& tokens)
{
    KldQuantiles q;
    if (tokens.empty())
        return q;
    std::vector<double> v;
    v.reserve(tokens.size());
    double sum = 0.0;
    for (const lm::TokenStat& t : tokens) {
        v.push_back(t.kld);
        sum += t.kld;
        q.zeros += t.kld == 0.0 ? 1 : 0;
    }
    std::sort(v.begin(), v.end());
    q.count = static_cast<int>(v.size());
    q.p5 = lm::percentileOfSorted(v, 0.05);
    q.p25 = lm::percentileOfSorted(v, 0.25);
    q.median = lm::percentileOfSorted(v, 0.5);
    q.p75 = lm::percentileOfSorted(v, 0.75);
    q.p95 = lm::percentileOfSorted(v, 0.95);
    q.p99 = lm::percentileOfSorted(v, 0.99);
    q.maximum = v.back();
    q.mean = sum / static_cast<double>(v.size());
    return q;
}

std::vector<double> runningMean(const std::vector<double>& values, const std::vector<int>& groups, int window)
{
    const int half = std::max(0, window / 2);
    const int n = static_cast<int>(values.size());
    std::vector<double> out(values.size(), 0.0);
    for (int i = 0; i < n; ++i) {
        double sum = 0.0;
        int count = 0;
        for (int j = std::max(0, i - half); j <= std::min(n - 1, i + half); ++j)
            if (groups[static_cast<std::size_t>(j)] == groups[static_cast<std::size_t>(i)]) {
                sum += values[static_cast<std::size_t>(j)];
                ++count;
            }
        out[static_cast<std::size_t>(i)] = count > 0 ? sum / count : 0.0;
    }
    return out;
}

std::vector<int> attributedConfigurations(const eval::EvalResult& result)
{
    std::vector<int> out;
    for (std::size_t c = 0; c < result.configurations.size(); ++c) {
        const auto rows = layerRows(result, static_cast<int>(c));
        if (std::any_of(rows.begin(), rows.end(), [](const eval::AttributionRow* a) { return a->kld.mean != 0.0 || a->kldHigh != 0.0; }))
            out.push_back(static_cast<int>(c));
    }
    return out;
}

namespace {

/// The box of the KLD figure: p25 to p75 with the median, whiskers p5 to p95, keys along the left axis.
SeriesSpec kldBoxSeries(const QColor& color)
{
    SeriesSpec box;
    box.kind = SeriesSpec::Kind::Box;
    box.name = QStringLiteral("p25–p75, median; whiskers p5–p95");
    box.transposed = true;
    box.legend = -1; // the footnote says what the box is; the legend names the markers
    QColor fill = color;
    fill.setAlpha(70);
    box.pen = QPen(color, 1.0);
    box.brush = fill;
    box.medianPen = QPen(Qt::black, 2.0);
    box.whiskerPen = QPen(color, 1.0, Qt::SolidLine);
    box.whiskerBarPen = QPen(color, 1.0);
    box.boxWidth = 0.56;
    box.boxWhiskerWidth = 0.3;
    return box;
}

/// A marker of the KLD figure: its legend name, shape and the quantile it marks.
struct KldMark {
    const char* name;
    Marker shape;
    double KldQuantiles::*value;
};
const KldMark kKldMarks[] = {{"mean", Marker::Circle, &KldQuantiles::mean},
                             {"p99", Marker::Triangle, &KldQuantiles::p99},
                             {"worst token", Marker::Cross, &KldQuantiles::maximum}};

/// One empty marker series per kKldMarks entry, in its order.
std::vector<SeriesSpec> kldMarkerSeries()
{
    std::vector<SeriesSpec> markers;
    for (const KldMark& m : kKldMarks) {
        SeriesSpec g;
        g.name = QString::fromLatin1(m.name);
        g.transposed = true;
        g.line = SeriesSpec::Line::None;
        g.pen = QPen(Qt::blue, 0);
        g.marker = MarkerStyle{m.shape, QPen(QColor(0x22, 0x22, 0x22), 1.0),
                               m.shape == Marker::Circle ? QBrush(Qt::white) : QBrush(Qt::NoBrush), 6.0};
        g.adaptiveSampling = false;
        g.feed = SeriesSpec::Feed::OneByOne;
        markers.push_back(g);
    }
    return markers;
}

} // namespace

EvalFigure evalKldFigure(const eval::EvalResult* result, const std::vector<int>& shown, const QString& title)
{
    EvalFigure out;
    FigureSpec& f = out.figure;
    PanelSpec& panel = f.panels.front();
    out.csv = QStringLiteral("configuration,scheme,budget,seed,tokens,zeros,p5,p25,median,p75,p95,p99,max,mean\n");
    panel.x.label = QStringLiteral("KLD(base ‖ Q) per token (nats)");
    panel.x.ticks = AxisSpec::Ticks::Log;
    if (!result || shown.empty() || result->scored.empty())
        return out;
    const eval::EvalResult& r = *result;
    std::vector<KldQuantiles> q;
    double smallest = std::numeric_limits<double>::infinity(), largest = 0.0;
    bool zeros = false;
    for (int c : shown) {
        q.push_back(kldQuantiles(r.configurations[static_cast<std::size_t>(c)].tokens));
        const KldQuantiles& k = q.back();
        for (double v : {k.p5, k.p25, k.median, k.p75, k.p95, k.p99, k.maximum, k.mean}) {
            if (v > 0.0)
                smallest = std::min(smallest, v);
            else
                zeros = true;
            largest = std::max(largest, v);
        }
        out.csv += configurationCsv(r, c) + QStringLiteral(",%1,%2,").arg(k.count).arg(k.zeros)
                   + QStringList{num(k.p5), num(k.p25), num(k.median), num(k.p75), num(k.p95), num(k.p99), num(k.maximum),
                                 num(k.mean)}
                         .join(QLatin1Char(','))
                   + QLatin1Char('\n');
    }
    // The floor: a decade under the smallest positive value (where zeros are drawn), or a nominal
    // one when every value is 0.
    const bool anyPositive = std::isfinite(smallest);
    out.floor = anyPositive ? (zeros ? decadeBelow(smallest) / 10.0 : smallest) : 1e-6;
    const double floor = out.floor;
    auto at = [floor](double v) { return std::max(v, floor); };

    SeriesSpec box = kldBoxSeries(seriesColor(0));
    std::vector<SeriesSpec> markers = kldMarkerSeries();
    QStringList withZeros;
    for (std::size_t i = 0; i < shown.size(); ++i) {
        const KldQuantiles& k = q[i];
        const double key = static_cast<double>(i);
        box.x << key;
        box.boxMin << at(k.p5);
        box.boxQ1 << at(k.p25);
        box.boxMedian << at(k.median);
        box.boxQ3 << at(k.p75);
        box.boxMax << at(k.p95);
        for (std::size_t m = 0; m < markers.size(); ++m) {
            markers[m].x << key;
            markers[m].y << at(k.*(kKldMarks[m].value));
        }
        // The median as a line across the box (QCPStatisticalBox clips its own median away when
        // its key axis is vertical).
        ItemSpec median;
        median.kind = ItemSpec::Kind::Segment;
        median.a = QPointF(at(k.median), key - 0.28);
        median.b = QPointF(at(k.median), key + 0.28);
        median.pen = QPen(Qt::black, 1.6);
        f.items.push_back(median);
        const QString label = evalConfigurationLabel(r, shown[i]);
        panel.y.tickAt << key;
        panel.y.tickText << label;
        if (k.zeros > 0)
            withZeros << (k.zeros == k.count ? QStringLiteral("%1 (every token)").arg(label)
                                             : QStringLiteral("%1 (%2%)").arg(label).arg(100.0 * k.zeros / k.count, 0, 'g', 2));
    }
    f.series.push_back(std::move(box));
    for (SeriesSpec& m : markers)
        f.series.push_back(std::move(m));
    panel.y.ticks = AxisSpec::Ticks::Text;
    panel.y.range = RangeSpec::fixed(-0.6, static_cast<double>(shown.size()) - 0.4);
    panel.y.reversed = true; // the run's first configuration on top
    panel.y.grid = false;
    panel.x.ticks = AxisSpec::Ticks::LogTuned;
    panel.x.range = RangeSpec::fixed(floor / 1.6, std::max(largest, floor * 10.0) * 1.6);
    f.legends.front().place = LegendSpec::Place::Below;
    f.legends.front().columns = 3;
    f.below.push_back(BelowRow{0, {}});
    QString note = QStringLiteral("box: p25 to p75 and median; whiskers: p5 to p95 (%1 tokens)").arg(r.scored.size());
    if (!withZeros.isEmpty())
        note += QStringLiteral("\nKLD = 0 drawn at the axis floor %1: %2").arg(powerText(floor), joinNames(withZeros, 3));
    f.addFootnote(note);
    f.title = title;
    return out;
}

namespace {

/// The attribution panel of configuration `c` (its bars, intervals and name), appending to the CSV.
void addLayerPanel(EvalFigure& out, const eval::EvalResult& r, int c, int panel)
{
    struct PathStyle {
        eval::AttributionPath path;
        const char* name;
        QColor color;
    };
    // Okabe-Ito: keys vermillion, values bluish green (as the model map's K/V panel), both blue.
    const PathStyle paths[] = {{eval::AttributionPath::K, "K only", QColor(0xD5, 0x5E, 0x00)},
                               {eval::AttributionPath::V, "V only", QColor(0x00, 0x9E, 0x73)},
                               {eval::AttributionPath::Both, "K and V", QColor(0x00, 0x72, 0xB2)}};
    FigureSpec& f = out.figure;
    if (panel > 0)
        f.panels.push_back(PanelSpec{});
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.row = panel;
    p.marginGroup = 0;
    p.marginSides = margin::kLeft | margin::kRight;
    f.barGroups.push_back(BarGroupSpec{true, 0.0});
    const auto rows = layerRows(r, c);
    double top = 0.0, bottom = 0.0;
    int layers = 0;
    for (const PathStyle& path : paths) {
        SeriesSpec bars;
        bars.kind = SeriesSpec::Kind::Bars;
        bars.name = QString::fromLatin1(path.name);
        bars.panel = panel;
        bars.barWidth = 0.27;
        bars.barGroup = static_cast<int>(f.barGroups.size()) - 1;
        bars.pen = QPen(path.color.darker(130), 0.6);
        bars.brush = path.color;
        bars.feed = SeriesSpec::Feed::Sorted;
        bars.errorBars = true;
        bars.errorPen = QPen(Qt::black, 0.8);
        bars.whiskerWidth = 3.0;
        bars.symbolGap = 0.0; // the whisker runs through the bar's top
        bars.legend = panel == 0 ? 0 : -1;
        for (const eval::AttributionRow* a : rows) {
            if (a->path != path.path)
                continue;
            bars.x << a->layer;
            bars.y << a->kld.mean;
            bars.errorMinus << a->kld.mean - a->kldLow;
            bars.errorPlus << a->kldHigh - a->kld.mean;
            top = std::max({top, a->kldHigh, a->kld.mean});
            bottom = std::min({bottom, a->kldLow, a->kld.mean});
            layers = std::max(layers, a->layer + 1);
            out.csv += configurationCsv(r, c)
                       + QStringLiteral(",%1,%2,").arg(a->layer).arg(QString::fromLatin1(eval::attributionPathName(a->path)))
                       + num(a->kld.mean) + QLatin1Char(',') + num(a->kldLow) + QLatin1Char(',') + num(a->kldHigh)
                       + QLatin1Char('\n');
        }
        f.series.push_back(std::move(bars));
    }
    p.x.ticks = AxisSpec::Ticks::Integer;
    p.x.integerLow = 0;
    p.x.integerHigh = std::max(0, layers - 1);
    // Room above the tallest interval for the panel's name.
    p.y.range = RangeSpec::fixed(bottom < 0.0 ? bottom * 1.1 : 0.0, top > 0.0 ? top * 1.3 : 1.0);
    p.y.label = QStringLiteral("mean KLD (nats)");
    p.x.zeroLine = p.y.zeroLine = false; // the axes are the zero lines
    p.x.grid = false;
    ItemSpec name;
    name.panel = panel;
    name.clip = false;
    name.xRatio = name.yRatio = true;
    name.a = QPointF(0.02, 0.03);
    name.align = Qt::AlignLeft | Qt::AlignTop;
    name.text = evalConfigurationLabel(r, c);
    f.items.push_back(name);
}

} // namespace

EvalFigure evalLayersFigure(const eval::EvalResult* result, const std::vector<int>& shown)
{
    EvalFigure out;
    FigureSpec& f = out.figure;
    out.csv = QStringLiteral("configuration,scheme,budget,seed,layer,path,kld_mean,kld_low,kld_high\n");
    if (!result || result->attribution.empty())
        return out;
    const eval::EvalResult& r = *result;
    // Configurations with rows whose every value is 0 (an identity scheme): named, not drawn.
    QStringList exact;
    const std::vector<int> drawable = attributedConfigurations(r);
    for (std::size_t c = 0; c < r.configurations.size(); ++c)
        if (!layerRows(r, static_cast<int>(c)).empty()
            && std::find(drawable.begin(), drawable.end(), static_cast<int>(c)) == drawable.end())
            exact << evalConfigurationLabel(r, static_cast<int>(c));
    f.marginGroups = 1;
    for (int c : shown) {
        if (layerRows(r, c).empty() || std::find(drawable.begin(), drawable.end(), c) == drawable.end())
            continue;
        addLayerPanel(out, r, c, out.panels++);
    }
    if (out.panels == 0)
        return out;
    f.panels.back().x.label = QStringLiteral("layer quantized alone (the rest exact)");
    f.legends.front().place = LegendSpec::Place::Below;
    f.legends.front().columns = 3;
    f.below.push_back(BelowRow{0, {}});
    QString note = QStringLiteral("bars: mean KLD over %1 tokens; whiskers: its 95% interval").arg(r.scored.size());
    if (!exact.isEmpty())
        note += QStringLiteral("\nnot drawn, every layer's KLD 0 exactly: %1").arg(joinNames(exact, 3));
    f.addFootnote(note);
    // No page title: each panel names its configuration, budget included.
    return out;
}

EvalFigure evalTextFigure(const eval::EvalResult* result, const std::vector<int>& shown, const QString& title)
{
    EvalFigure out;
    FigureSpec& f = out.figure;
    PanelSpec& panel = f.panels.front();
    out.csv = QStringLiteral("configuration,scheme,budget,seed,token_index,chunk,position,kld,running_mean\n");
    panel.x.label = QStringLiteral("scored token (chunk after chunk)");
    panel.y.label = QStringLiteral("KLD per token (nats)");
    panel.y.ticks = AxisSpec::Ticks::Log;
    if (!result || shown.empty() || result->scored.empty())
        return out;
    const eval::EvalResult& r = *result;
    const std::size_t n = r.scored.size();
    std::vector<int> chunks(n);
    int chunkCount = 0;
    for (std::size_t i = 0; i < n; ++i) {
        chunks[i] = r.scored[i].chunk;
        if (i == 0 || chunks[i] != chunks[i - 1])
            ++chunkCount;
    }
    // A window of about a tenth of a chunk's scored tokens (odd, 1 to 51).
    const int perChunk = static_cast<int>(n) / std::max(1, chunkCount);
    out.window = std::clamp(perChunk / 10, 1, 51) | 1;
    // The floor: the decade of the pooled 1st percentile of positive values, so a few round-off
    // sized values do not stretch the axis over ten decades.
    std::vector<double> positive;
    for (int c : shown)
        for (const lm::TokenStat& t : r.configurations[static_cast<std::size_t>(c)].tokens)
            if (t.kld > 0.0)
                positive.push_back(t.kld);
    std::sort(positive.begin(), positive.end());
    out.floor = positive.empty() ? 1e-6 : decadeBelow(lm::percentileOfSorted(positive, 0.01));
    const double floor = out.floor;
    double top = floor * 10.0;
    long long clamped = 0, total = 0;
    QStringList exact;
    int colour = 0;
    for (int c : shown) {
        const eval::ConfigurationResult& conf = r.configurations[static_cast<std::size_t>(c)];
        const QString label = evalConfigurationLabel(r, c);
        std::vector<double> kld;
        kld.reserve(conf.tokens.size());
        for (const lm::TokenStat& t : conf.tokens)
            kld.push_back(t.kld);
        const std::size_t m = std::min(kld.size(), n);
        const std::vector<int> groups(chunks.begin(), chunks.begin() + static_cast<std::ptrdiff_t>(m));
        kld.resize(m);
        const std::vector<double> mean = runningMean(kld, groups, out.window);
        for (std::size_t i = 0; i < m; ++i)
            out.csv += configurationCsv(r, c) + QStringLiteral(",%1,%2,%3,").arg(i).arg(r.scored[i].chunk).arg(r.scored[i].position)
                       + num(kld[i]) + QLatin1Char(',') + num(mean[i]) + QLatin1Char('\n');
        if (allZero(conf.tokens)) {
            exact << label;
            continue;
        }
        const QColor color = seriesColor(colour++);
        QColor faint = color;
        faint.setAlpha(80);
        SeriesSpec dots;
        dots.name = label + QStringLiteral(" per token");
        dots.line = SeriesSpec::Line::None;
        dots.pen = QPen(color);
        dots.marker = MarkerStyle{Marker::Disc, QPen(faint), QBrush(faint), 2.0};
        dots.adaptiveSampling = false;
        dots.legend = -1;
        dots.feed = SeriesSpec::Feed::Sorted;
        SeriesSpec line;
        line.name = label;
        line.pen = QPen(color, 1.3);
        line.marker = MarkerStyle{Marker::None, QPen(color), QBrush(Qt::white), 6.0};
        line.feed = SeriesSpec::Feed::Sorted;
        for (std::size_t i = 0; i < m; ++i) {
            ++total;
            if (kld[i] < floor)
                ++clamped;
            dots.x << static_cast<double>(i);
            dots.y << std::max(kld[i], floor);
            top = std::max(top, kld[i]);
            // A break between chunks: the text does not run on from one chunk's scored half to the next.
            if (i > 0 && groups[i] != groups[i - 1]) {
                line.x << static_cast<double>(i) - 0.5;
                line.y << std::numeric_limits<double>::quiet_NaN();
            }
            line.x << static_cast<double>(i);
            line.y << std::max(mean[i], floor);
        }
        f.series.push_back(std::move(dots));
        f.series.push_back(std::move(line));
    }
    // Chunk boundaries, while few enough to read.
    if (chunkCount > 1 && chunkCount <= 40)
        for (std::size_t i = 1; i < n; ++i)
            if (chunks[i] != chunks[i - 1]) {
                ItemSpec edge;
                edge.kind = ItemSpec::Kind::StraightLine;
                edge.a = QPointF(static_cast<double>(i) - 0.5, 1.0);
                edge.b = QPointF(static_cast<double>(i) - 0.5, 2.0);
                edge.pen = QPen(QColor(0x99, 0x99, 0x99), 0.6, Qt::DotLine);
                f.items.push_back(edge);
            }
    panel.x.range = RangeSpec::fixed(-0.5, static_cast<double>(n) - 0.5);
    panel.y.ticks = AxisSpec::Ticks::LogTuned;
    panel.y.range = RangeSpec::fixed(floor / 1.5, top * 1.5);
    f.legends.front().place = LegendSpec::Place::Below;
    f.legends.front().columns = 2;
    f.below.push_back(BelowRow{0, {}});
    QString note = QStringLiteral("dots: each token; lines: mean over %1 tokens; dotted: chunks").arg(out.window);
    if (clamped > 0)
        note += QStringLiteral("\n%1 of %2 values below %3 (0 included) drawn at it").arg(clamped).arg(total).arg(powerText(floor));
    if (!exact.isEmpty())
        note += QStringLiteral("\nnot drawn, KLD 0 at every token: %1").arg(joinNames(exact, 3));
    f.addFootnote(note);
    f.title = title;
    return out;
}

} // namespace kvlens::widgets
