// SPDX-License-Identifier: GPL-3.0-or-later
// The KVLens main window: control dock, plot views, progress and status, menus, worker thread.
#pragma once

#include "core/spec/result.h"
#include "core/spec/spec.h"
#include "widgets/background_job.h"
#include "widgets/figure_export.h"
#include "widgets/job_tracker.h"
#include "widgets/view_data.h"

#include <QElapsedTimer>
#include <QMainWindow>
#include <QThread>
#include <QTimer>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

class QLabel;
class QMenu;
class QProgressBar;
class QTabWidget;

namespace kvlens {
struct RunComparison;
}

namespace kvlens::widgets {
class ControlPanel;
class OutputView;
class RunCompareView;
class ResultView;
class ValidationView;
struct ValidationData;
} // namespace kvlens::widgets

namespace kvlens::app {

class ExperimentWorker;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    /// `restoreSettings`: start from the last session's spec and layout (off in tests).
    explicit MainWindow(bool restoreSettings = true, QWidget* parent = nullptr);
    ~MainWindow() override;

    widgets::ControlPanel* controls() const { return m_controls; }
    widgets::ValidationView* validationView() const { return m_validation; }
    const std::vector<widgets::ResultView*>& views() const { return m_views; }
    QTabWidget* tabs() const { return m_tabs; }
    /// The Output tab (a model run over text).
    widgets::OutputView* outputView() const { return m_output; }
    /// The first-run orientation panel above the tabs (hidden once dismissed).
    QWidget* orientationPanel() const { return m_orientation; }
    const widgets::ViewData& lastData() const { return m_data; }
    bool isRunning() const { return m_running; }
    quint64 currentRequest() const { return m_jobs.newest(); }
    /// The worker (on its own thread, holding the session's backends); for tests between runs.
    const ExperimentWorker* worker() const { return m_worker; }
    /// The status line's text (backend, trials, cache use).
    QString statusText() const;
    /// The progress bar's text as drawn ("12 / 72 trials · ETA 3 s").
    QString progressText() const;
    /// The message beside it: what the last action did ("wrote 42 files…; skipped: …").
    QString messageText() const;
    /// Exports `views` into `dir` as File → Export does after its dialog (exportViews: the spec of
    /// the run each figure is drawn from, a partial run marked, empty figures skipped), and puts
    /// what it wrote and what it skipped in the message. Refused while a run is going: its
    /// snapshot is not a run any export could describe.
    widgets::ExportOutcome exportTo(const std::vector<widgets::ResultView*>& views, const QString& dir,
                                    const std::function<QString(const widgets::ResultView&)>& stemFor,
                                    const widgets::ExportOptions& options);

    /// Finished runs kept this session (newest last, at most kMaxKeptRuns): "name · d = 128 … · 14:02".
    QStringList keptRuns() const;
    static constexpr int kMaxKeptRuns = 12;
    /// Compares kept run `index` (A) with the newest finished run (B) off the GUI thread, as
    /// `kvlens compare` does (seed-level tests, the spec difference), and shows the forest plot
    /// of B against A in the Run comparison window. False when there is no such pair.
    bool compareWithKept(int index);
    /// Overlays kept run `index` (A) and the newest finished run (B) in every view: one run whose
    /// schemes are A's and B's, named "A/scheme" and "B/scheme" (core/analysis/run_overlay.h),
    /// merged off the GUI thread. Refused (overlayShown with the reason) when the runs differ in
    /// the grid or the data. False when there is no such pair. The next run leaves the overlay.
    bool overlayWithKept(int index);
    /// The Run comparison window's view (null before the first comparison).
    widgets::RunCompareView* runCompareView() const { return m_compareView; }
    /// The spec difference of the comparison shown ("budgets: [2, 3] → [2, 3, 4]" per line).
    QString comparisonSpecDiff() const { return m_compareDiff; }

    /// Makes one (layer, head) cell of the current model run the experiment (a click on the
    /// Model map): every view then shows that head; the map keeps the whole model.
    void studyModelCell(int layer, int head);
    /// Loads a spec into the controls and runs it (preset, file, command line).
    void loadSpec(const ExperimentSpec& spec, bool run = true);
    /// Grabs the window into `path` once the next run has finished, then closes it.
    void screenshotWhenDone(const QString& path);
    /// Shows the view whose viewId() is `id`; false when there is none.
    bool showView(const QString& id);
    /// Debounce delay between a control change and the restarted run.
    static constexpr int kDebounceMs = 300;

public slots:
    /// Validates the controls' spec and starts a run (cancelling any older one).
    void startRun();
    void cancelRun();
    /// Runs paper B's validation of the controls' spec (three runs) on the worker.
    void startValidation();

