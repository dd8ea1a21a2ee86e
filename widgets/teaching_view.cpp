// SPDX-License-Identifier: GPL-3.0-or-later
// Teaching view: controls, the staged six-panel figure, and the background computation with stale-result dropping.
#include "widgets/teaching_view.h"

#include <QComboBox>
#include <QEventLoop>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvlens::widgets {

namespace {

constexpr int kDebounceMs = 120;

const char* const kStageNames[] = {"1 · Score noise", "2 · Softmax", "3 · KL", "4 · Output"};

// Short: at single-column export width each panel is barely over an inch wide.
const char* const kPanelTitles[] = {"score error δs", "top-10 weights", "weight inflation", "KL divergence",
                                    "output error", "values vs keys"};

/// Rows of the metrics table: label, one-sentence tooltip, and the stage that reveals the row.
struct MetricRow {
    const char* label;
    const char* tooltip;
    int stage;
};
const MetricRow kMetrics[] = {
    {"Var δs (σ²)", "Variance over the tokens of the score error δs_j = ŝ_j − s_j that the key path's estimator "
                   "makes for this query.", 0},
    {"Jensen exp(σ²/2)", "The factor by which zero-mean Gaussian score noise of variance σ² inflates the average "
                         "unnormalized weight exp(s_j), by Jensen's inequality.", 1},
    {"measured inflation", "The measured mean over tokens of exp(δs_j − mean δs): how much this noise actually "
                           "inflated the unnormalized weights (the common shift, which softmax ignores, removed).", 1},
    {"KL (nats)", "KL(p‖p̂): how much information the quantized attention p̂ loses about the exact attention p for this "
                      "query.", 2},
    {"output error", "Relative error ‖o − ô‖/‖o‖ of the attention output o = Σ p_j v_j with keys and values both "
                     "quantized.", 3},
    {"  key path only", "Output error with exact values but the quantized weights p̂: the key path's share.", 3},
    {"  value path only", "Output error with the exact weights p but quantized values: the value path's share.", 3},
    {"bits K / V", "Stored bits per coordinate of the key and of the value cache at this budget, overheads "
                   "included.", 0},
};

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
void categoryTicks(QCPAxis* axis, const QStringList& names)
{
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    for (int i = 0; i < names.size(); ++i)
        ticker->addTick(i + 1, names[i]);
    axis->setTicker(ticker);
    axis->setRange(0.4, names.size() + 0.6);
    axis->grid()->setVisible(false);
}

QCPBars* addBars(PlotWidget* plot, QCPAxisRect* rect, const QString& name, const QColor& color, double width)
{
    auto* bars = new QCPBars(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    bars->setName(name);
    bars->setPen(QPen(color.darker(130), 0));
    bars->setBrush(withAlpha(color, 200));
    bars->setWidth(width);
    plot->markSeries(bars);
    return bars;
}

} // namespace

TeachingView::TeachingView(QWidget* parent)
    : ResultView(parent)
{
    setPointSelectable(false);
    // Each panel has its own legend, filled by redraw().
    m_plot->setAutoAddPlottableToLegend(false);

    m_budget = new QSlider(Qt::Horizontal, this);
    m_budget->setRange(2, 4);
    m_budget->setValue(3);
    m_budget->setPageStep(1);
    m_budget->setTickPosition(QSlider::TicksBelow);
    m_budget->setFixedWidth(80);
    m_budget->setToolTip(QStringLiteral("Bit budget n per coordinate: KQV stores n-bit keys, QKQV (n−1)-bit keys plus a "
                                        "1-bit QJL sketch of the residual; both store (n−1)-bit values plus QJL."));
    m_budgetLabel = new QLabel(this);
    m_scale = new QSlider(Qt::Horizontal, this);
    m_scale->setRange(1, 16);
    m_scale->setValue(8);
    m_scale->setPageStep(2);
    m_scale->setFixedWidth(120);
    m_scale->setToolTip(QStringLiteral("Score scale c: queries are multiplied by c, so the gaussian scores have standard "
                                       "deviation c and attention gets more peaked as c grows."));
    m_scaleLabel = new QLabel(this);
    m_seed = new QSpinBox(this);
    m_seed->setRange(1, 999999);
    m_seed->setValue(1);
    m_seed->setToolTip(QStringLiteral("Seed of the keys, values, query, WHT signs, QJL sketches and the value-path noise."));
    m_back = new QPushButton(QStringLiteral("◂ Back"), this);
    m_back->setToolTip(QStringLiteral("Hide the last stage of the chain."));
    m_next = new QPushButton(QStringLiteral("Next ▸"), this);
    m_next->setToolTip(QStringLiteral("Reveal the next stage of the chain: score noise → softmax → KL → output."));
    m_stageBox = new QComboBox(this);
    for (const char* name : kStageNames)
        m_stageBox->addItem(QString::fromUtf8(name));
    m_stageBox->setToolTip(QStringLiteral("Stages of the chain shown so far."));
    addOption(QStringLiteral("Budget:"), m_budget);
    addOption(QString(), m_budgetLabel);
    addOption(QStringLiteral("Score scale:"), m_scale);
    addOption(QString(), m_scaleLabel);
    addOption(QStringLiteral("Seed:"), m_seed);
    addOption(QString(), m_back);
    addOption(QStringLiteral("Stage:"), m_stageBox);
    addOption(QString(), m_next);

    m_caption = new QLabel(this);
    m_caption->setWordWrap(true);
    m_caption->setToolTip(QStringLiteral("What this stage of the chain shows, in two sentences."));
    m_caption->setMinimumHeight(m_caption->fontMetrics().lineSpacing() * 3);
    m_status = new QLabel(this);
    m_status->setToolTip(QStringLiteral("N_eff = 1/Σp_j² is the number of tokens the exact attention effectively reads; "
                                        "H(p) its entropy in nats; the slopes are the log-log slopes of the value-path "
                                        "panel (theory: −1/2 for values, about 0 for keys)."));
    m_table = new QTableWidget(static_cast<int>(std::size(kMetrics)), 2, this);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    for (int r = 0; r < m_table->rowCount(); ++r) {
        auto* item = new QTableWidgetItem(QString::fromUtf8(kMetrics[r].label));
        item->setToolTip(QString::fromUtf8(kMetrics[r].tooltip));
        m_table->setVerticalHeaderItem(r, item);
    }
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

    m_layout->removeWidget(m_plot);
    m_layout->addWidget(m_caption);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(m_plot);
    split->addWidget(m_table);
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 1);
    m_layout->addWidget(split, 1);
    m_layout->addWidget(m_status);
    setToolTip(viewDescription());

