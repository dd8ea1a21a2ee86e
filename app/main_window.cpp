// SPDX-License-Identifier: GPL-3.0-or-later
// Main window: debounced runs on the worker thread, progressive drawing, menus, settings, export.
#include "app/main_window.h"

#include "app/resources.h"

#include "app/experiment_worker.h"
#include "app/settings.h"
#include "widgets/advisor_panel.h"
#include "widgets/model_map_view.h"
#include "widgets/output_view.h"
#include "widgets/run_compare_view.h"
#include "core/analysis/run_compare.h"
#include "core/analysis/run_overlay.h"
#include "core/experiment/shard.h"
#include "widgets/teaching_view.h"
#include "core/io/atomic_file.h"
#include "core/spec/spec_json.h"
#include "widgets/control_panel.h"
#include "widgets/export_dialog.h"
#include "widgets/figure_export.h"
#include "widgets/import_dialog.h"
#include "widgets/validation_view.h"
#include "gpu/device.h"
#include "widgets/views.h"

#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QTime>
#include <QFrame>
#include <QHBoxLayout>
#include <QPushButton>
#include <QFileDialog>
#include <QFileInfo>
#include <QHash>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QScrollArea>
#include <QGuiApplication>
#include <QScreen>
#include <QVBoxLayout>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>

#include <cmath>

