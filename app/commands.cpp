// SPDX-License-Identifier: GPL-3.0-or-later
// The command table and its front door: which row the words ask for, its options read by the one
// reader (app/cli.h), --help from the table, and each row's run function.
#include "app/commands.h"

#include "app/backend_factory.h"
#include "app/batch.h"
#include "app/capture_command.h"
#include "app/codebook_command.h"
#include "app/compare_command.h"
#include "app/eval_command.h"
#include "app/main_window.h"
#include "app/merge_command.h"
#include "app/reproduce.h"
#include "core/spec/spec_json.h"
#include "gpu/device.h"
#include "widgets/views.h"

#include <QApplication>
#include <QTimer>

#include <algorithm>
#include <optional>
#include <ostream>
#include <stdexcept>

namespace kvlens::app {

namespace {

// ---------------------------------------------------------------------------------------------
// The options, each spelled and described once.

std::vector<cli::Option> figureOptionRows()
{
    return {cli::text("--width", "single|double|IN", "figure width: single (3.5 in), double (7 in) or inches in [1, 20]"),
            cli::text("--dpi", "N", "PNG resolution, an integer in [72, 1200] (default 300)"),
            cli::text("--font-family", "F", "figure font family (default DejaVu Sans)"),
            cli::text("--font-size", "PT", "figure base font size in pt, in [5, 24] (default 8 up to 4 in wide, 9 beyond); "
                                           "no text falls below 6 pt")};
}

std::vector<std::string> viewChoices()
{
    std::vector<std::string> ids;
    for (const QString& id : widgets::viewIds())
        ids.push_back(id.toStdString());
    return ids;
}

/// Every option of the main modes; each mode takes a subset (pick).
std::vector<cli::Option> mainOptionRows()
{
    std::vector<cli::Option> rows{
        cli::text("--batch", "SPEC",
                  "run the spec file headless (\"default\": the default experiment); an eval spec (EVAL.json, "
                  "\"kvlens_eval\") runs the evaluation"),
        cli::text("--out", "DIR", "the output directory: the run's files, staged and put in place whole"),
        cli::integer("--threads", "N", 1, 256,
                     "worker threads: the CPU backend's, or an evaluation's forward passes (its spec's threads); "
                     "default: one per core"),
        cli::choice("--backend", {"cpu", "opencl", "auto"}, "compute backend (overrides the spec's)"),
        cli::text("--device", "DEVICE",
                  "OpenCL device: an index or a name substring (implies --backend opencl); default: "
                  "$KVLENS_OPENCL_DEVICE, else the first GPU, else the first CPU device"),
        cli::flag("--list-devices", "list the OpenCL devices and exit"),
        cli::flag("--quiet", "no progress line"),
        cli::flag("--validate",
                  "paper B's validation: CPU vs OpenCL with the same RNG, mt19937_64 vs pcg64, KS tests; writes "
                  "DIR/validation.csv; exit status 3 on an implementation difference, 4 without an OpenCL device"),
        cli::text("--shard", "i/n",
                  "run only shard i of n (0 <= i < n) of the spec's trials, for a job array; bring the n "
                  "directories together with kvlens merge"),
        cli::text("--reuse", "DIR",
                  "take what an earlier run DIR computed: the trials of an earlier --batch or --shard directory (same "
                  "data, scheme, budget, seed and backend), or the configurations of an earlier evaluation of the same "
                  "model, text and settings; compute only the others"),
        cli::flag("--reproduce",
                  "run the shipped presets and write DIR/report.html: every claim of papers A, B and C with its "
                  "measured figure, interval or p-value and computed verdict, plus figures and CSVs"),
        cli::flag("--full", "the papers' sizes (d = 1024 wherever a preset uses less, twice the seeds)"),
        cli::real("--reproduce-scale", "FACTOR", 0.0, 1.0, "shrink the --reproduce runs by this factor (tests)", true)
            .isHidden(),
        cli::flag("--no-figures", "write the tables only, no figures"),
        cli::text("--spec", "SPEC.json", "open the window on this spec file and run it"),
        cli::choice("--view", viewChoices(), "open the window on this view", "ID"),
        cli::text("--screenshot", "FILE.png",
                  "run the spec (default: the default experiment), save a PNG of the window when done, and exit"),
        cli::integer("--quit-after", "MS", 0, 1 << 30, "close the window after MS milliseconds (scripts, smoke tests)"),
        cli::flag("--version", "print the version and exit").withAlias("-v"),
    };
    for (cli::Option& o : figureOptionRows())
        rows.push_back(std::move(o));
    return rows;
}

/// The main options named in `names`, in that order; those in `required` must be given.
cli::Syntax pick(std::initializer_list<const char*> names, std::initializer_list<const char*> required = {})
{
    static const std::vector<cli::Option> all = mainOptionRows();
    cli::Syntax syntax;
    for (const char* name : names) {
        const auto it = std::find_if(all.begin(), all.end(), [&](const cli::Option& o) { return o.name == name; });
        syntax.options.push_back(*it);
        if (std::find_if(required.begin(), required.end(), [&](const char* r) { return it->name == r; }) != required.end())
            syntax.options.back() = it->isRequired();
    }
    return syntax;
}

int refuse(std::ostream& err, const std::string& prefix, const Error& error)
{
    err << prefix << ": " << error.text() << "\n";
    return kExitRefused;
}

// ---------------------------------------------------------------------------------------------
// The main modes' run functions.

int runWindow(const cli::Arguments& args, std::ostream&, std::ostream& err)
{
    const std::string backend = args.value("--backend"), device = args.value("--device");
    std::optional<ExperimentSpec> spec;
    if (args.has("--spec")) {
        auto loaded = loadSpecFile(args.value("--spec"));
        if (!loaded)
            return refuse(err, "kvlens", loaded.error());
        spec = std::move(*loaded);
    } else if (args.has("--screenshot") || !backend.empty() || !device.empty()) {
        // A screenshot documents the default experiment, not whatever the last session left.
        spec = *normalizeSpec(defaultSpec());
    }
    // --backend and --device apply to the window's spec as they do to a batch run's.
    if (spec)
        if (auto applied = applyBackendOptions(*spec, backend, device); !applied)
            return refuse(err, "kvlens", applied.error());
    MainWindow window(!args.has("--screenshot"));
    window.show();
    if (args.has("--view"))
        window.showView(QString::fromStdString(args.value("--view"))); // one of viewIds(): the reader checked it
    if (spec)
        window.loadSpec(*spec);
    else
        window.startRun();
    if (args.has("--screenshot"))
        window.screenshotWhenDone(QString::fromStdString(args.value("--screenshot")));
    if (args.has("--quit-after"))
        QTimer::singleShot(static_cast<int>(args.integer("--quit-after", 0)), &window, &QWidget::close);
    return QApplication::exec();
}

int runBatchMode(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    BatchOptions options;
    options.specPath = args.value("--batch");
    options.outDir = args.value("--out");
    options.threads = static_cast<int>(args.integer("--threads", 0));
    options.quiet = args.has("--quiet");
    options.figures = !args.has("--no-figures");
    options.backend = args.value("--backend");
    options.device = args.value("--device");
    options.validate = args.has("--validate");
    options.shard = args.value("--shard");
    options.reuseDir = args.value("--reuse");
    const auto figure = figureOptions(args, options.figures);
    if (!figure)
        return refuse(err, "kvlens", figure.error());
    options.figure = *figure;
    return runBatch(options, out, err);
}

int runEvalSpecMode(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    EvalOptions options;
    if (args.has("--shard")) {
        auto shard = parseEvalShard(args.value("--shard"));
        if (!shard)
            return refuse(err, "kvlens", shard.error());
        options.shard = *shard;
    }
    auto spec = loadEvalSpecFile(args.value("--batch"));
    if (!spec)
        return refuse(err, "kvlens", spec.error());
    options.spec = std::move(spec).value();
    options.spec.threads = static_cast<int>(args.integer("--threads", options.spec.threads));
    if (auto ok = applyBackendOptions(options.spec, args.value("--backend"), args.value("--device")); !ok)
        return refuse(err, "kvlens", ok.error());
    options.outDir = args.value("--out");
    options.reuseDir = withoutTrailingSlashes(args.value("--reuse"));
    options.quiet = args.has("--quiet");
    options.figures = !args.has("--no-figures");
    const auto figure = figureOptions(args, options.figures);
    if (!figure)
        return refuse(err, "kvlens", figure.error());
    options.figure = *figure;
    return runEvalCommand(options, out, err);
}

int runReproduceMode(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    ReproduceOptions options;
    options.outDir = args.value("--out");
    options.full = args.has("--full");
    options.threads = static_cast<int>(args.integer("--threads", 0));
    options.quiet = args.has("--quiet");
    options.figures = !args.has("--no-figures");
    options.scale = args.real("--reproduce-scale", 1.0);
    // The claim figures are drawn whatever --no-figures says (the report embeds them).
    const auto figure = figureOptions(args, true);
    if (!figure)
        return refuse(err, "kvlens", figure.error());
    options.figure = *figure;
    options.widthGiven = args.has("--width");
    return runReproduce(options, out, err);
}

int listDevices(const cli::Arguments&, std::ostream& out, std::ostream&)
{
    const auto devices = gpu::listDevices();
    if (!devices) {
        out << "no OpenCL devices: " << devices.error().text() << "\n";
        return kExitOk;
    }
    for (const auto& d : *devices)
        out << d.label() << "  [" << d.version << ", driver " << d.driver << ", " << d.computeUnits << " compute units, "
            << d.globalMemory / (1024 * 1024) << " MiB]\n";
    return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// The subcommands' run functions: their options as the command's options struct, then its run.

int runCodebookRow(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    const auto options = codebookOptionsFrom(args);
    return options ? runCodebook(*options, out, err) : refuse(err, "kvlens codebook", options.error());
}

int runCaptureRow(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    const auto options = captureOptionsFrom(args);
    return options ? runCaptureCommand(*options, out, err) : refuse(err, "kvlens capture", options.error());
}

int runEvalRow(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    auto options = evalOptionsFrom(args);
    if (!options)
        return refuse(err, "kvlens eval", options.error());
    const auto figure = figureOptions(args, options->figures);
    if (!figure)
        return refuse(err, "kvlens eval", figure.error());
    options->figure = *figure;
    return runEvalCommand(*options, out, err);
}

int runMergeRow(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    MergeOptions options = mergeOptionsFrom(args);
    const auto figure = figureOptions(args, options.figures);
    if (!figure)
        return refuse(err, "kvlens merge", figure.error());
    options.figure = *figure;
    return runMerge(options, out, err);
}

int runCompareRow(const cli::Arguments& args, std::ostream& out, std::ostream& err)
{
    CompareOptions options = compareOptionsFrom(args);
    const auto figure = figureOptions(args, options.figures);
    if (!figure)
        return refuse(err, "kvlens compare", figure.error());
    options.figure = *figure;
    return runCompare(options, out, err);
}

// ---------------------------------------------------------------------------------------------
// The table.

cli::Syntax withFigureOptions(cli::Syntax syntax)
{
    for (cli::Option& o : figureOptionRows())
        syntax.options.push_back(std::move(o));
    return syntax;
}

using RunFunction = std::function<int(const cli::Arguments&, std::ostream&, std::ostream&)>;

Command subcommand(std::string word, std::string usage, std::string summary, cli::Syntax syntax,
                   NeedsApplication application, RunFunction run)
{
    Command c;
    c.word = std::move(word);
    c.label = c.word;
    c.usage = std::move(usage);
    c.summary = std::move(summary);
    c.syntax = std::move(syntax);
    c.application = application;
    c.run = std::move(run);
    return c;
}

Command mode(std::string label, std::string refusal, std::string usage, std::string summary, cli::Syntax syntax,
             NeedsApplication application, RunFunction run)
{
    Command c = subcommand({}, std::move(usage), std::move(summary), std::move(syntax), application, std::move(run));
    c.label = std::move(label);
    c.refusal = std::move(refusal);
    return c;
}

std::vector<Command> makeSubcommands()
{
    std::vector<Command> rows;
    rows.push_back(subcommand("codebook", "kvlens codebook [--law beta|gauss] [--dim D] [--bits B] [--csv]",
                              "print a Lloyd-Max codebook: centroids, thresholds, MSE", codebookSyntax(),
                              NeedsApplication::No, runCodebookRow));
    rows.push_back(subcommand(
        "capture",
        "kvlens capture --model DIR (--text FILE | --tokens FILE.npy) [--ctx 512] [--offset T]\n"
        "               [--layers all|L,A-B,...] [--dtype f16|f32] [--meta KEY=VALUE]... --out FILE.safetensors",
        "a model dump (Q, K after RoPE, V of every layer and head over tokens T..T+ctx-1, one causal chunk at positions "
        "0..ctx-1) from the evaluator's forward, for the model regime and the advisor",
        captureSyntax(), NeedsApplication::No, runCaptureRow));
    rows.push_back(subcommand(
        "eval",
        "kvlens eval --model DIR (--text FILE | --tokens FILE.npy) --schemes S,... [--budgets 2,3,4] [options] --out DIR\n"
        "       kvlens eval --spec EVAL.json [--threads N] [--quiet] [--no-figures] [figure options] --out DIR",
        "a transformer over text with its KV cache quantized by each scheme: llama.cpp's KLD report per configuration, "
        "per-token and per-layer files, the proxy study and figures",
        withFigureOptions(evalSyntax()), NeedsApplication::ForFigures, runEvalRow));
    rows.push_back(subcommand("merge", "kvlens merge DIR_0 ... DIR_{n-1} --out DIR [--no-figures] [figure options]",
                              "check the shards of a --shard run and write the files the unsharded --batch run writes",
                              withFigureOptions(mergeSyntax()), NeedsApplication::ForFigures, runMergeRow));
    rows.push_back(subcommand("compare", "kvlens compare DIR_A DIR_B --out DIR [--paired] [--no-figures] [figure options]",
                              "two finished runs: the spec fields that differ, and per grid point, scheme and budget in "
                              "both, B - A with its interval and the seed-level test; or two evaluations of one model "
                              "and text: B - A per configuration paired over chunks, and per token",
                              withFigureOptions(compareSyntax()), NeedsApplication::ForFigures, runCompareRow));
    return rows;
}

std::vector<Command> makeModes()
{
    std::vector<Command> rows;
    rows.push_back(mode("the window", "the window",
                        "kvlens [--spec SPEC.json] [--view ID] [--screenshot FILE.png] [--backend B] [--device D] [--quit-after MS]",
                        "open the window (restores the last spec, or opens SPEC.json) and run it",
                        pick({"--spec", "--view", "--screenshot", "--backend", "--device", "--quit-after"}),
                        NeedsApplication::Yes, runWindow));
    rows.back().headless = false;
    rows.push_back(mode("--batch SPEC.json", "an experiment run (--batch SPEC.json)",
                        "kvlens --batch SPEC.json --out DIR [--threads N] [--quiet] [--no-figures] [--backend B] [--device D]\n"
                        "       [--shard i/n] [--reuse OLD] [figure options]",
                        "run a spec headless and write DIR/spec.json, summary.csv, trials.csv, queries.csv, "
                        "comparisons.csv, proxies.csv, trials.bin, manifest.json and figures/",
                        pick({"--batch", "--out", "--threads", "--quiet", "--no-figures", "--backend", "--device", "--shard",
                              "--reuse", "--width", "--dpi", "--font-family", "--font-size"},
                             {"--out"}),
                        NeedsApplication::ForFigures, runBatchMode));
    rows.push_back(mode("--batch SPEC.json --validate", "a validation (--validate)",
                        "kvlens --batch SPEC.json --validate --out DIR [--threads N] [--quiet] [--device D]",
                        "paper B's validation of the backends: DIR/spec.json and validation.csv",
                        pick({"--batch", "--validate", "--out", "--threads", "--quiet", "--device"}, {"--out"}),
                        NeedsApplication::No, runBatchMode));
    rows.push_back(mode("--batch EVAL.json", "an evaluation (EVAL.json)",
                        "kvlens --batch EVAL.json --out DIR [--threads N] [--backend B] [--device D] [--shard i/n] [--reuse OLD]\n"
                        "       [--quiet] [--no-figures] [figure options]",
                        "run an eval spec (kvlens eval's spec.json) and write what kvlens eval writes; with --shard, a fixed "
                        "1/n of its chunks for kvlens merge; --backend and --device choose where its forward runs",
                        pick({"--batch", "--out", "--threads", "--backend", "--device", "--shard", "--reuse", "--quiet",
                              "--no-figures", "--width", "--dpi", "--font-family", "--font-size"},
                             {"--out"}),
                        NeedsApplication::ForFigures, runEvalSpecMode));
    rows.push_back(mode("--reproduce", "--reproduce",
                        "kvlens --reproduce --out DIR [--full] [--threads N] [--quiet] [--no-figures] [figure options]",
                        "run the shipped presets and write DIR/report.html: the papers' claims, measured, with computed "
                        "verdicts",
                        pick({"--reproduce", "--out", "--full", "--threads", "--quiet", "--no-figures", "--reproduce-scale",
                              "--width", "--dpi", "--font-family", "--font-size"},
                             {"--out"}),
                        NeedsApplication::Yes, runReproduceMode));
    rows.push_back(mode("--list-devices", "--list-devices", "kvlens --list-devices",
                        "the OpenCL devices (index, name, type, platform)", pick({"--list-devices"}), NeedsApplication::No,
                        listDevices));
    rows.push_back(mode("--version", "--version", "kvlens --version", "the version", pick({"--version"}),
                        NeedsApplication::No, [](const cli::Arguments&, std::ostream& out, std::ostream&) {
                            out << "KVLens " << KVLENS_VERSION << "\n";
                            return kExitOk;
                        }));
    return rows;
}

// ---------------------------------------------------------------------------------------------
// Choosing the row.

const Command& modeNamed(const std::string& label)
{
    for (const Command& m : modes())
        if (m.label == label)
            return m;
    throw std::logic_error("no mode " + label);
}

/// The main mode `args` select: the option that names one; --batch by what its file holds.
const Command& selectMode(const cli::Arguments& args)
{
    if (args.has("--version"))
        return modeNamed("--version");
    if (args.has("--list-devices"))
        return modeNamed("--list-devices");
    if (args.has("--reproduce"))
        return modeNamed("--reproduce");
    if (args.has("--batch") && isEvalSpecFile(args.value("--batch")))
        return modeNamed("--batch EVAL.json");
    if (args.has("--batch") && args.has("--validate"))
        return modeNamed("--batch SPEC.json --validate");
    if (args.has("--batch"))
        return modeNamed("--batch SPEC.json");
    return modeNamed("the window");
}

/// Refuses an option the chosen mode does not take, naming the modes that do.
Status checkModeTakes(const Command& mode, const cli::Arguments& args)
{
    for (const std::string& name : args.given()) {
        if (mode.syntax.find(name))
            continue;
        if (std::find(mode.notYet.begin(), mode.notYet.end(), name) != mode.notYet.end())
            return Error{name, mode.refusal + " does not take it yet"};
        std::vector<std::string> takers;
        for (const Command& m : modes())
            if (m.syntax.find(name))
                takers.push_back(m.label);
        std::string list;
        for (std::size_t i = 0; i < takers.size(); ++i)
            list += (i == 0 ? "" : i + 1 == takers.size() ? " and " : ", ") + takers[i];
        return Error{name, mode.refusal + " does not take it (it is an option of " + list + ")"};
    }
    return Ok{};
}

/// Qt's own options (QGuiApplication, QApplication) taken out of `words`: they go to the
/// QApplication, not to the option reader.
std::vector<std::string> takeQtArguments(std::vector<std::string>& words)
{
    static const char* const kWithValue[] = {"-platform", "-platformpluginpath", "-platformtheme", "-plugin",
                                             "-qwindowgeometry", "-qwindowicon", "-qwindowtitle", "-session",
                                             "-style", "-stylesheet", "-display", "-geometry"};
    static const char* const kFlags[] = {"-reverse", "-widgetcount", "-nograb", "-dograb", "-sync"};
    std::vector<std::string> qt, rest;
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        const std::string name = w.substr(0, w.find('='));
        const bool valued = std::find(std::begin(kWithValue), std::end(kWithValue), name) != std::end(kWithValue);
        const bool isFlag = std::find(std::begin(kFlags), std::end(kFlags), w) != std::end(kFlags);
        if (!valued && !isFlag) {
            rest.push_back(w);
            continue;
        }
        qt.push_back(w);
        if (valued && name == w && i + 1 < words.size())
            qt.push_back(words[++i]);
    }
    words = std::move(rest);
    return qt;
}

std::string commandHelp(const Command& c)
{
    return "usage: " + c.usage + "\n\n" + cli::wrap(c.summary, 0) + "\n\noptions:\n" + cli::optionsHelp(c.syntax);
}

/// kvlens --help: the modes and commands from the table, then every main option with the modes taking it.
std::string overviewHelp()
{
    std::string text = "KVLens: see how KV-cache quantization damages attention.\n\n"
                       "usage: kvlens [options]            a main mode, chosen by its option (below)\n"
                       "       kvlens COMMAND [options]    a command; kvlens COMMAND --help lists its options\n\n"
                       "Modes:\n";
    auto row = [&](const Command& c) {
        text += "  " + c.usage + "\n" + std::string(6, ' ') + cli::wrap(c.summary, 6) + "\n";
    };
    for (const Command& m : modes())
        row(m);
    text += "\nCommands:\n";
    for (const Command& c : subcommands())
        row(c);
    text += "\nOptions of the modes, each with the modes that take it:\n"
            + cli::optionsHelp(mainSyntax(), [](const cli::Option& o) {
                  std::string takers;
                  for (const Command& m : modes())
                      if (m.syntax.find(o.name))
                          takers += (takers.empty() ? "" : ", ") + m.label;
                  return " [" + takers + "]";
              });
    text += "\nExit status: 0 done, 1 a failure while running or writing, 2 refused input (one line naming the "
            "option, file or field), 3 --validate found an implementation difference, 4 --validate had no OpenCL "
            "device, 130/143 interrupted (nothing written).\n";
    return text;
}

Invocation readSubcommand(const Command& command, const std::vector<std::string>& words, std::ostream& out,
                          std::ostream& err)
{
    Invocation invocation;
    auto args = cli::read(command.syntax, words, command.prefix());
    if (!args) {
        invocation.exitStatus = refuse(err, command.prefix(), args.error());
        return invocation;
    }
    if (args->helpRequested()) {
        out << commandHelp(command);
        return invocation;
    }
    invocation.command = &command;
    invocation.arguments = std::move(*args);
    return invocation;
}

Invocation readMainMode(const std::vector<std::string>& words, std::ostream& out, std::ostream& err)
{
    Invocation invocation;
    auto all = cli::read(mainSyntax(), words, "kvlens");
    if (all && all->helpRequested()) {
        out << overviewHelp();
        return invocation;
    }
    if (!all) {
        invocation.exitStatus = refuse(err, "kvlens", all.error());
        return invocation;
    }
    const Command& mode = selectMode(*all);
    if (auto takes = checkModeTakes(mode, *all); !takes) {
        invocation.exitStatus = refuse(err, "kvlens", takes.error());
        return invocation;
    }
    // Read again as the mode's own syntax: its required options.
    auto args = cli::read(mode.syntax, words, "kvlens");
    if (!args) {
        invocation.exitStatus = refuse(err, "kvlens", args.error());
        return invocation;
    }
    invocation.command = &mode;
    invocation.arguments = std::move(*args);
    return invocation;
}

} // namespace

bool Command::needsApplication(const cli::Arguments& args) const
{
    return application == NeedsApplication::Yes
           || (application == NeedsApplication::ForFigures && !args.has("--no-figures"));
}

std::string Command::prefix() const
{
    return word.empty() ? std::string("kvlens") : "kvlens " + word;
}

const std::vector<Command>& subcommands()
{
    static const std::vector<Command> rows = makeSubcommands();
    return rows;
}

const std::vector<Command>& modes()
{
    static const std::vector<Command> rows = makeModes();
    return rows;
}

const cli::Syntax& mainSyntax()
{
    static const cli::Syntax syntax{mainOptionRows(), {}};
    return syntax;
}

Invocation readCommandLine(const std::vector<std::string>& words, std::ostream& out, std::ostream& err)
{
    const Command* sub = nullptr;
    if (!words.empty())
        for (const Command& c : subcommands())
            if (c.word == words.front())
                sub = &c;
    std::vector<std::string> rest(words.begin() + (sub ? 1 : 0), words.end());
    // Qt's own options reach only the rows that may create a QApplication; elsewhere they are unknown.
    std::vector<std::string> qt;
    if (!sub || sub->application != NeedsApplication::No)
        qt = takeQtArguments(rest);
    Invocation invocation = sub ? readSubcommand(*sub, rest, out, err) : readMainMode(rest, out, err);
    invocation.qtArguments = std::move(qt);
    return invocation;
}

int runCommandLine(const std::string& name, const std::vector<std::string>& words, std::ostream& out, std::ostream& err)
{
    std::vector<std::string> all;
    if (!name.empty())
        all.push_back(name);
    all.insert(all.end(), words.begin(), words.end());
    const Invocation invocation = readCommandLine(all, out, err);
    if (!invocation.command)
        return invocation.exitStatus;
    if (invocation.command->needsApplication(invocation.arguments) && !QApplication::instance()) {
        err << invocation.command->prefix() << ": needs a QApplication (figures or the window)\n";
        return kExitFailed;
    }
    return invocation.command->run(invocation.arguments, out, err);
}

Result<widgets::ExportOptions> figureOptions(const cli::Arguments& args, bool figures)
{
    if (!figures)
        for (const char* name : {"--width", "--dpi", "--font-family", "--font-size"})
            if (args.has(name))
                return Error{name, "draws nothing with --no-figures (no figures are written)"};
    return widgets::figureOptionsFrom(QString::fromStdString(args.value("--width")),
                                      QString::fromStdString(args.value("--dpi")),
                                      QString::fromStdString(args.value("--font-family")),
                                      QString::fromStdString(args.value("--font-size")));
}

} // namespace kvlens::app
