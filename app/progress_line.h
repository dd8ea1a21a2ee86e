// SPDX-License-Identifier: GPL-3.0-or-later
// The headless commands' progress line on stderr: trials done, percent, time so far and ETA.
#pragma once

#include "core/experiment/runner.h"

#include <chrono>
#include <iosfwd>
#include <string>

namespace kvlens::app {

/// "\rkvlens: PREFIX 40/72 trials (56%)  1.2 s, ETA 0.9 s", at most ten updates a second, a newline
/// when done; cancelled once SIGINT or SIGTERM arrived (InterruptScope). `start` lets several runs
/// share one clock (--reproduce's presets).
class ProgressLine final : public Progress {
public:
    ProgressLine(std::ostream& err, bool quiet, std::string prefix = {},
                 std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now());

    void report(long long done, long long total) override;
    bool cancelled() const override;

    /// The line's text without the carriage return, for `elapsed` seconds since the start of this
    /// run (the ETA extrapolates this run's rate).
    static std::string text(const std::string& prefix, long long done, long long total, double elapsed,
                            double runElapsed);

private:
    std::ostream& m_err;
    bool m_quiet;
    std::string m_prefix;
    std::chrono::steady_clock::time_point m_start;
    std::chrono::steady_clock::time_point m_runStart = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point m_last{};
};

} // namespace kvlens::app