    m_debounce.setSingleShot(true);
    m_debounce.setInterval(kDebounceMs);
    connect(&m_debounce, &QTimer::timeout, this, &TeachingView::startCompute);
    for (QSlider* s : {m_budget, m_scale})
        connect(s, &QSlider::valueChanged, this, [this] {
            updateLabels();
            scheduleCompute();
        });
    connect(m_seed, &QSpinBox::valueChanged, this, &TeachingView::scheduleCompute);
    connect(m_back, &QPushButton::clicked, this, [this] { setStage(m_stage - 1); });
    connect(m_next, &QPushButton::clicked, this, [this] { setStage(m_stage + 1); });
    connect(m_stageBox, &QComboBox::currentIndexChanged, this, [this](int i) { setStage(i); });

    setStage(ScoreNoise);
    startCompute();
}

TeachingView::~TeachingView()
{
    // The running computation owns copies of its inputs; the flag only makes it stop early.
    m_jobs.cancel();
}

QString TeachingView::emptyText() const
{
    return QString(); // draws its own one-query example, with or without a run
}

QString TeachingView::viewDescription() const
{
    return QStringLiteral("One query under KQV and QKQV: key-path score noise, inflated by softmax (Jensen), costs KL "
                          "that does not average away, while the same noise on values shrinks like 1/√N_eff.");
}

