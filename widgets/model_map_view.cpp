// SPDX-License-Identifier: GPL-3.0-or-later
// Model map view.
#include "widgets/model_map_view.h"

#include "widgets/advisor_panel.h"
#include "widgets/figures/model_map_figure.h"

#include <QSplitter>

#include <QComboBox>
#include <QLabel>
#include <QSignalBlocker>

#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace kvlens::widgets {


ModelMapView::ModelMapView(QWidget* parent) : ResultView(parent)
{
    setPointSelectable(false); // every cell is drawn at once
    m_metric = new QComboBox(this);
    for (const ModelMapMetric& m : modelMapMetrics())
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
    for (const ModelMapMetric& m : modelMapMetrics())
        keys << QString::fromLatin1(m.key);
    return keys;
}

QString ModelMapView::dataCsv() const
{
    // `value` is the metric in `unit` (or, against another scheme, the log10 ratio the map colours);
    // `colour` says what the colour bar shows of it.
    const ModelMapMetric& m = modelMapMetrics()[static_cast<std::size_t>(std::max(0, m_metric->currentIndex()))];
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
    return m_mapData.results ? modelMapColourLabel(*m_mapData.results, choice()) : QString();
}

ModelMapChoice ModelMapView::choice() const
{
    ModelMapChoice c;
    c.metric = std::max(0, m_metric->currentIndex());
    c.scheme = m_scheme->currentData().toInt();
    c.versus = m_versus->count() > 0 ? m_versus->currentData().toInt() : -1;
    c.budget = m_budget->currentData().toInt();
    c.selectedLayer = m_selectedLayer;
    c.selectedHead = m_selectedHead;
    c.withAttribution = !m_narrowPrint;
    return c;
}

std::shared_ptr<const ResultSet> ModelMapView::figureResults() const
{
    return m_mapData.results;
}

QString ModelMapView::noFigureReason() const
{
    if (m_hasMap)
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
    QCPAxisRect* rect = figurePanel(0);
    if (!m_hasMap || m_layers == 0 || !rect)
        return false;
    const double x = rect->axis(QCPAxis::atBottom)->pixelToCoord(pos.x());
    const double y = rect->axis(QCPAxis::atLeft)->pixelToCoord(pos.y());
    head = static_cast<int>(std::lround(x));
    layer = static_cast<int>(std::lround(y));
    return rect->rect().contains(pos) && head >= 0 && head < m_heads && layer >= 0 && layer < m_layers;
}

QPoint ModelMapView::cellCenter(int layer, int head) const
{
    QCPAxisRect* rect = figurePanel(0);
    if (!m_hasMap || !rect || layer < 0 || head < 0 || layer >= m_layers || head >= m_heads)
        return {-1, -1};
    return {static_cast<int>(std::lround(rect->axis(QCPAxis::atBottom)->coordToPixel(head))),
            static_cast<int>(std::lround(rect->axis(QCPAxis::atLeft)->coordToPixel(layer)))};
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
    const std::shared_ptr<const eval::EvalResult> evaluation = m_eval;
    // The seed of reproduce's map judgement (output_vs_attention.csv) is its claims seed + 80; the
    // window's is fixed, 1000 resamples.
    m_judgeJobs.start(
        [map, evaluation, scheme](const JobContext<>&) { return eval::outputVsAttention(*map, *evaluation, scheme, 81, 1000); },
        [this, key](std::vector<eval::OutputVsAttention> rows) {
            if (key != m_judgeKey)
                return;
            m_rows = std::move(rows);
            redraw(); // the footnote and the line under the map
        });
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
        const eval::OutputVsAttention* best = bestJudgement(m_rows, level);
        if (!best)
            continue;
        QStringList others;
        for (const eval::OutputVsAttention& r : m_rows)
            if (r.level == level && &r != best)
                others << QStringLiteral("%1 %2").arg(modelMapMeasureLabel(r.measure)).arg(r.rho, 0, 'f', 2);
        text += QStringLiteral("%1<b>%2</b> predicts the output best per %3 (%4, %5 cells)%6. ")
                    .arg(text.isEmpty() ? QString() : QStringLiteral("Per KV head: "))
                    .arg(modelMapMeasureLabel(best->measure), level == std::string("layer") ? QStringLiteral("layer")
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
    return m_judgeJobs.wait(timeoutMs);
}

QString ModelMapView::emptyText() const
{
    return QString(); // the map draws its own note (what to open) inside the plot
}

void ModelMapView::redraw()
{
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
    const bool hasMap = !shown.empty() && shown.modelMap && !shown.modelMap->empty();
    m_advisor->setResults(hasMap ? shown.results : nullptr);
    m_layers = m_heads = 0;
    if (hasMap) {
        refreshChoices(*shown.results);
        for (const MapValue& v : *shown.modelMap)
            m_layers = std::max(m_layers, v.layer + 1);
    }
    judge();
    ModelMapFigure f = modelMapFigure(shown, !data().empty(), choice(), m_eval.get(), m_rows);
    m_hasMap = f.hasMap;
    m_layers = f.layers;
    m_heads = f.heads;
    m_values = std::move(f.values);
    m_attributionPoints = f.attributionPoints;
    showFigure(std::move(f.figure));
    const QString predicts = hasMap ? predictsText() : QString();
    m_predicts->setText(predicts);
    m_predicts->setVisible(!predicts.isEmpty());
}

void ModelMapView::refreshChoices(const ResultSet& r)
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

} // namespace kvlens::widgets
