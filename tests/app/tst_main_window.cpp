// SPDX-License-Identifier: GPL-3.0-or-later
// The main window: a run populates every view; a change mid-run cancels the old run; closing mid-run does not hang;
// runs reuse one backend per kind and device.
#include "app/backend_factory.h"
#include "app/progress_line.h"
#include "app/experiment_worker.h"
#include "app/main_window.h"
#include "app/resources.h"
#include "core/spec/spec_json.h"
#include "gpu/device.h"
#include "widgets/control_panel.h"
#include "widgets/model_map_view.h"
#include "widgets/output_view.h"
#include "widgets/run_compare_view.h"
#include "core/analysis/run_compare.h"
#include "core/analysis/eval_analysis.h"
#include "widgets/result_view.h"
#include "widgets/validation_view.h"

#include <QComboBox>
#include <QLabel>
#include <QTabWidget>
#include <QImage>
#include <QPushButton>
#include <QTableWidget>

#include <QDir>

#include <cmath>
#include <map>
#include <set>
#include <QElapsedTimer>
#include <QMouseEvent>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QSpinBox>
#include <QTest>

using namespace kvlens;

namespace {

widgets::ResultView* viewById(const app::MainWindow& window, const QString& id)
{
    for (widgets::ResultView* v : window.views())
        if (v->viewId() == id)
            return v;
    return nullptr;
}

ExperimentSpec small(int seeds = 2)
{
    auto spec = specFromJson(R"({"d": 32, "tokens": 128, "queries": 8, "budgets": [2, 3],
                                "schemes": ["KV", "KQV", "QKQV"], "comparisons": {"bootstrap": 100, "permutations": 49}})");
    Q_ASSERT(spec.ok());
    spec->seedCount = seeds;
    return *spec;
}

} // namespace

class TestMainWindow : public QObject {
    Q_OBJECT
private slots:
    void theProgressLineGivesTheEta()
    {
        using kvlens::app::ProgressLine;
        // Half done in 1 s of this run: 1 s to go.
        QCOMPARE(ProgressLine::text("", 36, 72, 1.0, 1.0), std::string("kvlens: 36/72 trials (50%)  1.0 s, ETA 1.0 s"));
        // A later preset of --reproduce: the clock is the whole command's, the rate this run's.
        QCOMPARE(ProgressLine::text("reproduce [2/3] a:", 10, 40, 30.0, 2.0),
                 std::string("kvlens: reproduce [2/3] a: 10/40 trials (25%)  30.0 s, ETA 6.0 s"));
        QCOMPARE(ProgressLine::text("", 72, 72, 2.5, 2.5), std::string("kvlens: 72/72 trials (100%)  2.5 s"));
        QCOMPARE(ProgressLine::text("", 0, 72, 0.1, 0.1), std::string("kvlens: 0/72 trials (0%)  0.1 s"));
    }

    void backendOptionsMeanTheSameInTheWindowAndInBatch()
    {
        // One rule for both (it was written twice, and disagreed on --backend auto --device 0).
        auto applied = [](const char* backend, const char* device) {
            kvlens::ExperimentSpec spec = kvlens::defaultSpec();
            spec.backend = BackendKind::Cpu;
            spec.device = "old";
            kvlens::app::applyBackendOptions(spec, backend, device);
            return spec.backendText() + "|" + spec.device;
        };
        QCOMPARE(applied("", ""), std::string("cpu|old"));
        QCOMPARE(applied("auto", ""), std::string("auto|old"));
        QCOMPARE(applied("", "1"), std::string("opencl|1"));
        QCOMPARE(applied("auto", "0"), std::string("auto|0"));
        QCOMPARE(applied("cpu", "pthread"), std::string("cpu|pthread"));
    }

    void initTestCase() { initKvlensResources(); }

    void runPopulatesEveryView()
    {
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
        QCOMPARE(finished.at(0).at(1).toString(), QString());
        QCOMPARE(finished.at(0).at(0).toULongLong(), window.currentRequest());
        QVERIFY(!window.isRunning());
        QCOMPARE(window.lastData().results->trials.size(), std::size_t{3 * 2 * 2});
        QVERIFY(window.lastData().comparisons);
        QCOMPARE(window.views().size(), std::size_t{11});
        // Expected series per view for 3 schemes x 2 budgets.
        const std::map<QString, int> expected = {{"shannon_phi", 6}, {"scatter_6d", 180}, {"kl_distribution", 12},
                                                 {"routing_recall", 6}, {"theory", 6}, {"sweep", 3},  // sweep: one line per scheme against n
                                                 {"rate_distortion", 4}, // a line per scheme, and the envelope
                                                 {"validation", 0},  // drawn when a validation runs
                                                 {"model_map", 0}};  // a model run's: here a placeholder line
        for (widgets::ResultView* v : window.views()) {
            const auto it = expected.find(v->viewId());
            if (it != expected.end())
                QCOMPARE(v->seriesCount(), it->second);
            else // the teaching view computes its own data in the background
                QVERIFY2(v->waitUntilDrawn() && v->seriesCount() > 0, qPrintable(v->viewId()));
        }
    }

