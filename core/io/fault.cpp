// SPDX-License-Identifier: GPL-3.0-or-later
// KVLENS_FAULT: "stop:NAME" or "enospc:FILE".
#include "core/io/fault.h"

#include <signal.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

namespace kvlens::io {

namespace {

std::string_view faultSpec()
{
    const char* value = std::getenv("KVLENS_FAULT");
    return value ? std::string_view(value) : std::string_view();
}

} // namespace

void faultPoint(std::string_view name)
{
    const std::string_view spec = faultSpec();
    if (spec.substr(0, 5) != "stop:" || spec.substr(5) != name)
        return;
    std::raise(SIGSTOP);
    // Continued. A signal the test sent while the process was stopped (SIGTERM, then SIGCONT) may
    // be delivered to any thread; let its handler run before this thread goes on, so the point
    // behaves as if the signal arrived exactly here.
    for (int i = 0; i < 1000; ++i) {
        sigset_t pending;
        sigemptyset(&pending);
        if (sigpending(&pending) != 0 || (!sigismember(&pending, SIGINT) && !sigismember(&pending, SIGTERM)))
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

bool faultFailsWrite(std::string_view fileName)
{
    const std::string_view spec = faultSpec();
    return spec.substr(0, 7) == "enospc:" && spec.substr(7) == fileName;
}

} // namespace kvlens::io
