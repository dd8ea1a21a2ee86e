// SPDX-License-Identifier: GPL-3.0-or-later
// The advisor beside the Model map: the front and the curves are computed on a pool thread; moving the
// target only picks from the front (a scan), so the slider answers at once.
#include "widgets/advisor_panel.h"

#include "widgets/plot_widget.h"

#include "core/analysis/eval_analysis.h"
#include "core/eval/evaluator.h"
#include "core/report/claims_output.h"

#include <QComboBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvlens::widgets {

namespace {

constexpr double kStep = 0.05; // slider resolution in bits per coordinate

QString widths(const BitAllocation& a)
{
    // "K3/V2" when every layer has the same widths, else "mixed".
    for (std::size_t l = 1; l < a.kBits.size(); ++l)
        if (a.kBits[l] != a.kBits[0] || a.vBits[l] != a.vBits[0])
            return QStringLiteral("mixed");
    return a.kBits.empty() ? QString() : QStringLiteral("K%1/V%2").arg(a.kBits[0]).arg(a.vBits[0]);
}

/// The advice measured end to end (on a pool thread): the model over its text with the advice, the best
/// uniform split and the reference configurations of claims::adviceCheckSpec, their mean KLD with 95%
/// intervals over chunks, and the uniform split's damage over the advice's.
AdviceMeasurement measureAdvice(const std::string& modelDir, const std::string& textFile, const BitAllocation& advice,
                                const std::optional<BitAllocation>& uniform, const QString& source, int chunks,
                                const JobContext<>& job)
{
    AdviceMeasurement out;
    out.advice = advice;
    out.uniform = uniform;
    out.source = source;
    EvalSpec spec = claims::adviceCheckSpec(modelDir, textFile, advice, uniform);
    if (chunks > 0)
        spec.chunks = chunks;
    eval::EvalCallbacks callbacks;
    callbacks.cancelled = [&job] { return job.cancelled(); };
    callbacks.progress = [&job](double done, double total, const std::string& stage) {
        job.progress->set(done, total, stage);
    };
    auto r = eval::runEval(spec, callbacks);
    if (!r) {
        out.error = QString::fromStdString(r.error().text());
        return out;
    }
    if (r->cancelled) {
        out.cancelled = true;
        return out;
    }
    constexpr std::uint64_t kSeed = 71; // --reproduce's E5: seed 1 + 70
    constexpr int kResamples = 400;
    out.chunks = r->chunksScored;
    for (std::size_t i = 0; i < r->configurations.size(); ++i) {
        const eval::ConfigurationResult& c = r->configurations[i];
        const eval::ChunkInterval k = eval::meanKld(*r, static_cast<int>(i), kSeed, kResamples);
        AdviceMeasurement::Row row;
        row.name = QString::fromStdString(c.name) + (c.budget > 0 ? QStringLiteral(" n = %1").arg(c.budget) : QString());
        row.bits = 0.5 * (c.bitsK + c.bitsV);
        row.kld = k.value;
        row.low = k.low;
        row.high = k.high;
        out.rows.push_back(row);
    }
    out.adviceRow = eval::findConfiguration(*r, "advice", 0);
    out.uniformRow = eval::findConfiguration(*r, "best uniform split", 0);
    out.ratio = out.ratioLow = out.ratioHigh = std::numeric_limits<double>::quiet_NaN();
    if (out.adviceRow >= 0 && out.uniformRow >= 0) {
        const eval::ChunkInterval ratio = eval::kldRatio(*r, out.uniformRow, out.adviceRow, kSeed, kResamples);
        out.ratio = ratio.value;
        out.ratioLow = ratio.low;
        out.ratioHigh = ratio.high;
    }
    return out;
}

} // namespace

