// SPDX-License-Identifier: GPL-3.0-or-later
// Views of an EvalResult and their export as one staged set.
#include "widgets/eval_views.h"

#include "core/eval/eval_files.h"
#include "core/lm/next_token_stats.h"

#include <QFileInfo>

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

// ---------------------------------------------------------------------------------------------

EvalView::EvalView(QWidget* parent)
    : ResultView(parent)
{
    setPointSelectable(false);
}

void EvalView::setEvalResult(std::shared_ptr<const eval::EvalResult> result, EvalPage page)
{
    m_result = std::move(result);
    m_page = std::move(page);
    redraw();
    updateEmptyState();
}

std::vector<int> EvalView::candidates(const eval::EvalResult& result) const
{
    std::vector<int> all(result.configurations.size());
    for (std::size_t i = 0; i < all.size(); ++i)
        all[i] = static_cast<int>(i);
    return all;
}

std::vector<int> EvalView::shownConfigurations() const
{
    if (!m_result)
        return {};
    return m_page.configurations.empty() ? candidates(*m_result) : m_page.configurations;
}

QString EvalView::emptyText() const
{
    if (!m_result)
        return QStringLiteral("Run kvlens eval to fill this view.");
    if (m_result->configurations.empty() || m_result->scored.empty())
        return QStringLiteral("the evaluation scored no tokens");
    return QString();
}

void EvalView::addPageTitle()
{
    if (m_page.title.isEmpty())
        return;
    m_plot->plotLayout()->insertRow(0);
    auto* title = new QCPTextElement(m_plot, m_page.title, m_plot->font());
    title->setObjectName(QString::fromLatin1(PlotWidget::kNoteName)); // styled with the notes
    title->setTextColor(Qt::black);
    m_plot->plotLayout()->addElement(0, 0, title);
    m_plot->plotLayout()->setRowStretchFactor(0, 0.001);
}

// ---------------------------------------------------------------------------------------------

EvalKldView::EvalKldView(QWidget* parent)
    : EvalView(parent)
{
    setToolTip(viewDescription());
}

QString EvalKldView::viewDescription() const
{
    return QStringLiteral("How far each scored token's next-token distribution moves when the KV cache is quantized: "
                          "KLD(base ‖ Q) per token, as quantiles per configuration.");
}

double EvalKldView::printAspect(double widthInches) const
{
    const int rows = std::max(1, static_cast<int>(shownConfigurations().size()));
    // An axis, its label, the legend row and two footnote lines, then a row per configuration.
    const double inches = 1.6 + 0.22 * rows + (m_page.title.isEmpty() ? 0.0 : 0.15);
    return std::clamp(inches / widthInches, 0.4, 2.2);
}

