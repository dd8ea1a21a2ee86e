// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens compare A B --out DIR` on real batch runs: the spec diff, differences against summary.csv, the
// seed-level tests, the refusals.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "common/kvlens_process.h"

#include <cmath>

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;

QByteArray readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray("(missing: " + path.toUtf8() + ")");
}

/// RFC 4180 fields of one line (quotes, doubled quotes; no newline inside a field here).
QStringList csvFields(const QString& line)
{
    QStringList out;
    QString field;
    bool quoted = false;
    for (int i = 0; i < line.size(); ++i) {
        const QChar c = line[i];
        if (quoted) {
            if (c == QLatin1Char('"') && i + 1 < line.size() && line[i + 1] == QLatin1Char('"')) {
                field += c;
                ++i;
            } else if (c == QLatin1Char('"')) {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == QLatin1Char('"')) {
            quoted = true;
        } else if (c == QLatin1Char(',')) {
            out << field;
            field.clear();
        } else {
            field += c;
        }
    }
    out << field;
    return out;
}

using Row = QMap<QString, QString>;
QList<Row> csvRows(const QString& path)
{
    const QStringList lines = QString::fromUtf8(readAll(path)).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QList<Row> rows;
    if (lines.isEmpty())
        return rows;
    const QStringList header = csvFields(lines.first());
    for (int i = 1; i < lines.size(); ++i) {
        const QStringList f = csvFields(lines[i]);
        Row r;
        for (int c = 0; c < header.size(); ++c)
            r[header[c]] = f.value(c);
        rows << r;
    }
    return rows;
}

Row findRow(const QList<Row>& rows, const QString& scheme, int budget, const QString& metric)
{
    for (const Row& r : rows)
        if (r.value("scheme") == scheme && r.value("budget").toInt() == budget && r.value("metric") == metric)
            return r;
    return {};
}

/// summary.csv's kl_mean of a (scheme, budget).
double summaryKl(const QString& dir, const QString& scheme, int budget)
{
    for (const Row& r : csvRows(dir + QStringLiteral("/summary.csv")))
        if (r.value("scheme") == scheme && r.value("budget").toInt() == budget)
            return r.value("kl_mean").toDouble();
    return std::nan("");
}

bool near(double a, double b, double rel)
{
    return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)) + 1e-300;
}

/// 2 schemes x 2 budgets x 8 seeds at tiny sizes: eight seeds, so an exact seed-level test can reach 2/2^8.
const QByteArray kBase = R"({"name": "base", "regime": {"name": "gaussian"}, "d": 16, "tokens": 64, "queries": 8,
    "schemes": ["KV", "QKQV"], "budgets": [2, 3], "seeds": {"first": 1, "count": 8},
    "comparisons": {"bootstrap": 100, "permutations": 19}})";

/// One custom scheme "S"; `kBits` is replaced to make B's key path one bit narrower.
const QByteArray kCustom = R"({"regime": {"name": "gaussian"}, "d": 16, "tokens": 64, "queries": 8, "budgets": [3],
    "seeds": {"first": 1, "count": 8}, "comparisons": {"bootstrap": 100, "permutations": 19}, "schemes": [{"name": "S",
    "k": {"transforms": ["wht"], "quantizer": {"kind": "lloyd", "law": "beta"}, "bits": "KBITS"},
    "v": {"transforms": ["wht"], "quantizer": {"kind": "lloyd", "law": "beta"}, "bits": "n"}}]})";

} // namespace

class TestCompareCommand : public QObject {
    Q_OBJECT

    QTemporaryDir m_dir;

    QString path(const QString& name) const { return m_dir.filePath(name); }