QStringList TeachingView::stageCaptions()
{
    return {
        QStringLiteral("Quantizing the keys perturbs every score s_j = q·k_j/√d by an error δs_j of mean about zero; "
                       "the histograms show those errors for this query under KQV (n-bit keys) and QKQV ((n−1)-bit "
                       "keys + 1-bit QJL). QJL's estimate is unbiased, but its variance (in the legend) is several "
                       "times larger, about 2π at the same budget."),
        QStringLiteral("Softmax exponentiates the scores, so each unnormalized weight is multiplied by exp(δs_j), and "
                       "because exp is convex that factor averages exp(σ²/2) > 1 although δs has mean zero (Jensen). "
                       "The bars set the top tokens' exact weights p beside the quantized ones, and the measured "
                       "mean inflation beside Jensen's prediction."),
        QStringLiteral("The KL divergence of the quantized attention from the exact one is the information it "
                       "loses; for small noise it is about half the p-weighted variance of δs. It grows with σ², so "
                       "the noisier key path pays in KL however unbiased its estimator is."),
        QStringLiteral("The output o = Σ p_j v_j takes the wrong weights from the key path and the value errors from "
                       "the value path; both schemes store values alike, so their gap is the keys' doing. On the "
                       "right, the same relative noise put on values shrinks like 1/√N_eff as more tokens share the "
                       "read-out, while the attention mass that noise on keys moves stays put."),
    };
}

QString TeachingView::caption() const
{
    return stageCaptions().value(m_stage);
}

int TeachingView::panelStage(Panel panel)
{
    switch (panel) {
    case ScoreHistogram: return ScoreNoise;
    case TopWeights:
    case Jensen: return Softmax;
    case KlPanel: return Kl;
    case OutputPanel:
    case ValuePath: return Output;
    case PanelCount: break;
    }
    return StageCount;
}

void TeachingView::setStage(int stage)
{
    stage = std::clamp(stage, 0, StageCount - 1);
    const bool changed = stage != m_stage || m_caption->text().isEmpty();
    m_stage = stage;
    {
        const QSignalBlocker block(m_stageBox);
        m_stageBox->setCurrentIndex(stage);
    }
    m_back->setEnabled(stage > 0);
    m_next->setEnabled(stage < StageCount - 1);
    m_caption->setText(QStringLiteral("<b>%1.</b> %2").arg(QString::fromUtf8(kStageNames[stage]).mid(4), caption()));
    for (int r = 0; r < m_table->rowCount(); ++r)
        m_table->setRowHidden(r, kMetrics[r].stage > stage);
    if (changed)
        redraw();
}

TeachingConfig TeachingView::config() const
{
    TeachingConfig c = m_base;
    c.budget = m_budget->value();
    if (m_scale->value() != m_baseScalePosition)
        c.scoreScale = scaleAt(m_scale->value());
    c.seed = static_cast<std::uint64_t>(m_seed->value());
    return c;
}

void TeachingView::setRunConfig(const TeachingConfig& base)
{
    m_base = base;
    const QSignalBlocker blockBudget(m_budget), blockScale(m_scale), blockSeed(m_seed);
    m_budget->setRange(std::min(2, base.budget), std::max(4, base.budget));
    m_budget->setValue(base.budget);
    m_baseScalePosition = std::clamp(static_cast<int>(std::lround(base.scoreScale / 0.25)), m_scale->minimum(),
                                     m_scale->maximum());
    m_scale->setValue(m_baseScalePosition);
    const int seed = static_cast<int>(std::min<std::uint64_t>(base.seed, std::numeric_limits<int>::max()));
    m_seed->setRange(1, std::max(999999, seed));
    m_seed->setValue(seed);
    updateLabels();
    startCompute();
}