AdvisorPanel::AdvisorPanel(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 0, 0, 0);
    auto* title = new QLabel(QStringLiteral("<b>Bit-allocation advisor</b>"), this);
    layout->addWidget(title);
    auto* form = new QFormLayout();
    form->setContentsMargins(0, 0, 0, 0);
    m_statistic = new QComboBox(this);
    m_statistic->addItem(QStringLiteral("mean"), static_cast<int>(AdvisorStatistic::Mean));
    m_statistic->addItem(QStringLiteral("median"), static_cast<int>(AdvisorStatistic::Median));
    m_statistic->addItem(QStringLiteral("p99"), static_cast<int>(AdvisorStatistic::P99));
    m_statistic->setToolTip(QStringLiteral("The statistic of the per-query loss over each layer's heads, queries and seeds that the advisor sums over layers."));
    m_loss = new QComboBox(this);
    m_loss->addItem(QStringLiteral("output error ‖T−T̂‖²/‖T‖²"), static_cast<int>(AdvisorLoss::RelMseT));
    m_loss->addItem(QStringLiteral("KL (keys only)"), static_cast<int>(AdvisorLoss::Kl));
    m_loss->setToolTip(QStringLiteral("The per-query loss: the attention output's relative error (K and V), or KL of the weights (blind to V)."));
    form->addRow(QStringLiteral("Objective"), m_statistic);
    form->addRow(QStringLiteral("Loss"), m_loss);
    m_slider = new QSlider(Qt::Horizontal, this);
    m_slider->setToolTip(QStringLiteral("Target average bits per coordinate over K and V of every layer, overheads included."));
    m_targetLabel = new QLabel(this);
    form->addRow(m_targetLabel, m_slider);
    layout->addLayout(form);
    m_verdict = new QLabel(this);
    m_verdict->setWordWrap(true);
    m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_verdict);
    m_measureButton = new QPushButton(QStringLiteral("Measure end to end"), this);
    m_measureButton->setToolTip(QStringLiteral("Run the model of the Output tab over its text with the advice, the best "
                                               "uniform split, TQ-KV and llama.cpp's K/V pairs, and compare their "
                                               "next-token KLD (intervals over chunks)."));
    m_measured = new QLabel(this);
    m_measured->setWordWrap(true);
    m_measured->setTextFormat(Qt::RichText);
    m_measured->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_measured->setVisible(false);
    layout->addWidget(m_measureButton);
    layout->addWidget(m_measured);
    m_measureJobs.onProgress(200, [this](const JobProgress& progress) { pollMeasurement(progress); });
    connect(m_measureButton, &QPushButton::clicked, this, [this] {
        if (m_measuring)
            cancelMeasurement();
        else
            measure();
    });
    m_plot = new QCustomPlot(this);
    m_plot->setMinimumHeight(150);
    m_plot->xAxis->setLabel(QStringLiteral("average bits per coordinate"));
    m_plot->yAxis->setLabel(QStringLiteral("predicted loss (sum over layers)"));
    m_plot->yAxis->setScaleType(QCPAxis::stLogarithmic);
    m_plot->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    m_plot->legend->setVisible(true);
    QFont small = m_plot->font();
    small.setPointSizeF(std::max(7.0, small.pointSizeF() - 1.0));
    m_plot->legend->setFont(small);
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    layout->addWidget(m_plot, 2);
    m_table = new QTableWidget(this);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->setVisible(false);
    m_table->setColumnCount(4);
    m_table->setHorizontalHeaderLabels({QStringLiteral("layer"), QStringLiteral("K bits"), QStringLiteral("V bits"),
                                        QStringLiteral("stored bits")});
    layout->addWidget(m_table, 1);
    setMinimumWidth(260);

    auto recompute = [this] { compute(); };
    connect(m_statistic, &QComboBox::currentIndexChanged, this, recompute);
    connect(m_loss, &QComboBox::currentIndexChanged, this, recompute);
    connect(m_slider, &QSlider::valueChanged, this, [this] { updateAdvice(); });
    updateAdvice();
}

AdvisorPanel::~AdvisorPanel()
{
    m_jobs.cancel();
    m_measureJobs.cancel();
}

void AdvisorPanel::setResults(std::shared_ptr<const ResultSet> results)
{
    if (results == m_results)
        return;
    m_results = std::move(results);
    compute();
}

