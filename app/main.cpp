// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens entry point: subcommands that need no window first, then batch mode or the GUI.
#include "app/backend_factory.h"
#include "app/batch.h"
#include "app/capture_command.h"
#include "app/codebook_command.h"
#include "app/compare_command.h"
#include "app/eval_command.h"
#include "app/main_window.h"
#include "app/merge_command.h"
#include "app/reproduce.h"
#include "app/resources.h"
#include "core/spec/spec_json.h"
#include "gpu/device.h"
#include "widgets/figure_export.h"
#include "widgets/views.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

/// Drops Qt's one harmless warning about a missing XDG_RUNTIME_DIR (root shells, CI), so
/// batch errors stay one line; everything else goes to Qt's default handler.
QtMessageHandler g_defaultHandler = nullptr;
void filterMessages(QtMsgType type, const QMessageLogContext& context, const QString& message)
{
    if (type == QtWarningMsg && message.startsWith(QLatin1String("QStandardPaths: XDG_RUNTIME_DIR not set")))
        return;
    // A PNG that cannot be written (a full disk) is reported by the exporter in one line with the
    // reason; libpng's own two-line complaint would only bury it.
    if (type == QtWarningMsg && message.startsWith(QLatin1String("libpng ")))
        return;
    g_defaultHandler(type, context, message);
}

bool hasArgument(int argc, char** argv, const char* name)
{
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], name) == 0)
            return true;
    return false;
}

int run(int argc, char** argv);

} // namespace

/// Whatever escapes (std::bad_alloc on a machine out of memory, a library's exception) ends the
/// program with one line and status 1, never std::terminate's abort and core dump.
int main(int argc, char** argv)
{
    try {
        return run(argc, argv);
    } catch (const std::bad_alloc&) {
        std::cerr << "kvlens: out of memory (std::bad_alloc); lower memory_limit_mb or the run's sizes\n";
    } catch (const std::exception& e) {
        std::cerr << "kvlens: internal error: " << e.what() << "\n";
    } catch (...) {
        std::cerr << "kvlens: internal error (unknown exception)\n";
    }
    return 1;
}

