// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens codebook`: prints a Lloyd-Max codebook (levels, thresholds, MSE) without opening a window.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kvlens::app {

/// Runs `kvlens codebook [--law beta|gauss] [--dim D] [--bits B] [--csv]` with `args` being
/// the words after "codebook". Prints to `out`, errors to `err`; returns the exit code.
int runCodebookCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