    void changingAControlMidRunCancelsTheOldRun()
    {
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        // A run long enough (thousands of trials) that only cancellation lets the next one start in time.
        window.loadSpec(small(2000));
        const quint64 first = window.currentRequest();
        QTRY_VERIFY_WITH_TIMEOUT(!window.lastData().empty(), 20000); // partial results arrive while running
        QVERIFY(window.isRunning());
        window.controls()->dBox()->setValue(48); // an edit: debounced restart
        QTRY_VERIFY_WITH_TIMEOUT(window.currentRequest() != first, 5000);
        const quint64 second = window.currentRequest();
        // The stale run never reports; the new one does (but is itself long: cancel it by spec).
        QTRY_VERIFY_WITH_TIMEOUT(!window.lastData().empty() && window.lastData().results->spec.d == 48, 20000);
        QCOMPARE(finished.count(), 0);
        window.loadSpec(small(2)); // supersedes the second run too
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 20000);
        QVERIFY(finished.at(0).at(0).toULongLong() != first);
        QVERIFY(finished.at(0).at(0).toULongLong() != second);
        QCOMPARE(window.lastData().results->spec.seedCount, 2);
    }

    void cancelKeepsWhatFinished()
    {
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small(2000));
        QTRY_VERIFY_WITH_TIMEOUT(!window.lastData().empty(), 20000);
        window.cancelRun();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 10000);
        QVERIFY(window.lastData().results->cancelled);
        QVERIFY(!window.lastData().results->trials.empty());
    }

    void aCancelledRunIsDrawnOnSharedSeedsAndExportedAsPartial()
    {
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small(2000));
        QTRY_VERIFY_WITH_TIMEOUT(!window.lastData().empty() && window.lastData().results->trials.size() >= 12, 20000);
        QTemporaryDir dir;
        widgets::ExportOptions options;
        options.pdf = options.png = false; // the SVG's text is what is read back
        const std::vector<widgets::ResultView*> views(window.views().begin(), window.views().end());
        auto stem = [](const widgets::ResultView& v) { return v.viewId(); };
        // While it runs, a snapshot is no run an export could describe.
        QVERIFY(window.isRunning());
        const auto refused = window.exportTo(views, dir.path(), stem, options);
        QVERIFY(!refused.ok());
        QVERIFY2(refused.error.contains(QStringLiteral("a run is going")), qPrintable(refused.error));
        window.cancelRun();
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 10000);
        const ResultSet& r = *window.lastData().results;
        QVERIFY(r.cancelled);
        // What is drawn: at each budget, every scheme on the same seeds (checked here from the trials).
        std::map<int, std::map<int, std::set<int>>> seeds; // budget -> scheme -> seed indices
        for (const TrialResult& t : r.trials)
            seeds[t.key.budget][t.key.scheme].insert(t.key.seedIndex);
        for (const auto& [budget, schemes] : seeds) {
            QCOMPARE(schemes.size(), std::size_t{3});
            for (const auto& [scheme, held] : schemes)
                QVERIFY2(held == schemes.begin()->second, qPrintable(QStringLiteral("n = %1").arg(budget)));
        }
        QVERIFY(static_cast<long long>(r.trials.size()) < r.totalTrials);
        QVERIFY2(window.messageText().contains(QStringLiteral("cancelled")), qPrintable(window.messageText()));

        const auto outcome = window.exportTo(views, dir.path(), stem, options);
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        const QString note = QStringLiteral("partial run: %1 of %2 trials").arg(r.trials.size()).arg(r.totalTrials);
        int csvs = 0, specs = 0, svgs = 0;
        for (const QString& name : QDir(dir.path()).entryList(QDir::Files)) {
            QFile f(dir.filePath(name));
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray text = f.readAll();
            if (name.endsWith(QLatin1String(".csv"))) {
                ++csvs;
                QVERIFY2(text.startsWith("# " + note.toUtf8()), qPrintable(name));
            } else if (name.endsWith(QLatin1String(".spec.json"))) {
                ++specs;
                QVERIFY2(text.contains("\"partial\"") && text.contains("\"of\": " + QByteArray::number(r.totalTrials)),
                         qPrintable(name));
                QVERIFY2(specFromJson(text.toStdString()).ok(), qPrintable(name)); // still a spec the reader takes
            } else if (name.endsWith(QLatin1String(".svg"))) {
                ++svgs;
                QVERIFY2(text.contains(note.toUtf8()), qPrintable(name));
            }
        }
        QVERIFY(csvs >= 8 && specs == csvs && svgs >= 8);
        // The comparisons need the whole run: not written, and said so.
        QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("comparisons.svg"))));
        QVERIFY2(outcome.skipped.join(QLatin1Char('\n')).contains(QStringLiteral("Comparisons: the comparisons need the whole run")),
                 qPrintable(outcome.skipped.join(QLatin1Char('\n'))));
        QVERIFY2(window.messageText().contains(QStringLiteral("skipped: ")), qPrintable(window.messageText()));
    }

    void exportAllWritesNoEmptyFigureAndSaysWhatItSkipped()
    {
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small(2));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
        QTemporaryDir dir;
        widgets::ExportOptions options;
        options.pdf = options.svg = false;
        options.dpi = 72;
        const std::vector<widgets::ResultView*> views(window.views().begin(), window.views().end());
        const auto outcome = window.exportTo(views, dir.path(), [](const widgets::ResultView& v) { return QStringLiteral("k_") + v.viewId(); },
                                             options);
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        const QStringList files = QDir(dir.path()).entryList(QDir::Files);
        QVERIFY(files.filter(QStringLiteral("model_map")).isEmpty());  // "Not a model run"
        QVERIFY(files.filter(QStringLiteral("validation")).isEmpty()); // no validation was run
        QVERIFY(files.contains(QStringLiteral("k_rate_distortion.png")) && files.contains(QStringLiteral("k_comparisons.png")));
        const QString skipped = outcome.skipped.join(QLatin1Char('\n'));
        QVERIFY2(skipped.contains(QStringLiteral("Model map: not a model run")), qPrintable(skipped));
        QVERIFY2(skipped.contains(QStringLiteral("Validation: ")), qPrintable(skipped));
        QCOMPARE(outcome.skipped.size(), 2);
        QVERIFY2(window.messageText().contains(QStringLiteral("skipped: Model map")), qPrintable(window.messageText()));
        // A whole run's files say nothing of a partial one.
        QFile csv(dir.filePath(QStringLiteral("k_kl_distribution.csv")));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        QVERIFY(!csv.readAll().startsWith("#"));
    }

    void closingMidRunDoesNotHang()
    {
        auto* window = new app::MainWindow(false);
        window->show();
        window->loadSpec(small(5000));
        QTRY_VERIFY_WITH_TIMEOUT(!window->lastData().empty(), 20000);
        QElapsedTimer timer;
        timer.start();
        window->close();
        delete window;
        QVERIFY2(timer.elapsed() < 5000, qPrintable(QString::number(timer.elapsed())));
    }

    void validationTab()
    {
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        QSignalSpy validated(&window, &app::MainWindow::validationFinished);
        window.loadSpec(small(3));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
        window.validationView()->runButton()->click();
        QTRY_COMPARE_WITH_TIMEOUT(validated.count(), 1, 240000);
        QCOMPARE(validated.at(0).at(1).toString(), QString());
        // 3 schemes x 2 budgets x 8 metrics.
        QCOMPARE(window.validationView()->table()->rowCount(), 3 * 2 * 8);
        const QString csv = window.validationView()->dataCsv();
        QVERIFY(csv.startsWith(QStringLiteral("point,scheme,budget,metric")));
        QVERIFY2(!csv.contains(QStringLiteral("implementation difference")), qPrintable(csv));
        // Not vacuous without OpenCL: the implementation columns are filled exactly when a
        // device ran the implementation run, and then within the validation's tolerance.
        const auto devices = gpu::listDevices();
        const bool device = devices && !devices->empty();
        const QStringList lines = csv.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 1 + 3 * 2 * 8);
        QCOMPARE(lines.front().split(QLatin1Char(',')).at(5), QStringLiteral("impl_max_rel_diff"));
        for (qsizetype i = 1; i < lines.size(); ++i) {
            const QStringList cells = lines[i].split(QLatin1Char(','));
            QCOMPARE(cells.size(), 12);
            if (!device) {
                QVERIFY2(cells[5].isEmpty() && cells[7].isEmpty(), qPrintable(lines[i]));
                continue;
            }
            bool ok = false;
            const double diff = cells[5].toDouble(&ok);
            QVERIFY2(ok && diff >= 0.0 && diff < 1e-2, qPrintable(lines[i]));
            QVERIFY2(cells[10].startsWith(QStringLiteral("agree")) || cells[10].startsWith(QStringLiteral("seed")),
                     qPrintable(lines[i]));
        }
    }

    void backendPoolReusesOneBackendPerDevice()
    {
        app::BackendPool pool;
        ExperimentSpec spec = small();
        ComputeBackend* cpu = pool.get(spec).backend.get();
        QVERIFY(cpu);
        QCOMPARE(pool.get(spec).backend.get(), cpu); // the next run: the same object
        QVERIFY(pool.get(spec, 2).backend.get() != cpu); // other threads: another
        QCOMPARE(pool.size(), std::size_t{2});
        // A device that does not exist: the CPU fallback, remembered (not reopened per edit).
        spec.backend = BackendKind::OpenCl;
        spec.device = "999";
        app::BackendChoice& missing = pool.get(spec);
        QVERIFY(!missing.warning.empty());
        QVERIFY(missing.label.rfind("cpu (fallback", 0) == 0);
        QCOMPARE(pool.get(spec).backend.get(), missing.backend.get());
        QVERIFY(missing.backend.get() != cpu);
        const auto devices = gpu::listDevices();
        if (!devices || devices->empty())
            QSKIP("no OpenCL device: the reuse of OpenCL backends is not exercised");
        spec.device = "0";
        app::BackendChoice& first = pool.get(spec);
        if (!first.warning.empty())
            QSKIP(qPrintable(QStringLiteral("OpenCL device 0 unusable: ") + QString::fromStdString(first.warning)));
        QVERIFY(first.label.rfind("opencl", 0) == 0);
        QCOMPARE(pool.get(spec).backend.get(), first.backend.get());
        spec.backend = BackendKind::Auto; // may choose the CPU backend: its own entry, kept like the others
        ComputeBackend* chosen = pool.get(spec).backend.get();
        QVERIFY(chosen != first.backend.get());
        QCOMPARE(pool.get(spec).backend.get(), chosen);
        spec.backend = BackendKind::Cpu; // a backend change and back
        QCOMPARE(pool.get(spec).backend.get(), cpu);
        spec.backend = BackendKind::OpenCl;
        QCOMPARE(pool.get(spec).backend.get(), first.backend.get());
        if (devices->size() > 1) { // a device change: a new backend
            spec.device = "1";
            app::BackendChoice& second = pool.get(spec);
            QVERIFY(second.backend.get() != first.backend.get());
            QCOMPARE(pool.get(spec).backend.get(), second.backend.get());
        }
    }

    void runsShareTheWorkersBackend()
    {
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
        ExperimentSpec other = small();
        other.d = 48; // an edit: a new run on the same backend
        window.loadSpec(other);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 30000);
        QCOMPARE(finished.at(1).at(1).toString(), QString());
        QCOMPARE(window.worker()->backends().size(), std::size_t{1});
    }

    void autoMeasuresTheFasterBackendOnceAndRemembersIt()
    {
        if (!gpu::listDevices() || gpu::listDevices()->empty())
            QSKIP("no OpenCL platform: auto is the CPU backend without measuring");
        QTemporaryDir cache;
        qputenv("KVLENS_CACHE_DIR", cache.path().toUtf8());
        ExperimentSpec spec = small();
        spec.backend = BackendKind::Auto;
        const int before = app::autoBackendMeasurements();
        const app::BackendChoice first = app::makeBackend(spec, 2);
        QCOMPARE(app::autoBackendMeasurements(), before + 1);
        QVERIFY2(first.note.find("probe run: CPU ") != std::string::npos, first.note.c_str());
        const bool cpu = first.backend->name() == "cpu";
        QVERIFY2(first.note.find(cpu ? "auto: the CPU backend, faster here" : "auto: OpenCL ") == 0, first.note.c_str());
        const QStringList files = QDir(cache.path()).entryList({QStringLiteral("auto-backend-*.txt")});
        QCOMPARE(files.size(), 1);
        // The second choice reads the file: no measuring, the same backend, and it says so.
        const app::BackendChoice second = app::makeBackend(spec, 2);
        QCOMPARE(app::autoBackendMeasurements(), before + 1);
        QCOMPARE(second.backend->name(), first.backend->name());
        QVERIFY2(second.note.find("measured earlier on this machine") != std::string::npos, second.note.c_str());
        // The remembered verdict decides: a file saying the other backend was faster is obeyed.
        QFile f(cache.filePath(files.front()));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(cpu ? "opencl 20 10\n" : "cpu 10 20\n");
        f.close();
        const app::BackendChoice third = app::makeBackend(spec, 2);
        QCOMPARE(third.backend->name() == "cpu", !cpu);
        qunsetenv("KVLENS_CACHE_DIR");
    }

    void addingASeedComputesOnlyTheNewSeedsTrials()
    {
        // Seeds 4 -> 5 in the dock: the 4 seeds already run come from the worker's trial cache.
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small(4));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
        QCOMPARE(window.lastData().results->reusedTrials, 0LL);
        const std::vector<TrialResult> before = window.lastData().results->trials;
        window.controls()->seedCountBox()->setValue(5); // an edit: debounced rerun
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 30000);
        const ResultSet& after = *window.lastData().results;
        QCOMPARE(after.trials.size(), std::size_t{3 * 2 * 5});
        QCOMPARE(after.reusedTrials, 3LL * 2 * 4); // computed: 6 trials of seed 5
        QVERIFY2(window.statusText().contains(QStringLiteral("6 computed, 24 from the cache")), qPrintable(window.statusText()));
        QVERIFY2(window.statusText().contains(QStringLiteral("cache ")), qPrintable(window.statusText()));
        // The cached trials are the ones first computed, where the new walk puts them.
        std::size_t matched = 0;
        for (const TrialResult& t : after.trials)
            for (const TrialResult& b : before)
                if (b.key.scheme == t.key.scheme && b.key.budget == t.key.budget && b.key.seed == t.key.seed) {
                    QCOMPARE(t.kl, b.kl);
                    QCOMPARE(t.sixD.snrK, b.sixD.snrK);
                    ++matched;
                }
        QCOMPARE(matched, before.size());
    }

    void theModelMapDrawsEveryCellAndAClickStudiesOne()
    {
        // The shipped tiny model (resources/models/tiny-llama/config.json): 4 layers x 8 query heads
        // (2 KV heads) of dimension 32, every cell a grid point.
        const std::string dump = std::string(KVLENS_EXAMPLES_DIR) + "/tiny_lm_kv.safetensors";
        auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + dump + R"(", "layers": "all",
            "heads": "all", "query_start": 448}, "d": 32, "tokens": 512, "queries": 64,
            "schemes": ["K-only", "V-only"], "budgets": [2, 3], "seeds": {"count": 1},
            "comparisons": {"bootstrap": 100, "permutations": 49}})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(*spec);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        widgets::ModelMapView* map = nullptr;
        for (widgets::ResultView* v : window.views())
            if (auto* m = qobject_cast<widgets::ModelMapView*>(v))
                map = m;
        QVERIFY(map);
        for (int layer = 0; layer < 4; ++layer)
            for (int head = 0; head < 8; ++head)
                QVERIFY2(std::isfinite(map->cellValue(layer, head)) && map->cellValue(layer, head) > 0.0,
                         qPrintable(QStringLiteral("cell %1, %2").arg(layer).arg(head)));
        QVERIFY(map->cellText(2, 1).contains(QStringLiteral("layer 2, head 1")));
        // A click makes (2, 1) the experiment: one grid point, that layer and head; the map stays whole.
        map->activateCell(2, 1);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        const ExperimentSpec& now = window.lastData().results->spec;
        QCOMPARE(now.pointCount(), 1);
        QCOMPARE(paramNumber(now.regimeParams, "layer"), 2.0);
        QCOMPARE(paramNumber(now.regimeParams, "head"), 1.0);
        QVERIFY(window.lastData().results->regimeNote.find("layer 2, query head 1") != std::string::npos);
        QVERIFY(std::isfinite(map->cellValue(0, 0))); // still the whole model
        QCOMPARE(map->mapData().results->spec.pointCount(), 32);

        // The colour bar says what it colours: log10 of the mean KL in nats, whose, at which budget.
        QCOMPARE(map->colourLabel(), QStringLiteral("log10 mean KL (nats), K-only, n = 2"));
        const QStringList header = map->dataCsv().section(QLatin1Char('\n'), 0, 0).split(QLatin1Char(','));
        QCOMPARE(header, (QStringList{"layer", "head", "scheme", "versus", "budget", "metric", "value", "unit", "colour"}));
        QVERIFY(map->dataCsv().section(QLatin1Char('\n'), 1, 1).endsWith(QStringLiteral(",nats,log10 value")));
        // The window marks the studied cell in red; a figure never does.
        auto redPixels = [](const QImage& image) {
            int red = 0;
            for (int y = 0; y < image.height(); ++y)
                for (int x = 0; x < image.width(); ++x) {
                    const QColor c = image.pixelColor(x, y);
                    red += c.red() > 200 && c.green() < 60 && c.blue() < 60 ? 1 : 0;
                }
            return red;
        };
        map->resize(900, 650);
        QVERIFY(redPixels(map->plot()->toPixmap(600, 450).toImage()) > 20);
        // Hovering a cell shows its numbers, and they stay: the plot's own move handler used to hide
        // the map's tooltip the instant it appeared.
        {
            window.resize(1280, 800);
            window.show();
            QVERIFY(QTest::qWaitForWindowExposed(&window));
            QVERIFY(window.showView(QStringLiteral("model_map")));
            QTest::qWait(50); // the tab's layout and the plot's viewport settle
            map->plot()->replot();
            QSignalSpy hovered(map->plot(), &widgets::PlotWidget::hovered);
            const QPoint at = map->cellCenter(1, 3);
            QVERIFY(map->plot()->xAxis->axisRect()->rect().contains(at));
            QVERIFY(at.x() >= 0);
            QMouseEvent move(QEvent::MouseMove, QPointF(at), map->plot()->mapToGlobal(QPointF(at)), Qt::NoButton,
                             Qt::NoButton, Qt::NoModifier);
            QCoreApplication::sendEvent(map->plot(), &move);
            QCOMPARE(hovered.count(), 1);
            QCOMPARE(hovered.at(0).at(0).toString(), map->cellText(1, 3));
            QCOMPARE(map->plot()->hoverText(), map->cellText(1, 3));
            QVERIFY(map->cellText(1, 3).contains(QStringLiteral("layer 1, head 3")));
            // Off the map: nothing.
            QMouseEvent away(QEvent::MouseMove, QPointF(2, 2), map->plot()->mapToGlobal(QPointF(2, 2)), Qt::NoButton,
                             Qt::NoButton, Qt::NoModifier);
            QCoreApplication::sendEvent(map->plot(), &away);
            QCOMPARE(map->plot()->hoverText(), QString());
        }
        QTemporaryDir dir;
        widgets::ExportOptions options;
        options.pdf = options.svg = false;
        options.dpi = 150;
        const auto outcome = window.exportTo({map}, dir.path(), [](const widgets::ResultView&) { return QStringLiteral("map"); },
                                             options);
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        const QImage png(dir.filePath(QStringLiteral("map.png")));
        QVERIFY(!png.isNull());
        QCOMPARE(redPixels(png), 0);
        QVERIFY(redPixels(map->plot()->toPixmap(600, 450).toImage()) > 20); // and the window keeps its mark
        // Legible in a single column: the colour bar's label fits its bar, nothing under 6 pt.
        {
            widgets::ExportOptions single;
            const widgets::PrintCheck check = widgets::checkPrint(*map, single);
            for (const widgets::PrintedText& t : check.texts)
                QVERIFY2(t.points >= widgets::kMinimumPrintPoints - 1e-6,
                         qPrintable(QStringLiteral("%1 \"%2\" at %3 pt").arg(t.what, t.text).arg(t.points)));
            QVERIFY2(check.collisions.isEmpty(), qPrintable(check.collisions.join(QStringLiteral("; "))));
            QVERIFY2(check.overlaps.isEmpty(), qPrintable(check.overlaps.join(QStringLiteral("; "))));
            if (qEnvironmentVariableIsSet("KVLENS_FIGURE_DIR")) // for an author to look at
                QVERIFY(window.exportTo({map}, qEnvironmentVariable("KVLENS_FIGURE_DIR"),
                                        [](const widgets::ResultView&) { return QStringLiteral("model_map_3.5in"); }, single)
                            .ok());
        }
        // The spec beside it is the whole map's run (32 cells), not the studied cell's.
        const auto written = loadSpecFile(dir.filePath(QStringLiteral("map.spec.json")).toStdString());
        QVERIFY2(written.ok(), written.ok() ? "" : written.error().text().c_str());
        QCOMPARE(written->pointCount(), 32);
        QVERIFY(*written == map->mapData().results->spec);
        QVERIFY(!(*written == window.lastData().results->spec));
        // V-only's KL is 0 in every cell (fp16 data: keys kept in fp16 are exact): no colour, and a note.
        for (QComboBox* box : map->findChildren<QComboBox*>())
            if (box->toolTip() == QStringLiteral("The scheme the map shows."))
                box->setCurrentIndex(1);
        QVERIFY2(map->plot()->footnotes().join(QLatin1Char(' ')).contains(QStringLiteral("32 of 32 cells uncoloured")),
                 qPrintable(map->plot()->footnotes().join(QLatin1Char(' '))));
        QVERIFY(map->colourLabel().contains(QStringLiteral("V-only")));
    }

    void theOutputTabSitsBesideTheMapAndAMapCellDrillsItsToken()
    {
        app::MainWindow window(false);
        window.show();
        // The first-run orientation says what the default experiment is; one click dismisses it.
        QWidget* orientation = window.orientationPanel();
        QVERIFY(orientation && orientation->isVisible());
        auto* orientationText = orientation->findChild<QLabel*>();
        QVERIFY(orientationText && orientationText->text().contains(QStringLiteral("default experiment")));
        auto* dismiss = orientation->findChild<QPushButton*>(QStringLiteral("dismissOrientation"));
        QVERIFY(dismiss);
        dismiss->click();
        QVERIFY(!orientation->isVisible());

        // The Output tab follows the Model map.
        QTabWidget* tabs = window.tabs();
        const int output = tabs->indexOf(window.outputView());
        QVERIFY(output > 0);
        auto* before = qobject_cast<widgets::ResultView*>(tabs->widget(output - 1));
        QVERIFY(before && before->viewId() == QStringLiteral("model_map"));
        QCOMPARE(tabs->tabText(output), QStringLiteral("Output"));

        // A model run in the Output tab, a token clicked, then a Model map cell: the same token is
        // drilled down in that cell's layer and head.
        widgets::OutputView* v = window.outputView();
        v->setContext(64);
        v->setChunks(2);
        v->setSchemes(QStringLiteral("KV"));
        v->setBudgets(QStringLiteral("2"));
        QSignalSpy outputDone(v, &widgets::OutputView::runFinished);
        v->startRun();
        QVERIFY(outputDone.wait(120000));
        QCOMPARE(outputDone.front().front().toString(), QString());
        v->selectToken(10);
        QVERIFY(v->waitUntilIdle(30000));
        QVERIFY(v->strip()->attention().has_value());

        const std::string dump = std::string(KVLENS_EXAMPLES_DIR) + "/tiny_lm_kv.safetensors";
        auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + dump + R"(", "layers": "all",
            "heads": "all", "query_start": 448}, "d": 32, "tokens": 512, "queries": 16,
            "schemes": ["KV"], "budgets": [2], "seeds": {"count": 1},
            "comparisons": {"bootstrap": 100, "permutations": 49}})");
        QVERIFY(spec.ok());
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(*spec);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        widgets::ModelMapView* map = nullptr;
        for (widgets::ResultView* r : window.views())
            if (auto* m = qobject_cast<widgets::ModelMapView*>(r))
                map = m;
        QVERIFY(map);

        // The Output tab's run is the map's end-to-end truth: its per-layer attribution of KV at
        // n = 2 is drawn beside the map (K only, V only, both, per layer), and the map's measures
        // are judged against it, the best one named under the map.
        const std::shared_ptr<const eval::EvalResult> evaluation = v->modelRun().result;
        QVERIFY(evaluation);
        int attributed = 0;
        for (const eval::AttributionRow& a : evaluation->attribution)
            attributed += a.kvHead < 0 && a.kld.mean > 0.0 ? 1 : 0;
        QCOMPARE(attributed, 3 * evaluation->layers);
        QCOMPARE(map->attributionPoints(), attributed);
        QTRY_VERIFY_WITH_TIMEOUT(!map->judging() && !map->outputRows().empty(), 30000);
        const auto expected = eval::outputVsAttention(*map->mapData().results, *evaluation, "KV", 81, 1000);
        QCOMPARE(map->outputRows().size(), expected.size());
        double bestRho = -2.0;
        QString best;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            QCOMPARE(map->outputRows()[i].rho, expected[i].rho);
            if (expected[i].level == "layer" && expected[i].rho > bestRho) {
                bestRho = expected[i].rho;
                best = QString::fromStdString(expected[i].measure);
            }
        }
        QVERIFY(!best.isEmpty());
        const QString predicts = map->predictsText();
        QVERIFY2(predicts.contains(QStringLiteral("predicts the output best per layer")), qPrintable(predicts));
        QVERIFY2(predicts.contains(QStringLiteral("ρ = %1").arg(bestRho, 0, 'f', 2)), qPrintable(predicts));
        const QString notes = map->plot()->footnotes().join(QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' '));
        QVERIFY2(notes.contains(QStringLiteral("predicts it best per layer")), qPrintable(notes));
        map->activateCell(3, 5);
        QVERIFY(v->waitUntilIdle(30000));
        QCOMPARE(v->strip()->attention()->layer, 3);
        QCOMPARE(v->strip()->attention()->head, 5);
        QCOMPARE(v->strip()->attention()->scored, 10);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
    }

    void twoFinishedRunsAreComparedInTheWindow()
    {
        // Two runs that differ in their budgets: the second is compared with the first as kvlens
        // compare does it; the spec difference names exactly that field, the shared configurations
        // are the same trials (identical rows), and n = 4 is only in B.
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QCOMPARE(window.keptRuns().size(), 1);
        QVERIFY(!window.compareWithKept(0)); // nothing to compare it with yet
        ExperimentSpec wider = small();
        wider.budgets = {2, 3, 4};
        window.loadSpec(wider);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        QCOMPARE(window.keptRuns().size(), 2);
        QSignalSpy shown(&window, &app::MainWindow::comparisonShown);
        QVERIFY(window.compareWithKept(0));
        QVERIFY(shown.wait(60000));
        QCOMPARE(shown.front().front().toString(), QString());
        QCOMPARE(window.comparisonSpecDiff(), QStringLiteral("budgets: [2,3] → [2,3,4]"));
        const RunComparison* c = window.runCompareView()->comparison();
        QVERIFY(c);
        QCOMPARE(c->sharedConfigurations, 3 * 2);
        QCOMPARE(c->onlyB, 3);
        QCOMPARE(c->onlyA, 0);
        for (const RunCompareRow& row : c->rows)
            if (row.status != RunRowStatus::OnlyInB)
                QCOMPARE(row.status, RunRowStatus::Identical);
    }

    void twoRunsAreOverlaidInEveryView()
    {
        // A: KV, KQV, QKQV on seeds 1-2; B: KV and TQ-KV on seeds 5-6, the same grid. The overlay
        // draws both runs' schemes on the same axes, named run/scheme; a run of another grid is refused.
        app::MainWindow window(false);
        QSignalSpy finished(&window, &app::MainWindow::runFinished);
        window.loadSpec(small());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        QVERIFY(!window.overlayWithKept(0)); // one run: nothing to overlay it with
        ExperimentSpec b = small();
        b.schemes = {*findScheme("KV"), *findScheme("TQ-KV")};
        b.firstSeed = 5;
        window.loadSpec(b);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
        QSignalSpy shown(&window, &app::MainWindow::overlayShown);
        QVERIFY(window.overlayWithKept(0));
        QVERIFY(shown.wait(60000));
        QCOMPARE(shown.front().front().toString(), QString());
        auto* kl = viewById(window, QStringLiteral("kl_distribution"));
        QVERIFY(kl);
        const ResultSet& r = *kl->data().results;
        QStringList schemes;
        for (const SchemeConfig& c : r.schemes)
            schemes << QString::fromStdString(c.name);
        QCOMPARE(schemes, QStringList({"A/KV", "A/KQV", "A/QKQV", "B/KV", "B/TQ-KV"}));
        QCOMPARE(r.trials.size(), std::size_t((3 + 2) * 2 * 2));
        // The KL view draws a series of each run's KV: the same axes, named by run.
        QStringList drawn;
        for (int i = 0; i < kl->plot()->plottableCount(); ++i)
            drawn << kl->plot()->plottable(i)->name();
        const QString all = drawn.join(QStringLiteral(" | "));
        for (const char* name : {"A/KV", "B/KV", "B/TQ-KV", "A/QKQV"})
            QVERIFY2(all.contains(QLatin1String(name)), qPrintable(all));
        QVERIFY(window.messageText().contains(QStringLiteral("overlay")));
        // A run over other budgets: refused, naming the field; the views keep what they showed.
        ExperimentSpec wider = small();
        wider.budgets = {2, 3, 4};
        window.loadSpec(wider);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, 60000);
        shown.clear();
        QVERIFY(window.overlayWithKept(1)); // B against the wider run
        QVERIFY(shown.wait(60000));
        QVERIFY2(shown.front().front().toString().startsWith(QStringLiteral("budgets")),
                 qPrintable(shown.front().front().toString()));
        QCOMPARE(kl->data().results->schemes.size(), std::size_t(3));
    }

    void presetsLoadAndValidate()
    {
        const QDir presets(QStringLiteral(":/presets"));
        const QStringList files = presets.entryList({QStringLiteral("*.json")});
        QVERIFY(files.size() >= 4);
        for (const QString& name : files) {
            QFile f(presets.filePath(name));
            QVERIFY(f.open(QIODevice::ReadOnly));
            const auto spec = specFromJson(f.readAll().toStdString(), KVLENS_EXAMPLES_DIR);
            QVERIFY2(spec.ok(), qPrintable(name + QStringLiteral(": ")
                                           + QString::fromStdString(spec.ok() ? std::string() : spec.error().text())));
        }
        // The ones the GUI issue names.
        for (const char* required : {"default.json", "paper_a.json", "low_rank_d1024.json", "budget_crossover.json", "heavy_tail_sweep.json",
                                     "paper_b_low_rank.json", "paper_b_heavy_tail.json", "paper_b_gaussian.json", "paper_c_headq.json"})
            QVERIFY2(files.contains(QLatin1String(required)), required);
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
