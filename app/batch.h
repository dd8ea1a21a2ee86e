// SPDX-License-Identifier: GPL-3.0-or-later
// Headless batch mode: `kvlens --batch SPEC.json --out DIR` runs a spec and writes its files.
#pragma once

#include <iosfwd>
#include <string>

namespace kvlens {
struct ResultSet;
}

namespace kvlens::app {

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
};

/// Runs the batch job. Validates first (a bad spec writes nothing), runs with a progress
/// line on `err`, then writes DIR/spec.json, summary.csv, trials.csv, queries.csv and
/// comparisons.csv, and every view as DIR/figures/<view>.{pdf,svg,png,csv,spec.json}, each
/// file atomically; prints the summary and comparison tables on `out`. Returns the process exit code:
/// 0 success, 2 bad input, 1 a failure while running or writing, 130 interrupted.
/// With a shard "i/n", runs only that shard's trials (parseShard, shardFilter) and writes
/// DIR/spec.json, trials.csv and queries.csv of those trials, trials.bin (every result,
/// lossless) and, last, manifest.json, for `kvlens merge` to put the run back together.
int runBatch(const BatchOptions& options, std::ostream& out, std::ostream& err);

/// The files of a finished run, shared by `--batch` and `kvlens merge`: DIR/spec.json,
/// summary.csv, trials.csv, queries.csv, comparisons.csv, proxies.csv and (with `figures`)
/// every view in DIR/figures, each file atomically; then the headline, summary and comparison
/// tables on `out`. Needs a QApplication when `figures` is set. Returns 0, or 1 after a
/// write error (named on `err`).
int writeRunFiles(const ResultSet& results, const std::string& outDir, bool figures, std::ostream& out,
                  std::ostream& err);

/// `kvlens --batch SPEC --validate --out DIR`: runs the spec on the CPU backend, on the
/// OpenCL device (same RNG: must agree to float tolerance) and on the CPU with the other RNG
/// (different draws: KS tests must not separate them); writes DIR/spec.json and
/// DIR/validation.csv and prints the table. Exit 0, 3 when an implementation difference is
/// found, 2 for bad input, 1 on failure.
int runValidation(const BatchOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
