// SPDX-License-Identifier: GPL-3.0-or-later
// One progress line for batch, validate and reproduce.
#include "app/progress_line.h"

#include "app/interrupt.h"

#include <cstdio>
#include <ostream>

namespace kvlens::app {

ProgressLine::ProgressLine(std::ostream& err, bool quiet, std::string prefix, std::chrono::steady_clock::time_point start)
    : m_err(err), m_quiet(quiet), m_prefix(std::move(prefix)), m_start(start)
{
}

std::string ProgressLine::text(const std::string& prefix, long long done, long long total, double elapsed,
                               double runElapsed)
{
    char line[320];
    const double percent = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
    int n = std::snprintf(line, sizeof line, "kvlens: %s%s%lld/%lld trials (%.0f%%)  %.1f s", prefix.c_str(),
                          prefix.empty() ? "" : " ", done, total, percent, elapsed);
    if (done > 0 && done < total && n > 0 && static_cast<std::size_t>(n) < sizeof line)
        std::snprintf(line + n, sizeof line - static_cast<std::size_t>(n), ", ETA %.1f s",
                      runElapsed * static_cast<double>(total - done) / static_cast<double>(done));
    return line;
}

void ProgressLine::report(long long done, long long total)
{
    if (m_quiet)
        return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - m_last < std::chrono::milliseconds(100))
        return;
    m_last = now;
    // Padded so a shorter line (the ETA gone) overwrites a longer one.
    m_err << '\r' << text(m_prefix, done, total, std::chrono::duration<double>(now - m_start).count(),
                          std::chrono::duration<double>(now - m_runStart).count())
          << "      " << (done == total ? "\n" : "") << std::flush;
}

bool ProgressLine::cancelled() const
{
    return InterruptScope::interrupted();
}

} // namespace kvlens::app
