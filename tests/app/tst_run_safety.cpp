// SPDX-License-Identifier: GPL-3.0-or-later
// What no input may do to a headless run: crash it, mix two runs in one directory, lose a previous
// run, or exit 0 after refusing. Each case drives the kvlens executable the way a user (or a
// scheduler killing a job) would; KVLENS_FAULT stops it at a named point so a kill lands exactly
// mid-write (core/io/fault.h).
#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "common/kvlens_process.h"

#include <csignal>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;
using kvlens::test::waitStopped;

QString writeFile(const QString& path, const QByteArray& contents)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(contents) != contents.size())
        qFatal("cannot write %s", qPrintable(path));
    return path;
}

/// A small spec that still takes long enough to write its figures.
QByteArray smallSpec(const char* name = "small")
{
    return QByteArray(R"({"name": ")") + name
           + R"(", "d": 32, "tokens": 64, "queries": 8, "budgets": [2, 3], "seeds": {"count": 2}, "schemes": ["KV", "KQV"]})";
}

/// Every file under `dir` (relative path -> SHA-256), hidden ones included.
QMap<QString, QByteArray> snapshot(const QString& dir)
{
    QMap<QString, QByteArray> files;
    QDirIterator it(dir, QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString path = it.next();
        QFile f(path);
        if (f.open(QIODevice::ReadOnly))
            files.insert(QDir(dir).relativeFilePath(path), QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256));
    }
    return files;
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

QStringList batchArgs(const QString& spec, const QString& out, const QStringList& more = {})
{
    return QStringList{QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet")} + more;
}

} // namespace

