// SPDX-License-Identifier: GPL-3.0-or-later
// Model map view.
#include "widgets/model_map_view.h"

#include "widgets/advisor_panel.h"

#include <QSplitter>

#include <QComboBox>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QLabel>
#include <QSignalBlocker>
#include <QtConcurrent/QtConcurrentRun>

#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace kvlens::widgets {

namespace {

struct MetricInfo {
    const char* key;
    const char* label;    ///< the metric box's entry
    const char* quantity; ///< what the colour bar names
    const char* unit;     ///< of the metric itself (the CSV's `unit` without a comparison)
    bool logScale;        ///< coloured by log10 of the value
};
const MetricInfo kMetrics[] = {
    {"kl_mean", "mean KL(exact ‖ quantized) (nats)", "mean KL", "nats", true},
    {"kl_p99", "p99 KL (nats)", "p99 KL", "nats", true},
    {"recall", "top-k recall", "top-k recall", "fraction", false},
    {"argmax_shift", "argmax-shift rate", "argmax-shift rate", "fraction", false},
    {"rel_mse_t", "output relative error ‖T−T̂‖²/‖T‖²", "output rel. error", "relative", true},
    {"score_err_var", "score-error variance (measured)", "score-error var.", "score units²", true},
    {"score_err_var_pred", "score-error variance (predicted)", "predicted score-error var.", "score units²", true},
    {"entropy", "attention entropy (nats)", "attention entropy", "nats", false},
};

/// Viridis (perceptually uniform, readable in greyscale and by the colour-blind), nine stops.
QCPColorGradient viridis()
{
    QCPColorGradient g;
    g.clearColorStops();
    const char* stops[] = {"#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c",
                           "#28ae80", "#5ec962", "#addc30", "#fde725"};
    for (int i = 0; i < 9; ++i)
        g.setColorStopAt(i / 8.0, QColor(QLatin1String(stops[i])));
    g.setNanHandling(QCPColorGradient::nhTransparent);
    return g;
}

/// Blue-white-red for a signed log ratio (ColorBrewer RdBu, colour-blind safe).
QCPColorGradient diverging()
{
    QCPColorGradient g;
    g.clearColorStops();
    const char* stops[] = {"#2166ac", "#67a9cf", "#d1e5f0", "#f7f7f7", "#fddbc7", "#ef8a62", "#b2182b"};
    for (int i = 0; i < 7; ++i)
        g.setColorStopAt(i / 6.0, QColor(QLatin1String(stops[i])));
    g.setNanHandling(QCPColorGradient::nhTransparent);
    return g;
}

/// A map measure's name in words (eval::OutputVsAttention::measure).
QString measureLabel(const std::string& measure)
{
    static const std::map<std::string, const char*> labels = {{"kl_mean", "mean KL"},
                                                              {"rel_mse_t", "output relative error"},
                                                              {"fisher", "Fisher score error"},
                                                              {"score_err_var", "score-error variance"},
                                                              {"entropy", "attention entropy"}};
    const auto it = labels.find(measure);
    return it != labels.end() ? QString::fromLatin1(it->second) : QString::fromStdString(measure);
}

/// The row of `level` with the highest finite rho, or null.
const eval::OutputVsAttention* bestRow(const std::vector<eval::OutputVsAttention>& rows, const std::string& level)
{
    const eval::OutputVsAttention* best = nullptr;
    for (const eval::OutputVsAttention& r : rows)
        if (r.level == level && std::isfinite(r.rho) && (!best || r.rho > best->rho))
            best = &r;
    return best;
}

QString rhoText(const eval::OutputVsAttention& r)
{
    QString t = QStringLiteral("ρ = %1").arg(r.rho, 0, 'f', 2);
    if (std::isfinite(r.low))
        t += QStringLiteral(" [%1, %2]").arg(r.low, 0, 'f', 2).arg(r.high, 0, 'f', 2);
    return t;
}

} // namespace