void AdvisorPanel::setObjective(AdvisorStatistic statistic, AdvisorLoss loss)
{
    const QSignalBlocker b1(m_statistic), b2(m_loss);
    m_statistic->setCurrentIndex(m_statistic->findData(static_cast<int>(statistic)));
    m_loss->setCurrentIndex(m_loss->findData(static_cast<int>(loss)));
    compute();
}

void AdvisorPanel::compute()
{
    if (!m_results) {
        m_jobs.supersede(); // nothing to compute: whatever runs is stale
        accept(AdvisorCurves{});
        return;
    }
    AdvisorOptions objective;
    objective.objective = static_cast<AdvisorStatistic>(m_statistic->currentData().toInt());
    objective.loss = static_cast<AdvisorLoss>(m_loss->currentData().toInt());
    auto results = m_results;
    m_verdict->setText(QStringLiteral("computing the front…"));
    m_jobs.start(
        [results, objective](const JobContext<>&) {
            AdvisorCurves out;
            auto curves = layerCurves(*results, objective);
            if (!curves) {
                out.error = QString::fromStdString(curves.error().text());
                return out;
            }
            out.curves = std::move(*curves);
            if (!out.curves.empty())
                out.front = paretoFront(out.curves);
            return out;
        },
        [this](const AdvisorCurves& outcome) { accept(outcome); });
}

void AdvisorPanel::accept(const AdvisorCurves& outcome)
{
    m_error = outcome.error;
    m_curves = outcome.curves;
    m_front = outcome.front;
    const double previous = target();
    {
        const QSignalBlocker block(m_slider);
        if (m_front.empty()) {
            m_slider->setRange(0, 0);
        } else {
            const int lo = static_cast<int>(std::ceil(m_front.front().bits / kStep - 1e-9));
            const int hi = static_cast<int>(std::floor(m_front.back().bits / kStep + 1e-9));
            m_slider->setRange(lo, std::max(lo, hi));
            // Keep the target where it was when it still fits, else the middle of the range.
            const int keep = static_cast<int>(std::lround(previous / kStep));
            m_slider->setValue(previous > 0.0 && keep >= lo && keep <= hi ? keep : (lo + hi) / 2);
        }
    }
    updateAdvice();
}

double AdvisorPanel::target() const
{
    return m_slider->maximum() > 0 ? m_slider->value() * kStep : 0.0;
}

double AdvisorPanel::minimumTarget() const
{
    return m_slider->minimum() * kStep;
}

double AdvisorPanel::maximumTarget() const
{
    return m_slider->maximum() * kStep;
}

void AdvisorPanel::setTarget(double bits)
{
    m_slider->setValue(static_cast<int>(std::lround(bits / kStep)));
}

void AdvisorPanel::updateAdvice()
{
    m_advice.reset();
    m_uniform.reset();
    const double budget = target();
    m_targetLabel->setText(QStringLiteral("Target %1 bits").arg(budget, 0, 'f', 2));
    if (!m_front.empty()) {
        // The least predicted loss within the target: the front is ascending in bits, descending in loss.
        for (const BitAllocation& a : m_front)
            if (a.bits <= budget + 1e-9 && (!m_advice || a.loss < m_advice->loss))
                m_advice = a;
        m_uniform = bestUniformSplit(m_curves, budget + 1e-9);
    }
    m_table->setRowCount(m_advice ? static_cast<int>(m_advice->layers.size()) : 0);
    if (m_advice)
        for (std::size_t l = 0; l < m_advice->layers.size(); ++l) {
            const QStringList cells = {QString::number(m_advice->layers[l]), QString::number(m_advice->kBits[l]),
                                       QString::number(m_advice->vBits[l]), QString::number(m_advice->layerBits[l], 'f', 2)};
            for (int c = 0; c < cells.size(); ++c) {
                auto* item = new QTableWidgetItem(cells[c]);
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
                m_table->setItem(static_cast<int>(l), c, item);
            }
        }
    m_table->resizeColumnsToContents();
    m_verdict->setText(verdictText());
    // A measurement belongs to the advice it measured.
    const bool sameAdvice = m_advice && m_measuredAdvice && m_measuredAdvice->kBits == m_advice->kBits
                            && m_measuredAdvice->vBits == m_advice->vBits;
    if ((m_measurement || m_measuring) && !sameAdvice)
        discardMeasurement();
    updateMeasureButton();
    drawFront();
    emit adviceChanged();
}