void EvalKldView::redraw()
{
    m_plot->resetPlot();
    m_floor = 0.0;
    m_csv = QStringLiteral("configuration,scheme,budget,seed,tokens,zeros,p5,p25,median,p75,p95,p99,max,mean\n");
    m_plot->xAxis->setLabel(QStringLiteral("KLD(base ‖ Q) per token (nats)"));
    PlotWidget::setLogAxis(m_plot->xAxis);
    const std::vector<int> shown = shownConfigurations();
    if (!m_result || shown.empty() || m_result->scored.empty()) {
        m_plot->replot();
        return;
    }
    const eval::EvalResult& r = *m_result;
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
        m_csv += configurationCsv(r, c) + QStringLiteral(",%1,%2,").arg(k.count).arg(k.zeros)
                 + QStringList{num(k.p5), num(k.p25), num(k.median), num(k.p75), num(k.p95), num(k.p99), num(k.maximum),
                               num(k.mean)}
                       .join(QLatin1Char(','))
                 + QLatin1Char('\n');
    }
    // The floor: a decade under the smallest positive value (where zeros are drawn), or a nominal
    // one when every value is 0.
    const bool anyPositive = std::isfinite(smallest);
    m_floor = anyPositive ? (zeros ? decadeBelow(smallest) / 10.0 : smallest) : 1e-6;
    auto at = [&](double v) { return std::max(v, m_floor); };

    const QColor color = seriesColor(0);
    auto* box = new QCPStatisticalBox(m_plot->yAxis, m_plot->xAxis);
    box->setName(QStringLiteral("p25–p75, median; whiskers p5–p95"));
    box->removeFromLegend(); // the footnote says what the box is; the legend names the markers
    QColor fill = color;
    fill.setAlpha(70);
    box->setPen(QPen(color, 1.0));
    box->setBrush(fill);
    box->setMedianPen(QPen(Qt::black, 2.0));
    box->setWhiskerPen(QPen(color, 1.0, Qt::SolidLine));
    box->setWhiskerBarPen(QPen(color, 1.0));
    box->setWidth(0.56);
    box->setWhiskerWidth(0.3);
    m_plot->markSeries(box);
    struct Marker {
        const char* name;
        QCPScatterStyle::ScatterShape shape;
        double KldQuantiles::*value;
    };
    const Marker markers[] = {{"mean", QCPScatterStyle::ssCircle, &KldQuantiles::mean},
                              {"p99", QCPScatterStyle::ssTriangle, &KldQuantiles::p99},
                              {"worst token", QCPScatterStyle::ssCross, &KldQuantiles::maximum}};
    std::vector<QCPGraph*> marks;
    for (const Marker& m : markers) {
        QCPGraph* g = m_plot->addGraph(m_plot->yAxis, m_plot->xAxis);
        g->setName(QString::fromLatin1(m.name));
        g->setLineStyle(QCPGraph::lsNone);
        g->setScatterStyle(QCPScatterStyle(m.shape, QPen(QColor(0x22, 0x22, 0x22), 1.0),
                                           m.shape == QCPScatterStyle::ssCircle ? QBrush(Qt::white) : QBrush(Qt::NoBrush), 6.0));
        g->setAdaptiveSampling(false);
        m_plot->markSeries(g);
        marks.push_back(g);
    }
    QSharedPointer<QCPAxisTickerText> names(new QCPAxisTickerText);
    QStringList withZeros;
    for (std::size_t i = 0; i < shown.size(); ++i) {
        const KldQuantiles& k = q[i];
        const double key = static_cast<double>(i);
        box->addData(key, at(k.p5), at(k.p25), at(k.median), at(k.p75), at(k.p95));
        for (std::size_t m = 0; m < marks.size(); ++m)
            marks[m]->addData(key, at(k.*(markers[m].value)));
        // The median as a line across the box (QCPStatisticalBox clips its own median away when
        // its key axis is vertical).
        auto* median = new QCPItemLine(m_plot);
        median->start->setCoords(at(k.median), key - 0.28);
        median->end->setCoords(at(k.median), key + 0.28);
        median->setPen(QPen(Qt::black, 1.6));
        const QString label = evalConfigurationLabel(r, shown[i]);
        names->addTick(key, label);
        if (k.zeros > 0)
            withZeros << (k.zeros == k.count ? QStringLiteral("%1 (every token)").arg(label)
                                             : QStringLiteral("%1 (%2%)").arg(label).arg(100.0 * k.zeros / k.count, 0, 'g', 2));
    }
    m_plot->yAxis->setTicker(names);
    m_plot->yAxis->setRange(-0.6, static_cast<double>(shown.size()) - 0.4);
    m_plot->yAxis->setRangeReversed(true); // the run's first configuration on top
    m_plot->yAxis->grid()->setVisible(false);
    m_plot->xAxis->setRange(m_floor / 1.6, std::max(largest, m_floor * 10.0) * 1.6);
    PlotWidget::tuneLogAxis(m_plot->xAxis);
    m_plot->legend->setVisible(true);
    m_plot->placeLegendBelow(3);
    QString note = QStringLiteral("box: p25 to p75 and median; whiskers: p5 to p95 (%1 tokens)").arg(r.scored.size());
    if (!withZeros.isEmpty())
        note += QStringLiteral("\nKLD = 0 drawn at the axis floor %1: %2").arg(powerText(m_floor), joinNames(withZeros, 3));
    m_plot->addFootnote(note);
    addPageTitle();
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

// ---------------------------------------------------------------------------------------------

EvalLayersView::EvalLayersView(QWidget* parent)
    : EvalView(parent)
{
    setToolTip(viewDescription());
}

QString EvalLayersView::viewDescription() const
{
    return QStringLiteral("Which layers matter: the mean KLD when only one layer's cache is quantized (its keys, its "
                          "values, or both), with the 95% interval.");
}

QString EvalLayersView::emptyText() const
{
    if (const QString base = EvalView::emptyText(); !base.isEmpty())
        return base;
    if (m_result->attribution.empty())
        return QStringLiteral("no per-layer attribution in this run (--attribution none)");
    if (m_panels == 0)
        return QStringLiteral("every configuration's per-layer KLD is 0 exactly");
    return QString();
}