ModelMapView::ModelMapView(QWidget* parent) : ResultView(parent)
{
    setPointSelectable(false); // every cell is drawn at once
    m_metric = new QComboBox(this);
    for (const MetricInfo& m : kMetrics)
        m_metric->addItem(QString::fromUtf8(m.label), QString::fromLatin1(m.key));
    m_metric->setToolTip(QStringLiteral("The metric each cell shows, over its queries and seeds."));
    m_scheme = new QComboBox(this);
    m_scheme->setToolTip(QStringLiteral("The scheme the map shows."));
    m_versus = new QComboBox(this);
    m_versus->setToolTip(QStringLiteral("Compare with: the map shows log10(metric of the scheme / metric of this "
                                        "one) per cell; none: the metric itself."));
    m_budget = new QComboBox(this);
    m_budget->setToolTip(QStringLiteral("The bit budget n the map shows."));
    addOption(QStringLiteral("Metric:"), m_metric);
    addOption(QStringLiteral("Scheme:"), m_scheme);
    addOption(QStringLiteral("vs:"), m_versus);
    addOption(QStringLiteral("Budget:"), m_budget);
    // The advisor beside the map, on the map's run (a splitter: the author can give the map the room).
    m_advisor = new AdvisorPanel(this);
    auto* split = new QSplitter(Qt::Horizontal, this);
    m_layout->removeWidget(m_plot);
    split->addWidget(m_plot);
    split->addWidget(m_advisor);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setChildrenCollapsible(false);
    m_layout->addWidget(split, 1);
    m_predicts = new QLabel(this);
    m_predicts->setWordWrap(true);
    m_predicts->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_predicts->setToolTip(QStringLiteral("Spearman rho over the map's cells between each attention-level measure and the "
                                          "KLD of the model's next token when only that layer is quantized (the Output "
                                          "tab's attribution), with a 95% bootstrap interval over cells."));
    m_predicts->hide();
    m_layout->addWidget(m_predicts);
    setToolTip(viewDescription());
    m_plot->setHoverProvider([this](const QPointF& pos) {
        int layer = 0, head = 0;
        return cellAt(pos.toPoint(), layer, head) ? cellText(layer, head) : QString();
    });
    connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
        int layer = 0, head = 0;
        if (event->button() == Qt::LeftButton && cellAt(event->pos(), layer, head))
            emit cellActivated(layer, head);
    });
}

QString ModelMapView::viewDescription() const
{
    return QStringLiteral("A model's damage layer by layer and head by head, with each layer's output error when only "
                          "K or only V is quantized; click a cell to study that head in every other view.");
}

QStringList ModelMapView::metricKeys()
{
    QStringList keys;
    for (const MetricInfo& m : kMetrics)
        keys << QString::fromLatin1(m.key);
    return keys;
}

QString ModelMapView::dataCsv() const
{
    // `value` is the metric in `unit` (or, against another scheme, the log10 ratio the map colours);
    // `colour` says what the colour bar shows of it.
    const MetricInfo& m = kMetrics[std::max(0, m_metric->currentIndex())];
    const bool ratio = m_versus->currentData().toInt() >= 0;
    const QString unit = ratio ? QStringLiteral("log10 ratio") : QString::fromUtf8(m.unit);
    const QString colour = ratio || !m.logScale ? QStringLiteral("value") : QStringLiteral("log10 value");
    QString out = QStringLiteral("layer,head,scheme,versus,budget,metric,value,unit,colour\n");
    for (int l = 0; l < m_layers; ++l)
        for (int h = 0; h < m_heads; ++h)
            out += QStringLiteral("%1,%2,%3,%4,%5,%6,%7,%8,%9\n")
                       .arg(l)
                       .arg(h)
                       .arg(m_scheme->currentText(), m_versus->currentText(), m_budget->currentData().toString(),
                            m_metric->currentData().toString())
                       .arg(cellValue(l, h), 0, 'g', 17)
                       .arg(unit, colour);
    return out;
}