    void batch(const QString& name, QByteArray spec)
    {
        QFile f(path(name + QStringLiteral(".json")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(spec);
        f.close();
        const Run r = runKvlens({QStringLiteral("--batch"), f.fileName(), QStringLiteral("--out"), path(name),
                                 QStringLiteral("--quiet"), QStringLiteral("--no-figures")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }

    Run compare(const QStringList& args) { return runKvlens(QStringList{QStringLiteral("compare")} + args); }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        batch(QStringLiteral("base"), kBase);
        batch(QStringLiteral("budgets"), QByteArray(kBase).replace("\"budgets\": [2, 3]", "\"budgets\": [2, 3, 4]"));
        batch(QStringLiteral("scale"), QByteArray(kBase).replace("\"d\": 16", "\"d\": 16, \"score_scale\": 4"));
        batch(QStringLiteral("custom_a"), QByteArray(kCustom).replace("KBITS", "n"));
        batch(QStringLiteral("custom_b"), QByteArray(kCustom).replace("KBITS", "n-1"));
    }

    void usage()
    {
        const Run help = compare({QStringLiteral("--help")});
        QCOMPARE(help.exitCode, 0);
        QVERIFY(help.out.contains("usage: kvlens compare DIR_A DIR_B --out DIR"));
        const Run one = compare({path(QStringLiteral("base")), QStringLiteral("--out"), path(QStringLiteral("x"))});
        QCOMPARE(one.exitCode, 2);
        QVERIFY(one.err.startsWith("kvlens compare: needs two run directories, got 1"));
        const Run global = runKvlens({QStringLiteral("--help")});
        QVERIFY(global.out.contains("kvlens compare DIR_A DIR_B --out DIR"));
    }

    void budgetListChange()
    {
        const QString out = path(QStringLiteral("cmp_budgets"));
        const Run r = compare({path(QStringLiteral("base")), path(QStringLiteral("budgets")), QStringLiteral("--out"), out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.err.isEmpty(), r.err.constData()); // same data, same seeds: every row paired, nothing to say
        // Exactly the one field that differs.
        QCOMPARE(readAll(out + QStringLiteral("/spec_diff.csv")), QByteArray("field,a,b\nbudgets,\"[2,3]\",\"[2,3,4]\"\n"));
        const QList<Row> rows = csvRows(out + QStringLiteral("/run_comparison.csv"));
        int onlyB = 0;
        for (const Row& row : rows)
            if (row.value("status") == QStringLiteral("only_in_b")) {
                QCOMPARE(row.value("budget"), QStringLiteral("4"));
                QCOMPARE(row.value("note"), QStringLiteral("only in B"));
                ++onlyB;
            }
        QCOMPARE(onlyB, 2); // KV and QKQV at n = 4: listed, not dropped
        // The shared cells are the same trials (the budget list does not change a trial's draw): identical, not tested.
        for (const char* scheme : {"KV", "QKQV"})
            for (int n : {2, 3}) {
                const Row row = findRow(rows, QString::fromLatin1(scheme), n, QStringLiteral("kl_mean"));
                QCOMPARE(row.value("status"), QStringLiteral("identical"));
                QCOMPARE(row.value("paired"), QStringLiteral("yes"));
                QCOMPARE(row.value("units"), QStringLiteral("8"));
                QCOMPARE(row.value("p"), QString()); // no test: p is left blank, as in comparisons.csv
                QCOMPARE(row.value("difference").toDouble(), 0.0);
                QVERIFY(near(row.value("mean_a").toDouble(), summaryKl(path(QStringLiteral("base")), QString::fromLatin1(scheme), n), 1e-12));
            }
        for (const char* ext : {"pdf", "svg", "png", "csv", "spec.json"})
            QVERIFY2(QFile::exists(out + QStringLiteral("/figures/run_comparison.") + QLatin1String(ext)), ext);
        QVERIFY(readAll(out + QStringLiteral("/figures/run_comparison.spec.json")).contains("\"budgets\""));
        QVERIFY(readAll(out + QStringLiteral("/runs.json")).contains("\"format\": \"kvlens-compare\""));
    }

    void differentDataIsUnpairedAndSaysSo()
    {
        const QString out = path(QStringLiteral("cmp_scale"));
        const Run r = compare({path(QStringLiteral("base")), path(QStringLiteral("scale")), QStringLiteral("--out"), out,
                               QStringLiteral("--no-figures")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.err.startsWith("kvlens compare: seeds not paired where the runs drew different data (score_scale differ)"),
                 r.err.constData());
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY(!QFile::exists(out + QStringLiteral("/figures")));
        QCOMPARE(readAll(out + QStringLiteral("/spec_diff.csv")), QByteArray("field,a,b\nscore_scale,1,4\n"));
        const QList<Row> rows = csvRows(out + QStringLiteral("/run_comparison.csv"));
        for (const char* scheme : {"KV", "QKQV"})
            for (int n : {2, 3}) {
                const Row row = findRow(rows, QString::fromLatin1(scheme), n, QStringLiteral("kl_mean"));
                QCOMPARE(row.value("paired"), QStringLiteral("no"));
                QCOMPARE(row.value("test"), QStringLiteral("mann-whitney-seeds"));
                QCOMPARE(row.value("units"), QStringLiteral("16"));
                QVERIFY(row.value("note").startsWith(QStringLiteral("unpaired: the runs drew different data")));
                // B - A against the two runs' summary.csv, computed independently.
                const double expected = summaryKl(path(QStringLiteral("scale")), QString::fromLatin1(scheme), n)
                                        - summaryKl(path(QStringLiteral("base")), QString::fromLatin1(scheme), n);
                QVERIFY2(near(row.value("difference").toDouble(), expected, 1e-9),
                         qPrintable(row.value("difference") + " vs " + QString::number(expected, 'g', 17)));
                QVERIFY(row.value("diff_ci_low").toDouble() <= expected && expected <= row.value("diff_ci_high").toDouble());
            }
        // Scores four times larger: every seed of B above every seed of A, the exact floor 2 / C(16, 8).
        const Row qkqv = findRow(rows, QStringLiteral("QKQV"), 2, QStringLiteral("kl_mean"));
        QVERIFY2(near(qkqv.value("p").toDouble(), 2.0 / 12870.0, 1e-9), qPrintable(qkqv.value("p")));
        QVERIFY(qkqv.value("log_ratio").toDouble() > 0.0);
    }

    void pairedRefusesDifferentData()
    {
        const QString out = path(QStringLiteral("cmp_refused"));
        const Run r = compare({path(QStringLiteral("base")), path(QStringLiteral("scale")), QStringLiteral("--out"), out,
                               QStringLiteral("--paired")});
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.startsWith("kvlens compare: --paired: KV at n = 2: the runs drew different data (score_scale "
                                  "differ): no seed is the same unit in both runs"),
                 r.err.constData());
        QVERIFY(!QFile::exists(out));
        // The same data passes --paired.
        const Run ok = compare({path(QStringLiteral("custom_a")), path(QStringLiteral("custom_b")), QStringLiteral("--out"),
                                path(QStringLiteral("cmp_paired")), QStringLiteral("--paired"), QStringLiteral("--no-figures")});
        QVERIFY2(ok.exitCode == 0, ok.err.constData());
    }

    void clearlyDifferentSchemesArePairedAndSmall()
    {
        const QString out = path(QStringLiteral("cmp_custom"));
        const Run r = compare({path(QStringLiteral("custom_a")), path(QStringLiteral("custom_b")), QStringLiteral("--out"),
                               out, QStringLiteral("--no-figures")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QList<Row> rows = csvRows(out + QStringLiteral("/run_comparison.csv"));
        const Row row = findRow(rows, QStringLiteral("S"), 3, QStringLiteral("kl_mean"));
        QCOMPARE(row.value("paired"), QStringLiteral("yes"));
        QCOMPARE(row.value("test"), QStringLiteral("wilcoxon-seeds"));
        QVERIFY(row.value("note").contains(QStringLiteral("definition differs")));
        // One key bit less: more KL on every seed, so the exact two-sided p is its floor 2/2^8.
        QVERIFY2(near(row.value("p").toDouble(), 2.0 / 256.0, 1e-12), qPrintable(row.value("p")));
        const double expected = summaryKl(path(QStringLiteral("custom_b")), QStringLiteral("S"), 3)
                                - summaryKl(path(QStringLiteral("custom_a")), QStringLiteral("S"), 3);
        QVERIFY(near(row.value("difference").toDouble(), expected, 1e-9));
        QVERIFY(expected > 0.0);
        QVERIFY(readAll(out + QStringLiteral("/spec_diff.csv")).contains("schemes[0].k.bits,\"\"\"n\"\"\",\"\"\"n-1\"\"\"\n"));
    }

    void refusesWhatIsNotAFinishedRun()
    {
        // A run directory without its manifest: stopped before the end (a run writes the manifest last).
        QVERIFY(QDir().mkpath(path(QStringLiteral("unfinished"))));
        QVERIFY(QFile::copy(path(QStringLiteral("base/spec.json")), path(QStringLiteral("unfinished/spec.json"))));
        QVERIFY(QFile::copy(path(QStringLiteral("base/trials.bin")), path(QStringLiteral("unfinished/trials.bin"))));
        Run r = compare({path(QStringLiteral("base")), path(QStringLiteral("unfinished")), QStringLiteral("--out"),
                         path(QStringLiteral("cmp_unfinished"))});
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.contains("unfinished: no readable manifest.json: not a finished run"), r.err.constData());
        QVERIFY(!QFile::exists(path(QStringLiteral("cmp_unfinished"))));

        // A folder that is neither empty nor a KVLens output is never replaced.
        QVERIFY(QDir().mkpath(path(QStringLiteral("mine"))));
        QFile keep(path(QStringLiteral("mine/notes.txt")));
        QVERIFY(keep.open(QIODevice::WriteOnly));
        keep.write("mine");
        keep.close();
        r = compare({path(QStringLiteral("base")), path(QStringLiteral("budgets")), QStringLiteral("--out"),
                     path(QStringLiteral("mine"))});
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(readAll(path(QStringLiteral("mine/notes.txt"))), QByteArray("mine"));

        // Runs that share no configuration.
        r = compare({path(QStringLiteral("base")), path(QStringLiteral("custom_a")), QStringLiteral("--out"),
                     path(QStringLiteral("cmp_nothing"))});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.startsWith("kvlens compare: the runs share no configuration"), r.err.constData());
    }

    void namesWhatAFolderThatIsNotARunIs_data()
    {
        // Each folder as its writer leaves it (the files that say what it is), and what compare says.
        QTest::addColumn<QStringList>("files");
        QTest::addColumn<QByteArray>("what");
        QTest::newRow("evaluation") << QStringList{QStringLiteral("spec.json={\"kvlens_eval\": 1, \"model\": \"m\"}"),
                                                   QStringLiteral("eval_summary.csv=scheme,budget"),
                                                   QStringLiteral("report.txt=r")}
                                    << QByteArray("an evaluation's output (kvlens eval or --batch EVAL.json), not an experiment run");
        QTest::newRow("report") << QStringList{QStringLiteral("report.html=<html>"), QStringLiteral("presets/")}
                                << QByteArray("a --reproduce report, not a run (each of its presets/<preset> folders is one)");
        QTest::newRow("validation") << QStringList{QStringLiteral("spec.json={}"), QStringLiteral("validation.csv=x")}
                                    << QByteArray("a --validate output (spec.json and validation.csv), not a run");
        QTest::newRow("empty") << QStringList{} << QByteArray("an empty folder, not a run");
        QTest::newRow("foreign") << QStringList{QStringLiteral("notes.txt=mine")}
                                 << QByteArray("a folder without a KVLens run in it (no manifest.json, no spec.json)");
    }
    void namesWhatAFolderThatIsNotARunIs()
    {
        QFETCH(QStringList, files);
        QFETCH(QByteArray, what);
        const QString folder = path(QStringLiteral("not_a_run_") + QString::fromUtf8(QTest::currentDataTag()));
        QVERIFY(QDir().mkpath(folder));
        for (const QString& file : files) {
            const QString name = file.section(QLatin1Char('='), 0, 0);
            if (name.endsWith(QLatin1Char('/'))) {
                QVERIFY(QDir().mkpath(folder + QLatin1Char('/') + name));
                continue;
            }
            QFile f(folder + QLatin1Char('/') + name);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(file.section(QLatin1Char('='), 1).toUtf8());
        }
        const QString out = path(QStringLiteral("cmp_not_a_run"));
        for (const QStringList& dirs : {QStringList{path(QStringLiteral("base")), folder}, QStringList{folder, path(QStringLiteral("base"))}}) {
            const Run r = compare(dirs + QStringList{QStringLiteral("--out"), out});
            QCOMPARE(r.exitCode, 2);
            QCOMPARE(r.err, "kvlens compare: " + folder.toUtf8() + ": " + what
                                + "; compare takes two finished experiment runs (written by --batch SPEC.json or kvlens merge)\n");
            QVERIFY(!QFile::exists(out));
        }
        const Run missing = compare({path(QStringLiteral("base")), path(QStringLiteral("nowhere")), QStringLiteral("--out"), out});
        QVERIFY2(missing.err.contains("nowhere: does not exist; compare takes"), missing.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestCompareCommand)
#include "tst_compare_command.moc"