std::vector<int> EvalLayersView::candidates(const eval::EvalResult& result) const
{
    std::vector<int> out;
    for (std::size_t c = 0; c < result.configurations.size(); ++c) {
        const auto rows = layerRows(result, static_cast<int>(c));
        if (std::any_of(rows.begin(), rows.end(), [](const eval::AttributionRow* a) { return a->kld.mean != 0.0 || a->kldHigh != 0.0; }))
            out.push_back(static_cast<int>(c));
    }
    return out;
}

double EvalLayersView::printAspect(double widthInches) const
{
    const int panels = std::max(1, m_panels);
    const double panelInches = widthInches < 5.0 ? 1.45 : 1.6;
    const double inches = 0.95 + panelInches * panels;
    return std::clamp(inches / widthInches, 0.5, 2.4);
}

void EvalLayersView::redraw()
{
    m_plot->resetPlot();
    m_panels = 0;
    m_csv = QStringLiteral("configuration,scheme,budget,seed,layer,path,kld_mean,kld_low,kld_high\n");
    if (!m_result || m_result->attribution.empty()) {
        m_plot->replot();
        return;
    }
    const eval::EvalResult& r = *m_result;
    const std::vector<int> shown = shownConfigurations();
    // Configurations with rows whose every value is 0 (an identity scheme): named, not drawn.
    QStringList exact;
    const std::vector<int> drawable = candidates(r);
    for (std::size_t c = 0; c < r.configurations.size(); ++c)
        if (!layerRows(r, static_cast<int>(c)).empty()
            && std::find(drawable.begin(), drawable.end(), static_cast<int>(c)) == drawable.end())
            exact << evalConfigurationLabel(r, static_cast<int>(c));
    struct PathStyle {
        eval::AttributionPath path;
        const char* name;
        QColor color;
    };
    // Okabe-Ito: keys vermillion, values bluish green (as the model map's K/V panel), both blue.
    const PathStyle paths[] = {{eval::AttributionPath::K, "K only", QColor(0xD5, 0x5E, 0x00)},
                               {eval::AttributionPath::V, "V only", QColor(0x00, 0x9E, 0x73)},
                               {eval::AttributionPath::Both, "K and V", QColor(0x00, 0x72, 0xB2)}};
    auto* margins = new QCPMarginGroup(m_plot);
    QCPAxisRect* last = nullptr;
    for (int c : shown) {
        const auto rows = layerRows(r, c);
        if (rows.empty() || std::find(drawable.begin(), drawable.end(), c) == drawable.end())
            continue;
        QCPAxisRect* rect = m_plot->axisRect();
        if (m_panels > 0) {
            rect = new QCPAxisRect(m_plot);
            m_plot->plotLayout()->addElement(m_plot->plotLayout()->rowCount(), 0, rect);
        }
        rect->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
        QCPAxis* x = rect->axis(QCPAxis::atBottom);
        QCPAxis* y = rect->axis(QCPAxis::atLeft);
        auto* group = new QCPBarsGroup(m_plot);
        group->setSpacingType(QCPBarsGroup::stAbsolute);
        group->setSpacing(0.0);
        double top = 0.0, bottom = 0.0;
        int layers = 0;
        for (const PathStyle& p : paths) {
            auto* bars = new QCPBars(x, y);
            bars->setName(QString::fromLatin1(p.name));
            bars->setWidth(0.27);
            bars->setBarsGroup(group);
            bars->setPen(QPen(p.color.darker(130), 0.6));
            bars->setBrush(p.color);
            auto* errors = new QCPErrorBars(x, y);
            errors->removeFromLegend();
            errors->setDataPlottable(bars);
            errors->setPen(QPen(Qt::black, 0.8));
            errors->setWhiskerWidth(3.0);
            errors->setSymbolGap(0.0); // the whisker runs through the bar's top
            QVector<double> keys, values, minus, plus;
            for (const eval::AttributionRow* a : rows) {
                if (a->path != p.path)
                    continue;
                keys << a->layer;
                values << a->kld.mean;
                minus << a->kld.mean - a->kldLow;
                plus << a->kldHigh - a->kld.mean;
                top = std::max({top, a->kldHigh, a->kld.mean});
                bottom = std::min({bottom, a->kldLow, a->kld.mean});
                layers = std::max(layers, a->layer + 1);
                m_csv += configurationCsv(r, c) + QStringLiteral(",%1,%2,").arg(a->layer).arg(QString::fromLatin1(eval::attributionPathName(a->path)))
                         + num(a->kld.mean) + QLatin1Char(',') + num(a->kldLow) + QLatin1Char(',') + num(a->kldHigh) + QLatin1Char('\n');
            }
            bars->setData(keys, values, true);
            errors->setData(minus, plus);
            m_plot->markSeries(bars);
            if (m_panels > 0)
                bars->removeFromLegend();
        }
        PlotWidget::setIntegerAxis(x, 0, std::max(0, layers - 1));
        // Room above the tallest interval for the panel's name.
        y->setRange(bottom < 0.0 ? bottom * 1.1 : 0.0, top > 0.0 ? top * 1.3 : 1.0);
        y->setLabel(QStringLiteral("mean KLD (nats)"));
        for (QCPAxis* axis : {x, y})
            axis->grid()->setZeroLinePen(Qt::NoPen); // the axes are the zero lines
        x->grid()->setVisible(false);
        x->setLabel(QString());
        auto* name = new QCPItemText(m_plot);
        name->setClipToAxisRect(false);
        name->setClipAxisRect(rect);
        name->position->setAxisRect(rect);
        name->position->setType(QCPItemPosition::ptAxisRectRatio);
        name->position->setCoords(0.02, 0.03);
        name->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        name->setText(evalConfigurationLabel(r, c));
        last = rect;
        ++m_panels;
    }
    if (m_panels == 0) {
        m_plot->replot();
        return;
    }
    last->axis(QCPAxis::atBottom)->setLabel(QStringLiteral("layer quantized alone (the rest exact)"));
    m_plot->legend->setVisible(true);
    m_plot->placeLegendBelow(3);
    QString note = QStringLiteral("bars: mean KLD over %1 tokens; whiskers: its 95% interval").arg(r.scored.size());
    if (!exact.isEmpty())
        note += QStringLiteral("\nnot drawn, every layer's KLD 0 exactly: %1").arg(joinNames(exact, 3));
    m_plot->addFootnote(note);
    // No page title: each panel names its configuration, budget included.
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

// ---------------------------------------------------------------------------------------------

EvalTextView::EvalTextView(QWidget* parent)
    : EvalView(parent)
{
    setToolTip(viewDescription());
}

QString EvalTextView::viewDescription() const
{
    return QStringLiteral("Where in the text the damage falls: each scored token's KLD(base ‖ Q), chunk after chunk, "
                          "with a running mean per configuration.");
}

double EvalTextView::printAspect(double widthInches) const
{
    const int lines = std::max(1, static_cast<int>(shownConfigurations().size()));
    const int legendRows = (lines + 1) / 2;
    const double inches = (widthInches < 5.0 ? 2.4 : 2.7) + 0.16 * legendRows + 0.35 + (m_page.title.isEmpty() ? 0.0 : 0.15);
    return std::clamp(inches / widthInches, 0.45, 1.6);
}

void EvalTextView::redraw()
{
    m_plot->resetPlot();
    m_floor = 0.0;
    m_csv = QStringLiteral("configuration,scheme,budget,seed,token_index,chunk,position,kld,running_mean\n");
    m_plot->xAxis->setLabel(QStringLiteral("scored token (chunk after chunk)"));
    m_plot->yAxis->setLabel(QStringLiteral("KLD per token (nats)"));
    PlotWidget::setLogAxis(m_plot->yAxis);
    const std::vector<int> shown = shownConfigurations();
    if (!m_result || shown.empty() || m_result->scored.empty()) {
        m_plot->replot();
        return;
    }
    const eval::EvalResult& r = *m_result;
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
    m_window = std::clamp(perChunk / 10, 1, 51) | 1;
    // The floor: the decade of the pooled 1st percentile of positive values, so a few round-off
    // sized values do not stretch the axis over ten decades.
    std::vector<double> positive;
    for (int c : shown)
        for (const lm::TokenStat& t : r.configurations[static_cast<std::size_t>(c)].tokens)
            if (t.kld > 0.0)
                positive.push_back(t.kld);
    std::sort(positive.begin(), positive.end());
    m_floor = positive.empty() ? 1e-6 : decadeBelow(lm::percentileOfSorted(positive, 0.01));
    double top = m_floor * 10.0;
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
        const std::vector<double> mean = runningMean(kld, groups, m_window);
        for (std::size_t i = 0; i < m; ++i)
            m_csv += configurationCsv(r, c) + QStringLiteral(",%1,%2,%3,").arg(i).arg(r.scored[i].chunk).arg(r.scored[i].position)
                     + num(kld[i]) + QLatin1Char(',') + num(mean[i]) + QLatin1Char('\n');
        if (allZero(conf.tokens)) {
            exact << label;
            continue;
        }
        const QColor color = seriesColor(colour++);
        QCPGraph* dots = m_plot->addScatterSeries(label + QStringLiteral(" per token"), color, QCPScatterStyle::ssDisc, 2.0);
        QColor faint = color;
        faint.setAlpha(80);
        dots->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, faint, faint, 2.0));
        dots->removeFromLegend();
        QCPGraph* line = m_plot->addLineSeries(label, color, QCPScatterStyle::ssNone);
        line->setPen(QPen(color, 1.3));
        QVector<double> x, y, lx, ly;
        for (std::size_t i = 0; i < m; ++i) {
            ++total;
            if (kld[i] < m_floor)
                ++clamped;
            x << static_cast<double>(i);
            y << std::max(kld[i], m_floor);
            top = std::max(top, kld[i]);
            // A break between chunks: the text does not run on from one chunk's scored half to the next.
            if (i > 0 && groups[i] != groups[i - 1]) {
                lx << static_cast<double>(i) - 0.5;
                ly << std::numeric_limits<double>::quiet_NaN();
            }
            lx << static_cast<double>(i);
            ly << std::max(mean[i], m_floor);
        }
        dots->setData(x, y, true);
        line->setData(lx, ly, true);
    }
    // Chunk boundaries, while few enough to read.
    if (chunkCount > 1 && chunkCount <= 40)
        for (std::size_t i = 1; i < n; ++i)
            if (chunks[i] != chunks[i - 1]) {
                auto* edge = new QCPItemStraightLine(m_plot);
                edge->point1->setCoords(static_cast<double>(i) - 0.5, 1.0);
                edge->point2->setCoords(static_cast<double>(i) - 0.5, 2.0);
                edge->setPen(QPen(QColor(0x99, 0x99, 0x99), 0.6, Qt::DotLine));
            }
    m_plot->xAxis->setRange(-0.5, static_cast<double>(n) - 0.5);
    m_plot->yAxis->setRange(m_floor / 1.5, top * 1.5);
    PlotWidget::tuneLogAxis(m_plot->yAxis);
    m_plot->legend->setVisible(true);
    m_plot->placeLegendBelow(2);
    QString note = QStringLiteral("dots: each token; lines: mean over %1 tokens; dotted: chunks").arg(m_window);
    if (clamped > 0)
        note += QStringLiteral("\n%1 of %2 values below %3 (0 included) drawn at it").arg(clamped).arg(total).arg(powerText(m_floor));
    if (!exact.isEmpty())
        note += QStringLiteral("\nnot drawn, KLD 0 at every token: %1").arg(joinNames(exact, 3));
    m_plot->addFootnote(note);
    addPageTitle();
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

