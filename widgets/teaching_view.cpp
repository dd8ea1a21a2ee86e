// SPDX-License-Identifier: GPL-3.0-or-later
// Teaching view: controls, the staged six-panel figure, and the background computation with stale-result dropping.
#include "widgets/teaching_view.h"

#include "widgets/figures/teaching_figure.h"

#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvlens::widgets {

namespace {

constexpr int kDebounceMs = 120;

const char* const kStageNames[] = {"1 · Score noise", "2 · Softmax", "3 · KL", "4 · Output"};

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
    return teachingPanelStage(static_cast<TeachingPanel>(panel));
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
    const TeachingConfig cfg = config();
    // Numerics on the global thread pool, never on the GUI thread; a newer request cancels this one.
    m_jobs.start(
        [cfg](const JobContext<>& job) {
            TeachingOutcome out;
            auto r = computeTeaching(cfg, job.cancelFlag.get());
            if (r)
                out.result = std::make_shared<const TeachingResult>(std::move(r).value());
            else
                out.error = QString::fromStdString(r.error().text());
            return out;
        },
        [this](const TeachingOutcome& outcome) { accept(outcome); });
    updateLabels();
}

void TeachingView::accept(const TeachingOutcome& outcome)
{
    m_error = outcome.error;
    if (outcome.result)
        m_result = outcome.result;
    redraw();
    fillTable();
    updateLabels();
    emit computed(m_jobs.newest());
}

bool TeachingView::waitUntilDrawn(int timeoutMs)
{
    if (m_debounce.isActive())
        startCompute();
    // The computation runs on a pool thread; this thread sleeps in an event loop until its result is
    // drawn or the time is up. No polling.
    return m_jobs.wait(timeoutMs);
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
    return figurePanel(panel);
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
    showFigure(teachingFigure(m_result.get(), m_error, m_stage, m_printInches));
}

} // namespace kvlens::widgets