QString ModelMapView::colourLabel() const
{
    const MetricInfo& m = kMetrics[std::max(0, m_metric->currentIndex())];
    const QString budget = QStringLiteral("n = %1").arg(m_budget->currentData().toInt());
    if (m_versus->currentData().toInt() >= 0)
        return QStringLiteral("log10 ratio of %1, %2 / %3, %4")
            .arg(QString::fromUtf8(m.quantity), m_scheme->currentText(), m_versus->currentText(), budget);
    return QStringLiteral("%1%2 (%3), %4, %5")
        .arg(m.logScale ? QStringLiteral("log10 ") : QString(), QString::fromUtf8(m.quantity), QString::fromUtf8(m.unit),
             m_scheme->currentText(), budget);
}

std::shared_ptr<const ResultSet> ModelMapView::figureResults() const
{
    return m_mapData.results;
}

QString ModelMapView::noFigureReason() const
{
    if (m_map)
        return QString();
    return data().empty() ? QStringLiteral("no model run yet")
                          : QStringLiteral("not a model run (the map needs regime \"model\" with layers and heads)");
}

void ModelMapView::mousePressEvent(QMouseEvent* event)
{
    ResultView::mousePressEvent(event);
}

bool ModelMapView::cellAt(const QPoint& pos, int& layer, int& head) const
{
    if (!m_map || m_layers == 0)
        return false;
    const double x = m_map->keyAxis()->pixelToCoord(pos.x());
    const double y = m_map->valueAxis()->pixelToCoord(pos.y());
    head = static_cast<int>(std::lround(x));
    layer = static_cast<int>(std::lround(y));
    return m_map->keyAxis()->axisRect()->rect().contains(pos) && head >= 0 && head < m_heads && layer >= 0
           && layer < m_layers;
}

QPoint ModelMapView::cellCenter(int layer, int head) const
{
    if (!m_map || layer < 0 || head < 0 || layer >= m_layers || head >= m_heads)
        return {-1, -1};
    return {static_cast<int>(std::lround(m_map->keyAxis()->coordToPixel(head))),
            static_cast<int>(std::lround(m_map->valueAxis()->coordToPixel(layer)))};
}

double ModelMapView::cellValue(int layer, int head) const
{
    if (layer < 0 || head < 0 || layer >= m_layers || head >= m_heads)
        return kNan;
    return m_values[static_cast<std::size_t>(layer * m_heads + head)];
}

void ModelMapView::activateCell(int layer, int head)
{
    emit cellActivated(layer, head);
}

QString ModelMapView::cellText(int layer, int head) const
{
    if (!m_mapData.modelMap)
        return {};
    const int budget = m_budget->currentData().toInt();
    QString text = QStringLiteral("layer %1, head %2, n = %3").arg(layer).arg(head).arg(budget);
    for (const MapValue& v : *m_mapData.modelMap)
        if (v.layer == layer && v.head == head && v.budget == budget && v.scheme == m_scheme->currentData().toInt()) {
            text += QStringLiteral("\n%1: %2").arg(QString::fromStdString(v.metric)).arg(v.value, 0, 'g', 4);
            if (std::isfinite(v.ciLow))
                text += QStringLiteral(" [%1, %2]").arg(v.ciLow, 0, 'g', 3).arg(v.ciHigh, 0, 'g', 3);
        }
    return text + QStringLiteral("\nclick: study this head in every view");
}

void ModelMapView::setEvaluation(std::shared_ptr<const eval::EvalResult> evaluation)
{
    m_eval = std::move(evaluation);
    redraw();
}

