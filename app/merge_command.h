// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens merge DIR_0 ... DIR_{n-1} --out DIR`: checks shards of a batch run and writes the whole run's files.
#pragma once

#include "app/cli.h"
#include "widgets/figure_export.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace kvlens::app {

struct MergeOptions {
    std::vector<std::string> shardDirs; ///< as given, each written by `kvlens --batch SPEC --shard i/n --out DIR_i`
    std::string outDir;
    bool figures = true;                ///< also render every view into DIR/figures
    widgets::ExportOptions figure;      ///< --width, --dpi, --font-family, --font-size
};

/// The options of `kvlens merge DIR_0 ... DIR_{n-1} --out DIR [--no-figures]` (the figure options are
/// the command table's).
cli::Syntax mergeSyntax();
/// The options read (mergeSyntax) as MergeOptions, the directories without trailing slashes.
MergeOptions mergeOptionsFrom(const cli::Arguments& args);

/// Reads every shard's manifest.json and the first shard's spec.json, checks the set
/// (checkShardSet: one spec, one program version, one shard count, every trial exactly once;
/// a problem is listed by directory on `err` and nothing is written), decodes each trials.bin,
/// and writes what an unsharded `--batch` run writes (writeRunFiles). Needs a QApplication
/// when figures are on. Returns 0, 2 for shards that do not fit together or cannot be read,
/// 1 for a write error.
int runMerge(const MergeOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