QString AdvisorPanel::verdictText() const
{
    if (!m_error.isEmpty())
        return m_error;
    if (!m_results)
        return QStringLiteral("Run a model map with K-only and V-only at two or more budgets: the advisor chooses each "
                              "layer's K and V widths from their curves.");
    if (m_curves.empty())
        return QStringLiteral("No advice: this run has no K-only and V-only trials. Add the schemes K-only and V-only "
                              "(at two or more budgets) to the model map's spec.");
    const double budget = target();
    if (!m_advice)
        return QStringLiteral("No allocation fits %1 bits: the cheapest needs %2.").arg(budget, 0, 'f', 2).arg(m_front.front().bits, 0, 'f', 2);
    if (!m_uniform)
        return QStringLiteral("The advice uses %1 bits, predicted loss %2; no uniform K/V split fits %3 bits.")
            .arg(m_advice->bits, 0, 'f', 2)
            .arg(m_advice->loss, 0, 'g', 3)
            .arg(budget, 0, 'f', 2);
    const double gain = m_uniform->loss > 0.0 ? 100.0 * (m_uniform->loss - m_advice->loss) / m_uniform->loss : 0.0;
    if (gain < 0.05)
        return QStringLiteral("The best uniform split of ≤ %1 bits (%2 at %3 bits, predicted loss %4) is as good as any mixed "
                              "allocation: per-layer widths do not help here.")
            .arg(budget, 0, 'f', 2)
            .arg(widths(*m_uniform))
            .arg(m_uniform->bits, 0, 'f', 2)
            .arg(m_uniform->loss, 0, 'g', 3);
    return QStringLiteral("The advice (%1 bits) predicts %2 % less loss than the best uniform split of ≤ %3 bits "
                          "(%4 at %5 bits): %6 against %7. Predicted from single-path curves: measure it end to end "
                          "below (or --batch, allocation_check.csv).")
        .arg(m_advice->bits, 0, 'f', 2)
        .arg(gain, 0, 'f', 0)
        .arg(budget, 0, 'f', 2)
        .arg(widths(*m_uniform))
        .arg(m_uniform->bits, 0, 'f', 2)
        .arg(m_advice->loss, 0, 'g', 3)
        .arg(m_uniform->loss, 0, 'g', 3);
}

void AdvisorPanel::drawFront()
{
    m_plot->clearGraphs();
    m_plot->clearItems();
    if (m_front.empty()) {
        m_plot->replot();
        return;
    }
    const QVector<QColor>& palette = okabeItoPalette();
    auto* front = m_plot->addGraph();
    front->setName(QStringLiteral("Pareto front"));
    front->setPen(QPen(palette.value(4, Qt::blue), 1.5));
    front->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
    for (const BitAllocation& a : m_front)
        if (a.loss > 0.0)
            front->addData(a.bits, a.loss);
    // Every uniform split (the same K and V width in every layer) for comparison.
    auto* uniform = m_plot->addGraph();
    uniform->setName(QStringLiteral("uniform K/V splits"));
    uniform->setLineStyle(QCPGraph::lsNone);
    uniform->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, QColor(110, 110, 110), 6));
    if (!m_curves.empty()) {
        const std::size_t nk = m_curves.front().kBits.size(), nv = m_curves.front().vBits.size();
        for (std::size_t k = 0; k < nk; ++k)
            for (std::size_t v = 0; v < nv; ++v) {
                const BitAllocation a = evaluateAllocation(m_curves, std::vector<int>(m_curves.size(), static_cast<int>(k)),
                                                           std::vector<int>(m_curves.size(), static_cast<int>(v)));
                if (a.loss > 0.0)
                    uniform->addData(a.bits, a.loss);
            }
    }
    if (m_advice && m_advice->loss > 0.0) {
        auto* advice = m_plot->addGraph();
        advice->setName(QStringLiteral("advice"));
        advice->setLineStyle(QCPGraph::lsNone);
        advice->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, QPen(palette.value(5, Qt::red), 2), QBrush(palette.value(5, Qt::red)), 10));
        advice->addData(m_advice->bits, m_advice->loss);
    }
    auto* line = new QCPItemStraightLine(m_plot);
    line->setPen(QPen(QColor(150, 150, 150), 1, Qt::DashLine));
    line->point1->setCoords(target(), 1.0);
    line->point2->setCoords(target(), 2.0);
    m_plot->rescaleAxes();
    // Room around the extreme markers so none is cut in half at the frame.
    const QCPRange x = m_plot->xAxis->range();
    m_plot->xAxis->setRange(x.lower - 0.05 * x.size() - 0.05, x.upper + 0.05 * x.size() + 0.05);
    const QCPRange y = m_plot->yAxis->range();
    if (y.lower > 0.0)
        m_plot->yAxis->setRange(y.lower / 1.5, y.upper * 1.5);
    m_plot->replot();
}