namespace kvlens::app {

namespace {

/// A view's name on its tab: the title, shortened where a long one would push the last tabs out of
/// a 1280-px window.
QString tabTitle(const QString& id, const QString& title)
{
    static const QHash<QString, QString> shorter{{QStringLiteral("shannon_phi"), QStringLiteral("Shannon-φ")},
                                                 {QStringLiteral("scatter_6d"), QStringLiteral("6D scatter")},
                                                 {QStringLiteral("kl_distribution"), QStringLiteral("KL")},
                                                 {QStringLiteral("routing_recall"), QStringLiteral("Recall")},
                                                 {QStringLiteral("rate_distortion"), QStringLiteral("Rate–distortion")}};
    return shorter.value(id, title);
}

} // namespace


namespace {

constexpr int kMaxRecent = 8;

} // namespace

MainWindow::MainWindow(bool restoreSettings, QWidget* parent)
    : QMainWindow(parent), m_restoreSettings(restoreSettings)
{
    registerWorkerTypes();
    setWindowTitle(QStringLiteral("KVLens"));
    setObjectName(QStringLiteral("KVLensMainWindow"));
    buildControlDock();
    buildTabs();
    buildCentral();
    connectModelMap();
    buildStatusBar();
    startWorker();
    buildMenus();
    populateBackends();
    // Content never sets the window's minimum: tabs, tables and status texts take the width they
    // are given (tables scroll, labels clip with the full text in their tooltip).
    for (widgets::ResultView* v : m_views)
        v->setMinimumSize(320, 240);
    m_message->setMinimumWidth(60);
    m_message->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_status->setMinimumWidth(80);
    m_status->setMaximumWidth(620);
    fitToScreen();
    m_exportFolder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    if (m_restoreSettings)
        restoreSession();
}

void MainWindow::buildControlDock()
{
    m_controls = new widgets::ControlPanel(this);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(m_controls);
    scroll->setWidgetResizable(true);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* dock = new QDockWidget(QStringLiteral("Experiment"), this);
    dock->setObjectName(QStringLiteral("ExperimentDock"));
    // Run and Cancel stay in view under the scrolling controls, whatever the screen height.
    auto* dockContent = new QWidget(dock);
    auto* dockLayout = new QVBoxLayout(dockContent);
    dockLayout->setContentsMargins(0, 0, 0, 4);
    dockLayout->addWidget(scroll, 1);
    QWidget* runBar = m_controls->takeRunBar();
    runBar->setParent(dockContent);
    runBar->setContentsMargins(8, 0, 8, 0);
    dockLayout->addWidget(runBar);
    dock->setWidget(dockContent);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
    scroll->setMinimumWidth(m_controls->sizeHint().width() + 24);
    addDockWidget(Qt::LeftDockWidgetArea, dock);
}

void MainWindow::buildTabs()
{
    m_tabs = new QTabWidget(this);
    m_views = widgets::createViews(m_tabs);
    m_validation = new widgets::ValidationView(m_tabs);
    m_views.push_back(m_validation);
    // Eleven tabs in the width a 1280-px window leaves beside the dock: short names on the tabs,
    // the full title and what the view shows in each tab's tooltip.
    m_tabs->tabBar()->setExpanding(false);
    m_tabs->setUsesScrollButtons(true);
    m_tabs->setStyleSheet(QStringLiteral("QTabBar::tab { padding: 4px 7px; }"));
    for (widgets::ResultView* v : m_views) {
        const int tab = m_tabs->addTab(v, tabTitle(v->viewId(), v->viewTitle()));
        m_tabs->setTabToolTip(tab, v->viewTitle() + QStringLiteral(": ") + v->viewDescription());
        connect(v->plot(), &widgets::PlotWidget::hovered, this, [this](const QString& text) {
            if (!text.isEmpty())
                statusBar()->showMessage(QString(text).replace(QLatin1Char('\n'), QStringLiteral("  ·  ")), 4000);
        });
    }
    // The model's output: its own run (a model over text), beside the Model map it explains.
    m_output = new widgets::OutputView(m_tabs);
    const QString model = QString::fromStdString(shippedModelDirectory());
    m_output->setDefaults(model, model + QStringLiteral("/heldout.txt"));
    int outputAt = m_tabs->count();
    for (int i = 0; i < m_tabs->count(); ++i)
        if (auto* v = qobject_cast<widgets::ResultView*>(m_tabs->widget(i)); v && v->viewId() == QStringLiteral("model_map"))
            outputAt = i + 1;
    outputAt = m_tabs->insertTab(outputAt, m_output, QStringLiteral("Output"));
    m_tabs->setTabToolTip(outputAt, QStringLiteral("Output: a model over text with its KV cache quantized by each scheme; "
                                                   "llama.cpp's KLD statistics, the text shaded by each token's KLD, and "
                                                   "the drill-down from a damaged token to one head's attention."));
}

void MainWindow::buildCentral()
{
    // First-run orientation: what the default experiment is and where to look first (dismissed once for good).
    auto* central = new QWidget(this);
    auto* centralLayout = new QVBoxLayout(central);
    centralLayout->setContentsMargins(0, 0, 0, 0);
    centralLayout->setSpacing(0);
    auto* frame = new QFrame(central);
    m_orientation = frame;
    frame->setObjectName(QStringLiteral("orientation"));
    frame->setFrameShape(QFrame::StyledPanel);
    frame->setStyleSheet(QStringLiteral("#orientation { background: #eef4fb; }"));
    auto* orientationLayout = new QHBoxLayout(m_orientation);
    orientationLayout->setContentsMargins(8, 4, 4, 4);
    auto* orientationText = new QLabel(
        QStringLiteral("<b>Start here.</b> The default experiment quantizes Gaussian keys and values (d = 128, 1024 tokens, "
                       "8 seeds) with paper A's KV, KQV and QKQV at 2-4 bits and measures how far each query's attention "
                       "moves. Look first at <b>KL</b> (the damage per query), then <b>Comparisons</b> (which scheme is "
                       "better, with the seed as the unit), then <b>Teaching</b> (why keys hurt more than values). "
                       "<b>Output</b> runs a real model over text; Presets load the papers' experiments."),
        m_orientation);
    orientationText->setWordWrap(true);
    orientationLayout->addWidget(orientationText, 1);
    auto* dismiss = new QPushButton(QStringLiteral("Got it"), m_orientation);
    dismiss->setObjectName(QStringLiteral("dismissOrientation"));
    orientationLayout->addWidget(dismiss, 0, Qt::AlignTop);
    connect(dismiss, &QPushButton::clicked, this, [this] {
        m_orientation->hide();
        if (m_restoreSettings)
            Settings().setOrientationDismissed(true);
    });
    if (m_restoreSettings && Settings().orientationDismissed())
        m_orientation->hide();
    centralLayout->addWidget(m_orientation);
    centralLayout->addWidget(m_tabs, 1);
    setCentralWidget(central);
}

void MainWindow::connectModelMap()
{
    for (widgets::ResultView* v : m_views)
        if (auto* map = qobject_cast<widgets::ModelMapView*>(v)) {
            connect(map, &widgets::ModelMapView::cellActivated, this, &MainWindow::studyModelCell);
            // The Output tab's finished run is the map's end-to-end truth (attribution beside it, the
            // measure that predicts it named); a cancelled run's partial chunks are not.
            connect(m_output, &widgets::OutputView::runFinished, map, [this, map](const QString& error, bool cancelled) {
                if (error.isEmpty() && !cancelled)
                    map->setEvaluation(m_output->modelRun().result);
            });
            // The advisor measures its advice end to end on the Output tab's model and text.
            auto source = [this, map] { map->advisor()->setModelSource(m_output->modelDir(), m_output->textFile()); };
            connect(m_output, &widgets::OutputView::sourceChanged, map, source);
            source();
        }
}

void MainWindow::buildStatusBar()
{
    m_status = new QLabel(this);
    m_message = new QLabel(this);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_progress = new QProgressBar(this);
    m_progress->setMaximumWidth(260);
    m_progress->setFormat(QStringLiteral("%v / %m trials"));
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    statusBar()->addWidget(m_message, 1);
    statusBar()->addPermanentWidget(m_status);
    statusBar()->addPermanentWidget(m_progress);
}

void MainWindow::startWorker()
{
    // The worker and its thread: requests and results are value types through queued signals.
    m_worker = new ExperimentWorker(m_jobs.generation());
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(this, &MainWindow::requestRun, m_worker, &ExperimentWorker::run, Qt::QueuedConnection);
    connect(m_worker, &ExperimentWorker::started, this, &MainWindow::onStarted, Qt::QueuedConnection);
    connect(m_worker, &ExperimentWorker::progress, this, &MainWindow::onProgress, Qt::QueuedConnection);
    connect(m_worker, &ExperimentWorker::partial, this, &MainWindow::onPartial, Qt::QueuedConnection);
    connect(m_worker, &ExperimentWorker::finished, this, &MainWindow::onFinished, Qt::QueuedConnection);
    connect(
        m_worker, &ExperimentWorker::cacheChanged, this,
        [this](quint64 id, double usedMb, double limitMb, qint64 entries) {
            if (!m_jobs.isNewest(id))
                return;
            m_cacheText = QStringLiteral("cache %1/%2 MB (%3 trials)")
                              .arg(usedMb, 0, 'f', usedMb < 10.0 ? 1 : 0)
                              .arg(limitMb, 0, 'f', 0)
                              .arg(entries);
        },
        Qt::QueuedConnection);
    connect(this, &MainWindow::requestValidation, m_worker, &ExperimentWorker::validate, Qt::QueuedConnection);
    connect(m_worker, &ExperimentWorker::validationFinished, this, &MainWindow::onValidationFinished,
            Qt::QueuedConnection);
    connect(m_validation, &widgets::ValidationView::validationRequested, this, &MainWindow::startValidation);
    m_thread.setObjectName(QStringLiteral("kvlens-worker"));
    m_thread.start();

    m_debounce.setSingleShot(true);
    m_debounce.setInterval(kDebounceMs);
    connect(&m_debounce, &QTimer::timeout, this, &MainWindow::startRun);
    connect(m_controls, &widgets::ControlPanel::specEdited, this, &MainWindow::onSpecEdited);
    connect(m_controls, &widgets::ControlPanel::runRequested, this, &MainWindow::startRun);
    connect(m_controls, &widgets::ControlPanel::cancelRequested, this, &MainWindow::cancelRun);
}

void MainWindow::restoreSession()
{
    const Settings s;
    // The saved geometry only where it still fits (a laptop after a large monitor).
    const QRect fitted = geometry();
    if (restoreGeometry(s.geometry()) && !fitsScreen())
        setGeometry(fitted);
    restoreState(s.windowState());
    m_exportFolder = s.exportFolder(m_exportFolder);
    m_recent = s.recentSpecs();
    rebuildRecentMenu();
    if (const auto spec = s.lastSpec())
        m_controls->setSpec(*spec);
}

void MainWindow::saveSession()
{
    Settings s;
    s.setGeometry(saveGeometry());
    s.setWindowState(saveState());
    s.setExportFolder(m_exportFolder);
    s.setRecentSpecs(m_recent);
    if (const auto spec = normalizeSpec(m_controls->spec()); spec)
        s.setLastSpec(*spec);
}

MainWindow::~MainWindow()
{
    // Cancel any run and join the worker thread (closeEvent does the same for a shown window).
    m_jobs.cancel();
    m_thread.quit();
    m_thread.wait();
}

void MainWindow::buildMenus()
{
    QMenu* file = menuBar()->addMenu(QStringLiteral("&File"));
    file->addAction(QStringLiteral("&Open spec…"), QKeySequence::Open, this, &MainWindow::openSpec);
    file->addAction(QStringLiteral("&Save spec as…"), QKeySequence::SaveAs, this, &MainWindow::saveSpec);
    m_recentMenu = file->addMenu(QStringLiteral("Recent specs"));
    file->addAction(QStringLiteral("&Import tensors…"), QKeySequence(QStringLiteral("Ctrl+I")), this,
                    &MainWindow::importTensors);
    file->addSeparator();
    file->addAction(QStringLiteral("&Export view…"), QKeySequence(QStringLiteral("Ctrl+E")), this,
                    &MainWindow::exportCurrent);
    file->addAction(QStringLiteral("Export &all views…"), QKeySequence(QStringLiteral("Ctrl+Shift+E")), this,
                    &MainWindow::exportAll);
    file->addSeparator();
    file->addAction(QStringLiteral("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    buildPresetsMenu(menuBar()->addMenu(QStringLiteral("&Presets")));
    QMenu* run = menuBar()->addMenu(QStringLiteral("&Run"));
    run->addAction(QStringLiteral("&Run now"), this, &MainWindow::startRun);
    run->addAction(QStringLiteral("&Cancel"), this, &MainWindow::cancelRun);
    run->addSeparator();
    m_runsMenu = run->addMenu(QStringLiteral("Compare the current run &with"));
    m_runsMenu->setToolTipsVisible(true);
    m_overlayMenu = run->addMenu(QStringLiteral("&Overlay the current run with"));
    m_overlayMenu->setToolTipsVisible(true);
    rebuildRunsMenu();
    QMenu* help = menuBar()->addMenu(QStringLiteral("&Help"));
    help->addAction(QStringLiteral("&About KVLens"), this, [this] {
        QMessageBox::about(this, QStringLiteral("About KVLens"),
                           QStringLiteral("<b>KVLens %1</b><p>See how KV-cache quantization damages attention: "
                                          "Shannon-φ planes, the 6D error frame, KL distributions, routing recall and "
                                          "statistical tests for KV, KQV, QKQV, TurboQuant variants and KIVI.</p>"
                                          "<p>GPL-3.0-or-later. Built with Qt, QCustomPlot, Eigen and Boost.Math.</p>")
                               .arg(QStringLiteral(KVLENS_VERSION)));
    });
}

QRect MainWindow::availableScreenArea() const
{
    const QScreen* screen = this->screen() ? this->screen() : QGuiApplication::primaryScreen();
    return screen ? screen->availableGeometry() : QRect(0, 0, 1280, 820);
}

void MainWindow::fitToScreen()
{
    // 85 % of the screen and at least 1280 x 820 where that fits, never more than the screen gives
    // (minus room for the frame): a 1366 x 768 laptop gets 1280 x 728, a 1920 x 1080 screen 1632 x 918.
    const QRect area = availableScreenArea();
    const int width = std::min(std::max(1280, area.width() * 85 / 100), area.width() - 16);
    const int height = std::min(std::max(820, area.height() * 85 / 100), area.height() - 40);
    resize(std::max(640, width), std::max(480, height));
    move(area.x() + std::max(0, (area.width() - frameGeometry().width()) / 2),
         area.y() + std::max(0, (area.height() - frameGeometry().height()) / 2));
}

bool MainWindow::fitsScreen() const
{
    const QRect area = availableScreenArea();
    return geometry().width() <= area.width() && geometry().height() <= area.height()
           && area.intersects(geometry());
}

void MainWindow::buildPresetsMenu(QMenu* menu)
{
    const QDir dir(QStringLiteral(":/presets"));
    for (const QString& name : dir.entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
        QFile f(dir.filePath(name));
        if (!f.open(QIODevice::ReadOnly))
            continue;
        const auto spec = specFromJson(f.readAll().toStdString(), presetDataDirectory());
        if (!spec)
            continue; // the preset tests catch broken presets
        QAction* a = menu->addAction(QString::fromStdString(spec->name));
        a->setToolTip(QStringLiteral("%1: regime %2, d = %3, %4 schemes")
                          .arg(name, QString::fromStdString(spec->regime))
                          .arg(spec->d)
                          .arg(spec->schemes.size()));
        const ExperimentSpec loaded = *spec;
        connect(a, &QAction::triggered, this, [this, loaded] { loadSpec(loaded); });
    }
    menu->setToolTipsVisible(true);
}

void MainWindow::studyModelCell(int layer, int head)
{
    ExperimentSpec spec = m_data.results ? m_data.results->spec : m_controls->spec();
    if (!spec.hasModelCells())
        return;
    // The Output tab's clicked token, if any, is drilled down in that same head.
    if (m_output->text()->selected() >= 0)
        m_output->setDrillHead(layer, head);
    // The cell becomes the experiment: the layer and head axes go, every view shows that head.
    std::erase_if(spec.sweep, [](const SweepAxis& a) {
        return a.parameter == SweepParameter::Regime && (a.regimeKey == "layer" || a.regimeKey == "head");
    });
    spec.regimeParams["layer"] = static_cast<double>(layer);
    spec.regimeParams["head"] = static_cast<double>(head);
    spec.fallback.clear();
    setMessage(QStringLiteral("studying layer %1, head %2 (the map keeps the whole model)").arg(layer).arg(head), false);
    loadSpec(spec);
}

void MainWindow::loadSpec(const ExperimentSpec& spec, bool run)
{
    m_controls->setSpec(spec);
    if (run)
        startRun();
}

void MainWindow::screenshotWhenDone(const QString& path)
{
    m_screenshotPath = path;
}

bool MainWindow::showView(const QString& id)
{
    if (id == QStringLiteral("output")) {
        m_tabs->setCurrentWidget(m_output);
        return true;
    }
    for (widgets::ResultView* v : m_views)
        if (v->viewId() == id) {
            m_tabs->setCurrentWidget(v);
            return true;
        }
    return false;
}

void MainWindow::onSpecEdited()
{
    if (m_controls->autoRun())
        m_debounce.start();
}

std::optional<ExperimentSpec> MainWindow::beginJob(quint64& requestId)
{
    m_debounce.stop();
    auto spec = normalizeSpec(m_controls->spec());
    if (!spec) {
        setMessage(QString::fromStdString(spec.error().text()), true);
        return std::nullopt;
    }
    // Starting a job cancels the running request; the worker drops stale ones.
    requestId = m_jobs.start();
    m_running = true;
    m_controls->setRunning(true);
    return std::move(*spec);
}

void MainWindow::startRun()
{
    quint64 requestId = 0;
    const auto spec = beginJob(requestId);
    if (!spec)
        return;
    m_overlayJob.supersede(); // an overlay still merging is dropped: the new run's data belong in the views
    m_progress->setRange(0, static_cast<int>(std::min<long long>(spec->trialCount(), 1 << 30)));
    m_progress->setValue(0);
    clearEta();
    // The status line holds the finished run's numbers: none of them describe the run now starting.
    m_status->clear();
    m_status->setToolTip(QString());
    setMessage(QStringLiteral("running…"), false);
    emit requestRun(requestId, *spec);
}

void MainWindow::populateBackends()
{
    QStringList labels{QStringLiteral("CPU")}, values{QStringLiteral("cpu")};
    const auto devices = gpu::listDevices();
    if (devices)
        for (const auto& d : *devices) {
            labels << QStringLiteral("OpenCL %1").arg(QString::fromStdString(d.label()));
            values << QString::number(d.index);
        }
    if (!devices || devices->empty()) {
        // Still offered, so a spec asking for OpenCL shows what it asked for; it runs on the CPU
        // and says so (stderr, status bar, the exported spec's "cpu (fallback: ...)").
        labels << QStringLiteral("OpenCL (unavailable: runs on the CPU)");
        values << QString();
    }
    m_controls->setBackends(labels, values);
}

void MainWindow::startValidation()
{
    quint64 requestId = 0;
    const auto spec = beginJob(requestId);
    if (!spec)
        return;
    m_validation->setBusy(true, QStringLiteral("validating: CPU, OpenCL, and the other RNG…"));
    m_tabs->setCurrentWidget(m_validation);
    emit requestValidation(requestId, *spec);
}

void MainWindow::onValidationFinished(quint64 id, const widgets::ValidationData& data, const QString& error)
{
    if (!m_jobs.isNewest(id)) {
        m_validation->setBusy(false);
        return;
    }
    m_running = false;
    m_controls->setRunning(false);
    m_validation->setBusy(false, error);
    if (error.isEmpty()) {
        m_validation->setValidation(data);
        setMessage(QStringLiteral("validation done"), false);
    } else {
        setMessage(QStringLiteral("validation: %1").arg(error), true);
    }
    emit validationFinished(id, error);
}

void MainWindow::cancelRun()
{
    m_debounce.stop();
    if (!m_running)
        return;
    m_jobs.cancel(); // the worker stops within one trial
    m_running = false;
    m_controls->setRunning(false);
    clearEta();
    setMessage(QStringLiteral("cancelled; finished trials stay drawn"), false);
}

void MainWindow::onStarted(quint64 id, const QString& backend, qint64 total)
{
    if (!m_jobs.isNewest(id))
        return;
    m_backendLabel = backend;
    m_progress->setRange(0, static_cast<int>(std::min<qint64>(total, 1 << 30)));
    m_progress->setFormat(QStringLiteral("%v / %m trials"));
    m_runClock.start();
}

void MainWindow::clearEta()
{
    m_progress->setFormat(QStringLiteral("%v / %m trials"));
}

QString MainWindow::progressText() const
{
    return m_progress->text();
}

void MainWindow::onProgress(quint64 id, qint64 done, qint64 total)
{
    // A cancelled run keeps its id (what it finished is still drawn), and its worker may report
    // progress until it notices the cancel: that must not bring an ETA back.
    if (!m_jobs.isNewest(id) || !m_running)
        return;
    m_progress->setRange(0, static_cast<int>(std::min<qint64>(total, 1 << 30)));
    m_progress->setValue(static_cast<int>(std::min<qint64>(done, 1 << 30)));
    // The ETA extrapolates this run's rate, once it has run a second and finished a trial.
    const double elapsed = m_runClock.isValid() ? m_runClock.elapsed() / 1000.0 : 0.0;
    if (done > 0 && done < total && elapsed >= 1.0) {
        const double eta = elapsed * static_cast<double>(total - done) / static_cast<double>(done);
        m_progress->setFormat(QStringLiteral("%v / %m trials · ETA %1")
                                  .arg(eta < 90.0 ? QStringLiteral("%1 s").arg(eta, 0, 'f', 0)
                                                  : QStringLiteral("%1 min").arg(eta / 60.0, 0, 'f', 1)));
    } else if (done >= total) {
        m_progress->setFormat(QStringLiteral("%v / %m trials"));
    }
}

void MainWindow::onPartial(quint64 id, const widgets::ViewData& data)
{
    if (!m_jobs.isNewest(id))
        return; // a stale run's snapshot
    showData(data);
}

void MainWindow::onFinished(quint64 id, const widgets::ViewData& data, const QString& error, bool cancelled, double ms)
{
    // Only the current request updates the window; a run stopped by Cancel keeps its id, so
    // what it finished is still drawn, while a run superseded by a newer request is dropped.
    if (!m_jobs.isNewest(id))
        return;
    m_running = false;
    m_controls->setRunning(false);
    clearEta();
    if (!error.isEmpty()) {
        setMessage(error, true);
        emit runFinished(id, error);
        return;
    }
    showData(data);
    const ResultSet& r = *data.results;
    if (!cancelled && !data.partial)
        keepRun(data.results);
    showRunStatus(data, ms);
    const QString cancelNote =
        data.leftOut > 0
            ? QStringLiteral("cancelled: drawn %1 of %2 trials, on the seeds every scheme finished (%3 more finished "
                             "trials left out)")
                  .arg(r.trials.size())
                  .arg(r.totalTrials)
                  .arg(data.leftOut)
            : QStringLiteral("cancelled after %1 of %2 trials").arg(r.trials.size()).arg(r.totalTrials);
    setMessage(cancelled ? cancelNote
                         : (r.regimeNote.empty() ? QStringLiteral("done") : QString::fromStdString(r.regimeNote)),
               false);
    emit runFinished(id, QString());
    if (!m_screenshotPath.isEmpty()) {
        const QString path = m_screenshotPath;
        m_screenshotPath.clear();
        QTimer::singleShot(400, this, [this, path] { screenshotCurrentTab(path); });
    }
}

void MainWindow::keepRun(const std::shared_ptr<const ResultSet>& results)
{
    // Kept for comparison: the results are immutable and shared with the views.
    const ResultSet& r = *results;
    KeptRun kept;
    kept.results = results;
    kept.backend = m_backendLabel;
    kept.time = QTime::currentTime().toString(QStringLiteral("HH:mm:ss"));
    kept.name = QStringLiteral("%1 · %2 · %3 schemes × %4 budgets × %5 seeds")
                    .arg(QString::fromStdString(r.spec.name.empty() ? std::string("run") : r.spec.name))
                    .arg(QString::fromStdString(r.spec.regime))
                    .arg(r.schemes.size())
                    .arg(r.spec.budgets.size())
                    .arg(r.spec.seedCount);
    m_kept.push_back(std::move(kept));
    if (static_cast<int>(m_kept.size()) > kMaxKeptRuns)
        m_kept.erase(m_kept.begin());
    rebuildRunsMenu();
}

void MainWindow::showRunStatus(const widgets::ViewData& data, double ms)
{
    const ResultSet& r = *data.results;
    const double uniformEntropy = std::log(static_cast<double>(r.spec.tokens));
    const QString reused = r.reusedTrials > 0 ? QStringLiteral(" (%1 computed, %2 from the cache)")
                                                    .arg(static_cast<long long>(r.trials.size()) - r.reusedTrials)
                                                    .arg(r.reusedTrials)
                                              : QString();
    m_status->setText(QStringLiteral("%1 · %2/%3 trials%4 · %5 s · attention entropy %6 nats (uniform %7) · %8")
                          .arg(m_backendLabel)
                          .arg(r.trials.size())
                          .arg(r.totalTrials)
                          .arg(reused)
                          .arg(ms / 1000.0, 0, 'f', 2)
                          .arg(data.figures ? data.figures->meanEntropy : 0.0, 0, 'f', 2)
                          .arg(uniformEntropy, 0, 'f', 2)
                          .arg(m_cacheText));
    m_status->setToolTip(m_status->text() + QStringLiteral("\n\n") + QStringLiteral("Backend · trials finished (new ones computed, the rest from the trial cache) · "
                                        "run time · mean entropy of the exact attention (low entropy = peaked "
                                        "attention, where key errors hurt most) · the trial cache's use of its limit."));
}

void MainWindow::screenshotCurrentTab(const QString& path)
{
    auto grabAndClose = [this, path] {
        const bool saved = grab().save(path, "PNG");
        if (!saved)
            qWarning("kvlens: cannot write the screenshot %s", qPrintable(path));
        close();
    };
    // The Output tab documents a model run: its default run, then the drill-down of the
    // worst-predicted token of the configuration shown.
    if (auto* output = qobject_cast<widgets::OutputView*>(m_tabs->currentWidget())) {
        connect(
            output, &widgets::OutputView::runFinished, this,
            [this, output, grabAndClose](const QString& error, bool) {
                const auto& run = output->modelRun();
                if (!error.isEmpty() || !run.result || output->configuration() < 0) {
                    grabAndClose();
                    return;
                }
                const auto& tokens = run.result->configurations[static_cast<std::size_t>(output->configuration())].tokens;
                int worst = 0;
                for (int i = 0; i < static_cast<int>(tokens.size()); ++i)
                    if (tokens[static_cast<std::size_t>(i)].kld > tokens[static_cast<std::size_t>(worst)].kld)
                        worst = i;
                connect(output, &widgets::OutputView::probed, this,
                        [this, grabAndClose] { QTimer::singleShot(300, this, grabAndClose); }, Qt::SingleShotConnection);
                output->selectToken(worst);
            },
            Qt::SingleShotConnection);
        output->startRun();
        return;
    }
    // The Model map documents the advisor too: its advice measured end to end on the Output tab's
    // model and text.
    if (auto* map = qobject_cast<widgets::ModelMapView*>(m_tabs->currentWidget())) {
        widgets::AdvisorPanel* advisor = map->advisor();
        advisor->waitUntilComputed(60000);
        if (advisor->measureButton()->isEnabled()) {
            connect(advisor, &widgets::AdvisorPanel::measurementFinished, this,
                    [this, grabAndClose] { QTimer::singleShot(300, this, grabAndClose); }, Qt::SingleShotConnection);
            advisor->measure();
            return;
        }
    }
    // The Teaching tab documents its whole chain: every stage shown and drawn, and the table's
    // header given a turn of the event loop to fit the rows just revealed.
    if (auto* teaching = qobject_cast<widgets::TeachingView*>(m_tabs->currentWidget())) {
        teaching->setStage(widgets::TeachingView::StageCount - 1);
        teaching->waitUntilDrawn();
        QTimer::singleShot(300, this, grabAndClose);
        return;
    }
    grabAndClose();
}

QString MainWindow::statusText() const
{
    return m_status->text();
}

void MainWindow::showData(const widgets::ViewData& data)
{
    m_data = data;
    for (widgets::ResultView* v : m_views)
        v->setData(data);
}

void MainWindow::setMessage(const QString& text, bool error)
{
    m_message->setText(text);
    m_message->setStyleSheet(error ? QStringLiteral("color: #b00020;") : QString());
}

void MainWindow::openSpec()
{
    const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Open spec"), m_exportFolder,
                                                      QStringLiteral("KVLens spec (*.json)"));
    if (!path.isEmpty())
        openSpecFile(path);
}

void MainWindow::openSpecFile(const QString& path)
{
    const auto spec = loadSpecFile(path.toStdString());
    if (!spec) {
        QMessageBox::warning(this, QStringLiteral("Cannot open spec"), QString::fromStdString(spec.error().text()));
        return;
    }
    addRecent(path);
    loadSpec(*spec);
}

void MainWindow::importTensors()
{
    // Start where the last import was, else beside the shipped example, else in the export folder.
    QString folder = Settings().importFolder();
    if (folder.isEmpty())
        folder = QDir(QStringLiteral(KVLENS_EXAMPLES_DIR)).exists() ? QStringLiteral(KVLENS_EXAMPLES_DIR) : m_exportFolder;
    widgets::ImportDialog dialog(m_controls->spec(), folder, this);
    if (dialog.exec() != QDialog::Accepted || !dialog.valid())
        return;
    Settings().setImportFolder(QFileInfo(dialog.path()).absolutePath());
    loadSpec(dialog.spec());
}

void MainWindow::saveSpec()
{
    const auto spec = normalizeSpec(m_controls->spec());
    if (!spec) {
        QMessageBox::warning(this, QStringLiteral("Cannot save spec"), QString::fromStdString(spec.error().text()));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save spec"),
                                                      QDir(m_exportFolder).filePath(QStringLiteral("spec.json")),
                                                      QStringLiteral("KVLens spec (*.json)"));
    if (path.isEmpty())
        return;
    if (auto written = writeFileAtomic(path.toStdString(), specToJson(*spec) + "\n"); !written) {
        QMessageBox::warning(this, QStringLiteral("Cannot save spec"), QString::fromStdString(written.error().text()));
        return;
    }
    addRecent(path);
}

void MainWindow::addRecent(const QString& path)
{
    m_recent.removeAll(path);
    m_recent.prepend(path);
    while (m_recent.size() > kMaxRecent)
        m_recent.removeLast();
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    for (const QString& path : m_recent)
        m_recentMenu->addAction(path, this, [this, path] { openSpecFile(path); });
    m_recentMenu->setEnabled(!m_recent.isEmpty());
}

QString MainWindow::messageText() const
{
    return m_message->text();
}

widgets::ExportOutcome MainWindow::exportTo(const std::vector<widgets::ResultView*>& views, const QString& dir,
                                            const std::function<QString(const widgets::ResultView&)>& stemFor,
                                            const widgets::ExportOptions& options)
{
    widgets::ExportOutcome outcome;
    if (m_running) {
        outcome.error = QStringLiteral("a run is going: export once it has finished, or cancel it (a cancelled run "
                                       "is exported as partial, on the seeds every scheme finished)");
        setMessage(QStringLiteral("export refused: %1").arg(outcome.error), true);
        return outcome;
    }
    // One set: written beside the folder's files and renamed in only when every file is written,
    // so a full disk or a failed view leaves the previous export whole. Each figure's spec is
    // the run it was drawn from (the Model map's whole model while one of its cells is studied).
    outcome = widgets::exportViews(views, dir, stemFor, options);
    if (!outcome.ok()) {
        setMessage(QStringLiteral("export failed: %1").arg(outcome.error), true);
        return outcome;
    }
    QString text = outcome.written.size() <= 6 ? QStringLiteral("wrote %1").arg(outcome.written.join(QStringLiteral(", ")))
                                               : QStringLiteral("wrote %1 files to %2").arg(outcome.written.size()).arg(dir);
    if (!outcome.skipped.isEmpty())
        text += QStringLiteral("; skipped: %1").arg(outcome.skipped.join(QStringLiteral("; ")));
    setMessage(text, false);
    m_message->setToolTip(text);
    return outcome;
}

void MainWindow::exportCurrent()
{
    if (auto* output = qobject_cast<widgets::OutputView*>(m_tabs->currentWidget())) {
        const QString dir = QFileDialog::getExistingDirectory(this, QStringLiteral("Export the model run into"), m_exportFolder);
        if (dir.isEmpty())
            return;
        m_exportFolder = dir;
        const auto outcome = output->exportRun(dir, widgets::ExportOptions{});
        if (!outcome.ok())
            QMessageBox::warning(this, QStringLiteral("Export failed"), outcome.error);
        else
            setMessage(QStringLiteral("wrote %1 files into %2").arg(outcome.written.size()).arg(dir), false);
        return;
    }
    auto* view = qobject_cast<widgets::ResultView*>(m_tabs->currentWidget());
    if (!view || m_data.empty()) {
        QMessageBox::information(this, QStringLiteral("Export"), QStringLiteral("Run an experiment first."));
        return;
    }
    widgets::ExportDialog dialog(m_exportFolder, view->viewId(), false, this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    m_exportFolder = dialog.folder();
    const QString stem = dialog.stem();
    const auto outcome = exportTo({view}, dialog.folder(), [&](const widgets::ResultView&) { return stem; },
                                  dialog.options());
    if (!outcome.ok())
        QMessageBox::warning(this, QStringLiteral("Export failed"), outcome.error);
    else if (outcome.written.isEmpty())
        QMessageBox::information(this, QStringLiteral("Export"),
                                 QStringLiteral("Nothing written: %1").arg(outcome.skipped.join(QLatin1Char('\n'))));
}

void MainWindow::exportAll()
{
    if (m_data.empty()) {
        QMessageBox::information(this, QStringLiteral("Export"), QStringLiteral("Run an experiment first."));
        return;
    }
    widgets::ExportDialog dialog(m_exportFolder, QStringLiteral("kvlens_"), true, this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    m_exportFolder = dialog.folder();
    const QString prefix = dialog.stem();
    const std::vector<widgets::ResultView*> views(m_views.begin(), m_views.end());
    const auto outcome = exportTo(
        views, dialog.folder(), [&](const widgets::ResultView& v) { return prefix + v.viewId(); }, dialog.options());
    if (!outcome.ok())
        QMessageBox::warning(this, QStringLiteral("Export failed"),
                             outcome.error + QStringLiteral("\nNothing in %1 was changed.").arg(dialog.folder()));
    else if (!outcome.skipped.isEmpty())
        QMessageBox::information(this, QStringLiteral("Export"),
                                 QStringLiteral("Wrote %1 files to %2.\n\nNot written (nothing to draw):\n%3")
                                     .arg(outcome.written.size())
                                     .arg(dialog.folder(), outcome.skipped.join(QLatin1Char('\n'))));
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    // Cancel-then-wait: the worker stops within one trial, then the thread is joined.
    m_debounce.stop();
    m_jobs.cancel();
    m_thread.quit();
    m_thread.wait();
    if (m_restoreSettings)
        saveSession();
    event->accept();
}

QStringList MainWindow::keptRuns() const
{
    QStringList out;
    for (const KeptRun& k : m_kept)
        out << k.name + QStringLiteral(" · ") + k.time;
    return out;
}

void MainWindow::rebuildRunsMenu()
{
    for (QMenu* menu : {m_runsMenu, m_overlayMenu}) {
        if (!menu)
            continue;
        menu->clear();
        // Every kept run but the newest (the current one) can be run A.
        const int candidates = static_cast<int>(m_kept.size()) - 1;
        if (candidates <= 0) {
            QAction* none = menu->addAction(QStringLiteral("(finish two runs: each finished run is kept here)"));
            none->setEnabled(false);
            continue;
        }
        const bool overlay = menu == m_overlayMenu;
        for (int i = candidates - 1; i >= 0; --i) {
            QAction* a = menu->addAction(m_kept[static_cast<std::size_t>(i)].name + QStringLiteral(" · ")
                                         + m_kept[static_cast<std::size_t>(i)].time);
            a->setToolTip(overlay ? QStringLiteral("Run A: this run; run B: the current one. Every view draws both, "
                                                   "their series named A/scheme and B/scheme.")
                                  : QStringLiteral("Run A: this run; run B: the current one. The seed-level test per "
                                                   "scheme and budget, as kvlens compare writes it."));
            if (overlay)
                connect(a, &QAction::triggered, this, [this, i] { overlayWithKept(i); });
            else
                connect(a, &QAction::triggered, this, [this, i] { compareWithKept(i); });
        }
    }
}

bool MainWindow::overlayWithKept(int index)
{
    if (index < 0 || index + 1 >= static_cast<int>(m_kept.size()))
        return false;
    const KeptRun a = m_kept[static_cast<std::size_t>(index)];
    const KeptRun b = m_kept.back();
    setMessage(QStringLiteral("overlaying A (%1) and B (%2)…").arg(a.time, b.time), false);
    m_overlayJob.start(
        [a, b](const auto&) {
            OverlayOutcome out;
            auto merged = overlayRuns({{"A", a.results.get()}, {"B", b.results.get()}});
            if (!merged) {
                out.error = QString::fromStdString(merged.error().text());
                return out;
            }
            out.data = widgets::makeViewData(std::make_shared<const ResultSet>(std::move(*merged)), false);
            return out;
        },
        [this, a, b](const OverlayOutcome& outcome) {
            if (!outcome.error.isEmpty()) {
                setMessage(QStringLiteral("cannot overlay: ") + outcome.error, true);
                emit overlayShown(outcome.error);
                return;
            }
            showData(outcome.data);
            setMessage(QStringLiteral("overlay: A = %1 (%2), B = %3 (%4); series are named A/scheme and B/scheme; the "
                                      "next run leaves the overlay")
                           .arg(a.name, a.time, b.name, b.time),
                       false);
            emit overlayShown(QString());
        });
    return true;
}

void MainWindow::showComparison(const CompareOutcome& outcome, const KeptRun& a, const KeptRun& b)
{
    if (!outcome.comparison) {
        m_compareDiff.clear();
        m_compareLabel->setText(outcome.error);
        m_compareView->setComparison(nullptr);
        emit comparisonShown(outcome.error);
        return;
    }
    const RunComparison& c = *outcome.comparison;
    QStringList diff;
    for (const SpecDifference& d : c.specDiff)
        diff << QStringLiteral("%1: %2 → %3")
                    .arg(QString::fromStdString(d.path), QString::fromStdString(d.a.empty() ? "(none)" : d.a),
                         QString::fromStdString(d.b.empty() ? "(none)" : d.b));
    m_compareDiff = diff.join(QLatin1Char('\n'));
    m_compareLabel->setText(QStringLiteral("<b>A</b>: %1 · %2<br><b>B</b>: %3 · %4<br>spec difference: %5%6")
                                .arg(a.name.toHtmlEscaped(), a.time, b.name.toHtmlEscaped(), b.time)
                                .arg(diff.isEmpty() ? QStringLiteral("none") : diff.join(QStringLiteral("; ")).toHtmlEscaped())
                                .arg(c.pairingNote.empty()
                                         ? QString()
                                         : QStringLiteral("<br>unpaired: ") + QString::fromStdString(c.pairingNote).toHtmlEscaped()));
    m_compareView->setComparison(outcome.comparison);
    emit comparisonShown(QString());
}

bool MainWindow::compareWithKept(int index)
{
    if (index < 0 || index + 1 >= static_cast<int>(m_kept.size()))
        return false;
    const KeptRun a = m_kept[static_cast<std::size_t>(index)];
    const KeptRun b = m_kept.back();
    if (!m_compareWindow) {
        m_compareWindow = new QWidget(this, Qt::Window);
        m_compareWindow->setWindowTitle(QStringLiteral("KVLens: run comparison"));
        auto* layout = new QVBoxLayout(m_compareWindow);
        m_compareLabel = new QLabel(m_compareWindow);
        m_compareLabel->setWordWrap(true);
        m_compareLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
        layout->addWidget(m_compareLabel);
        m_compareView = new widgets::RunCompareView(m_compareWindow);
        layout->addWidget(m_compareView, 1);
        const QRect area = availableScreenArea();
        m_compareWindow->resize(std::min(900, area.width() - 40), std::min(700, area.height() - 60));
    }
    m_compareLabel->setText(QStringLiteral("comparing A (%1, %2) with B (%3, %4)…").arg(a.name, a.time, b.name, b.time));
    m_compareWindow->show();
    m_compareWindow->raise();
    // Numerics off the GUI thread: each run as its finished run directory would hold it.
    m_compareJob.start(
        [a, b](const auto&) {
            auto asDirectory = [](const KeptRun& k) {
                RunDirectory d;
                d.dir = "run of " + k.time.toStdString();
                d.results = *k.results;
                d.manifest = manifestFor(*k.results, k.results->spec, ShardId{});
                return d;
            };
            CompareOutcome out;
            auto r = compareRuns(asDirectory(a), asDirectory(b));
            if (r)
                out.comparison = std::make_shared<const RunComparison>(std::move(*r));
            else
                out.error = QString::fromStdString(r.error().text());
            return out;
        },
        [this, a, b](const CompareOutcome& outcome) { showComparison(outcome, a, b); });
    return true;
}

} // namespace kvlens::app
