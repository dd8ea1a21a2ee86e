// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens compare DIR_A DIR_B --out DIR`: two finished runs, what their specs change and how every shared
// configuration moved from A to B, tested on the seed as the unit.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::app {

struct CompareOptions {
    std::string dirA, dirB;  ///< finished run directories (`--batch` or `kvlens merge` output)
    std::string outDir;
    bool paired = false;     ///< refuse where the seeds cannot be paired instead of testing unpaired
    bool figures = true;     ///< also write figures/run_comparison.{pdf,svg,png,csv,spec.json}
    std::string width, dpi, fontFamily, fontSize; ///< as --batch's figure options; empty: defaults
};

/// The words after "compare", parsed; without options, `exitCode` is what to exit with (0 after
/// --help, 2 after a usage error, both already printed).
struct CompareArguments {
    std::optional<CompareOptions> options;
    int exitCode = 0;
};
CompareArguments parseCompareArguments(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The usage text (kvlens --help lists it too).
const char* compareUsage();

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