void AdvisorPanel::setModelSource(const QString& modelDir, const QString& textFile)
{
    if (modelDir == m_modelDir && textFile == m_textFile)
        return;
    m_modelDir = modelDir;
    m_textFile = textFile;
    if (m_measurement || m_measuring)
        discardMeasurement();
    updateMeasureButton();
}

void AdvisorPanel::updateMeasureButton()
{
    m_measureButton->setText(m_measuring ? QStringLiteral("Cancel the measurement") : QStringLiteral("Measure end to end"));
    m_measureButton->setEnabled(m_measuring || (m_advice.has_value() && !m_modelDir.isEmpty() && !m_textFile.isEmpty()));
    const QString text = measuredText();
    m_measured->setText(m_measurement ? text : text.toHtmlEscaped());
    m_measured->setToolTip(measuredDetails());
    m_measured->setVisible(!text.isEmpty());
}

void AdvisorPanel::discardMeasurement()
{
    m_measureJobs.supersede(); // whatever the old job returns is stale now
    m_measuring = false;
    m_measurement.reset();
    m_measuredAdvice.reset();
    m_measureStatus.clear();
    updateMeasureButton();
}

void AdvisorPanel::measure(int chunks)
{
    if (!m_advice || m_modelDir.isEmpty() || m_textFile.isEmpty())
        return;
    m_measurement.reset();
    m_measuring = true;
    m_measuredAdvice = m_advice;
    const std::string modelDir = m_modelDir.toStdString(), textFile = m_textFile.toStdString();
    const BitAllocation advice = *m_advice;
    const std::optional<BitAllocation> uniform = m_uniform;
    const QString source = QStringLiteral("%1 on %2").arg(QFileInfo(m_modelDir).fileName(), QFileInfo(m_textFile).fileName());
    m_measureJobs.start(
        [modelDir, textFile, advice, uniform, source, chunks](const JobContext<>& job) {
            return measureAdvice(modelDir, textFile, advice, uniform, source, chunks, job);
        },
        [this](const AdviceMeasurement& m) { acceptMeasurement(m); });
    m_measureClock.start();
    m_measureStatus = QStringLiteral("measuring end to end: loading %1…").arg(source);
    updateMeasureButton();
}

void AdvisorPanel::cancelMeasurement()
{
    if (!m_measuring)
        return;
    m_measureJobs.cancel();
    m_measureStatus = QStringLiteral("cancelling the measurement…");
    updateMeasureButton();
}

