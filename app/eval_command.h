// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens eval`: a model's next-token damage under each KV-cache scheme, and --batch on an eval spec.
#pragma once

#include "app/cli.h"
#include "core/common/result.h"
#include "core/eval/eval_result.h"
#include "core/eval/eval_shard.h"
#include "core/eval/evaluator.h"
#include "core/io/staged_dir.h"
#include "core/spec/eval_spec.h"
#include "widgets/figure_export.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace kvlens::app {

struct EvalOptions {
    EvalSpec spec;
    std::string outDir;
    bool quiet = false;
    bool figures = true;
    widgets::ExportOptions figure;
    eval::EvalShard shard; ///< --shard i/n: a fixed 1/n of the chunks (0 of 1: the whole run)
    std::string reuseDir;  ///< --reuse OLD: an earlier evaluation whose configurations this run takes
};

/// An evaluation's directory (a whole run, a merged one or a shard): manifest.json, spec.json and
/// eval_shard.bin read and checked against each other (the spec hash, the checksum, the chunks).
Result<eval::EvalShardInput> readEvalRecord(const std::string& dir);

/// "i/n" as a shard: 0 <= i < n <= 1048576, refused naming --shard otherwise.
Result<eval::EvalShard> parseEvalShard(const std::string& text);

/// The options of `kvlens eval --model DIR (--text FILE | --tokens FILE.npy) --schemes S,...
/// [--budgets n,...] [--ctx 512] [--chunks N] [--calibration T] [--seeds FIRST[:COUNT]] [--residual R]
/// [--attribution none|layers|heads] [--threads N] [--memory-limit MB] [--no-special] [--backend B]
/// [--device D] [--quiet] [--no-figures] --out DIR`, or `--spec EVAL.json` instead of the model options.
cli::Syntax evalSyntax();

/// The options of an evaluation that are not fields of its spec: what `--spec EVAL.json` and
/// `kvlens --batch EVAL.json` take beside the file (--threads, --backend and --device set the spec's
/// fields of those names: where it runs, not what it computes).
const std::vector<std::string>& evalRunOptions();

/// The options read (evalSyntax) as EvalOptions, its spec checked (checkEvalSpec). With --spec,
/// an option that is a field of the spec is refused, naming it. Errors name the option. The
/// figure options are the caller's (figureOptions).
Result<EvalOptions> evalOptionsFrom(const cli::Arguments& args);

/// Runs the evaluation (its forward where spec.backend and spec.device say: prepareForward) and
/// writes DIR/spec.json (the eval spec), eval_summary.csv,
/// eval_tokens.csv, eval_layers.csv, eval_proxies.csv (paper C's proxies against each token's KLD),
/// report.txt, eval_shard.bin and manifest.json (the run, lossless: what kvlens merge and --reuse
/// read) and (with figures) DIR/figures, all through a staging directory (DIR holds all of the run
/// or stays as it was), printing the report on `out` and a progress line with ETA on `err`. A shard
/// (options.shard) writes spec.json, eval_shard.bin and manifest.json only. Exit status: 0, 2 refused
/// input (nothing written), 1 a failure while writing, 130/143 interrupted (nothing written).
int runEvalCommand(const EvalOptions& options, std::ostream& out, std::ostream& err);

/// Writes a finished evaluation's files (those of runEvalCommand, a shard's or the whole run's) into
/// the staging directory `staged` and puts it in place (finishRun): the one writer of kvlens eval,
/// --batch EVAL.json and kvlens merge of eval shards. Returns the exit status.
int writeEvalRun(const eval::EvalResult& result, const EvalOptions& options, io::StagedDirectory& staged,
                 std::ostream& out, std::ostream& err);

/// True when `path` is a readable file holding an eval spec ("kvlens_eval"); false otherwise (an
/// experiment spec, "default", or an unreadable file, which --batch then reports).
bool isEvalSpecFile(const std::string& path);

} // namespace kvlens::app