namespace {

int run(int argc, char** argv)
{
    if (argc >= 2 && std::string(argv[1]) == "codebook") {
        std::vector<std::string> args(argv + 2, argv + argc);
        return kvlens::app::runCodebookCommand(args, std::cout, std::cerr);
    }
    // `kvlens capture`: no window and no figures, so no Qt at all.
    if (argc >= 2 && std::string(argv[1]) == "capture") {
        auto parsed = kvlens::app::parseCaptureArguments(std::vector<std::string>(argv + 2, argv + argc));
        if (!parsed) {
            std::cerr << "kvlens capture: " << parsed.error().text() << "\n";
            return kvlens::app::kExitRefused;
        }
        return kvlens::app::runCaptureCommand(*parsed, std::cout, std::cerr);
    }
    // `kvlens merge`: arguments checked before Qt starts; the figures then need a QApplication.
    const bool merge = argc >= 2 && std::string(argv[1]) == "merge";
    std::optional<kvlens::app::MergeOptions> mergeOptions;
    if (merge) {
        auto parsed = kvlens::app::parseMergeArguments(std::vector<std::string>(argv + 2, argv + argc), std::cout,
                                                       std::cerr);
        if (!parsed.options)
            return parsed.exitCode;
        mergeOptions = std::move(parsed.options);
    }
    // `kvlens compare`: arguments checked before Qt starts; the figure then needs a QApplication.
    const bool compare = argc >= 2 && std::string(argv[1]) == "compare";
    std::optional<kvlens::app::CompareOptions> compareOptions;
    if (compare) {
        auto parsed = kvlens::app::parseCompareArguments(std::vector<std::string>(argv + 2, argv + argc), std::cout,
                                                         std::cerr);
        if (!parsed.options)
            return parsed.exitCode;
        compareOptions = std::move(parsed.options);
    }
    // `kvlens eval`: arguments checked before Qt starts (a bad one writes nothing); figures need Qt.
    const bool eval = argc >= 2 && std::string(argv[1]) == "eval";
    std::optional<kvlens::app::EvalOptions> evalOptions;
    if (eval) {
        auto parsed = kvlens::app::parseEvalArguments(std::vector<std::string>(argv + 2, argv + argc));
        if (!parsed) {
            std::cerr << "kvlens eval: " << parsed.error().text() << "\n";
            return kvlens::app::kExitRefused;
        }
        evalOptions = std::move(parsed).value();
    }
    if (hasArgument(argc, argv, "--list-devices")) {
        // No window, no display needed.
        const auto devices = kvlens::gpu::listDevices();
        if (!devices) {
            std::cout << "no OpenCL devices: " << devices.error().text() << "\n";
            return 0;
        }
        for (const auto& d : *devices)
            std::cout << d.label() << "  [" << d.version << ", driver " << d.driver << ", " << d.computeUnits
                      << " compute units, " << d.globalMemory / (1024 * 1024) << " MiB]\n";
        return 0;
    }
    // Batch mode renders figures without a display, and --help / --version need none:
    // default to the offscreen platform there.
    const bool batch = hasArgument(argc, argv, "--batch") || hasArgument(argc, argv, "--reproduce");
    const bool headless = batch || merge || compare || eval || hasArgument(argc, argv, "--help") || hasArgument(argc, argv, "-h")
                          || hasArgument(argc, argv, "--help-all") || hasArgument(argc, argv, "--version")
                          || hasArgument(argc, argv, "-v");
    if (headless && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("QT_QPA_PLATFORM"))
        setenv("QT_QPA_PLATFORM", "offscreen", 1);

    g_defaultHandler = qInstallMessageHandler(filterMessages);
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("KVLens"));
    QApplication::setOrganizationName(QStringLiteral("KVLens"));
    QApplication::setApplicationVersion(QStringLiteral(KVLENS_VERSION));
    initKvlensResources();
    if (mergeOptions)
        return kvlens::app::runMerge(*mergeOptions, std::cout, std::cerr);
    if (evalOptions)
        return kvlens::app::runEvalCommand(*evalOptions, std::cout, std::cerr);
    if (compareOptions)
        return kvlens::app::runCompare(*compareOptions, std::cout, std::cerr);

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "KVLens: see how KV-cache quantization damages attention.\n\n"
        "Without options, opens the main window. Subcommands:\n"
        "  kvlens codebook [--law beta|gauss] [--dim D] [--bits B] [--csv]   print a Lloyd-Max codebook\n"
        "  kvlens merge DIR_0 ... DIR_{n-1} --out DIR [--no-figures]   check the shards of a --shard run and\n"
        "                                       write the files the unsharded run writes\n"
        "  kvlens compare DIR_A DIR_B --out DIR [--paired] [--no-figures]   compare two finished runs: the spec\n"
        "                                       fields that differ, and per scheme and budget in both B - A with\n"
        "                                       its interval and the seed-level test (kvlens compare --help)\n")
        + QString::fromLatin1(kvlens::app::evalUsage()) + QString::fromLatin1(kvlens::app::captureUsage())
        + QStringLiteral(
        "Batch mode (no display needed):\n"
        "  kvlens --batch SPEC.json --out DIR   run a spec (\"default\" for the default experiment) and write\n"
        "                                       DIR/spec.json, summary.csv, trials.csv, queries.csv, comparisons.csv,\n"
        "                                       proxies.csv\n"
        "  kvlens --reproduce --out DIR [--full]   run the shipped presets and write DIR/report.html, the papers'\n"
        "                                       claims with measured figures and computed verdicts\n"
        "  kvlens --batch SPEC.json --shard i/n --out DIR_i   run only shard i of n (0 <= i < n), for job arrays;\n"
        "                                       DIR_i gets manifest.json, trials.bin, spec.json and the shard's CSVs\n"
        "  kvlens --batch SPEC.json --reuse OLD --out DIR   take the trials OLD (an earlier --batch or --shard\n"
        "                                       directory) already computed; compute only the others"));
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption batchOption(QStringLiteral("batch"),
                                         QStringLiteral("Run the spec file headless (\"default\": the default experiment)."),
                                         QStringLiteral("spec"));
    const QCommandLineOption outOption(QStringLiteral("out"), QStringLiteral("Output directory of --batch."),
                                       QStringLiteral("dir"));
    const QCommandLineOption threadsOption(QStringLiteral("threads"),
                                           QStringLiteral("Worker threads for the CPU backend (default: one per core)."),
                                           QStringLiteral("n"));
    const QCommandLineOption backendOption(QStringLiteral("backend"),
                                           QStringLiteral("Compute backend: cpu, opencl or auto (overrides the spec)."),
                                           QStringLiteral("name"));
    const QCommandLineOption deviceOption(
        QStringLiteral("device"),
        QStringLiteral("OpenCL device: an index or a name substring (implies --backend opencl). "
                       "Default: $KVLENS_OPENCL_DEVICE, else the first GPU, else the first CPU device."),
        QStringLiteral("device"));
    const QCommandLineOption devicesOption(QStringLiteral("list-devices"), QStringLiteral("List the OpenCL devices and exit."));
    const QCommandLineOption quietOption(QStringLiteral("quiet"), QStringLiteral("No progress line in batch mode."));
    const QCommandLineOption validateOption(
        QStringLiteral("validate"),
        QStringLiteral("Batch mode: validate the backends (CPU vs OpenCL with the same RNG, mt19937_64 vs pcg64) with "
                       "KS tests; writes DIR/validation.csv. Exit status 3 when an implementation difference is found."));
    const QCommandLineOption shardOption(
        QStringLiteral("shard"),
        QStringLiteral("Batch mode: run only shard i of n (\"i/n\", 0 <= i < n) of the spec's trials, for a job array; "
                       "bring the n directories together with `kvlens merge`."),
        QStringLiteral("i/n"));
    const QCommandLineOption reuseOption(
        QStringLiteral("reuse"),
        QStringLiteral("Batch mode: reuse the trials of an earlier --batch or --shard directory whose data, scheme, "
                       "budget, seed and backend match (its trials.bin); only the others are computed."),
        QStringLiteral("dir"));
    const QCommandLineOption reproduceOption(
        QStringLiteral("reproduce"),
        QStringLiteral("Run the shipped presets and write DIR/report.html: every claim of papers A, B and C with its "
                       "measured figure, interval or p-value and computed verdict, plus figures (PDF, SVG) and CSVs."));
    const QCommandLineOption fullOption(QStringLiteral("full"),
                                        QStringLiteral("With --reproduce: the papers' sizes (d = 1024, twice the seeds)."));
    QCommandLineOption reproduceScaleOption(QStringLiteral("reproduce-scale"),
                                            QStringLiteral("Shrink the --reproduce runs by this factor (tests)."),
                                            QStringLiteral("factor"));
    reproduceScaleOption.setFlags(QCommandLineOption::HiddenFromHelp);
    const QCommandLineOption widthOption(QStringLiteral("width"),
                                         QStringLiteral("Batch and reproduce: figure width, single (3.5 in), double (7 in) "
                                                        "or inches."),
                                         QStringLiteral("in"));
    const QCommandLineOption dpiOption(QStringLiteral("dpi"), QStringLiteral("Batch and reproduce: PNG resolution (300)."),
                                       QStringLiteral("dpi"));
    const QCommandLineOption fontFamilyOption(QStringLiteral("font-family"),
                                              QStringLiteral("Batch and reproduce: figure font family (DejaVu Sans)."),
                                              QStringLiteral("family"));
    const QCommandLineOption fontSizeOption(QStringLiteral("font-size"),
                                            QStringLiteral("Batch and reproduce: figure base font size in pt (8 up to 4 in "
                                                           "wide, 9 beyond); no text falls below 6 pt."),
                                            QStringLiteral("pt"));
    const QCommandLineOption noFiguresOption(QStringLiteral("no-figures"),
                                             QStringLiteral("Batch mode: write the tables only, no figures."));
    const QCommandLineOption quitAfter(QStringLiteral("quit-after"),
                                       QStringLiteral("Close the window after <ms> milliseconds (scripts, smoke tests)."),
                                       QStringLiteral("ms"));
    const QCommandLineOption specOption(QStringLiteral("spec"),
                                        QStringLiteral("Open the window on this spec file and run it."),
                                        QStringLiteral("file"));
    const QCommandLineOption screenshotOption(
        QStringLiteral("screenshot"),
        QStringLiteral("Run the spec (default: the default experiment), save a PNG of the window when done, and exit."),
        QStringLiteral("png"));
    const QCommandLineOption viewOption(
        QStringLiteral("view"),
        QStringLiteral("Open on this view: %1.").arg(kvlens::widgets::viewIds().join(QStringLiteral(", "))),
        QStringLiteral("id"));
    parser.addOptions({widthOption, dpiOption, fontFamilyOption, fontSizeOption});
    parser.addOptions({batchOption, outOption, threadsOption, backendOption, deviceOption, devicesOption, validateOption,
                       quietOption, shardOption, reuseOption,
                       noFiguresOption, specOption, screenshotOption, viewOption,
                       quitAfter, reproduceOption, fullOption, reproduceScaleOption});
    parser.process(app);
    // Nothing on the command line is ignored: a stray word, an option given twice (which one would
    // win?) or an option with an empty value is refused with the usage hint.
    if (!parser.positionalArguments().isEmpty()) {
        std::cerr << "kvlens: unexpected argument '" << parser.positionalArguments().front().toStdString()
                  << "' (options start with --; see kvlens --help)\n";
        return 2;
    }
    for (const QCommandLineOption* option : std::initializer_list<const QCommandLineOption*>{&batchOption, &outOption, &threadsOption, &backendOption, &deviceOption, &shardOption, &reuseOption, &specOption,
          &screenshotOption, &viewOption, &quitAfter, &reproduceScaleOption, &widthOption, &dpiOption, &fontFamilyOption,
          &fontSizeOption}) {
        const QStringList values = parser.values(*option);
        const std::string name = option->names().front().toStdString();
        if (values.size() > 1) {
            std::cerr << "kvlens: --" << name << " is given " << values.size() << " times; give it once\n";
            return 2;
        }
        if (values.size() == 1 && values.front().trimmed().isEmpty()) {
            std::cerr << "kvlens: --" << name << " needs a value (" << option->valueName().toStdString() << ")\n";
            return 2;
        }
    }

    int threads = 0;
    if (parser.isSet(threadsOption)) {
        bool ok = false;
        threads = parser.value(threadsOption).toInt(&ok);
        if (!ok || threads < 1 || threads > 256) {
            std::cerr << "kvlens: --threads must be an integer in [1, 256], got '"
                      << parser.value(threadsOption).toStdString() << "'\n";
            return 2;
        }
    }

    const auto figure = kvlens::widgets::figureOptionsFrom(parser.value(widthOption), parser.value(dpiOption),
                                                           parser.value(fontFamilyOption), parser.value(fontSizeOption));
    if (!figure) {
        std::cerr << "kvlens: " << figure.error().text() << "\n";
        return 2;
    }
    for (const QCommandLineOption* option : {&widthOption, &dpiOption, &fontFamilyOption, &fontSizeOption})
        if (parser.isSet(*option) && !parser.isSet(batchOption) && !parser.isSet(reproduceOption)) {
            std::cerr << "kvlens: --" << option->names().front().toStdString() << " needs --batch SPEC or --reproduce\n";
            return 2;
        }
    for (const QCommandLineOption* option : {&shardOption, &reuseOption})
        if (parser.isSet(*option) && !parser.isSet(batchOption)) {
            std::cerr << "kvlens: --" << option->names().front().toStdString() << " needs --batch SPEC\n";
            return 2;
        }
    if (parser.isSet(reproduceOption)) {
        kvlens::app::ReproduceOptions options;
        options.outDir = parser.value(outOption).toStdString();
        options.full = parser.isSet(fullOption);
        options.threads = threads;
        options.quiet = parser.isSet(quietOption);
        options.figures = !parser.isSet(noFiguresOption);
        options.figure = *figure;
        options.widthGiven = parser.isSet(widthOption);
        if (parser.isSet(reproduceScaleOption)) {
            bool ok = false;
            options.scale = parser.value(reproduceScaleOption).toDouble(&ok);
            if (!ok)
                options.scale = -1.0; // rejected with the allowed range by runReproduce
        }
        return kvlens::app::runReproduce(options, std::cout, std::cerr);
    }
    if (parser.isSet(batchOption) && kvlens::app::isEvalSpecFile(parser.value(batchOption).toStdString())) {
        // An eval spec ("kvlens_eval"): the evaluator, with --batch's output options.
        auto spec = kvlens::loadEvalSpecFile(parser.value(batchOption).toStdString());
        if (!spec) {
            std::cerr << "kvlens: " << spec.error().text() << "\n";
            return kvlens::app::kExitRefused;
        }
        kvlens::app::EvalOptions options;
        options.spec = std::move(spec).value();
        options.outDir = parser.value(outOption).toStdString();
        if (options.outDir.empty()) {
            std::cerr << "kvlens: --batch needs --out DIR\n";
            return kvlens::app::kExitRefused;
        }
        options.quiet = parser.isSet(quietOption);
        options.figures = !parser.isSet(noFiguresOption);
        options.figure = *figure;
        return kvlens::app::runEvalCommand(options, std::cout, std::cerr);
    }
    if (parser.isSet(batchOption)) {
        kvlens::app::BatchOptions options;
        options.specPath = parser.value(batchOption).toStdString();
        options.outDir = parser.value(outOption).toStdString();
        options.threads = threads;
        options.quiet = parser.isSet(quietOption);
        options.figures = !parser.isSet(noFiguresOption);
        options.backend = parser.value(backendOption).toStdString();
        options.device = parser.value(deviceOption).toStdString();
        options.validate = parser.isSet(validateOption);
        options.shard = parser.value(shardOption).toStdString();
        options.shardGiven = parser.isSet(shardOption);
        options.reuseDir = parser.value(reuseOption).toStdString();
        options.figure = *figure;
        return kvlens::app::runBatch(options, std::cout, std::cerr);
    }

    // A screenshot documents the default experiment, not whatever the last session left.
    const bool screenshot = parser.isSet(screenshotOption);
    kvlens::app::MainWindow window(!screenshot);
    window.show();
    if (parser.isSet(viewOption) && !window.showView(parser.value(viewOption))) {
        std::cerr << "kvlens: --view: unknown view '" << parser.value(viewOption).toStdString()
                  << "' (" << kvlens::widgets::viewIds().join(QStringLiteral(", ")).toStdString() << ")\n";
        return 2;
    }
    // --backend and --device apply to the window's spec as they do to a batch run's.
    {
        kvlens::ExperimentSpec probe;
        if (auto s = kvlens::app::applyBackendOptions(probe, parser.value(backendOption).toStdString(),
                                                      parser.value(deviceOption).toStdString());
            !s) {
            std::cerr << "kvlens: " << s.error().text() << "\n";
            return 2;
        }
    }
    auto withBackend = [&](kvlens::ExperimentSpec spec) {
        (void)kvlens::app::applyBackendOptions(spec, parser.value(backendOption).toStdString(),
                                               parser.value(deviceOption).toStdString()); // checked above
        return spec;
    };
    if (parser.isSet(specOption)) {
        const auto spec = kvlens::loadSpecFile(parser.value(specOption).toStdString());
        if (!spec) {
            std::cerr << "kvlens: " << spec.error().text() << "\n";
            return 2;
        }
        window.loadSpec(withBackend(*spec));
    } else if (screenshot || parser.isSet(backendOption) || parser.isSet(deviceOption)) {
        window.loadSpec(withBackend(*kvlens::normalizeSpec(kvlens::defaultSpec())));
    } else {
        window.startRun();
    }
    if (screenshot)
        window.screenshotWhenDone(parser.value(screenshotOption));
    if (parser.isSet(quitAfter)) {
        bool ok = false;
        const int ms = parser.value(quitAfter).toInt(&ok);
        if (!ok || ms < 0) {
            std::cerr << "kvlens: --quit-after needs a non-negative number of milliseconds\n";
            return 2;
        }
        QTimer::singleShot(ms, &window, &QWidget::close);
    }
    return QApplication::exec();
}

} // namespace