bool TeachingView::isComputing() const
{
    return m_debounce.isActive() || !m_jobs.settled();
}

void TeachingView::scheduleCompute()
{
    // A newer request makes the running one pointless: stop it now, start the new one after the debounce.
    m_jobs.cancel();
    m_debounce.start();
    updateLabels();
}

void TeachingView::startCompute()
{
    m_debounce.stop();
    const quint64 id = m_jobs.start(); // cancels the running one
    const TeachingConfig cfg = config();
    auto cancel = m_jobs.cancelFlag();
    auto* watcher = new QFutureWatcher<TeachingOutcome>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher] {
        if (m_watcher == watcher)
            m_watcher = nullptr;
        accept(watcher->result());
        watcher->deleteLater();
    });
    m_watcher = watcher;
    // Numerics on the global thread pool, never on the GUI thread.
    watcher->setFuture(QtConcurrent::run([cfg, cancel, id] {
        TeachingOutcome out;
        out.request = id;
        auto r = computeTeaching(cfg, cancel.get());
        if (r)
            out.result = std::make_shared<const TeachingResult>(std::move(r).value());
        else
            out.error = QString::fromStdString(r.error().text());
        return out;
    }));
    updateLabels();
}

void TeachingView::accept(const TeachingOutcome& outcome)
{
    // Stale (an older request, or one already drawn by waitUntilDrawn): drop it.
    if (!m_jobs.accept(outcome.request))
        return;
    m_error = outcome.error;
    if (outcome.result)
        m_result = outcome.result;
    redraw();
    fillTable();
    updateLabels();
    emit computed(outcome.request);
}

bool TeachingView::waitUntilDrawn(int timeoutMs)
{
    if (m_debounce.isActive())
        startCompute();
    if (m_jobs.settled())
        return true;
    if (!m_watcher)
        return false;
    // The computation runs on a pool thread; this thread sleeps in an event loop until the
    // watcher reports (its handler draws the result) or the time is up. No polling.
    QFutureWatcher<TeachingOutcome>* watcher = m_watcher;
    if (!watcher->isFinished()) {
        QEventLoop loop;
        QTimer timeout;
        timeout.setSingleShot(true);
        connect(watcher, &QFutureWatcherBase::finished, &loop, &QEventLoop::quit);
        connect(&timeout, &QTimer::timeout, &loop, &QEventLoop::quit);
        timeout.start(timeoutMs);
        loop.exec(QEventLoop::ExcludeUserInputEvents);
    }
    if (!m_jobs.settled() && watcher == m_watcher && watcher->isFinished())
        accept(watcher->result());
    return m_jobs.settled();
}

void TeachingView::updateLabels()
{
    m_budgetLabel->setText(QStringLiteral("n = %1").arg(m_budget->value()));
    m_scaleLabel->setText(QStringLiteral("c = %1").arg(scaleAt(m_scale->value()), 0, 'f', 2));
    if (isComputing()) {
        m_status->setText(QStringLiteral("computing…"));
        return;
    }
    if (!m_error.isEmpty()) {
        m_status->setText(m_error);
        return;
    }
    if (!m_result)
        return;
    const TeachingResult& r = *m_result;
    m_status->setText(QStringLiteral("%10, d = %1, N = %2, seed %3 · N_eff = %4 · H(p) = %5 nats · value-path "
                                     "panel: noise η = %6 (score noise sd %7), slopes: values %8, keys %9")
                          .arg(r.config.d)
                          .arg(r.config.tokens)
                          .arg(r.config.seed)
                          .arg(r.effectiveTokens, 0, 'f', 1)
                          .arg(r.entropy, 0, 'f', 2)
                          .arg(r.valuePath.config.noiseLevel, 0, 'f', 3)
                          .arg(r.valuePath.scoreNoiseStd, 0, 'f', 3)
                          .arg(r.valuePath.valueSlope, 0, 'f', 2)
                          .arg(r.valuePath.keySlope, 0, 'f', 2)
                          .arg(QString::fromStdString(r.config.regime)));
}