void AdvisorPanel::pollMeasurement(const JobProgress& progress)
{
    if (!m_measuring)
        return;
    const JobProgress::Snapshot now = progress.snapshot();
    if (now.total <= 0.0 || m_measureStatus.startsWith(QStringLiteral("cancelling")))
        return;
    const double elapsed = m_measureClock.elapsed() / 1000.0;
    const double share = std::clamp(now.done / now.total, 0.0, 1.0);
    QString eta;
    if (share > 0.02)
        eta = QStringLiteral(" · about %1 s left").arg(std::max(0.0, elapsed * (1.0 - share) / share), 0, 'f', 0);
    m_measureStatus = QStringLiteral("measuring end to end: %1 %%2 · %3").arg(100.0 * share, 0, 'f', 0).arg(eta, QString::fromStdString(now.stage));
    updateMeasureButton();
}

void AdvisorPanel::acceptMeasurement(const AdviceMeasurement& m)
{
    m_measuring = false;
    if (!m.error.isEmpty())
        m_measureStatus = QStringLiteral("The measurement failed: %1").arg(m.error);
    else if (m.cancelled)
        m_measureStatus = QStringLiteral("The measurement was cancelled; nothing is shown for it.");
    else {
        m_measurement = m;
        m_measureStatus.clear();
    }
    updateMeasureButton();
    emit measurementFinished();
}

bool AdvisorPanel::waitUntilMeasured(int timeoutMs)
{
    if (m_measuring)
        m_measureJobs.wait(timeoutMs);
    return !m_measuring;
}

QString AdvisorPanel::measuredText() const
{
    if (!m_measurement)
        return m_measureStatus;
    const AdviceMeasurement& m = *m_measurement;
    auto interval = [](double v, double lo, double hi) {
        return QStringLiteral("%1 [%2, %3]").arg(v, 0, 'g', 3).arg(lo, 0, 'g', 3).arg(hi, 0, 'g', 3);
    };
    QString t = QStringLiteral("<b>Measured end to end</b> (%1, %2 chunks; mean next-token KLD, 95% interval over chunks): ")
                    .arg(m.source.toHtmlEscaped())
                    .arg(m.chunks);
    if (m.adviceRow >= 0) {
        const auto& a = m.rows[static_cast<std::size_t>(m.adviceRow)];
        t += QStringLiteral("the advice %1 at %2 bits").arg(interval(a.kld, a.low, a.high)).arg(a.bits, 0, 'f', 2);
    }
    if (m.uniformRow >= 0 && m.uniform) {
        const auto& u = m.rows[static_cast<std::size_t>(m.uniformRow)];
        t += QStringLiteral("; the best uniform split (%1) %2 at %3 bits. The uniform split does %4 times the advice's damage: ")
                 .arg(widths(*m.uniform), interval(u.kld, u.low, u.high))
                 .arg(u.bits, 0, 'f', 2)
                 .arg(interval(m.ratio, m.ratioLow, m.ratioHigh));
        if (std::isfinite(m.ratioLow) && m.ratioLow > 1.0)
            t += QStringLiteral("the advice wins beyond the interval.");
        else if (std::isfinite(m.ratioHigh) && m.ratioHigh < 1.0)
            t += QStringLiteral("the uniform split wins: the per-layer losses do not add up on this model.");
        else
            t += QStringLiteral("the interval covers 1, so this text cannot separate them.");
    } else {
        t += QStringLiteral("; no uniform split fits the target.");
    }
    if (m.rows.size() > 2)
        t += QStringLiteral(" (Hover for the other configurations.)");
    return t;
}

QString AdvisorPanel::measuredDetails() const
{
    if (!m_measurement)
        return {};
    QStringList lines;
    for (const AdviceMeasurement::Row& row : m_measurement->rows)
        lines << QStringLiteral("%1: %2 bits, mean KLD %3 [%4, %5]")
                     .arg(row.name)
                     .arg(row.bits, 0, 'f', 2)
                     .arg(row.kld, 0, 'g', 3)
                     .arg(row.low, 0, 'g', 3)
                     .arg(row.high, 0, 'g', 3);
    return lines.join(QLatin1Char('\n'));
}

bool AdvisorPanel::waitUntilComputed(int timeoutMs)
{
    return m_jobs.wait(timeoutMs);
}

} // namespace kvlens::widgets
