// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens --batch`: files written, the default experiment's headline, bad specs write nothing.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QSet>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include "common/kvlens_process.h"

#include <algorithm>
#include <cmath>

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;

QList<QStringList> readCsv(const QString& path)
{
    QFile f(path);
    QList<QStringList> rows;
    if (!f.open(QIODevice::ReadOnly))
        return rows;
    for (const QByteArray& line : f.readAll().split('\n'))
        if (!line.isEmpty())
            rows.append(QString::fromUtf8(line).split(','));
    return rows;
}

QString writeSpec(const QTemporaryDir& dir, const QByteArray& json)
{
    const QString path = dir.filePath(QStringLiteral("spec.json"));
    QFile f(path);
    f.open(QIODevice::WriteOnly);
    f.write(json);
    return path;
}

} // namespace

class TestBatch : public QObject {
    Q_OBJECT
private slots:
    void defaultExperimentWritesTheFourFilesAndTheHeadline()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens({QStringLiteral("--batch"), QStringLiteral("default"), QStringLiteral("--out"), out});
        QCOMPARE(r.exitCode, 0);
        for (const char* name : {"spec.json", "summary.csv", "trials.csv", "queries.csv", "comparisons.csv", "proxies.csv"})
            QVERIFY2(QFile::exists(out + QLatin1Char('/') + QLatin1String(name)), name);
        QVERIFY(r.err.contains("72/72 trials"));
        QVERIFY(r.out.contains("bits_k"));

        const auto summary = readCsv(out + QStringLiteral("/summary.csv"));
        QCOMPARE(summary.size(), 1 + 3 * 3); // header + 3 schemes x 3 budgets
        const QStringList header = summary.first();
        const int scheme = header.indexOf(QStringLiteral("scheme")), budget = header.indexOf(QStringLiteral("budget"));
        const int kl = header.indexOf(QStringLiteral("kl_mean")), bits = header.indexOf(QStringLiteral("bits_v"));
        QVERIFY(scheme >= 0 && budget >= 0 && kl >= 0 && bits >= 0);
        double kqv = -1, qkqv = -1;
        for (const auto& row : summary.mid(1)) {
            if (row[budget] != QStringLiteral("4"))
                continue;
            if (row[scheme] == QStringLiteral("KQV")) {
                kqv = row[kl].toDouble();
                QCOMPARE(row[bits].toDouble(), 4.25); // (3 x 128 + 16 + 128 + 16) / 128
            }
            if (row[scheme] == QStringLiteral("QKQV"))
                qkqv = row[kl].toDouble();
        }
        QVERIFY(kqv > 0 && qkqv > 0);
        QVERIFY2(kqv < qkqv, qPrintable(QStringLiteral("KQV %1, QKQV %2").arg(kqv).arg(qkqv)));
        QCOMPARE(readCsv(out + QStringLiteral("/queries.csv")).size(), 1 + 72 * 64);
        QCOMPARE(readCsv(out + QStringLiteral("/trials.csv")).size(), 1 + 72);

        // comparisons.csv: at n = 4, KQV vs QKQV tested on the 8 seeds: KQV lower on every seed, so
        // the exact seed-level p is the smallest 8 units allow, 2/2^8 (log10 -2.107), and r > 0.
        const auto comparisons = readCsv(out + QStringLiteral("/comparisons.csv"));
        QCOMPARE(comparisons.size(), 1 + 3 * 3); // 3 pairs x 3 budgets
        const QStringList ch = comparisons.first();
        const int a = ch.indexOf(QStringLiteral("scheme_a")), b = ch.indexOf(QStringLiteral("scheme_b"));
        const int cb = ch.indexOf(QStringLiteral("budget")), lp = ch.indexOf(QStringLiteral("log10_p"));
        const int rb = ch.indexOf(QStringLiteral("rank_biserial"));
        const int unit = ch.indexOf(QStringLiteral("unit")), units = ch.indexOf(QStringLiteral("units"));
        QVERIFY(unit >= 0 && units >= 0);
        bool found = false;
        for (const auto& row : comparisons.mid(1)) {
            if (row[a] == QStringLiteral("KQV") && row[b] == QStringLiteral("QKQV") && row[cb] == QStringLiteral("4")) {
                found = true;
                QCOMPARE(row[unit], QStringLiteral("seed"));
                QCOMPARE(row[units], QStringLiteral("8"));
                QVERIFY2(std::abs(row[lp].toDouble() - std::log10(2.0 / 256.0)) < 1e-9, qPrintable(row[lp]));
                QVERIFY2(row[rb].toDouble() > 0.0, qPrintable(row[rb]));
            }
        }
        QVERIFY(found);
        QVERIFY(r.out.contains("KQV vs QKQV"));