void TeachingView::fillTable()
{
    if (!m_result)
        return;
    for (int c = 0; c < 2; ++c) {
        const TeachingScheme& t = m_result->schemes[static_cast<std::size_t>(c)];
        auto* header = new QTableWidgetItem(QString::fromStdString(t.name));
        header->setForeground(seriesColor(c));
        m_table->setHorizontalHeaderItem(c, header);
        const ScoreNoiseChain& k = t.chain;
        const QString values[] = {fmt(k.varianceDeltaS),    fmt(k.jensenFactor, 6),
                                  fmt(k.measuredInflation, 6), fmt(k.kl),
                                  fmt(k.outputError),       fmt(k.keyOutputError),
                                  fmt(k.valueOutputError),  QStringLiteral("%1 / %2").arg(fmt(t.keyBits, 3), fmt(t.valueBits, 3))};
        for (int r = 0; r < m_table->rowCount(); ++r) {
            auto* item = new QTableWidgetItem(values[r]);
            item->setToolTip(QString::fromUtf8(kMetrics[r].tooltip));
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_table->setItem(r, c, item);
        }
    }
    // Wide enough for every number: the splitter would otherwise squeeze the table.
    m_table->resizeColumnsToContents();
    m_table->setMinimumWidth(m_table->verticalHeader()->sizeHint().width() + m_table->columnWidth(0)
                             + m_table->columnWidth(1) + 2 * m_table->frameWidth() + 4);
}

QCPAxisRect* TeachingView::panelRect(Panel panel) const
{
    return m_panels.value(panel, nullptr);
}

int TeachingView::panelPointCount(Panel panel) const
{
    QCPAxisRect* rect = panelRect(panel);
    if (!rect)
        return 0;
    int points = 0;
    for (QCPAbstractPlottable* p : rect->plottables())
        if (p->visible() && p->interface1D())
            points += p->interface1D()->dataCount();
    return points;
}

QString TeachingView::dataCsv() const
{
    return m_result ? QString::fromStdString(teachingCsv(*m_result)) : QString();
}

void TeachingView::beginPrint(double widthInches)
{
    m_printInches = widthInches;
    redraw();
}

void TeachingView::endPrint()
{
    m_printInches = 0.0;
    redraw();
}

double TeachingView::printAspect(double widthInches) const
{
    // Two columns of three rows at a single column; three of two, with legends under them, beyond.
    return widthInches < kWidePrintInches ? 1.45 : 0.85;
}

