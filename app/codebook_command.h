// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens codebook`: prints a Lloyd-Max codebook (levels, thresholds, MSE) without opening a window.
#pragma once

#include "app/cli.h"
#include "core/common/result.h"
#include "core/quant/lloyd_max.h"

#include <iosfwd>

namespace kvlens::app {

struct CodebookOptions {
    CodebookLaw law = CodebookLaw::Beta;
    int dim = 128;     ///< beta: the dimension D; gauss: variance 1/D, 0 for unit variance
    int bits = 3;
    bool csv = false;  ///< index,level,lower,upper rows instead of the table
};

/// The options of `kvlens codebook [--law beta|gauss] [--dim D] [--bits B] [--csv]`.
cli::Syntax codebookSyntax();
/// The options read (codebookSyntax) as CodebookOptions; a beta law needs D >= 3.
Result<CodebookOptions> codebookOptionsFrom(const cli::Arguments& args);

/// Designs the codebook and prints it to `out`. Returns 0, or 1 when the design did not converge.
int runCodebook(const CodebookOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
