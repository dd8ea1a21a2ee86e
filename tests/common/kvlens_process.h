// SPDX-License-Identifier: GPL-3.0-or-later
// Runs the kvlens executable (KVLENS_EXE, defined by the test's CMake registration) and collects what it printed.
#pragma once

#include <QByteArray>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStringList>

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

} // namespace kvlens::test
