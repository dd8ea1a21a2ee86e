// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens compare DIR_A DIR_B --out DIR`: two finished runs, what their specs change and how every shared
// configuration moved from A to B, tested on the seed as the unit.
#pragma once

#include "app/cli.h"
#include "widgets/figure_export.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace kvlens::app {

struct CompareOptions {
    std::string dirA, dirB;  ///< finished run directories (`--batch` or `kvlens merge` output)
    std::string outDir;
    bool paired = false;     ///< refuse where the seeds cannot be paired instead of testing unpaired
    bool figures = true;     ///< also write figures/run_comparison.{pdf,svg,png,csv,spec.json}
    widgets::ExportOptions figure; ///< --width, --dpi, --font-family, --font-size
};

/// The options of `kvlens compare DIR_A DIR_B --out DIR [--paired] [--no-figures]` (the figure
/// options are the command table's).
cli::Syntax compareSyntax();
/// The options read (compareSyntax) as CompareOptions, the directories without trailing slashes.
CompareOptions compareOptionsFrom(const cli::Arguments& args);

/// What `dir` is when it is not a finished experiment run, in words compare can refuse with: an
/// evaluation's output, a shard, an unfinished run, an empty or foreign folder, a file, nothing.
/// Empty when it holds a run's manifest (readRunDirectory then checks the rest).
std::string whatIsNotARun(const std::string& dir);

/// Reads both runs (readRunDirectory: a directory that is not a finished, whole run is refused),
/// compares them (compareRuns) and writes DIR/spec_diff.csv, run_comparison.csv, runs.json and the
/// forest plot, staged and renamed into place as --batch writes its directory. Where the runs drew
/// different data (or share no seed) the rows use the unpaired test and a line on `err` says so;
/// with `paired` that is refused instead. Needs a QApplication when figures are on. Returns 0; 2
/// for refused input (a directory that is not a finished run, no shared configuration, --paired
/// on different data, an output directory that is not writable or not a KVLens output); 1 for a
/// write error; 130/143 when interrupted.
int runCompare(const CompareOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