void TeachingView::redraw()
{
    m_plot->resetPlot();
    QCPLayoutGrid* grid = m_plot->plotLayout();
    // Three panels a row; at a single column two, in three rows (printAspect gives the height).
    const bool narrow = m_printInches > 0.0 && m_printInches < kWidePrintInches;
    const int columns = narrow ? 2 : 3;
    m_panels.clear();
    m_panels << m_plot->axisRect();
    grid->take(m_plot->axisRect());
    grid->simplify();
    m_panels.first()->insetLayout()->take(m_plot->legend);
    m_panels.first()->insetLayout()->simplify();
    for (int i = 1; i < PanelCount; ++i)
        m_panels << new QCPAxisRect(m_plot);
    // Each cell: the panel, and its legend under it (outside the data, where it cannot cover bars
    // or another legend).
    QVector<QCPLegend*> legends;
    for (int i = 0; i < PanelCount; ++i) {
        auto* cell = new QCPLayoutGrid;
        grid->addElement(i / columns, i % columns, cell);
        cell->addElement(0, 0, m_panels[i]);
        QCPLegend* legend = i == 0 ? m_plot->legend : new QCPLegend;
        legend->setBorderPen(Qt::NoPen);
        legend->setBrush(Qt::NoBrush);
        legend->setFillOrder(QCPLayoutGrid::foColumnsFirst); // one entry a row
        legend->setWrap(1);
        legend->setVisible(true);
        cell->addElement(1, 0, legend); // gives the legend its plot, then its layer
        legend->setLayer(QStringLiteral("legend"));
        cell->setRowStretchFactor(1, 0.001);
        cell->setRowSpacing(0);
        legends << legend;
    }
    // An empty legend's largest size is its margins, which would squeeze its whole column to a
    // sliver: out of the layout with it (the main one back into its panel's inset, hidden).
    auto dropEmptyLegends = [&] {
        for (int i = 0; i < PanelCount; ++i) {
            QCPLegend* legend = legends[i];
            if (legend->itemCount() > 0)
                continue;
            auto* cell = static_cast<QCPLayoutGrid*>(legend->layout());
            if (legend == m_plot->legend) {
                cell->take(legend);
                m_panels[i]->insetLayout()->addElement(legend, Qt::AlignTop | Qt::AlignRight);
                legend->setVisible(false);
            } else {
                cell->remove(legend);
            }
            cell->simplify();
        }
    };
    for (int i = 0; i < PanelCount; ++i) {
        // The top axis carries the panel title.
        QCPAxis* top = m_panels[i]->axis(QCPAxis::atTop);
        top->setVisible(true);
        top->setTicks(false);
        top->setTickLabels(false);
        top->setLabel(QString::fromUtf8(kPanelTitles[i]));
    }
    auto placeholder = [this](QCPAxisRect* rect, const QString& text) {
        auto* label = new QCPItemText(m_plot);
        label->setClipToAxisRect(false);
        label->position->setType(QCPItemPosition::ptAxisRectRatio);
        label->position->setAxisRect(rect);
        label->position->setCoords(0.5, 0.5);
        label->setText(text);
        label->setColor(QColor(0x77, 0x77, 0x77));
    };
    const std::array<QColor, 2> schemeColor = {seriesColor(0), seriesColor(1)};

    if (!m_result) {
        for (QCPAxisRect* rect : m_panels)
            placeholder(rect, m_error.isEmpty() ? QStringLiteral("computing…") : m_error);
        dropEmptyLegends();
        m_plot->applyPaperStyle(m_plot->font().pointSizeF());
        m_plot->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const TeachingResult& r = *m_result;
    QStringList schemeNames;
    for (const TeachingScheme& t : r.schemes)
        schemeNames << QString::fromStdString(t.name);

    for (int i = 0; i < PanelCount; ++i) {
        const auto panel = static_cast<Panel>(i);
        QCPAxisRect* rect = m_panels[i];
        QCPAxis* x = rect->axis(QCPAxis::atBottom);
        QCPAxis* y = rect->axis(QCPAxis::atLeft);
        if (panelStage(panel) > m_stage) {
            x->setTickLabels(false);
            y->setTickLabels(false);
            placeholder(rect, QStringLiteral("Next ▸ reveals stage %1").arg(panelStage(panel) + 1));
            continue;
        }
        switch (panel) {
        case ScoreHistogram: {
            x->setLabel(QStringLiteral("δs (score units)"));
            y->setLabel(QStringLiteral("density"));
            QVector<double> centres;
            for (std::size_t b = 0; b + 1 < r.binEdges.size(); ++b)
                centres << 0.5 * (r.binEdges[b] + r.binEdges[b + 1]);
            for (int s = 0; s < 2; ++s) {
                const TeachingScheme& t = r.schemes[static_cast<std::size_t>(s)];
                QCPGraph* g = m_plot->addLineSeries(
                    QStringLiteral("%1: Var δs = %2").arg(schemeNames[s], fmt(t.chain.varianceDeltaS, 3)),
                    schemeColor[static_cast<std::size_t>(s)], QCPScatterStyle::ssNone, Qt::SolidLine, rect);
                g->setLineStyle(QCPGraph::lsStepCenter);
                g->setBrush(withAlpha(schemeColor[static_cast<std::size_t>(s)], 50));
                g->setData(centres, QVector<double>(t.histogram.begin(), t.histogram.end()));
            }
            rect->axis(QCPAxis::atBottom)->rescale();
            y->rescale();
            y->setRangeLower(0.0);
            y->setRangeUpper(y->range().upper * 1.1);
            break;
        }
        case TopWeights: {
            x->setLabel(QStringLiteral("token (rank by p)"));
            y->setLabel(QStringLiteral("weight"));
            QStringList tokens;
            QVector<double> keys, p;
            for (std::size_t k = 0; k < r.topTokens.size(); ++k) {
                // Every rank live; in print ranks 1, 5, 10, ... (ten labels crowd a panel a third of a page wide).
                const bool labelled = m_printInches <= 0.0 || k == 0 || (k + 1) % 5 == 0;
                tokens << (labelled ? QString::number(k + 1) : QString());
                keys << static_cast<double>(k + 1);
                p << r.probs[static_cast<std::size_t>(r.topTokens[k])];
            }
            categoryTicks(x, tokens);
            auto* group = new QCPBarsGroup(m_plot);
            QCPBars* exact = addBars(m_plot, rect, QStringLiteral("p (exact)"), QColor(0x99, 0x99, 0x99), 0.27);
            exact->setData(keys, p);
            exact->setBarsGroup(group);
            for (int s = 0; s < 2; ++s) {
                QVector<double> pHat;
                for (int j : r.topTokens)
                    pHat << r.schemes[static_cast<std::size_t>(s)].chain.probsHat[static_cast<std::size_t>(j)];
                QCPBars* b = addBars(m_plot, rect, QStringLiteral("%1 weights").arg(schemeNames[s]),
                                     schemeColor[static_cast<std::size_t>(s)], 0.27);
                b->setData(keys, pHat);
                b->setBarsGroup(group);
            }
            y->rescale();
            y->setRangeLower(0.0);
            y->setRangeUpper(y->range().upper * 1.1);
            break;
        }
        case Jensen: {
            y->setLabel(QStringLiteral("mean factor"));
            categoryTicks(x, schemeNames);
            auto* group = new QCPBarsGroup(m_plot);
            QCPBars* predicted = addBars(m_plot, rect, QStringLiteral("Jensen exp(σ²/2)"), seriesColor(3), 0.35);
            QCPBars* measured = addBars(m_plot, rect, QStringLiteral("measured"), seriesColor(5), 0.35);
            double top = 1.0;
            for (int s = 0; s < 2; ++s) {
                const ScoreNoiseChain& k = r.schemes[static_cast<std::size_t>(s)].chain;
                // QCPBars draws from the base value to base + value: store the excess over 1.
                predicted->addData(s + 1, k.jensenFactor - 1.0);
                measured->addData(s + 1, k.measuredInflation - 1.0);
                top = std::max({top, k.jensenFactor, k.measuredInflation});
            }
            for (QCPBars* b : {predicted, measured}) {
                b->setBarsGroup(group);
                b->setBaseValue(1.0); // the factor starts at 1: no inflation
            }
            y->setRange(1.0, 1.0 + std::max(1e-4, (top - 1.0) * 1.5));
            break;
        }
        case KlPanel: {
            y->setLabel(QStringLiteral("KL (nats)"));
            categoryTicks(x, schemeNames);
            double top = 0.0;
            for (int s = 0; s < 2; ++s) {
                const double kl = r.schemes[static_cast<std::size_t>(s)].chain.kl;
                QCPBars* b = addBars(m_plot, rect, schemeNames[s], schemeColor[static_cast<std::size_t>(s)], 0.5);
                b->addData(s + 1, kl);
                top = std::max(top, kl);
            }
            y->setRange(0.0, top > 0.0 ? top * 1.2 : 1e-6);
            break;
        }
        case OutputPanel: {
            y->setLabel(QStringLiteral("‖o − ô‖ / ‖o‖"));
            categoryTicks(x, schemeNames);
            auto* group = new QCPBarsGroup(m_plot);
            const std::array<QString, 3> names = {QStringLiteral("both paths"), QStringLiteral("key path only"),
                                                  QStringLiteral("value path only")};
            // Not the schemes' colours: these bars are paths, the ticks name the schemes.
            const std::array<QColor, 3> colors = {QColor(0x66, 0x66, 0x66), seriesColor(4), seriesColor(5)};
            double top = 0.0;
            for (std::size_t c = 0; c < 3; ++c) {
                QCPBars* b = addBars(m_plot, rect, names[c], colors[c], 0.25);
                for (int s = 0; s < 2; ++s) {
                    const ScoreNoiseChain& k = r.schemes[static_cast<std::size_t>(s)].chain;
                    const double v = c == 0 ? k.outputError : (c == 1 ? k.keyOutputError : k.valueOutputError);
                    b->addData(s + 1, v);
                    top = std::max(top, v);
                }
                b->setBarsGroup(group);
            }
            y->setRange(0.0, top > 0.0 ? top * 1.5 : 1e-6);
            break;
        }
        case ValuePath: {
            x->setLabel(QStringLiteral("N_eff = 1/Σp²"));
            y->setLabel(QStringLiteral("error"));
            PlotWidget::setLogAxis(x);
            PlotWidget::setLogAxis(y);
            QVector<double> neff, value, key, reference;
            for (const ValuePathPoint& p : r.valuePath.points) {
                neff << p.effectiveTokens;
                value << p.valueError;
                key << p.keyMassMoved;
                reference << 1.0 / std::sqrt(p.effectiveTokens);
            }
            QCPGraph* v = m_plot->addLineSeries(
                QStringLiteral("values, slope %1").arg(r.valuePath.valueSlope, 0, 'f', 2),
                seriesColor(2), QCPScatterStyle::ssCircle, Qt::SolidLine, rect);
            v->setData(neff, value);
            QCPGraph* k = m_plot->addLineSeries(
                QStringLiteral("keys, slope %1").arg(r.valuePath.keySlope, 0, 'f', 2),
                seriesColor(1), QCPScatterStyle::ssSquare, Qt::SolidLine, rect);
            k->setData(neff, key);
            // Decoration, not data: the 1/sqrt(N_eff) law the value path should follow.
            QCPGraph* ref = m_plot->addGraph(x, y);
            ref->setName(QStringLiteral("slope −1/2"));
            ref->setPen(QPen(Qt::black, 1, Qt::DashLine));
            ref->setData(neff, reference);
            double lo = INFINITY, hi = 0.0;
            for (const QVector<double>* series : {&value, &key, &reference})
                for (double d : *series)
                    if (d > 0.0) {
                        lo = std::min(lo, d);
                        hi = std::max(hi, d);
                    }
            if (hi > 0.0)
                y->setRange(lo / 1.5, hi * 1.5);
            x->rescale();
            x->setRange(x->range().lower / 1.3, x->range().upper * 1.3);
            // Plain-number labels at the powers of ten: the ranges span one to three decades.
            for (QCPAxis* axis : {x, y}) {
                QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
                ticker->setSubTickCount(8);
                axis->setTicker(ticker);
                axis->setNumberFormat(QStringLiteral("g"));
                axis->setNumberPrecision(5); // 1000, not 1e+03
            }
            break;
        }
        case PanelCount: break;
        }
        QCPLegend* legend = legends[i];
        if (panel != KlPanel) // the KL bars are labelled by their ticks
            for (QCPAbstractPlottable* p : rect->plottables())
                p->addToLegend(legend);
    }
    dropEmptyLegends();
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
