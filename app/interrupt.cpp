// SPDX-License-Identifier: GPL-3.0-or-later
// sigaction handlers that only store the signal number (async-signal-safe).
#include "app/interrupt.h"

#include <atomic>
#include <csignal>

namespace kvlens::app {

namespace {

std::atomic<int> g_signal{0};
struct sigaction g_previousInt {}, g_previousTerm {};

extern "C" void onSignal(int signal)
{
    g_signal.store(signal);
}

} // namespace

InterruptScope::InterruptScope()
{
    g_signal.store(0);
    struct sigaction action {};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &g_previousInt);
    sigaction(SIGTERM, &action, &g_previousTerm);
}

InterruptScope::~InterruptScope()
{
    sigaction(SIGINT, &g_previousInt, nullptr);
    sigaction(SIGTERM, &g_previousTerm, nullptr);
}

bool InterruptScope::interrupted()
{
    return g_signal.load() != 0;
}

int InterruptScope::exitStatus()
{
    return 128 + (g_signal.load() != 0 ? g_signal.load() : SIGINT);
}

const char* InterruptScope::what()
{
    return g_signal.load() == SIGTERM ? "terminated" : "interrupted";
}

} // namespace kvlens::app
