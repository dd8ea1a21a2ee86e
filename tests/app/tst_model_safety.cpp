// SPDX-License-Identifier: GPL-3.0-or-later
// The model features' headless runs against what a careless user or an attacker does (issue 26):
// Ctrl-C during the statistics, a dump replaced after the trials or before merge. Each drives the
// kvlens executable; KVLENS_FAULT stops it at a named point so the change lands exactly there.
#include "common/dump_file.h"
#include "common/kvlens_process.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>

#include <chrono>
#include <thread>

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;
using kvlens::test::waitStopped;
using kvlens::test::writeDump;

QString writeFile(const QString& path, const QByteArray& contents)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(contents) != contents.size())
        qFatal("cannot write %s", qPrintable(path));
    return path;
}

/// Names in `dir` that a run leaves beside its target while it works (staging, lock, old copies).
QStringList leftovers(const QString& dir)
{
    QStringList out;
    for (const QString& name : QDir(dir).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot))
        if (name.contains(QLatin1String(".kvlens-")) || name.contains(QLatin1String(".tmp")))
            out << name;
    return out;
}

/// Starts kvlens with KVLENS_FAULT=stop:POINT and waits until it has stopped itself there.
bool startStopped(QProcess& p, const QStringList& args, const char* point)
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("KVLENS_FAULT"), QStringLiteral("stop:") + QLatin1String(point));
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(KVLENS_EXE), args);
    return p.waitForStarted() && waitStopped(p.processId());
}

/// A model spec over `dump` (head_dim 32: the fp16 norms add 0.5 bits, so the advisor's 3-bit target
/// is reachable) with the advisor's schemes.
QByteArray modelSpec(const QString& dump)
{
    return QByteArray(R"({"name": "hostile model", "regime": {"name": "model", "file": ")") + dump.toUtf8()
           + R"(", "layers": "all", "heads": "all"}, "d": 32, "tokens": 16, "queries": 4,
               "schemes": ["K-only", "V-only", "TQ-KV"], "budgets": [2, 3, 4], "seeds": {"count": 2},
               "metrics": {"top_k": 2}, "comparisons": {"bootstrap": 100, "permutations": 19}})";
}

} // namespace

class TestModelSafety : public QObject {
    Q_OBJECT
private slots:
    void sigtermStopsTheStatisticsWithinASecond();
    void aDumpReplacedBeforeTheAdvisorsRerunIsRefused();
    void aDumpReplacedBeforeMergeIsRefused();
};

void TestModelSafety::sigtermStopsTheStatisticsWithinASecond()
{
    // Finding 1: after the trials, the comparisons (here a million bootstrap resamples a row,
    // seconds of work) polled nothing, so SIGTERM waited for them. Now every resample polls.
    QTemporaryDir dir;
    const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")),
                                   R"({"d": 32, "tokens": 64, "queries": 64, "schemes": ["KV", "KQV", "QKQV"],
                                       "budgets": [2], "seeds": {"count": 8},
                                       "comparisons": {"bootstrap": 1000000, "permutations": 0}})");
    const QString out = dir.filePath(QStringLiteral("out"));
    QProcess p;
    QVERIFY(startStopped(p, {QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet")},
                         "analysis"));
    ::kill(static_cast<pid_t>(p.processId()), SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // well inside the first row
    QElapsedTimer timer;
    timer.start();
    ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
    QVERIFY(p.waitForFinished(30000));
    const qint64 ms = timer.elapsed();
    QCOMPARE(p.exitCode(), 143);
    QVERIFY2(ms < 1000, qPrintable(QStringLiteral("exit took %1 ms after SIGTERM").arg(ms)));
    QVERIFY(!QFileInfo::exists(out));
    QCOMPARE(leftovers(dir.path()), QStringList());
}

void TestModelSafety::aDumpReplacedBeforeTheAdvisorsRerunIsRefused()
{
    // Finding 9: the advice's rerun read the dump again, so a file replaced after the trials gave
    // allocation_check.csv of other data beside every other table of the old one, exit 0.
    QTemporaryDir dir;
    const QString dump = dir.filePath(QStringLiteral("dump.safetensors"));
    writeDump(dump.toStdString(), 2, 16, 1.0, -1, 32);
    const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), modelSpec(dump));
    const QString out = dir.filePath(QStringLiteral("out"));
    QProcess p;
    QVERIFY(startStopped(p, {QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet"),
                             QStringLiteral("--no-figures")},
                         "advisor"));
    writeDump(dump.toStdString(), 2, 16, 3.0, 1, 32); // the same name, other keys in layer 1
    ::kill(static_cast<pid_t>(p.processId()), SIGCONT);
    QVERIFY(p.waitForFinished(120000));
    const QByteArray err = p.readAllStandardError();
    QCOMPARE(p.exitCode(), 2);
    QVERIFY2(err.contains("the advice's rerun: the input of grid point 1 (head = 0, layer = 1)"), err.constData());
    QVERIFY2(err.contains("is not what the run read"), err.constData());
    QVERIFY(!QFileInfo::exists(out));
    QCOMPARE(leftovers(dir.path()), QStringList());

    // Unchanged, the same run writes the advice and its check.
    writeDump(dump.toStdString(), 2, 16, 1.0, -1, 32);
    const Run ok = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet"),
                              QStringLiteral("--no-figures")});
    QVERIFY2(ok.exitCode == 0, ok.err.constData());
    QVERIFY(QFileInfo::exists(out + QStringLiteral("/allocation_check.csv")));
}

void TestModelSafety::aDumpReplacedBeforeMergeIsRefused()
{
    // Finding 9, merge: the shards' manifests hold the data hashes; the advisor's rerun at merge
    // reads the dump as it is now, and must refuse a replaced one.
    QTemporaryDir dir;
    const QString dump = dir.filePath(QStringLiteral("dump.safetensors"));
    writeDump(dump.toStdString(), 2, 16, 1.0, -1, 32);
    const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), modelSpec(dump));
    QStringList shards;
    for (int i = 0; i < 2; ++i) {
        const QString shard = dir.filePath(QStringLiteral("shard%1").arg(i));
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), shard,
                                 QStringLiteral("--quiet"), QStringLiteral("--shard"), QStringLiteral("%1/2").arg(i)});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        shards << shard;
    }
    writeDump(dump.toStdString(), 2, 16, 3.0, 0, 32);
    const QString out = dir.filePath(QStringLiteral("merged"));
    const Run merged = runKvlens(QStringList{QStringLiteral("merge")} + shards
                                 + QStringList{QStringLiteral("--out"), out, QStringLiteral("--no-figures")});
    QCOMPARE(merged.exitCode, 2);
    QVERIFY2(merged.err.contains("is not what the run read"), merged.err.constData());
    QVERIFY(!QFileInfo::exists(out));
    QCOMPARE(leftovers(dir.path()), QStringList());
}

QTEST_APPLESS_MAIN(TestModelSafety)
#include "tst_model_safety.moc"