class TestRunSafety : public QObject {
    Q_OBJECT
private slots:
    // --- No input crashes the program: each is refused with status 2 and one line. ---
    void hostileSpecsAreRefusedInOneLine_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QByteArray>("mention");
        // A value nested 100 000 deep used to overflow the stack when the message dumped it.
        QTest::newRow("deep nesting") << QByteArray("{\"d\": " + QByteArray(100000, '[') + QByteArray(100000, ']') + "}")
                                      << QByteArray("nested deeper than 64 levels");
        QTest::newRow("deep value in a message")
            << QByteArray("{\"name\": " + QByteArray(60, '[') + QByteArray(60, ']') + "}")
            << QByteArray("name: must be a string, got an array of 1 element");
        QTest::newRow("duplicate key") << QByteArray(R"({"d": 64, "d": 128})") << QByteArray("key 'd' is given twice");
        QTest::newRow("duplicate nested key")
            << QByteArray(R"({"seeds": {"count": 2, "count": 3}})") << QByteArray("key 'count' is given twice");
        QTest::newRow("d 1e308") << QByteArray(R"({"d": 1e308})") << QByteArray("d: must be an integer in [4, 16384]");
        QTest::newRow("seeds 1e300") << QByteArray(R"({"seeds": {"count": 1e300}})")
                                     << QByteArray("seeds.count: must be an integer in [1, 100000]");
        QTest::newRow("control characters") << QByteArray("{\"name\": \"x\\u001b[2J\\r\"}")
                                            << QByteArray("name: must not contain control characters");
        QTest::newRow("1e10 trials") << QByteArray(R"({"seeds": {"count": 100000}, "schemes": ["KV", "KQV", "QKQV",
            "TQ-KV", "TQ-KQV"], "budgets": [2, 3, 4, 5, 6, 7, 8], "sweep": {"score_scale": [)"
                                                + [] {
                                                      QByteArray v;
                                                      for (int i = 0; i < 4000; ++i)
                                                          v += (i ? "," : "") + QByteArray::number(1.0 + i * 1e-3);
                                                      return v;
                                                  }()
                                                + "]}}")
                                     << QByteArray("memory_limit_mb: this run needs about");
    }
    void hostileSpecsAreRefusedInOneLine()
    {
        QFETCH(QByteArray, json);
        QFETCH(QByteArray, mention);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), json);
        for (const QStringList& extra : {QStringList{}, QStringList{QStringLiteral("--shard"), QStringLiteral("0/1")}}) {
            const Run r = runKvlens(batchArgs(spec, out, extra));
            QCOMPARE(r.exitCode, 2);
            QVERIFY2(r.err.contains(mention), r.err.constData());
            QCOMPARE(r.err.count('\n'), 1);
            QVERIFY(!r.err.contains('\x1b'));
            QVERIFY(!QDir(out).exists());
            QVERIFY2(leftovers(dir.path()).isEmpty(), qPrintable(leftovers(dir.path()).join(' ')));
        }
    }

    void theHostileSpecCorpusIsRefused_data()
    {
        // tests/data/README.md, "Hostile specs": file and what the message must contain.
        QTest::addColumn<QString>("file");
        QTest::addColumn<QByteArray>("mention");
        QFile readme(QStringLiteral(KVLENS_TEST_DATA_DIR "/README.md"));
        QVERIFY(readme.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(readme.readAll());
        const QString section = text.mid(text.indexOf(QLatin1String("## Hostile specs")));
        static const QRegularExpression row(QStringLiteral("^\\| `(spec_[^`]+\\.json)` \\|[^|]*\\| `([^`]+)` \\|$"),
                                            QRegularExpression::MultilineOption);
        int rows = 0;
        for (auto it = row.globalMatch(section); it.hasNext(); ++rows) {
            const auto m = it.next();
            QTest::newRow(qPrintable(m.captured(1))) << m.captured(1) << m.captured(2).toUtf8();
        }
        QVERIFY(rows >= 5);
    }
    void theHostileSpecCorpusIsRefused()
    {
        QFETCH(QString, file);
        QFETCH(QByteArray, mention);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens(batchArgs(QStringLiteral(KVLENS_TEST_DATA_DIR "/") + file, out));
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(mention), r.err.constData());
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY(!QDir(out).exists());
    }

    void devicesAndFifosAreNeverRead()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        Run r = runKvlens(batchArgs(QStringLiteral("/dev/zero"), out), {}, 20000);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("/dev/zero: is not a regular file"), r.err.constData());
        // A link to /dev/zero, and a FIFO nobody writes (reading it would block forever).
        QVERIFY(QFile::link(QStringLiteral("/dev/zero"), dir.filePath(QStringLiteral("link.json"))));
        r = runKvlens(batchArgs(dir.filePath(QStringLiteral("link.json")), out), {}, 20000);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("is not a regular file"), r.err.constData());
        const QByteArray fifo = dir.filePath(QStringLiteral("fifo.json")).toLocal8Bit();
        QCOMPARE(::mkfifo(fifo.constData(), 0600), 0);
        r = runKvlens(batchArgs(QString::fromLocal8Bit(fifo), out), {}, 20000);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("is not a regular file"), r.err.constData());
    }

    void mergeRefusesManifestsThatAreDevices()
    {
        QTemporaryDir dir;
        const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), smallSpec());
        const QString shard = dir.filePath(QStringLiteral("s0"));
        QCOMPARE(runKvlens(batchArgs(spec, shard, {QStringLiteral("--shard"), QStringLiteral("0/1")})).exitCode, 0);
        for (const char* name : {"manifest.json", "trials.bin"}) {
            const QString copy = dir.filePath(QStringLiteral("bad_") + QLatin1String(name));
            QVERIFY(QDir().mkpath(copy));
            for (const QString& f : QDir(shard).entryList(QDir::Files))
                QVERIFY(QFile::copy(shard + QLatin1Char('/') + f, copy + QLatin1Char('/') + f));
            QVERIFY(QFile::remove(copy + QLatin1Char('/') + QLatin1String(name)));
            QVERIFY(QFile::link(QStringLiteral("/dev/zero"), copy + QLatin1Char('/') + QLatin1String(name)));
            const Run r = runKvlens({QStringLiteral("merge"), copy, QStringLiteral("--out"), dir.filePath(QStringLiteral("m"))},
                                    {}, 20000);
            QCOMPARE(r.exitCode, 2);
            QVERIFY2(r.err.contains("not a regular file"), r.err.constData());
            QVERIFY(!QDir(dir.filePath(QStringLiteral("m"))).exists());
        }
    }

    void commandLineLeavesNothingSilentlyIgnored_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QByteArray>("mention");
        const QString d = QStringLiteral("default"), b = QStringLiteral("--batch"), o = QStringLiteral("--out");
        QTest::newRow("empty shard") << QStringList{b, d, QStringLiteral("--shard"), QString(), o, QStringLiteral("x")}
                                     << QByteArray("kvlens: --shard: needs a value (i/n)\n");
        QTest::newRow("extra argument") << QStringList{b, d, QStringLiteral("extra"), o, QStringLiteral("x")}
                                        << QByteArray("kvlens: unexpected argument 'extra' (options start with --; see kvlens --help)\n");
        QTest::newRow("repeated batch") << QStringList{b, d, b, d, o, QStringLiteral("x")}
                                        << QByteArray("kvlens: --batch: is given twice; give it once\n");
        QTest::newRow("repeated out") << QStringList{b, d, o, QStringLiteral("x"), o, QStringLiteral("y")}
                                      << QByteArray("kvlens: --out: is given twice; give it once\n");
    }
    void commandLineLeavesNothingSilentlyIgnored()
    {
        QFETCH(QStringList, args);
        QFETCH(QByteArray, mention);
        QTemporaryDir dir;
        QProcess p;
        p.setWorkingDirectory(dir.path());
        p.start(QStringLiteral(KVLENS_EXE), args);
        QVERIFY(p.waitForFinished(20000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY2(p.readAllStandardError().contains(mention), mention.constData());
        QVERIFY(QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).isEmpty());
    }

    void aDeviceIndexTooLargeForAnyIntegerIsJustAMissingDevice()
    {
        // std::stoul used to throw out_of_range here and abort the program.
        QTemporaryDir dir;
        const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), smallSpec());
        const Run r = runKvlens(batchArgs(spec, dir.filePath(QStringLiteral("out")),
                                          {QStringLiteral("--device"), QStringLiteral("99999999999999999999"),
                                           QStringLiteral("--no-figures")}));
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.err.contains("no OpenCL device 99999999999999999999")
                     || r.err.contains("OpenCL unavailable"), r.err.constData());
    }

    // --- A run's output directory is all of one run, or untouched. ---
    void killedWhileWritingLeavesThePreviousRunWhole_data()
    {
        QTest::addColumn<QByteArray>("point");
        QTest::addColumn<int>("signal");
        QTest::addColumn<int>("status"); // -1: killed outright
        QTest::newRow("SIGKILL mid-write") << QByteArray("writing") << int(SIGKILL) << -1;
        QTest::newRow("SIGTERM mid-write") << QByteArray("writing") << int(SIGTERM) << 143;
        QTest::newRow("SIGINT mid-write") << QByteArray("writing") << int(SIGINT) << 130;
        QTest::newRow("SIGKILL before commit") << QByteArray("commit") << int(SIGKILL) << -1;
        QTest::newRow("SIGTERM before commit") << QByteArray("commit") << int(SIGTERM) << 143;
    }
    void killedWhileWritingLeavesThePreviousRunWhole()
    {
        QFETCH(QByteArray, point);
        QFETCH(int, signal);
        QFETCH(int, status);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const QString first = writeFile(dir.filePath(QStringLiteral("first.json")), smallSpec("first"));
        const QString second = writeFile(dir.filePath(QStringLiteral("second.json")), smallSpec("second"));
        QCOMPARE(runKvlens(batchArgs(first, out)).exitCode, 0);
        const auto before = snapshot(out);
        QVERIFY(before.contains(QStringLiteral("figures/kl_distribution.png")));

        QProcess p;
        QVERIFY(startStopped(p, batchArgs(second, out), point.constData()));
        ::kill(static_cast<pid_t>(p.processId()), signal);
        if (signal != SIGKILL)
            ::kill(static_cast<pid_t>(p.processId()), SIGCONT);
        QVERIFY(p.waitForFinished(60000));
        if (status < 0) {
            QCOMPARE(p.exitStatus(), QProcess::CrashExit);
        } else {
            QCOMPARE(p.exitStatus(), QProcess::NormalExit);
            QCOMPARE(p.exitCode(), status);
            QVERIFY(p.readAllStandardError().contains("nothing written"));
            // A clean stop leaves nothing beside the target.
            QVERIFY2(leftovers(dir.path()).isEmpty(), qPrintable(leftovers(dir.path()).join(' ')));
        }
        QCOMPARE(snapshot(out), before); // the first run, byte for byte, figures and all

        // The next run replaces it whole and clears what a killed run left.
        QCOMPARE(runKvlens(batchArgs(second, out, {QStringLiteral("--no-figures")})).exitCode, 0);
        QVERIFY2(leftovers(dir.path()).isEmpty(), qPrintable(leftovers(dir.path()).join(' ')));
        QFile spec(out + QStringLiteral("/spec.json"));
        QVERIFY(spec.open(QIODevice::ReadOnly));
        QVERIFY(spec.readAll().contains("\"second\""));
        QVERIFY(!QDir(out + QStringLiteral("/figures")).exists()); // no stale figures of the first run
    }

    void aFullDiskLeavesThePreviousRunWholeAndSaysSo()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const QString first = writeFile(dir.filePath(QStringLiteral("first.json")), smallSpec("first"));
        QCOMPARE(runKvlens(batchArgs(first, out)).exitCode, 0);
        const auto before = snapshot(out);
        const Run r = runKvlens(batchArgs(first, out), {QStringLiteral("KVLENS_FAULT=enospc:trials.csv")});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("trials.csv: write failed: No space left on device"), r.err.constData());
        QVERIFY(r.err.contains("is as it was"));
        QCOMPARE(snapshot(out), before);
        QVERIFY2(leftovers(dir.path()).isEmpty(), qPrintable(leftovers(dir.path()).join(' ')));
    }

    void aRealFullDiskToo()
    {
        // A 256 KiB tmpfs: the default run's queries.csv alone does not fit. Needs mount rights (root).
        QTemporaryDir dir;
        const QByteArray mountPoint = dir.filePath(QStringLiteral("tiny")).toLocal8Bit();
        QVERIFY(QDir().mkpath(QString::fromLocal8Bit(mountPoint)));
        if (::mount("tmpfs", mountPoint.constData(), "tmpfs", 0, "size=256k") != 0)
            QSKIP("cannot mount a tmpfs here (needs root); the injected ENOSPC case covers the logic");
        struct Unmount {
            QByteArray path;
            ~Unmount() { ::umount(path.constData()); }
        } unmount{mountPoint};
        const QString out = QString::fromLocal8Bit(mountPoint) + QStringLiteral("/out");
        const Run r = runKvlens(batchArgs(QStringLiteral("default"), out));
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("No space left on device") || r.err.contains("no space left on device"), r.err.constData());
        QVERIFY(!QDir(out).exists());
        QVERIFY2(leftovers(QString::fromLocal8Bit(mountPoint)).isEmpty(),
                 qPrintable(leftovers(QString::fromLocal8Bit(mountPoint)).join(' ')));
    }

    void aSecondRunIntoTheSameDirectoryIsRefusedNamingTheHolder()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const QString first = writeFile(dir.filePath(QStringLiteral("first.json")), smallSpec("first"));
        const QString second = writeFile(dir.filePath(QStringLiteral("second.json")), smallSpec("second"));
        QProcess holder;
        QVERIFY(startStopped(holder, batchArgs(first, out), "writing"));
        const Run r = runKvlens(batchArgs(second, out));
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("another kvlens run is writing this directory (pid "
                                + QByteArray::number(holder.processId()) + ")"),
                 r.err.constData());
        ::kill(static_cast<pid_t>(holder.processId()), SIGCONT);
        QVERIFY(holder.waitForFinished(60000));
        QCOMPARE(holder.exitCode(), 0);
        QFile spec(out + QStringLiteral("/spec.json"));
        QVERIFY(spec.open(QIODevice::ReadOnly));
        QVERIFY(spec.readAll().contains("\"first\""));
        QVERIFY(leftovers(dir.path()).isEmpty());
    }

    void anUnwritableOutputIsRefusedBeforeComputing()
    {
        // /proc refuses new directories even to root.
        const Run r = runKvlens(batchArgs(QStringLiteral("default"), QStringLiteral("/proc/kvlens-no/out")), {}, 20000);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(!r.err.contains("trials"), r.err.constData()); // refused before the progress line
        QVERIFY2(r.err.contains("/proc/kvlens-no"), r.err.constData());
    }

    void aFolderThatIsNotARunIsNeverReplaced()
    {
        QTemporaryDir dir;
        writeFile(dir.filePath(QStringLiteral("thesis.tex")), "precious");
        const Run r = runKvlens(batchArgs(QStringLiteral("default"), dir.path()), {}, 20000);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("holds files that are not a KVLens run"), r.err.constData());
        QVERIFY(QFile::exists(dir.filePath(QStringLiteral("thesis.tex"))));
    }

    void validateWithoutOpenClSaysItComparedNothing()
    {
        QTemporaryDir dir;
        const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), smallSpec());
        const QString out = dir.filePath(QStringLiteral("v"));
        // No ICD: OpenCL has no platform at all.
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--validate"), QStringLiteral("--out"), out,
                                 QStringLiteral("--quiet")},
                                {QStringLiteral("OCL_ICD_VENDORS=/nonexistent"), QStringLiteral("OPENCL_VENDOR_PATH=/nonexistent")});
        QCOMPARE(r.exitCode, 4);
        QVERIFY2(r.err.contains("--validate compared nothing"), r.err.constData());
        QVERIFY(QFile::exists(out + QStringLiteral("/validation.csv"))); // the RNG check still ran and is recorded
    }
};

QTEST_GUILESS_MAIN(TestRunSafety)
#include "tst_run_safety.moc"
