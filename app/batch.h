// SPDX-License-Identifier: GPL-3.0-or-later
// Headless batch mode: `kvlens --batch SPEC.json --out DIR` runs a spec and writes its files.
#pragma once

#include "widgets/figure_export.h"

#include <iosfwd>
#include <string>

#include "core/common/result.h"
#include "core/spec/spec.h"

namespace kvlens {
struct ResultSet;
namespace io {
class StagedDirectory;
}
} // namespace kvlens

namespace kvlens::app {

/// Exit statuses of the headless commands (README, "Exit status"): one per class of outcome.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;      ///< a failure while running or writing (I/O error, disk full)
inline constexpr int kExitRefused = 2;     ///< refused input: arguments, spec, data, output directory
inline constexpr int kExitDifferent = 3;   ///< --validate found an implementation difference
inline constexpr int kExitNotCompared = 4; ///< --validate had no OpenCL device to compare
// 130 / 143: interrupted by SIGINT / SIGTERM (InterruptScope::exitStatus).

struct BatchOptions {
    std::string specPath;   ///< a spec file, or "default" for the built-in default experiment
    std::string outDir;
    int threads = 0;        ///< 0: one per core
    std::string backend;    ///< overrides the spec's backend when set ("cpu", "opencl", "auto")
    std::string device;     ///< overrides the spec's OpenCL device (and implies "opencl")
    bool quiet = false;     ///< no progress line
    bool figures = true;    ///< also render every view into DIR/figures
    bool validate = false;  ///< paper B's validation instead of a plain run (see runValidation)
    std::string shard;      ///< "i/n": run only shard i of n (see runBatch); empty: the whole spec
    std::string reuseDir;   ///< --reuse: an earlier run directory whose matching trials are taken, not computed
    widgets::ExportOptions figure; ///< --width, --dpi, --font-family, --font-size
};

/// True when `a` and `b` name the same place (both resolvable): an output directory must not be an input.
bool samePath(const std::string& a, const std::string& b);
/// `dir` without trailing slashes ("/" stays), so messages and comparisons see one spelling.
std::string withoutTrailingSlashes(std::string dir);

/// The spec of a batch run: the file (or "default"), with --backend/--device applied, normalized.
/// Errors carry the spec path before the field.
Result<ExperimentSpec> loadBatchSpec(const BatchOptions& options);

/// The end of a headless run whose files went into `staged`: `written` is the writer's status.
/// On success commits the directory and prints `report`; otherwise (or after SIGINT/SIGTERM)
/// abandons it, leaving the target as it was. Returns the exit status.
int finishRun(io::StagedDirectory& staged, int written, const std::string& report, std::ostream& out,
              std::ostream& err);

/// Runs the batch job. Validates first (a bad spec writes nothing), runs with a progress
/// line on `err`, then writes DIR/spec.json, summary.csv, trials.csv, queries.csv and
/// comparisons.csv, and every view as DIR/figures/<view>.{pdf,svg,png,csv,spec.json}, each
/// file atomically; prints the summary and comparison tables on `out`. Returns the process exit code:
/// 0 success, 2 refused input, 1 a failure while running or writing, 130/143 interrupted.
/// Everything is written into a staging directory beside DIR (io::StagedDirectory, locked and
/// checked for writability before computing) and swapped into place at the end: DIR holds all of
/// this run, or stays as it was.
/// With a shard "i/n", runs only that shard's trials (parseShard, shardFilter) and writes
/// DIR/spec.json, trials.csv and queries.csv of those trials, trials.bin (every result,
/// lossless) and, last, manifest.json, for `kvlens merge` to put the run back together.
int runBatch(const BatchOptions& options, std::ostream& out, std::ostream& err);

/// The files of a finished run, shared by `--batch` and `kvlens merge`: DIR/spec.json,
/// summary.csv, trials.csv, queries.csv, comparisons.csv, proxies.csv and (with `figures`)
/// every view in DIR/figures, each file atomically; then the headline, summary and comparison
/// tables on `out`. Needs a QApplication when `figures` is set. Returns 0, or 1 after a
/// write error (named on `err`).
/// `shownDir` names the directory in the "wrote ..." line when `outDir` is a staging directory.
/// Returns 130/143 when SIGINT/SIGTERM arrived while writing (InterruptScope).
/// A model run with K-only and V-only also gets model_map.csv, kv_sensitivity.csv, pareto.csv,
/// allocation.json and allocation_check.csv: the advice is rerun as its own experiment, with a
/// progress line on `err` unless `quiet`, and Ctrl-C cancels it like the run.
int writeRunFiles(const ResultSet& results, const std::string& outDir, bool figures, std::ostream& out,
                  std::ostream& err, const std::string& shownDir = {}, bool quiet = false,
                  const widgets::ExportOptions& figureOptions = {});

/// `kvlens --batch SPEC --validate --out DIR`: runs the spec on the CPU backend, on the
/// OpenCL device (same RNG: must agree to float tolerance) and on the CPU with the other RNG
/// (different draws: KS tests must not separate them); writes DIR/spec.json and
/// DIR/validation.csv and prints the table. Exit 0, 3 when an implementation difference is
/// found, 2 for bad input, 1 on failure.
int runValidation(const BatchOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
