// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens compare`: its options, what a folder that is not a run is, and the files; the comparison itself is core's (run_compare).
#include "app/compare_command.h"

#include "app/batch.h"
#include "app/eval_command.h"
#include "app/interrupt.h"
#include "core/analysis/run_compare.h"
#include "core/experiment/runner.h"
#include "core/io/atomic_file.h"
#include "core/io/json_text.h"
#include "core/io/staged_dir.h"
#include "core/spec/spec_json.h"
#include "widgets/figure_export.h"
#include "widgets/run_compare_view.h"

#include <nlohmann/json.hpp>

#include <QDir>
#include <QWidget>

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <sstream>

namespace kvlens::app {

namespace {

std::string absolute(const std::string& dir)
{
    std::error_code e;
    const auto p = std::filesystem::absolute(dir, e);
    return e ? dir : p.lexically_normal().string();
}

nlohmann::json runJson(const RunDirectory& run)
{
    return nlohmann::json{{"dir", absolute(run.dir)},
                          {"spec_hash", hex64(run.manifest.specHash)},
                          {"program_version", run.manifest.programVersion},
                          {"backend", run.manifest.backend},
                          {"data_hash", hex64(run.manifest.dataHash)},
                          {"trials", run.results.trials.size()}};
}

} // namespace

cli::Syntax compareSyntax()
{
    return {{cli::text("--out", "DIR",
                       "writes DIR/spec_diff.csv (the spec fields that differ), run_comparison.csv (per grid point, scheme "
                       "and budget in both runs: every metric in A and B, B - A with its interval, the log ratio, the "
                       "seed-level test; configurations in one run only listed as such), runs.json and "
                       "figures/run_comparison.{pdf,svg,png,csv,spec.json}")
                 .isRequired(),
             cli::flag("--paired", "refuse where the seeds cannot be paired (the runs drew different data, or share no "
                                   "seed) instead of using the unpaired test over the two groups of seeds"),
             cli::flag("--no-figures", "write the tables only")},
            {"DIR_A DIR_B", "run directories", "two finished runs (written by --batch or kvlens merge)", 2, 2}};
}

CompareOptions compareOptionsFrom(const cli::Arguments& args)
{
    CompareOptions options;
    options.dirA = withoutTrailingSlashes(args.positionals().at(0));
    options.dirB = withoutTrailingSlashes(args.positionals().at(1));
    options.outDir = args.value("--out");
    options.paired = args.has("--paired");
    options.figures = !args.has("--no-figures");
    return options;
}

std::string whatIsNotARun(const std::string& dir)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(dir, ec);
    if (!fs::exists(status))
        return "does not exist";
    if (!fs::is_directory(status))
        return "is a file, not a run directory";
    auto has = [&](const char* name) { return fs::exists(dir + "/" + name, ec); };
    if (has("manifest.json"))
        return {}; // a run, or a shard: readRunDirectory says which
    if (isEvalSpecFile(dir + "/spec.json") || has("eval_summary.csv"))
        return "an evaluation's output (kvlens eval or --batch EVAL.json), not an experiment run";
    if (has("report.html") && has("presets"))
        return "a --reproduce report, not a run (each of its presets/<preset> folders is one)";
    if (has("validation.csv"))
        return "a --validate output (spec.json and validation.csv), not a run";
    if (has("run_comparison.csv"))
        return "a kvlens compare output, not a run";
    if (has("spec.json"))
        return "no readable manifest.json: not a finished run (--batch and kvlens merge write it last; a run that was "
               "stopped leaves none)";
    if (fs::is_empty(dir, ec))
        return "an empty folder, not a run";
    return "a folder without a KVLens run in it (no manifest.json, no spec.json)";
}

