// SPDX-License-Identifier: GPL-3.0-or-later
// Fault injection for the tests of what a run must survive (kill mid-write, a full disk), driven by
// the environment variable KVLENS_FAULT, which nothing sets in normal use.
#pragma once

#include <string_view>

namespace kvlens::io {

/// With KVLENS_FAULT=stop:NAME, the process stops itself (SIGSTOP) when it reaches the point called
/// NAME, so a test can kill it exactly there (SIGKILL, or SIGTERM then SIGCONT). Points:
/// "inputs-read" (an imported regime's tensors are read, no trial has run), "analysis" (the trials
/// are done, the comparisons not begun), "advisor" (a model run's advice is about to be rerun),
/// "writing" (a run's tables are written, its figures not yet) and "commit" (every file written,
/// the directory not yet in place).
void faultPoint(std::string_view name);

/// With KVLENS_FAULT=enospc:FILE, true for a file named FILE: writeFileAtomic then fails the way a
/// full disk makes it fail (errno ENOSPC).
bool faultFailsWrite(std::string_view fileName);

} // namespace kvlens::io