void ModelMapView::judge()
{
    m_judgeNote.clear();
    const std::shared_ptr<const ResultSet> map = m_mapData.modelMap && !m_mapData.modelMap->empty() ? m_mapData.results : nullptr;
    if (!m_eval || !map || m_scheme->count() == 0) {
        m_judgeKey.clear();
        m_rows.clear();
        return;
    }
    const std::string scheme = m_scheme->currentText().toStdString();
    if (m_eval->layers != m_layers) {
        m_judgeNote = QStringLiteral("The Output tab's run is of a model with %1 layers; this map has %2: no end-to-end "
                                     "judgement.")
                          .arg(m_eval->layers)
                          .arg(m_layers);
        m_rows.clear();
        m_judgeKey.clear();
        return;
    }
    bool attributed = false;
    for (const eval::AttributionRow& a : m_eval->attribution)
        attributed = attributed || m_eval->configurations[static_cast<std::size_t>(a.configuration)].name == scheme;
    if (!attributed) {
        m_judgeNote = QStringLiteral("The Output tab's run has no per-layer attribution of %1: add %1 to its schemes "
                                     "(with attribution layers) to judge this map against the output.")
                          .arg(QString::fromStdString(scheme));
        m_rows.clear();
        m_judgeKey.clear();
        return;
    }
    const QString key = QStringLiteral("%1/%2/%3")
                            .arg(reinterpret_cast<quintptr>(map.get()))
                            .arg(reinterpret_cast<quintptr>(m_eval.get()))
                            .arg(QString::fromStdString(scheme));
    if (key == m_judgeKey)
        return;
    m_judgeKey = key;
    m_rows.clear();
    const quint64 id = m_judgeJobs.start();
    using Rows = std::vector<eval::OutputVsAttention>;
    auto* watcher = new QFutureWatcher<Rows>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, id, key] {
        const Rows rows = watcher->result();
        watcher->deleteLater();
        if (!m_judgeJobs.accept(id) || key != m_judgeKey)
            return;
        m_rows = rows;
        redraw(); // the footnote and the line under the map
    });
    const std::shared_ptr<const eval::EvalResult> evaluation = m_eval;
    // The seed of reproduce's map judgement (output_vs_attention.csv) is its claims seed + 80; the
    // window's is fixed, 1000 resamples.
    watcher->setFuture(QtConcurrent::run([map, evaluation, scheme] {
        return eval::outputVsAttention(*map, *evaluation, scheme, 81, 1000);
    }));
}

QString ModelMapView::predictsText() const
{
    if (!m_eval)
        return {};
    if (!m_judgeNote.isEmpty())
        return m_judgeNote;
    if (m_judgeKey.isEmpty())
        return {};
    if (m_rows.empty())
        return judging() ? QStringLiteral("Judging the map against the Output tab's end-to-end attribution…")
                         : QStringLiteral("The map and the Output tab's attribution of %1 share fewer than 3 cells: "
                                          "no judgement.")
                               .arg(m_scheme->currentText());
    QString text;
    for (const char* level : {"layer", "head"}) {
        const eval::OutputVsAttention* best = bestRow(m_rows, level);
        if (!best)
            continue;
        QStringList others;
        for (const eval::OutputVsAttention& r : m_rows)
            if (r.level == level && &r != best)
                others << QStringLiteral("%1 %2").arg(measureLabel(r.measure)).arg(r.rho, 0, 'f', 2);
        text += QStringLiteral("%1<b>%2</b> predicts the output best per %3 (%4, %5 cells)%6. ")
                    .arg(text.isEmpty() ? QString() : QStringLiteral("Per KV head: "))
                    .arg(measureLabel(best->measure), level == std::string("layer") ? QStringLiteral("layer")
                                                                                    : QStringLiteral("KV head"),
                         rhoText(*best))
                    .arg(best->cells)
                    .arg(others.isEmpty() ? QString() : QStringLiteral("; then ") + others.join(QStringLiteral(", ")));
    }
    return QStringLiteral("Against the end-to-end KLD of %1 (Output tab, only one layer quantized): %2")
        .arg(m_scheme->currentText().toHtmlEscaped(), text.trimmed());
}

void ModelMapView::beginPrint(double widthInches)
{
    m_narrowPrint = widthInches < 5.0;
    redraw();
}

void ModelMapView::endPrint()
{
    m_narrowPrint = false;
    redraw();
}

bool ModelMapView::waitUntilDrawn(int timeoutMs)
{
    QElapsedTimer clock;
    clock.start();
    while (judging() && clock.elapsed() < timeoutMs)
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    return !judging();
}

