// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens capture`: a model dump (Q, K, V of every layer and head over one chunk) from the
// evaluator's own forward, for the Model map and the advisor, without Python.
#pragma once

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

/// `kvlens capture --model DIR (--text FILE | --tokens FILE.npy) [--ctx 512] [--offset T]
/// [--layers all|L,A-B,...] [--dtype f16|f32] [--threads N] [--memory-limit MB] [--no-special]
/// [--meta KEY=VALUE]... [--quiet] --out FILE.safetensors`. Errors name the argument.
Result<CaptureOptions> parseCaptureArguments(const std::vector<std::string>& args);

/// Captures and writes the dump atomically (FILE is all of the new dump or stays as it was),
/// printing a summary on `out` (none with --quiet). Exit status: 0, 2 refused input (nothing written), 1 a failure
/// while writing, 130/143 interrupted (nothing written).
int runCaptureCommand(const CaptureOptions& options, std::ostream& out, std::ostream& err);

/// The usage lines of `kvlens capture` for --help.
const char* captureUsage();

} // namespace kvlens::app
