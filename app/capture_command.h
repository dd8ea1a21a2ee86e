// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens capture`: a model dump (Q, K, V of every layer and head over one chunk) from the
// evaluator's own forward, for the Model map and the advisor, without Python.
#pragma once

#include "app/cli.h"
#include "core/common/result.h"
#include "core/eval/capture.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace kvlens::app {

struct CaptureOptions {
    eval::CaptureSpec spec;
    std::string outFile;
    bool quiet = false;
};

/// The options of `kvlens capture --model DIR (--text FILE | --tokens FILE.npy) [--ctx 512] [--offset T]
/// [--layers all|L,A-B,...] [--dtype f16|f32] [--threads N] [--memory-limit MB] [--no-special]
/// [--meta KEY=VALUE]... [--quiet] --out FILE.safetensors`.
cli::Syntax captureSyntax();
/// The options read (captureSyntax) as CaptureOptions, checked (checkCaptureSpec, the output file's
/// folder); errors name the option. A --meta key the dump writes itself is refused, naming it
/// (captureReservedKeys).
Result<CaptureOptions> captureOptionsFrom(const cli::Arguments& args);

/// The __metadata__ keys a dump always holds: its layout (dumpLayoutKeys) and its provenance
/// (model, rope, positions, source, model_layers, span_loss, captured_by, model_dir), which
/// --meta may not overwrite.
std::vector<std::string> captureReservedKeys();

/// Captures and writes the dump atomically (FILE is all of the new dump or stays as it was),
/// printing a summary on `out` (none with --quiet). Exit status: 0, 2 refused input (nothing written), 1 a failure
/// while writing, 130/143 interrupted (nothing written).
int runCaptureCommand(const CaptureOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
