// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens --batch --shard i/n` and `kvlens merge`: three shards merged equal the whole run; bad sets are refused by name.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "common/kvlens_process.h"

#include <algorithm>

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;

QByteArray readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("(missing: " + path.toUtf8() + ")");
}

/// The CSV's lines without its timing columns (ms_*), which differ from run to run.
QList<QByteArray> withoutTimings(const QByteArray& csv)
{
    QList<QByteArray> lines = csv.split('\n');
    if (!lines.isEmpty() && lines.last().isEmpty())
        lines.removeLast();
    if (lines.isEmpty())
        return lines;
    const QList<QByteArray> header = lines.first().split(',');
    QList<int> keep;
    for (int c = 0; c < header.size(); ++c)
        if (!header[c].startsWith("ms_"))
            keep.append(c);
    for (QByteArray& line : lines) {
        const QList<QByteArray> cells = line.split(',');
        QList<QByteArray> kept;
        for (const int c : keep)
            kept.append(cells.value(c));
        line = kept.join(',');
    }
    return lines;
}

/// Header, then the rows sorted: the comparison the issue asks for.
QList<QByteArray> sortedRows(const QByteArray& csv)
{
    QList<QByteArray> lines = withoutTimings(csv);
    if (lines.size() > 1)
        std::sort(lines.begin() + 1, lines.end());
    return lines;
}

/// A 24-trial sweep (2 values of nu x 2 budgets x 2 schemes x 3 seeds) at tiny sizes.
constexpr const char* kSpec = R"({"kvlens_spec": 1, "name": "shard test",
    "regime": {"name": "heavy_tail", "mode": "marginal"}, "sweep": {"regime.nu": [3, 1.5]},
    "d": 16, "tokens": 64, "queries": 8, "schemes": ["KV", "QKQV"], "budgets": [2, 3],
    "seeds": {"first": 1, "count": 3}, "comparisons": {"bootstrap": 200, "permutations": 99}})";

} // namespace

