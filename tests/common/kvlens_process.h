// SPDX-License-Identifier: GPL-3.0-or-later
// Runs the kvlens executable (KVLENS_EXE, defined by the test's CMake registration) and collects what it printed.
#pragma once

#include <QByteArray>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStringList>

#include <chrono>
#include <thread>

namespace kvlens::test {

/// What one kvlens process did; exitCode stays -1 when it did not finish in time.
struct Run {
    int exitCode = -1;
    QByteArray out, err;
};

/// Runs kvlens with `args`; `environment` ("NAME=value" entries) is added to this process's
/// environment. Waits at most `timeoutMs`.
inline Run runKvlens(const QStringList& args, const QStringList& environment = {}, int timeoutMs = 120000)
{
    QProcess p;
    if (!environment.isEmpty()) {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const QString& assignment : environment)
            env.insert(assignment.section(QLatin1Char('='), 0, 0), assignment.section(QLatin1Char('='), 1));
        p.setProcessEnvironment(env);
    }
    p.start(QStringLiteral(KVLENS_EXE), args);
    Run r;
    if (!p.waitForFinished(timeoutMs))
        return r;
    r.exitCode = p.exitCode();
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

/// True once /proc says process `pid` is stopped (state T; KVLENS_FAULT=stop:POINT stops it),
/// polling every 20 ms for at most `ms`.
inline bool waitStopped(qint64 pid, int ms = 60000)
{
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
        QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
        if (stat.open(QIODevice::ReadOnly)) {
            const QByteArray text = stat.readAll();
            const auto close = text.lastIndexOf(')');
            if (close > 0 && text.size() > close + 2 && text[close + 2] == 'T')
                return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

} // namespace kvlens::test