int ModelMapView::drawAttribution(QCPLayoutGrid* row, QCPAxisRect* mapRect, QCPMarginGroup* margins, int budget)
{
    if (!m_eval || m_eval->layers != m_layers || m_narrowPrint)
        return 0;
    const std::string scheme = m_scheme->currentText().toStdString();
    struct Path {
        eval::AttributionPath path;
        const char* name;
        QColor colour;
        QCPScatterStyle::ScatterShape shape;
        double offset;
    };
    const Path paths[] = {{eval::AttributionPath::K, "K", QColor(0xd9, 0x5f, 0x02), QCPScatterStyle::ssCircle, -0.22},
                          {eval::AttributionPath::V, "V", QColor(0x1b, 0x9e, 0x77), QCPScatterStyle::ssSquare, 0.0},
                          {eval::AttributionPath::Both, "both", QColor(0x75, 0x70, 0xb3), QCPScatterStyle::ssDiamond, 0.22}};
    std::vector<const eval::AttributionRow*> rows;
    for (const eval::AttributionRow& a : m_eval->attribution) {
        const eval::ConfigurationResult& c = m_eval->configurations[static_cast<std::size_t>(a.configuration)];
        if (c.name == scheme && c.budget == budget && c.seedIndex == 0 && a.kvHead < 0 && a.kld.mean > 0.0
            && std::isfinite(a.kld.mean))
            rows.push_back(&a);
    }
    if (rows.empty())
        return 0;
    auto* rect = new QCPAxisRect(m_plot);
    row->addElement(0, 2, rect);
    QCPAxis* layerAxis = rect->axis(QCPAxis::atLeft);
    QCPAxis* kldAxis = rect->axis(QCPAxis::atBottom);
    layerAxis->setRange(-0.5, m_layers - 0.5);
    layerAxis->setRangeReversed(true);
    layerAxis->setTicker(mapRect->axis(QCPAxis::atLeft)->ticker());
    layerAxis->setTickLabels(false); // the map's layer labels, on the same rows
    layerAxis->setSubTicks(false);
    layerAxis->grid()->setZeroLinePen(Qt::NoPen);
    PlotWidget::setLogAxis(kldAxis);
    kldAxis->setLabel(QStringLiteral("output KLD\n(nats)"));
    double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
    auto* legend = new QCPLegend;
    rect->insetLayout()->addElement(legend, Qt::AlignTop | Qt::AlignRight);
    legend->setLayer(QStringLiteral("legend"));
    int drawn = 0;
    for (const Path& p : paths) {
        auto* g = new QCPGraph(layerAxis, kldAxis);
        g->setName(QString::fromLatin1(p.name));
        g->setLineStyle(QCPGraph::lsNone);
        g->setPen(QPen(p.colour, 1.2));
        g->setScatterStyle(QCPScatterStyle(p.shape, p.colour, p.colour, 5));
        auto* bars = new QCPErrorBars(layerAxis, kldAxis);
        bars->setPen(QPen(p.colour, 1.0));
        bars->removeFromLegend();
        QVector<double> keys, values, minus, plus;
        for (const eval::AttributionRow* a : rows) {
            if (a->path != p.path)
                continue;
            const double low = std::max(a->kldLow, a->kld.mean * 1e-3); // a log axis has no place for <= 0
            keys << a->layer + p.offset;
            values << a->kld.mean;
            minus << a->kld.mean - low;
            plus << std::max(0.0, a->kldHigh - a->kld.mean);
            lo = std::min(lo, low);
            hi = std::max(hi, std::max(a->kldHigh, a->kld.mean));
        }
        g->setData(keys, values, true);
        bars->setDataPlottable(g);
        bars->setData(minus, plus);
        if (!keys.isEmpty())
            legend->addItem(new QCPPlottableLegendItem(legend, g));
        drawn += static_cast<int>(keys.size());
    }
    // Room on the right, above every point, for the legend in the top corner.
    if (std::isfinite(lo))
        kldAxis->setRange(lo / 1.5, hi * 12.0);
    PlotWidget::tuneLogAxis(kldAxis);
    rect->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
    row->setColumnStretchFactor(0, 2.5);
    row->setColumnStretchFactor(2, 1.3);
    return drawn;
}

QString ModelMapView::emptyText() const
{
    return QString(); // the map draws its own note (what to open) inside the plot
}

