// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens eval`: a model's next-token damage under each KV-cache scheme, and --batch on an eval spec.
#pragma once

#include "app/cli.h"
#include "core/common/result.h"
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
};

/// The options of `kvlens eval --model DIR (--text FILE | --tokens FILE.npy) --schemes S,...
/// [--budgets n,...] [--ctx 512] [--chunks N] [--calibration T] [--seeds FIRST[:COUNT]] [--residual R]
/// [--attribution none|layers|heads] [--threads N] [--memory-limit MB] [--no-special] [--quiet]
/// [--no-figures] --out DIR`, or `--spec EVAL.json` instead of the model options.
cli::Syntax evalSyntax();

/// The options of an evaluation that are not fields of its spec: what `--spec EVAL.json` and
/// `kvlens --batch EVAL.json` take beside the file (--threads sets the spec's threads).
const std::vector<std::string>& evalRunOptions();

/// The options read (evalSyntax) as EvalOptions, its spec checked (checkEvalSpec). With --spec,
/// an option that is a field of the spec is refused, naming it. Errors name the option. The
/// figure options are the caller's (figureOptions).
Result<EvalOptions> evalOptionsFrom(const cli::Arguments& args);

/// Runs the evaluation and writes DIR/spec.json (the eval spec), eval_summary.csv,
/// eval_tokens.csv, eval_layers.csv, eval_proxies.csv (paper C's proxies against each token's KLD),
/// report.txt and (with figures) DIR/figures, all through a
/// staging directory (DIR holds all of the run or stays as it was), printing the report on `out`
/// and a progress line with ETA on `err`. Exit status: 0, 2 refused input (nothing written), 1 a
/// failure while writing, 130/143 interrupted (nothing written).
int runEvalCommand(const EvalOptions& options, std::ostream& out, std::ostream& err);

/// True when `path` is a readable file holding an eval spec ("kvlens_eval"); false otherwise (an
/// experiment spec, "default", or an unreadable file, which --batch then reports).
bool isEvalSpecFile(const std::string& path);

} // namespace kvlens::app