// ---------------------------------------------------------------------------------------------

ExportOutcome exportEvalFigures(const eval::EvalResult& result, const QString& dir, const ExportOptions& options,
                                const QByteArray& specJson)
{
    // The views live only inside this call: they may share the caller's result without a copy.
    const std::shared_ptr<const eval::EvalResult> shared(&result, [](const eval::EvalResult*) {});
    std::vector<std::unique_ptr<EvalView>> views;
    auto addPages = [&](auto make, int perPage) {
        std::unique_ptr<EvalView> probe = make();
        const std::vector<EvalPage> pages = evalPages(result, probe->candidates(result), perPage);
        for (const EvalPage& page : pages) {
            std::unique_ptr<EvalView> view = make();
            view->setObjectName(view->viewId() + page.suffix);
            view->resize(900, 650);
            view->setEvalResult(shared, page);
            views.push_back(std::move(view));
        }
    };
    addPages([] { return std::unique_ptr<EvalView>(new EvalKldView); }, 14);
    addPages([] { return std::unique_ptr<EvalView>(new EvalLayersView); }, EvalLayersView::kMaxPanels);
    addPages([] { return std::unique_ptr<EvalView>(new EvalTextView); }, EvalTextView::kMaxLines);
    std::vector<ResultView*> raw;
    for (const auto& v : views)
        raw.push_back(v.get());
    return exportViews(raw, dir, [](const ResultView& v) { return v.objectName(); }, options, specJson);
}

} // namespace kvlens::widgets