int runCompare(const CompareOptions& options, std::ostream& out, std::ostream& err)
{
    for (const std::string* dir : {&options.dirA, &options.dirB}) {
        if (samePath(*dir, options.outDir)) {
            err << "kvlens compare: --out " << options.outDir << " is one of the runs compared; choose another\n";
            return kExitRefused;
        }
        // Said plainly: what the folder is and what compare takes, not only that a file is missing.
        if (const std::string what = whatIsNotARun(*dir); !what.empty()) {
            err << "kvlens compare: " << *dir << ": " << what << "; compare takes two finished experiment runs "
                << "(written by --batch SPEC.json or kvlens merge)\n";
            return kExitRefused;
        }
    }
    // Both runs are held at once: each may take a quarter of the machine.
    const double limit = 0.25 * physicalMemoryBytes();
    auto a = readRunDirectory(options.dirA, limit);
    if (!a) {
        err << "kvlens compare: " << a.error().text() << "\n";
        return kExitRefused;
    }
    auto b = readRunDirectory(options.dirB, limit);
    if (!b) {
        err << "kvlens compare: " << b.error().text() << "\n";
        return kExitRefused;
    }
    RunCompareOptions compareOptions;
    compareOptions.requirePaired = options.paired;
    auto compared = compareRuns(*a, *b, compareOptions);
    if (!compared) {
        err << "kvlens compare: " << compared.error().text() << "\n";
        return kExitRefused;
    }
    const auto comparison = std::make_shared<const RunComparison>(std::move(*compared));
    if (!comparison->pairingNote.empty())
        err << "kvlens compare: seeds not paired where " << comparison->pairingNote
            << ": those rows use the unpaired exact Mann-Whitney test over the two groups of seeds (their note says so)\n";

    auto staged = io::StagedDirectory::begin(options.outDir);
    if (!staged) {
        err << "kvlens compare: " << staged.error().text() << "\n";
        return kExitRefused;
    }
    const InterruptScope interrupts;
    const std::string dir = staged->path() + "/";
    nlohmann::json runs{{"format", "kvlens-compare"}, {"format_version", 1}, {"a", runJson(*a)}, {"b", runJson(*b)},
                        {"pairing_note", comparison->pairingNote}};
    const std::pair<std::string, std::string> files[] = {
        {"spec_diff.csv", specDiffCsv(*comparison)},
        {"run_comparison.csv", runComparisonCsv(*comparison)},
        {"runs.json", io::dumpJson(runs, 2) + "\n"},
    };
    int written = 0;
    for (const auto& file : files) {
        if (auto w = writeFileAtomic(dir + file.first, file.second); !w) {
            err << "kvlens compare: " << w.error().text() << staged->spaceNote() << "\n";
            written = kExitFailed;
            break;
        }
        if (InterruptScope::interrupted()) {
            written = InterruptScope::exitStatus();
            break;
        }
    }
    int figureFiles = 0;
    if (written == 0 && options.figures) {
        // The figure's spec.json holds both runs' specs: it is drawn from two result sets.
        const nlohmann::json specs{{"a", {{"dir", absolute(a->dir)}, {"spec", nlohmann::json::parse(specToJson(a->results.spec))}}},
                                   {"b", {{"dir", absolute(b->dir)}, {"spec", nlohmann::json::parse(specToJson(b->results.spec))}}}};
        QWidget host;
        widgets::RunCompareView view(&host);
        view.resize(900, 650);
        view.setComparison(comparison);
        const auto outcome = widgets::exportView(view, QDir(QString::fromStdString(staged->path())).filePath(QStringLiteral("figures")),
                                                 view.viewId(), options.figure, QByteArray::fromStdString(io::dumpJson(specs, 2) + "\n"));
        if (!outcome.ok()) {
            err << "kvlens compare: " << outcome.error.toStdString() << staged->spaceNote() << "\n";
            written = kExitFailed;
        }
        figureFiles = static_cast<int>(outcome.written.size());
    }
    std::ostringstream report;
    report << "KVLens compare: A = " << options.dirA << " (" << a->results.trials.size() << " trials), B = "
           << options.dirB << " (" << b->results.trials.size() << " trials); " << comparison->sharedConfigurations
           << " configurations in both, " << comparison->onlyA << " only in A, " << comparison->onlyB << " only in B\n"
           << runComparisonText(*comparison) << "wrote " << options.outDir
           << "/{spec_diff.csv, run_comparison.csv, runs.json}";
    if (options.figures)
        report << " and " << figureFiles << " files in " << options.outDir << "/figures";
    report << "\n";
    return finishRun(*staged, written, report.str(), out, err);
}

} // namespace kvlens::app
