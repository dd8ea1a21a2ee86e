// SPDX-License-Identifier: GPL-3.0-or-later
// Ctrl-C and SIGTERM for the headless commands: one flag, polled by runs and writers.
#pragma once

namespace kvlens::app {

/// While alive, SIGINT and SIGTERM set a flag instead of killing the process, so a batch, merge or
/// reproduce run can stop between trials or files, remove its staging directory and exit with
/// exitStatus(); the previous handlers come back on destruction. One at a time.
class InterruptScope {
public:
    InterruptScope();
    ~InterruptScope();
    InterruptScope(const InterruptScope&) = delete;
    InterruptScope& operator=(const InterruptScope&) = delete;

    /// True once SIGINT or SIGTERM arrived.
    static bool interrupted();
    /// 130 after SIGINT, 143 after SIGTERM (128 + the signal, as a shell reports it).
    static int exitStatus();
    /// The signal's name for messages: "interrupted" or "terminated".
    static const char* what();
};

} // namespace kvlens::app