    /// Sizes the window to 85 % of the screen's available area (at least 1280 x 820 where that fits,
    /// never more than the screen) and centres it.
    void fitToScreen();
    /// Whether the window lies within the screen's available area.
    bool fitsScreen() const;

signals:
    /// A run's final data has been drawn (or it failed: `error` non-empty).
    void runFinished(quint64 id, const QString& error);
    /// Internal: hands a request to the worker thread.
    void requestRun(quint64 id, const kvlens::ExperimentSpec& spec);
    void requestValidation(quint64 id, const kvlens::ExperimentSpec& spec);
    /// A run comparison is drawn (or failed: `error` non-empty).
    void comparisonShown(const QString& error);
    /// An overlay of two runs is drawn in every view (or refused: `error` non-empty).
    void overlayShown(const QString& error);
    /// A validation finished (or failed: `error` non-empty).
    void validationFinished(quint64 id, const QString& error);

protected:
    void closeEvent(QCloseEvent* event) override;


private:
    // The constructor's parts, in order.
    void buildControlDock();
    void buildTabs();
    void buildCentral(); ///< the orientation panel above the tabs
    void connectModelMap();
    void buildStatusBar();
    void startWorker();
    /// The last session's geometry, layout, folders, recent files and spec (Settings).
    void restoreSession();
    void saveSession();

    QRect availableScreenArea() const;
    void buildMenus();
    void buildPresetsMenu(QMenu* menu);
    void onSpecEdited();
    /// A run's or validation's start: the controls' spec normalized (or its error shown, none
    /// returned), a new job id in `requestId` (cancelling the older one), the controls set running.
    std::optional<ExperimentSpec> beginJob(quint64& requestId);
    void onStarted(quint64 id, const QString& backend, qint64 total);
    void onProgress(quint64 id, qint64 done, qint64 total);
    void onPartial(quint64 id, const widgets::ViewData& data);
    void onFinished(quint64 id, const widgets::ViewData& data, const QString& error, bool cancelled, double ms);
    void onValidationFinished(quint64 id, const widgets::ValidationData& data, const QString& error);
    /// onFinished's parts: a finished run kept for comparison, the status line, the screenshot.
    void keepRun(const std::shared_ptr<const ResultSet>& results);
    void showRunStatus(const widgets::ViewData& data, double ms);
    /// Grabs the window into `path` once the current tab has shown what it documents, then closes.
    void screenshotCurrentTab(const QString& path);
    void populateBackends();
    /// The progress bar without an ETA (a run starting, cancelled or finished).
    void clearEta();
    void showData(const widgets::ViewData& data);
    void setMessage(const QString& text, bool error);
    void openSpec();
    void openSpecFile(const QString& path);
    void importTensors();
    void saveSpec();
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void exportCurrent();
    void exportAll();

    widgets::ControlPanel* m_controls = nullptr;
    QTabWidget* m_tabs = nullptr;
    widgets::OutputView* m_output = nullptr;
    QWidget* m_orientation = nullptr; ///< the first-run orientation panel
    struct KeptRun {
        QString name;
        QString time;
        std::shared_ptr<const ResultSet> results;
        QString backend;
    };
    std::vector<KeptRun> m_kept;
    QMenu* m_runsMenu = nullptr;
    QMenu* m_overlayMenu = nullptr;
    /// An overlay of two kept runs, merged off the GUI thread.
    struct OverlayOutcome {
        widgets::ViewData data;
        QString error;
    };
    widgets::BackgroundJob<OverlayOutcome> m_overlayJob{this};
    QWidget* m_compareWindow = nullptr;
    widgets::RunCompareView* m_compareView = nullptr;
    QLabel* m_compareLabel = nullptr;
    QString m_compareDiff;
    /// A comparison of two kept runs, computed off the GUI thread.
    struct CompareOutcome {
        std::shared_ptr<const RunComparison> comparison;
        QString error;
    };
    widgets::BackgroundJob<CompareOutcome> m_compareJob{this};
    void rebuildRunsMenu();
    void showComparison(const CompareOutcome& outcome, const KeptRun& a, const KeptRun& b);
    std::vector<widgets::ResultView*> m_views;
    widgets::ValidationView* m_validation = nullptr;
    QProgressBar* m_progress = nullptr;
    QElapsedTimer m_runClock; ///< since the newest run started (for the ETA)
    QLabel* m_status = nullptr;
    QLabel* m_message = nullptr;
    QMenu* m_recentMenu = nullptr;
    QTimer m_debounce;
    QThread m_thread;
    ExperimentWorker* m_worker = nullptr;
    widgets::JobTracker m_jobs; ///< runs and validations: the newest is the one shown
    bool m_running = false;
    bool m_restoreSettings = true;
    QString m_backendLabel;
    QString m_cacheText;            ///< the trial cache's use, from the worker after each run
    widgets::ViewData m_data;
    QString m_exportFolder;
    QStringList m_recent;
    QString m_screenshotPath;
};

} // namespace kvlens::app