void ModelMapView::redraw()
{
    m_plot->resetPlot();
    m_plot->legend->setVisible(false);
    m_map = nullptr;
    m_layers = m_heads = 0;
    m_attributionPoints = 0;
    m_values.clear();
    // A run of one cell of the model already mapped keeps the map (and marks the cell); any other
    // run replaces it.
    const ViewData& now = data();
    const auto fileOf = [](const ViewData& d) {
        return d.results && d.results->spec.regime == "model" && d.results->spec.regimeParams.count("file")
                   ? paramText(d.results->spec.regimeParams, "file")
                   : std::string();
    };
    const bool oneCell = now.results && now.results->spec.regime == "model" && now.results->spec.pointCount() == 1;
    if (oneCell && m_mapData.results && fileOf(now) == fileOf(m_mapData)) {
        m_selectedLayer = static_cast<int>(paramNumber(now.results->spec.regimeParams, "layer"));
        m_selectedHead = static_cast<int>(paramNumber(now.results->spec.regimeParams, "head"));
    } else {
        m_mapData = now;
        m_selectedLayer = m_selectedHead = -1;
    }
    const ViewData& shown = m_mapData;
    m_advisor->setResults(shown.modelMap && !shown.modelMap->empty() ? shown.results : nullptr);
    if (shown.empty() || !shown.modelMap || shown.modelMap->empty()) {
        auto* note = new QCPItemText(m_plot);
        note->position->setType(QCPItemPosition::ptAxisRectRatio);
        note->position->setCoords(0.5, 0.5);
        note->setText(data().empty() ? QStringLiteral("Run a model dump (File → Import, or a spec with regime \"model\")…")
                                     : QStringLiteral("Not a model run: the map needs regime \"model\" with layers "
                                                      "and heads"));
        m_plot->xAxis->setVisible(false);
        m_plot->yAxis->setVisible(false);
        m_plot->replot();
        judge();
        m_predicts->hide();
        return;
    }
    const ResultSet& r = *shown.results;
    const auto& map = *shown.modelMap;
    {
        const QVariant scheme = m_scheme->currentData(), versus = m_versus->currentData(), budget = m_budget->currentData();
        const QSignalBlocker b1(m_scheme), b2(m_versus), b3(m_budget);
        m_scheme->clear();
        m_versus->clear();
        m_versus->addItem(QStringLiteral("none"), -1);
        for (std::size_t i = 0; i < r.schemes.size(); ++i) {
            m_scheme->addItem(QString::fromStdString(r.schemes[i].name), static_cast<int>(i));
            m_versus->addItem(QString::fromStdString(r.schemes[i].name), static_cast<int>(i));
        }
        m_budget->clear();
        for (int n : r.spec.budgets)
            m_budget->addItem(QStringLiteral("n = %1").arg(n), n);
        const int s = m_scheme->findData(scheme), v = m_versus->findData(versus), b = m_budget->findData(budget);
        m_scheme->setCurrentIndex(s >= 0 ? s : 0);
        m_versus->setCurrentIndex(v >= 0 ? v : 0);
        m_budget->setCurrentIndex(b >= 0 ? b : 0);
    }
    const std::string metric = m_metric->currentData().toString().toStdString();
    const int scheme = m_scheme->currentData().toInt(), versus = m_versus->currentData().toInt();
    const int budget = m_budget->currentData().toInt();
    const bool logScale = kMetrics[std::max(0, m_metric->currentIndex())].logScale;
    std::map<std::pair<int, int>, double> value, other;
    std::set<int> layers, heads;
    for (const MapValue& v : map) {
        layers.insert(v.layer);
        heads.insert(v.head);
        if (v.metric != metric || v.budget != budget)
            continue;
        if (v.scheme == scheme)
            value[{v.layer, v.head}] = v.value;
        if (v.scheme == versus)
            other[{v.layer, v.head}] = v.value;
    }
    m_layers = *layers.rbegin() + 1;
    m_heads = *heads.rbegin() + 1;
    m_values.assign(static_cast<std::size_t>(m_layers * m_heads), kNan);
    const bool difference = versus >= 0;
    for (const auto& [cell, v] : value) {
        double shown = v;
        if (difference) {
            const auto it = other.find(cell);
            shown = it != other.end() && it->second > 0.0 && v > 0.0 ? std::log10(v / it->second) : kNan;
        }
        m_values[static_cast<std::size_t>(cell.first * m_heads + cell.second)] = shown;
    }

    auto* rect = m_plot->axisRect();
    // The map, its colour scale and (with an evaluation) the attribution on the map's layer axis
    // share one row of their own, so the footnotes under them span the whole width.
    auto* top = new QCPLayoutGrid;
    m_plot->plotLayout()->take(rect); // leaves its cell (0, 0) empty
    m_plot->plotLayout()->addElement(0, 0, top);
    top->addElement(0, 0, rect);
    m_map = new QCPColorMap(m_plot->xAxis, m_plot->yAxis);
    m_map->data()->setSize(m_heads, m_layers);
    m_map->data()->setRange(QCPRange(0, m_heads - 1), QCPRange(0, m_layers - 1));
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (int l = 0; l < m_layers; ++l)
        for (int h = 0; h < m_heads; ++h) {
            const double v = cellValue(l, h);
            const bool useLog = logScale && !difference;
            const double shown = useLog ? (v > 0.0 ? std::log10(v) : kNan) : v;
            m_map->data()->setCell(h, l, shown);
            if (std::isfinite(shown)) {
                lo = std::min(lo, shown);
                hi = std::max(hi, shown);
            }
        }
    // Cells the colours cannot show: a log scale has no place for 0 (V-only's KL: a value error
    // never moves the weights), and a ratio none for a cell where either scheme is 0.
    int zeros = 0, blank = 0;
    for (int l = 0; l < m_layers; ++l)
        for (int h = 0; h < m_heads; ++h) {
            const double v = cellValue(l, h);
            const auto it = value.find({l, h});
            if (it == value.end())
                continue;
            if (!std::isfinite(v) || (logScale && !difference && !(v > 0.0))) {
                ++blank;
                zeros += it->second == 0.0 ? 1 : 0;
            }
        }
    m_map->setInterpolate(false);
    m_map->setName(QString::fromStdString(r.schemes[static_cast<std::size_t>(scheme)].name));
    auto* scale = new QCPColorScale(m_plot);
    top->addElement(0, 1, scale);
    scale->setType(QCPAxis::atRight);
    m_map->setColorScale(scale);
    if (difference) {
        const double m = std::max({std::abs(lo), std::abs(hi), 1e-3});
        m_map->setGradient(diverging());
        m_map->setDataRange(QCPRange(-m, m));
    } else {
        m_map->setGradient(viridis());
        m_map->setDataRange(std::isfinite(lo) ? QCPRange(lo, hi > lo ? hi : lo + 1e-9) : QCPRange(0, 1));
    }
    scale->axis()->setLabel(colourLabel());
    auto* margins = new QCPMarginGroup(m_plot);
    rect->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
    scale->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
    m_plot->xAxis->setLabel(QStringLiteral("query head"));
    m_plot->yAxis->setLabel(QStringLiteral("layer"));
    m_plot->xAxis->setRange(-0.5, m_heads - 0.5);
    m_plot->yAxis->setRange(-0.5, m_layers - 0.5);
    m_plot->yAxis->setRangeReversed(true); // layer 0 on top, as models are drawn
    for (QCPAxis* axis : {m_plot->xAxis, m_plot->yAxis}) {
        QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
        ticker->setTickStep(std::max(1, (axis == m_plot->xAxis ? m_heads : m_layers) / 8));
        ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
        axis->setTicker(ticker);
    }

    // Below: per layer, the output error with only K and only V quantized at this budget.
    if (m_selectedLayer >= 0) {
        // The window's mark of the cell being studied: on the UI layer, which no export draws.
        auto* mark = new QCPItemRect(m_plot);
        mark->setLayer(m_plot->uiLayer());
        mark->topLeft->setCoords(m_selectedHead - 0.5, m_selectedLayer - 0.5);
        mark->bottomRight->setCoords(m_selectedHead + 0.5, m_selectedLayer + 0.5);
        mark->setPen(QPen(Qt::red, 2.0));
        mark->setBrush(Qt::NoBrush);
    }
    if (shown.sensitivity && !shown.sensitivity->empty()) {
        auto* below = new QCPAxisRect(m_plot);
        m_plot->plotLayout()->addElement(1, 0, below);
        auto* k = m_plot->addLineSeries(QStringLiteral("only K quantized"), QColor(0xd9, 0x5f, 0x02),
                                        QCPScatterStyle::ssCircle, Qt::SolidLine, below);
        auto* v = m_plot->addLineSeries(QStringLiteral("only V quantized"), QColor(0x1b, 0x9e, 0x77),
                                        QCPScatterStyle::ssSquare, Qt::DashLine, below);
        double yMin = std::numeric_limits<double>::infinity(), yMax = 0.0;
        for (const SensitivityRow& s : *shown.sensitivity) {
            if (s.budget != budget)
                continue;
            if (s.kOnlyRelMseT > 0)
                k->addData(s.layer, s.kOnlyRelMseT);
            if (s.vOnlyRelMseT > 0)
                v->addData(s.layer, s.vOnlyRelMseT);
            for (double y : {s.kOnlyRelMseT, s.vOnlyRelMseT})
                if (y > 0) {
                    yMin = std::min(yMin, y);
                    yMax = std::max(yMax, y);
                }
        }
        below->axis(QCPAxis::atBottom)->setLabel(QStringLiteral("layer"));
        below->axis(QCPAxis::atLeft)->setLabel(QStringLiteral("output rel. error"));
        PlotWidget::setLogAxis(below->axis(QCPAxis::atLeft));
        if (std::isfinite(yMin))
            below->axis(QCPAxis::atLeft)->setRange(yMin / 2, yMax * 2);
        PlotWidget::tuneLogAxis(below->axis(QCPAxis::atLeft));
        below->axis(QCPAxis::atBottom)->setRange(-0.5, m_layers - 0.5);
        QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
        ticker->setTickStep(std::max(1, m_layers / 8));
        ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
        below->axis(QCPAxis::atBottom)->setTicker(ticker);
        below->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
        rect->setMarginGroup(QCP::msLeft | QCP::msRight | QCP::msBottom | QCP::msTop, margins);
        m_plot->plotLayout()->setRowStretchFactor(0, 2.0);
        m_plot->plotLayout()->setRowStretchFactor(1, 1.0);
        auto* legend = new QCPLegend;
        below->insetLayout()->addElement(legend, Qt::AlignTop | Qt::AlignRight);
        legend->setLayer(QStringLiteral("legend"));
        legend->addItem(new QCPPlottableLegendItem(legend, k));
        legend->addItem(new QCPPlottableLegendItem(legend, v));
    }
    m_attributionPoints = drawAttribution(top, rect, margins, budget);
    judge();
    if (const eval::OutputVsAttention* best = bestRow(m_rows, "layer"))
        m_plot->addFootnote(
            (m_attributionPoints > 0 ? QStringLiteral("Right: the next token's KLD with one layer's K, V or both quantized "
                                                      "(95% intervals); %1 predicts it best per layer, %2, %3 cells")
                                     : QStringLiteral("Output tab, one layer quantized (drawn at 7 in): %1 "
                                                      "predicts it best per layer, %2, %3 cells"))
                .arg(measureLabel(best->measure), rhoText(*best))
                .arg(best->cells));
    if (blank > 0)
        m_plot->addFootnote(zeros == blank
                                ? QStringLiteral("%1 of %2 cells uncoloured: %3 = 0 exactly there (no place on a log scale)")
                                      .arg(blank)
                                      .arg(m_layers * m_heads)
                                      .arg(QString::fromUtf8(kMetrics[std::max(0, m_metric->currentIndex())].quantity))
                                : QStringLiteral("%1 of %2 cells uncoloured: no finite value (0 or missing)")
                                      .arg(blank)
                                      .arg(m_layers * m_heads));
    // One style for everything drawn (the sensitivity panel's legend too), live and in exports.
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot();
    const QString predicts = predictsText();
    m_predicts->setText(predicts);
    m_predicts->setVisible(!predicts.isEmpty());
}

} // namespace kvlens::widgets
