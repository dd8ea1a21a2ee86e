// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens eval` and `kvlens --batch EVAL.json` end to end on the shipped model: the files, the
// report, and bad input refused in one line (exit 2, nothing written).
#include "common/kvlens_process.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

using kvlens::test::runKvlens;

namespace {

const QString kModel = QStringLiteral(KVLENS_MODELS_DIR "/tiny-llama");

QByteArray readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

} // namespace

class TestEvalCommand : public QObject {
    Q_OBJECT

private slots:
    void commandLineWritesEveryFile()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("run"));
        const auto r = runKvlens({QStringLiteral("eval"), QStringLiteral("--model"), kModel, QStringLiteral("--text"),
                                  kModel + QStringLiteral("/heldout.txt"), QStringLiteral("--schemes"),
                                  QStringLiteral("exact,TQ-KV,K=q8_0,V=q4_0"), QStringLiteral("--budgets"), QStringLiteral("3"),
                                  QStringLiteral("--ctx"), QStringLiteral("128"), QStringLiteral("--chunks"), QStringLiteral("3"),
                                  QStringLiteral("--no-figures"), QStringLiteral("--out"), out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        for (const char* f : {"spec.json", "eval_summary.csv", "eval_tokens.csv", "eval_layers.csv", "eval_proxies.csv",
                              "report.txt"})
            QVERIFY2(QFile::exists(out + QLatin1Char('/') + QLatin1String(f)), f);
        // The proxy study: one row per quantized configuration (the exact cache has no proxies), and
        // the report's table of the best proxies.
        const QByteArray proxies = readAll(out + QStringLiteral("/eval_proxies.csv"));
        QVERIFY2(proxies.contains("\nTQ-KV,3,189,") && proxies.contains("\n\"K=q8_0,V=q4_0\",fixed,189,")
                     && !proxies.contains("\nexact,"),
                 proxies.constData());
        QVERIFY(r.out.contains("Which attention-level proxy ranks the tokens by their KLD"));
        const QByteArray summary = readAll(out + QStringLiteral("/eval_summary.csv"));
        // exact (fixed width), TQ-KV n = 3, K=q8_0,V=q4_0 (fixed): three rows, 3 chunks x 63 scored tokens.
        QVERIFY2(summary.contains("\nexact,fixed,1,32,32,189,"), summary.constData());
        QVERIFY(summary.contains("\nTQ-KV,3,1,"));
        QVERIFY(summary.contains("\n\"K=q8_0,V=q4_0\",fixed,1,8.5,4.5,189,"));
        QVERIFY(r.out.contains("Mean KLD"));
        QVERIFY(r.out.contains("layers that matter most"));
        QVERIFY(!QDir(out + QStringLiteral("/figures")).exists()); // --no-figures
        // The spec it wrote runs again through --batch, to the same numbers.
        const QString again = dir.filePath(QStringLiteral("again"));
        const auto b = runKvlens({QStringLiteral("--batch"), out + QStringLiteral("/spec.json"), QStringLiteral("--out"),
                                  again, QStringLiteral("--quiet"), QStringLiteral("--no-figures")});
        QVERIFY2(b.exitCode == 0, b.err.constData());
        QCOMPARE(readAll(again + QStringLiteral("/eval_summary.csv")), summary);
    }

    void figuresAreWrittenThroughTheStagingDirectory()
    {
        // exact (KLD 0 everywhere: the zeros the log axes must place) and TQ-KV n = 3, with the
        // default attribution: every figure, each with its data and the eval spec.
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("run"));
        const auto r = runKvlens({QStringLiteral("eval"), QStringLiteral("--model"), kModel, QStringLiteral("--text"),
                                  kModel + QStringLiteral("/heldout.txt"), QStringLiteral("--schemes"),
                                  QStringLiteral("exact,TQ-KV"), QStringLiteral("--budgets"), QStringLiteral("3"),
                                  QStringLiteral("--ctx"), QStringLiteral("128"), QStringLiteral("--chunks"), QStringLiteral("3"),
                                  QStringLiteral("--quiet"), QStringLiteral("--out"), out});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        for (const char* stem : {"eval_kld", "eval_layers", "eval_text"})
            for (const char* ext : {".pdf", ".svg", ".png", ".csv", ".spec.json"}) {
                const QString path = out + QStringLiteral("/figures/") + QLatin1String(stem) + QLatin1String(ext);
                QVERIFY2(QFileInfo(path).size() > 0, qPrintable(path));
            }
        QCOMPARE(readAll(out + QStringLiteral("/figures/eval_kld.spec.json")), readAll(out + QStringLiteral("/spec.json")));
        // The KLD figure's data: a row per configuration with 189 scored tokens; exact's all 0.
        const QByteArray kld = readAll(out + QStringLiteral("/figures/eval_kld.csv"));
        QVERIFY2(kld.contains("\nexact,exact,fixed,1,189,189,0,0,0,0,0,0,0,0\n"), kld.constData());
        QVERIFY2(kld.contains("\nTQ-KV n=3,TQ-KV,3,1,189,"), kld.constData());
        QVERIFY2(r.out.contains("files in " + out.toUtf8() + "/figures"), r.out.constData());
        // Nothing of the staging directory is left beside the run.
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden), QStringList{QStringLiteral("run")});
    }

    void badInputIsRefusedAndNothingWritten_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("mention");
        const QString text = kModel + QStringLiteral("/heldout.txt");
        QTest::newRow("unknown scheme") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--text"), text,
                                                       QStringLiteral("--schemes"), QStringLiteral("KQQV")}
                                        << QStringLiteral("unknown scheme 'KQQV'");
        QTest::newRow("both inputs") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--text"), text,
                                                    QStringLiteral("--tokens"), text, QStringLiteral("--schemes"),
                                                    QStringLiteral("KV")}
                                     << QStringLiteral("exactly one of");
        QTest::newRow("ctx beyond the model") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--text"), text,
                                                             QStringLiteral("--schemes"), QStringLiteral("KV"),
                                                             QStringLiteral("--ctx"), QStringLiteral("4096")}
                                              << QStringLiteral("ctx: must be at most 512");
        QTest::newRow("text too short") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--text"),
                                                       QStringLiteral(KVLENS_TEST_DATA "/eval_short.txt"),
                                                       QStringLiteral("--schemes"), QStringLiteral("KV")}
                                        << QStringLiteral("fewer than two chunks");
        QTest::newRow("no model") << QStringList{QStringLiteral("--model"), QStringLiteral("/nonexistent/model"),
                                                 QStringLiteral("--text"), text, QStringLiteral("--schemes"), QStringLiteral("KV")}
                                  << QStringLiteral("/nonexistent/model");
        QTest::newRow("bad budget") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--text"), text,
                                                   QStringLiteral("--schemes"), QStringLiteral("KV"), QStringLiteral("--budgets"),
                                                   QStringLiteral("2,9")}
                                    << QStringLiteral("--budgets: must be an integer in [1, 8], got '9'");
    }
    void badInputIsRefusedAndNothingWritten()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, mention);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("run"));
        const auto r = runKvlens(QStringList{QStringLiteral("eval")} + args + QStringList{QStringLiteral("--out"), out});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(QString::fromUtf8(r.err).contains(mention), r.err.constData());
        QCOMPARE(QString::fromUtf8(r.err).trimmed().count(QLatin1Char('\n')), 0); // one line
        QVERIFY(!QDir(out).exists() || QDir(out).isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestEvalCommand)
#include "tst_eval_command.moc"
