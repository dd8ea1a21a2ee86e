// SPDX-License-Identifier: GPL-3.0-or-later
// Argument parsing and file writing for `kvlens compare`; the comparison itself is core's (run_compare).
#include "app/compare_command.h"

#include "app/batch.h"
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

constexpr const char* kUsage =
    "usage: kvlens compare DIR_A DIR_B --out DIR [--paired] [--no-figures]\n"
    "                      [--width single|double|IN] [--dpi N] [--font-family F] [--font-size PT]\n"
    "  DIR_A, DIR_B  two finished runs (written by --batch or kvlens merge)\n"
    "  --out DIR     writes DIR/spec_diff.csv (the spec fields that differ), run_comparison.csv (per\n"
    "                grid point, scheme and budget in both runs: every metric in A and B, B - A with its\n"
    "                interval, the log ratio, the seed-level test; configurations in one run only listed\n"
    "                as such), runs.json and figures/run_comparison.{pdf,svg,png,csv,spec.json}\n"
    "  --paired      refuse where the seeds cannot be paired (the runs drew different data, or share no\n"
    "                seed) instead of using the unpaired test over the two groups of seeds\n"
    "  --no-figures  write the tables only\n";

bool samePath(const std::string& a, const std::string& b)
{
    std::error_code ea, eb;
    const auto pa = std::filesystem::weakly_canonical(a, ea), pb = std::filesystem::weakly_canonical(b, eb);
    return !ea && !eb && pa == pb;
}

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

const char* compareUsage()
{
    return kUsage;
}

CompareArguments parseCompareArguments(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)
{
    CompareOptions options;
    std::vector<std::string> dirs;
    bool outGiven = false;
    std::vector<std::string> seen;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            out << kUsage;
            return {};
        }
        if (a.rfind("--", 0) == 0) {
            if (std::find(seen.begin(), seen.end(), a) != seen.end()) {
                err << "kvlens compare: " << a << " is given twice; give it once\n" << kUsage;
                return {std::nullopt, 2};
            }
            seen.push_back(a);
        }
        std::string* value = a == "--out"           ? &options.outDir
                             : a == "--width"       ? &options.width
                             : a == "--dpi"         ? &options.dpi
                             : a == "--font-family" ? &options.fontFamily
                             : a == "--font-size"   ? &options.fontSize
                                                    : nullptr;
        if (value) {
            if (i + 1 >= args.size() || args[i + 1].empty()) {
                err << "kvlens compare: " << a << " needs a value\n" << kUsage;
                return {std::nullopt, 2};
            }
            *value = args[++i];
            outGiven = outGiven || a == "--out";
        } else if (a == "--paired") {
            options.paired = true;
        } else if (a == "--no-figures") {
            options.figures = false;
        } else if (a.rfind("--", 0) == 0) {
            err << "kvlens compare: unknown option '" << a << "'\n" << kUsage;
            return {std::nullopt, 2};
        } else {
            std::string dir = a;
            while (dir.size() > 1 && dir.back() == '/')
                dir.pop_back();
            dirs.push_back(dir);
        }
    }
    if (dirs.size() != 2) {
        err << "kvlens compare: needs two run directories, got " << dirs.size() << "\n" << kUsage;
        return {std::nullopt, 2};
    }
    if (!outGiven || options.outDir.empty()) {
        err << "kvlens compare: --out DIR is required\n" << kUsage;
        return {std::nullopt, 2};
    }
    options.dirA = dirs[0];
    options.dirB = dirs[1];
    return {options, 0};
}

int runCompare(const CompareOptions& options, std::ostream& out, std::ostream& err)
{
    const auto figure = widgets::figureOptionsFrom(QString::fromStdString(options.width), QString::fromStdString(options.dpi),
                                                   QString::fromStdString(options.fontFamily),
                                                   QString::fromStdString(options.fontSize));
    if (!figure) {
        err << "kvlens compare: " << figure.error().text() << "\n";
        return kExitRefused;
    }
    for (const std::string* dir : {&options.dirA, &options.dirB})
        if (samePath(*dir, options.outDir)) {
            err << "kvlens compare: --out " << options.outDir << " is one of the runs compared; choose another\n";
            return kExitRefused;
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
                                                 view.viewId(), *figure, QByteArray::fromStdString(io::dumpJson(specs, 2) + "\n"));
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