class TestShardMerge : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_spec;
    QStringList m_shards;

    QString path(const char* name) const { return m_dir.filePath(QLatin1String(name)); }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        m_spec = path("spec.json");
        QFile f(m_spec);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(kSpec);
        f.close();

        const Run whole = runKvlens({QStringLiteral("--batch"), m_spec, QStringLiteral("--out"), path("whole"),
                                     QStringLiteral("--quiet")});
        QVERIFY2(whole.exitCode == 0, whole.err.constData());
        for (int i = 0; i < 3; ++i) {
            m_shards << path("shards/s") + QString::number(i);
            const Run shard = runKvlens({QStringLiteral("--batch"), m_spec, QStringLiteral("--shard"),
                                         QStringLiteral("%1/3").arg(i), QStringLiteral("--out"), m_shards.last(),
                                         QStringLiteral("--quiet")});
            QVERIFY2(shard.exitCode == 0, shard.err.constData());
            QVERIFY(shard.out.contains(QStringLiteral("shard %1/3, 8 of 24 trials").arg(i).toUtf8()));
        }
    }

    void shardDirectoriesHoldTheirTrials()
    {
        QList<QByteArray> rows;
        for (const QString& dir : m_shards) {
            for (const char* name : {"manifest.json", "trials.bin", "spec.json", "trials.csv", "queries.csv"})
                QVERIFY2(QFile::exists(dir + QLatin1Char('/') + QLatin1String(name)), name);
            QVERIFY(!QFile::exists(dir + QStringLiteral("/summary.csv")));
            const QByteArray manifest = readAll(dir + QStringLiteral("/manifest.json"));
            QVERIFY(manifest.contains("\"trial_count\": 8"));
            const QList<QByteArray> lines = withoutTimings(readAll(dir + QStringLiteral("/trials.csv")));
            QCOMPARE(lines.size(), 1 + 8);
            rows += lines.mid(1);
        }
        // The shards' partial trials.csv together are the whole run's rows, each once.
        QList<QByteArray> whole = sortedRows(readAll(path("whole/trials.csv")));
        std::sort(rows.begin(), rows.end());
        QCOMPARE(rows, whole.mid(1));
    }

    void mergeEqualsTheWholeRun()
    {
        const Run merge = runKvlens(QStringList{QStringLiteral("merge")} + m_shards
                                    + QStringList{QStringLiteral("--out"), path("merged")});
        QVERIFY2(merge.exitCode == 0, merge.err.constData());
        QVERIFY(merge.out.contains("merged 3 shards (24 trials)"));
        QVERIFY(merge.out.contains("bits_k"));
        QCOMPARE(readAll(path("merged/spec.json")), readAll(path("whole/spec.json")));
        for (const char* name : {"summary.csv", "trials.csv", "queries.csv", "comparisons.csv", "proxies.csv"}) {
            const QByteArray whole = readAll(path("whole/") + QLatin1String(name));
            const QByteArray merged = readAll(path("merged/") + QLatin1String(name));
            QVERIFY2(whole.count('\n') > 1, name);
            QCOMPARE(sortedRows(merged), sortedRows(whole));
            // Stronger than the issue asks: the rows come in the same order too.
            QCOMPARE(withoutTimings(merged), withoutTimings(whole));
            if (!QByteArray(name).startsWith("trials"))
                QVERIFY2(merged == whole, name); // no timing columns: byte for byte
        }
        // The same figures, with the same data behind them.
        const QStringList wholeFigures = QDir(path("whole/figures")).entryList(QDir::Files, QDir::Name);
        QVERIFY(!wholeFigures.isEmpty());
        QCOMPARE(QDir(path("merged/figures")).entryList(QDir::Files, QDir::Name), wholeFigures);
        for (const QString& f : wholeFigures)
            if (f.endsWith(QLatin1String(".csv")))
                QCOMPARE(sortedRows(readAll(path("merged/figures/") + f)), sortedRows(readAll(path("whole/figures/") + f)));
    }

    void defaultSpecInThreeShardsReproducesTheSummary()
    {
        // The acceptance check of the issue, on the default experiment (d = 128, N = 1024, 72 trials).
        const Run whole = runKvlens({QStringLiteral("--batch"), QStringLiteral("default"), QStringLiteral("--out"),
                                     path("default_whole"), QStringLiteral("--quiet"), QStringLiteral("--no-figures")});
        QVERIFY2(whole.exitCode == 0, whole.err.constData());
        QStringList shards;
        for (int i = 0; i < 3; ++i) {
            shards << path("default_shards/s") + QString::number(i);
            const Run shard = runKvlens({QStringLiteral("--batch"), QStringLiteral("default"), QStringLiteral("--shard"),
                                         QStringLiteral("%1/3").arg(i), QStringLiteral("--out"), shards.last(),
                                         QStringLiteral("--quiet")});
            QVERIFY2(shard.exitCode == 0, shard.err.constData());
            QVERIFY(shard.out.contains(QStringLiteral("shard %1/3, 24 of 72 trials").arg(i).toUtf8()));
        }
        std::reverse(shards.begin(), shards.end()); // any order
        const Run merge = runKvlens(QStringList{QStringLiteral("merge")} + shards
                                    + QStringList{QStringLiteral("--out"), path("default_merged"), QStringLiteral("--no-figures")});
        QVERIFY2(merge.exitCode == 0, merge.err.constData());
        const QByteArray summary = readAll(path("default_whole/summary.csv"));
        QCOMPARE(summary.count('\n'), 1 + 9); // 3 schemes x 3 budgets
        QCOMPARE(readAll(path("default_merged/summary.csv")), summary);
        QCOMPARE(readAll(path("default_merged/comparisons.csv")), readAll(path("default_whole/comparisons.csv")));
    }

    void missingShardIsRefusedByName()
    {
        const Run merge = runKvlens({QStringLiteral("merge"), m_shards[0], m_shards[2], QStringLiteral("--out"),
                                     path("no_merge_missing"), QStringLiteral("--no-figures")});
        QVERIFY(merge.exitCode != 0);
        QVERIFY2(merge.err.contains("shard 1/3 is missing (8 trials"), merge.err.constData());
        QVERIFY2(merge.err.contains(m_shards[0].toUtf8() + ": shard 0/3"), merge.err.constData());
        QVERIFY2(merge.err.contains(m_shards[2].toUtf8() + ": shard 2/3"), merge.err.constData());
        QVERIFY(!QFileInfo::exists(path("no_merge_missing")));
    }

    void duplicatedShardIsRefusedByName()
    {
        // A copy of shard 2 under another name, given beside the original.
        const QString copy = path("elsewhere/s2_again");
        QVERIFY(QDir().mkpath(copy));
        for (const char* name : {"manifest.json", "trials.bin", "spec.json"})
            QVERIFY(QFile::copy(m_shards[2] + QLatin1Char('/') + QLatin1String(name), copy + QLatin1Char('/') + QLatin1String(name)));
        const Run merge = runKvlens(QStringList{QStringLiteral("merge")} + m_shards
                                    + QStringList{copy, QStringLiteral("--out"), path("no_merge_dup")});
        QVERIFY(merge.exitCode != 0);
        QVERIFY2(merge.err.contains("shard 2/3 is given 2 times: " + m_shards[2].toUtf8() + " and " + copy.toUtf8()),
                 merge.err.constData());
        QVERIFY(!QFileInfo::exists(path("no_merge_dup")));
    }

    void damagedOrForeignShardsAreRefused()
    {
        // A shard of another spec (different seeds).
        QByteArray otherSpec = kSpec;
        otherSpec.replace("\"first\": 1", "\"first\": 2");
        const QString otherPath = path("other.json");
        QFile f(otherPath);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(otherSpec);
        f.close();
        const QString other = path("other_s1");
        const Run shard = runKvlens({QStringLiteral("--batch"), otherPath, QStringLiteral("--shard"), QStringLiteral("1/3"),
                                     QStringLiteral("--out"), other, QStringLiteral("--quiet")});
        QCOMPARE(shard.exitCode, 0);
        Run merge = runKvlens({QStringLiteral("merge"), m_shards[0], other, m_shards[2], QStringLiteral("--out"),
                               path("no_merge_foreign"), QStringLiteral("--no-figures")});
        QVERIFY(merge.exitCode != 0);
        QVERIFY2(merge.err.contains(other.toUtf8() + ": spec hash"), merge.err.constData());
        QVERIFY(!QFileInfo::exists(path("no_merge_foreign")));

        // One flipped byte in a trials file.
        const QString damaged = path("damaged_s1");
        QVERIFY(QDir().mkpath(damaged));
        for (const char* name : {"manifest.json", "spec.json"})
            QVERIFY(QFile::copy(m_shards[1] + QLatin1Char('/') + QLatin1String(name), damaged + QLatin1Char('/') + QLatin1String(name)));
        QByteArray bytes = readAll(m_shards[1] + QStringLiteral("/trials.bin"));
        bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
        QFile out(damaged + QStringLiteral("/trials.bin"));
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(bytes);
        out.close();
        merge = runKvlens({QStringLiteral("merge"), m_shards[0], damaged, m_shards[2], QStringLiteral("--out"),
                           path("no_merge_damaged"), QStringLiteral("--no-figures")});
        QVERIFY(merge.exitCode != 0);
        QVERIFY2(merge.err.contains(damaged.toUtf8() + "/trials.bin: checksum mismatch"), merge.err.constData());
        QVERIFY(!QFileInfo::exists(path("no_merge_damaged")));

        // Not a shard directory at all.
        merge = runKvlens({QStringLiteral("merge"), path("whole/figures"), QStringLiteral("--out"), path("no_merge_plain")});
        QVERIFY(merge.exitCode != 0);
        QVERIFY2(merge.err.contains(path("whole/figures").toUtf8() + ": no readable manifest.json"), merge.err.constData());
    }

    void reuseComputesOnlyNewTrialsAndWritesTheFreshRunsFiles()
    {
        // `whole` ran seeds 1-3 of KV and QKQV. Extended by a seed and a scheme placed first, with
        // --reuse whole: 24 of 48 trials come from whole/trials.bin, and every file equals a
        // from-scratch run's (trials.csv and trials.bin but for their timings).
        QByteArray extended = kSpec;
        extended.replace("\"schemes\": [\"KV\", \"QKQV\"]", "\"schemes\": [\"KQV\", \"KV\", \"QKQV\"]");
        extended.replace("\"count\": 3", "\"count\": 4");
        QVERIFY(extended != QByteArray(kSpec));
        const QString spec = path("extended.json");
        QFile f(spec);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(extended);
        f.close();
        const Run reused = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--reuse"), path("whole"),
                                      QStringLiteral("--out"), path("reused"), QStringLiteral("--quiet"),
                                      QStringLiteral("--no-figures")});
        QVERIFY2(reused.exitCode == 0, reused.err.constData());
        QVERIFY2(reused.out.contains("reused 24 of 48 trials from"), reused.out.constData());
        QVERIFY2(reused.out.contains("computed 24"), reused.out.constData());
        const Run fresh = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), path("fresh"),
                                     QStringLiteral("--quiet"), QStringLiteral("--no-figures")});
        QVERIFY2(fresh.exitCode == 0, fresh.err.constData());
        for (const char* name : {"spec.json", "summary.csv", "queries.csv", "comparisons.csv", "proxies.csv"}) {
            const QByteArray a = readAll(path("reused/") + QLatin1String(name));
            QVERIFY2(a.count('\n') > 1, name);
            QVERIFY2(a == readAll(path("fresh/") + QLatin1String(name)), name);
        }
        QCOMPARE(withoutTimings(readAll(path("reused/trials.csv"))), withoutTimings(readAll(path("fresh/trials.csv"))));
        // A reused run is itself reusable: everything comes from it the second time.
        const Run again = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--reuse"), path("reused"),
                                     QStringLiteral("--out"), path("again"), QStringLiteral("--quiet"),
                                     QStringLiteral("--no-figures")});
        QVERIFY2(again.exitCode == 0, again.err.constData());
        QVERIFY2(again.out.contains("reused 48 of 48 trials"), again.out.constData());
        QCOMPARE(readAll(path("again/trials.csv")), readAll(path("reused/trials.csv"))); // timings included: reused

        // Not a run directory, and a damaged trials file: refused, naming --reuse and the file.
        const Run notRun = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--reuse"), path("whole/figures"),
                                      QStringLiteral("--out"), path("no_reuse"), QStringLiteral("--quiet")});
        QCOMPARE(notRun.exitCode, 2);
        QVERIFY2(notRun.err.contains("--reuse: ") && notRun.err.contains("spec.json"), notRun.err.constData());
        QVERIFY(!QFileInfo::exists(path("no_reuse")));
        const QString damaged = path("damaged_run");
        QVERIFY(QDir().mkpath(damaged));
        for (const char* name : {"spec.json", "manifest.json"})
            QVERIFY(QFile::copy(path("whole/") + QLatin1String(name), damaged + QLatin1Char('/') + QLatin1String(name)));
        QByteArray bytes = readAll(path("whole/trials.bin"));
        bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
        QFile out(damaged + QStringLiteral("/trials.bin"));
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(bytes);
        out.close();
        const Run bad = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--reuse"), damaged,
                                   QStringLiteral("--out"), path("no_reuse"), QStringLiteral("--quiet")});
        QCOMPARE(bad.exitCode, 2);
        QVERIFY2(bad.err.contains("trials.bin: ") && bad.err.contains("checksum"), bad.err.constData());
    }

    void badShardArgumentsAreRefused_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QByteArray>("message");
        QTest::newRow("index = count") << QStringList{QStringLiteral("--batch"), QStringLiteral("default"),
                                                      QStringLiteral("--shard"), QStringLiteral("3/3"),
                                                      QStringLiteral("--out"), QStringLiteral("x")}
                                       << QByteArray("--shard: must be i/n");
        QTest::newRow("not a fraction") << QStringList{QStringLiteral("--batch"), QStringLiteral("default"),
                                                       QStringLiteral("--shard"), QStringLiteral("half"),
                                                       QStringLiteral("--out"), QStringLiteral("x")}
                                        << QByteArray("got 'half'");
        QTest::newRow("merge without --out") << QStringList{QStringLiteral("merge"), QStringLiteral("a")}
                                             << QByteArray("--out DIR is required");
        QTest::newRow("merge without shards") << QStringList{QStringLiteral("merge"), QStringLiteral("--out"),
                                                             QStringLiteral("x")}
                                              << QByteArray("no shard directories");
    }
    void badShardArgumentsAreRefused()
    {
        QFETCH(QStringList, args);
        QFETCH(QByteArray, message);
        QProcess p;
        p.setWorkingDirectory(m_dir.path());
        p.start(QStringLiteral(KVLENS_EXE), args);
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 2);
        const QByteArray err = p.readAllStandardError();
        QVERIFY2(err.contains(message), err.constData());
        QVERIFY(!QFileInfo::exists(m_dir.filePath(QStringLiteral("x"))));
    }
};

QTEST_GUILESS_MAIN(TestShardMerge)
#include "tst_shard_merge.moc"