        // proxies.csv: one row per scheme and a pooled one; rho in [-1, 1], and on the default
        // experiment the Fisher score error ranks queries by KL better than relMSE_K does.
        const auto proxies = readCsv(out + QStringLiteral("/proxies.csv"));
        QCOMPARE(proxies.size(), 1 + 3 + 1);
        const int group = proxies.first().indexOf(QStringLiteral("group"));
        const int fisher = proxies.first().indexOf(QStringLiteral("rho_fisher"));
        const int relK = proxies.first().indexOf(QStringLiteral("rho_rel_mse_k"));
        QVERIFY(group >= 0 && fisher >= 0 && relK >= 0);
        QCOMPARE(proxies.last()[group], QStringLiteral("(pooled)"));
        for (const auto& row : proxies.mid(1)) {
            QVERIFY2(std::abs(row[fisher].toDouble()) <= 1.0, qPrintable(row.join(',')));
            QVERIFY2(row[fisher].toDouble() > row[relK].toDouble(), qPrintable(row.join(',')));
        }
        QVERIFY(r.out.contains("Spearman rho of each proxy"));

        // The teaching figure, headless: the run's first scheme pair (KV, KQV) at its first budget.
        QVERIFY2(r.out.contains("teaching figure: KV against KQV at n = 2, seed 1"), r.out.constData());
        for (const char* ext : {"pdf", "svg", "png", "csv"})
            QVERIFY2(QFile::exists(out + QStringLiteral("/figures/teaching.") + QLatin1String(ext)), ext);
        const auto teaching = readCsv(out + QStringLiteral("/figures/teaching.csv"));
        QVERIFY(teaching.size() > 100);
        const int tScheme = teaching.first().indexOf(QStringLiteral("scheme"));
        QVERIFY(tScheme >= 0);
        QSet<QString> pair;
        for (const auto& row : teaching.mid(1))
            if (!row[tScheme].isEmpty())
                pair.insert(row[tScheme]);
        pair.remove(QStringLiteral("key path")); // the value-path panel's two curves
        pair.remove(QStringLiteral("value path"));
        QCOMPARE(pair, (QSet<QString>{QStringLiteral("KV"), QStringLiteral("KQV")}));
        QVERIFY(std::any_of(teaching.cbegin(), teaching.cend(), [](const QStringList& row) {
            return row.size() == 4 && row[0] == QStringLiteral("config.budget") && row[3].toDouble() == 2.0;
        }));
    }

    void writtenSpecReadsBackToTheSameRun()
    {
        QTemporaryDir dir;
        const QString spec = writeSpec(dir, R"({"regime": {"name": "focused", "beta": 5}, "d": 32, "tokens": 64,
            "queries": 8, "budgets": [3], "seeds": {"count": 2}, "schemes": ["TQ-QKV"]})");
        const QString a = dir.filePath(QStringLiteral("a")), b = dir.filePath(QStringLiteral("b"));
        QCOMPARE(runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), a, QStringLiteral("--quiet")}).exitCode, 0);
        QCOMPARE(runKvlens({QStringLiteral("--batch"), a + QStringLiteral("/spec.json"), QStringLiteral("--out"), b,
                            QStringLiteral("--quiet")}).exitCode, 0);
        for (const char* name : {"spec.json", "queries.csv"}) {
            QFile fa(a + QLatin1Char('/') + QLatin1String(name)), fb(b + QLatin1Char('/') + QLatin1String(name));
            QVERIFY(fa.open(QIODevice::ReadOnly) && fb.open(QIODevice::ReadOnly));
            QCOMPARE(fa.readAll(), fb.readAll());
        }
    }

    void anAdvisorOnARunItCannotServeIsNamed()
    {
        // A spec naming the advisor on drawn data: the run is written, and the printout says why no advice.
        QTemporaryDir dir;
        const QString spec = writeSpec(dir, R"({"d": 32, "tokens": 64, "queries": 8, "budgets": [3], "seeds": {"count": 2},
            "schemes": ["KV"], "advisor": {"bits": [3, 3.5], "objective": "median"}})");
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet"),
                                 QStringLiteral("--no-figures")});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("advisor: not run: the spec's \"advisor\" applies to a model run"), r.out.constData());
        QVERIFY(!QFileInfo::exists(out + QStringLiteral("/allocation.json")));
        // The written spec keeps the advisor, so a rerun of it (or kvlens merge) advises alike.
        QFile written(out + QStringLiteral("/spec.json"));
        QVERIFY(written.open(QIODevice::ReadOnly));
        const QByteArray json = written.readAll();
        QVERIFY2(json.contains("\"objective\": \"median\"") && json.contains("3.5"), json.constData());
    }

    void badSpecExitsNonZeroAndWritesNothing_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QByteArray>("mention");
        QTest::newRow("d") << QByteArray(R"({"d": 2})") << QByteArray("d: must be an integer in [4, 16384], got 2");
        QTest::newRow("scheme") << QByteArray(R"({"schemes": ["KQQV"]})") << QByteArray("schemes[0]: unknown scheme");
        QTest::newRow("json") << QByteArray("{") << QByteArray("not valid JSON");
        QTest::newRow("advisor target") << QByteArray(R"({"budgets": [3, 4], "advisor": {"bits": [3.5, 2.5]}})")
                                        << QByteArray("advisor.bits[1]: 2.5 is outside [3, 16]");
        QTest::newRow("advisor key") << QByteArray(R"({"advisor": {"bits": 3, "objetive": "p99"}})")
                                     << QByteArray("advisor.objetive: unknown key (allowed: bits, objective, loss)");
    }
    void badSpecExitsNonZeroAndWritesNothing()
    {
        QFETCH(QByteArray, json);
        QFETCH(QByteArray, mention);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens({QStringLiteral("--batch"), writeSpec(dir, json), QStringLiteral("--out"), out});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(mention), r.err.constData());
        QCOMPARE(r.err.count('\n'), 1); // one line
        QVERIFY(!QDir(out).exists());
    }

    void openclMatchesTheCpuOrFallsBackWithAReason()
    {
        QTemporaryDir dir;
        const QString spec = writeSpec(dir, R"({"d": 64, "tokens": 256, "queries": 16, "budgets": [3, 4],
            "seeds": {"count": 2}, "schemes": ["KV", "KQV", "QKQV"]})");
        const QString cpu = dir.filePath(QStringLiteral("cpu")), gpu = dir.filePath(QStringLiteral("gpu"));
        QCOMPARE(runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), cpu, QStringLiteral("--quiet"),
                            QStringLiteral("--no-figures")}).exitCode, 0);
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), gpu, QStringLiteral("--quiet"),
                                 QStringLiteral("--no-figures"), QStringLiteral("--device"), QStringLiteral("0")});
        QCOMPARE(r.exitCode, 0);
        const auto a = readCsv(cpu + QStringLiteral("/summary.csv")), b = readCsv(gpu + QStringLiteral("/summary.csv"));
        QCOMPARE(a.size(), b.size());
        const int kl = a.first().indexOf(QStringLiteral("kl_mean"));
        QFile specFile(gpu + QStringLiteral("/spec.json"));
        QVERIFY(specFile.open(QIODevice::ReadOnly));
        const QByteArray written = specFile.readAll();
        if (r.err.contains("OpenCL unavailable")) {
            // No usable OpenCL here: the run still completes on the CPU, says so, and the
            // exported spec records the fallback.
            QVERIFY(written.contains("cpu (fallback:"));
        } else {
            QVERIFY(written.contains("\"backend\": \"opencl\""));
            QVERIFY(r.out.contains("backend opencl"));
        }
        for (int i = 1; i < a.size(); ++i) {
            const double x = a[i][kl].toDouble(), y = b[i][kl].toDouble();
            QVERIFY2(std::abs(x - y) <= 1e-4 * std::abs(x), qPrintable(QStringLiteral("%1 vs %2").arg(x).arg(y)));
        }
    }

    void missingDeviceFallsBackToTheCpu()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const QString spec = writeSpec(dir, R"({"d": 32, "tokens": 64, "queries": 8, "budgets": [3],
            "seeds": {"count": 1}, "schemes": ["KV"]})");
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet"),
                                 QStringLiteral("--no-figures"), QStringLiteral("--device"), QStringLiteral("99")});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.err.contains("OpenCL unavailable, running on the CPU backend"), r.err.constData());
        QFile specFile(out + QStringLiteral("/spec.json"));
        QVERIFY(specFile.open(QIODevice::ReadOnly));
        QVERIFY(specFile.readAll().contains("cpu (fallback:"));
        // The exported spec reruns (on the CPU).
        QCOMPARE(runKvlens({QStringLiteral("--batch"), out + QStringLiteral("/spec.json"), QStringLiteral("--out"),
                            dir.filePath(QStringLiteral("again")), QStringLiteral("--quiet"), QStringLiteral("--no-figures")})
                     .exitCode,
                 0);
    }

    void validateSeparatesImplementationFromSeed()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const QString spec = writeSpec(dir, R"({"d": 64, "tokens": 256, "queries": 16, "budgets": [4],
            "seeds": {"count": 6}, "schemes": ["KQV", "QKQV"]})");
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--validate"), QStringLiteral("--out"), out,
                                 QStringLiteral("--quiet")});
        QCOMPARE(r.exitCode, 0); // 3 would mean an implementation difference
        const auto rows = readCsv(out + QStringLiteral("/validation.csv"));
        QCOMPARE(rows.size(), 1 + 2 * 8); // 2 schemes x 1 budget x 8 metrics
        QVERIFY(r.out.contains("0 implementation difference(s)"));
    }

    void authorControlsSetTheFiguresWidthResolutionAndFont()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens({QStringLiteral("--batch"), QStringLiteral("default"), QStringLiteral("--out"), out,
                                 QStringLiteral("--width"), QStringLiteral("double"), QStringLiteral("--dpi"),
                                 QStringLiteral("150"), QStringLiteral("--font-size"), QStringLiteral("10"),
                                 QStringLiteral("--font-family"), QStringLiteral("DejaVu Serif"), QStringLiteral("--quiet")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        // 7 in = 504 pt wide PDF page; 7 in at 150 dpi = 1050 px PNG; the serif family embedded.
        QFile pdf(out + QStringLiteral("/figures/kl_distribution.pdf"));
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        const QByteArray bytes = pdf.readAll();
        QVERIFY2(bytes.contains("/MediaBox [0 0 504.000000 378.000000]"), bytes.left(600).constData());
        QVERIFY(bytes.contains("DejaVuSerif"));
        QVERIFY(!bytes.contains("DejaVuSans-"));
        QFile png(out + QStringLiteral("/figures/kl_distribution.png"));
        QVERIFY(png.open(QIODevice::ReadOnly));
        const QByteArray header = png.read(24); // signature, IHDR length and type, then the width (big-endian)
        QCOMPARE(header.size(), 24);
        const auto width = (static_cast<quint32>(static_cast<quint8>(header[16])) << 24)
                           | (static_cast<quint32>(static_cast<quint8>(header[17])) << 16)
                           | (static_cast<quint32>(static_cast<quint8>(header[18])) << 8)
                           | static_cast<quint32>(static_cast<quint8>(header[19]));
        QCOMPARE(width, quint32{1050});

        for (const QStringList& bad : {QStringList{QStringLiteral("--width"), QStringLiteral("0.2")},
                                       QStringList{QStringLiteral("--dpi"), QStringLiteral("5000")},
                                       QStringList{QStringLiteral("--font-size"), QStringLiteral("2")},
                                       QStringList{QStringLiteral("--font-family"), QStringLiteral("No Such Font")}}) {
            const Run refused = runKvlens(QStringList{QStringLiteral("--batch"), QStringLiteral("default"),
                                                      QStringLiteral("--out"), dir.filePath(QStringLiteral("bad"))}
                                          + bad);
            QCOMPARE(refused.exitCode, 2);
            QVERIFY2(refused.err.contains(bad.first().toUtf8()), refused.err.constData());
            QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("bad"))));
        }
    }

    void missingOutIsAnError()
    {
        const Run r = runKvlens({QStringLiteral("--batch"), QStringLiteral("default")});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains("--out"));
    }
};

QTEST_GUILESS_MAIN(TestBatch)
#include "tst_batch.moc"
