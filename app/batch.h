// SPDX-License-Identifier: GPL-3.0-or-later
// Headless batch mode: `kvlens --batch SPEC.json --out DIR` runs a spec and writes its files.
#pragma once

#include <iosfwd>
#include <string>

namespace kvlens::app {

struct BatchOptions {
    std::string specPath;   ///< a spec file, or "default" for the built-in default experiment
    std::string outDir;
    int threads = 0;        ///< 0: one per core
    bool quiet = false;     ///< no progress line
    bool figures = true;    ///< also render every view into DIR/figures
};

/// Runs the batch job. Validates first (a bad spec writes nothing), runs with a progress
/// line on `err`, then writes DIR/spec.json, summary.csv, trials.csv, queries.csv and
/// comparisons.csv, and every view as DIR/figures/<view>.{pdf,svg,png,csv,spec.json}, each
/// file atomically; prints the summary and comparison tables on `out`. Returns the process exit code:
/// 0 success, 2 bad input, 1 a failure while running or writing, 130 interrupted.
int runBatch(const BatchOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
