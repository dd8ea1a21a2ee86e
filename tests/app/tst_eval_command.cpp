// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens eval` and `kvlens --batch EVAL.json` end to end on the shipped model: the files, the
// report, and bad input refused in one line (exit 2, nothing written).
#include "common/kvlens_process.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <utility>

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
        // --threads reaches the evaluation as its spec's threads: one thread sums the forward in
        // another order, so the exact cache's perplexity moves in its last digits only (measured:
        // 1e-9 relative), never beyond 1e-6.
        const QString oneThread = dir.filePath(QStringLiteral("one_thread"));
        const auto t = runKvlens({QStringLiteral("--batch"), out + QStringLiteral("/spec.json"), QStringLiteral("--out"),
                                  oneThread, QStringLiteral("--quiet"), QStringLiteral("--no-figures"), QStringLiteral("--threads"),
                                  QStringLiteral("1")});
        QVERIFY2(t.exitCode == 0, t.err.constData());
        QVERIFY2(readAll(out + QStringLiteral("/spec.json")).contains("\"threads\": 0"), readAll(out + QStringLiteral("/spec.json")).constData());
        QVERIFY2(readAll(oneThread + QStringLiteral("/spec.json")).contains("\"threads\": 1"),
                 readAll(oneThread + QStringLiteral("/spec.json")).constData());
        auto exactPpl = [](const QByteArray& csv) {
            for (const QByteArray& line : csv.split('\n'))
                if (line.startsWith("exact,fixed,1,"))
                    return line.split(',').value(6).toDouble(); // ppl
            return 0.0;
        };
        const double ppl = exactPpl(summary), pplOneThread = exactPpl(readAll(oneThread + QStringLiteral("/eval_summary.csv")));
        QVERIFY2(ppl > 1.0 && std::abs(pplOneThread - ppl) <= 1e-6 * ppl, qPrintable(QStringLiteral("%1 vs %2").arg(ppl, 0, 'g', 17).arg(pplOneThread, 0, 'g', 17)));
        QVERIFY(readAll(out + QStringLiteral("/report.txt")).contains("\nforward: CPU, "));
        // --backend opencl reaches the evaluation as its spec's backend: on an OpenCL device (PoCL
        // here) the exact cache's perplexity agrees within the device test's 1e-4 and report.txt names
        // the device; with no usable device the run falls back to the CPU and says so.
        const QString device = dir.filePath(QStringLiteral("device"));
        const auto g = runKvlens({QStringLiteral("--batch"), out + QStringLiteral("/spec.json"), QStringLiteral("--out"), device,
                                  QStringLiteral("--quiet"), QStringLiteral("--no-figures"), QStringLiteral("--backend"),
                                  QStringLiteral("opencl")});
        QVERIFY2(g.exitCode == 0, g.err.constData());
        QVERIFY(readAll(device + QStringLiteral("/spec.json")).contains("\"backend\": \"opencl\""));
        const QByteArray report = readAll(device + QStringLiteral("/report.txt"));
        if (report.contains("\nforward: OpenCL, ")) {
            const double pplDevice = exactPpl(readAll(device + QStringLiteral("/eval_summary.csv")));
            QVERIFY2(std::abs(pplDevice - ppl) <= 1e-4 * ppl, qPrintable(QStringLiteral("%1 vs %2").arg(pplDevice, 0, 'g', 17).arg(ppl, 0, 'g', 17)));
        } else {
            QVERIFY2(report.contains("\nforward: CPU, ") && report.contains("fallback: "), report.constData());
        }
    }

    void anEvalSpecRefusesWhatAnEvaluationDoesNotTake_data()
    {
        QTest::addColumn<QStringList>("extra");
        QTest::addColumn<QString>("message");
        QTest::newRow("shard out of range") << QStringList{QStringLiteral("--shard"), QStringLiteral("2/2")}
                                            << QStringLiteral("kvlens: --shard: must be i/n with 0 <= i < n");
        QTest::newRow("--validate") << QStringList{QStringLiteral("--validate")}
                                    << QStringLiteral("kvlens: --validate: an evaluation (EVAL.json) does not take it (it is an option of ");
        QTest::newRow("figure option without figures")
            << QStringList{QStringLiteral("--no-figures"), QStringLiteral("--dpi"), QStringLiteral("600")}
            << QStringLiteral("kvlens: --dpi: draws nothing with --no-figures");
    }
    void anEvalSpecRefusesWhatAnEvaluationDoesNotTake()
    {
        QFETCH(QStringList, extra);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString spec = dir.filePath(QStringLiteral("eval.json"));
        QFile f(spec);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QStringLiteral(R"({"kvlens_eval": 1, "model": "%1", "text": "%1/heldout.txt", "schemes": ["KV"], "budgets": [3],
                               "ctx": 128, "chunks": 2})")
                    .arg(kModel)
                    .toUtf8());
        f.close();
        const QString out = dir.filePath(QStringLiteral("run"));
        const auto r = runKvlens(QStringList{QStringLiteral("--batch"), spec, QStringLiteral("--out"), out} + extra);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.startsWith(message.toUtf8()), r.err.constData());
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY(!QFileInfo::exists(out));
        // kvlens eval --spec takes the same: a field of the spec beside the file is refused, naming it.
        const auto e = runKvlens({QStringLiteral("eval"), QStringLiteral("--spec"), spec, QStringLiteral("--ctx"), QStringLiteral("64"),
                                  QStringLiteral("--out"), out});
        QCOMPARE(e.exitCode, 2);
        QVERIFY2(e.err.startsWith("kvlens eval: --ctx: is a field of the eval spec"), e.err.constData());
    }

    void shardsMergeIntoTheUnshardedRunsFiles()
    {
        // kvlens --batch EVAL.json --shard i/3 (one as kvlens eval --spec), then kvlens merge: the files
        // of the unsharded run, byte for byte but for eval_shard.bin and manifest.json (which hold the
        // run's timings), figures included.
        QTemporaryDir dir;
        const QString spec = dir.filePath(QStringLiteral("eval.json"));
        QFile f(spec);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QStringLiteral(R"({"kvlens_eval": 1, "model": "%1", "text": "%1/heldout.txt", "schemes": ["TQ-KV", "q8_0"],
                               "budgets": [3], "ctx": 128, "chunks": 5})")
                    .arg(kModel)
                    .toUtf8());
        f.close();
        const QString whole = dir.filePath(QStringLiteral("whole"));
        auto r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), whole, QStringLiteral("--quiet")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QStringList shards;
        for (int i = 0; i < 3; ++i) {
            const QString out = dir.filePath(QStringLiteral("shard%1").arg(i));
            const QString shard = QStringLiteral("%1/3").arg(i);
            r = i == 1 ? runKvlens({QStringLiteral("eval"), QStringLiteral("--spec"), spec, QStringLiteral("--shard"), shard,
                                    QStringLiteral("--out"), out, QStringLiteral("--quiet")})
                       : runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--shard"), shard, QStringLiteral("--out"),
                                    out, QStringLiteral("--quiet")});
            QVERIFY2(r.exitCode == 0, r.err.constData());
            // A shard writes its spec and its record only: no tables of a partial run.
            QVERIFY(QFile::exists(out + QStringLiteral("/eval_shard.bin")));
            QVERIFY(QFile::exists(out + QStringLiteral("/manifest.json")));
            QVERIFY(!QFile::exists(out + QStringLiteral("/eval_summary.csv")));
            shards.prepend(out); // any order
        }
        // A missing shard is refused naming it, and nothing is written.
        const QString merged = dir.filePath(QStringLiteral("merged"));
        r = runKvlens(QStringList{QStringLiteral("merge")} + shards.mid(0, 2) + QStringList{QStringLiteral("--out"), merged});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("shard 0 of 3 is missing"), r.err.constData());
        QVERIFY(!QFileInfo::exists(merged));
        r = runKvlens(QStringList{QStringLiteral("merge")} + shards + QStringList{QStringLiteral("--out"), merged});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QStringList files = QDir(whole).entryList(QDir::Files);
        for (const QString& figure : QDir(whole + QStringLiteral("/figures")).entryList(QDir::Files))
            files << QStringLiteral("figures/") + figure;
        QVERIFY(files.contains(QStringLiteral("eval_summary.csv")) && files.contains(QStringLiteral("figures/eval_kld.csv")));
        for (const QString& name : files) {
            if (name == QStringLiteral("eval_shard.bin") || name == QStringLiteral("manifest.json") || name.endsWith(QStringLiteral(".png"))
                || name.endsWith(QStringLiteral(".pdf")))
                continue;
            QVERIFY2(readAll(whole + QLatin1Char('/') + name) == readAll(merged + QLatin1Char('/') + name), qPrintable(name));
        }
    }

    void reuseTakesTheConfigurationsAnEarlierRunComputed()
    {
        QTemporaryDir dir;
        auto specWith = [&](const QString& name, const QString& schemes, int ctx) {
            const QString path = dir.filePath(name);
            QFile f(path);
            f.open(QIODevice::WriteOnly);
            f.write(QStringLiteral(R"({"kvlens_eval": 1, "model": "%1", "text": "%1/heldout.txt", "schemes": [%2],
                                   "budgets": [3], "ctx": %3, "chunks": 3})")
                        .arg(kModel, schemes)
                        .arg(ctx)
                        .toUtf8());
            return path;
        };
        const QString a = specWith(QStringLiteral("a.json"), QStringLiteral(R"("TQ-KV", "q8_0")"), 128);
        const QString b = specWith(QStringLiteral("b.json"), QStringLiteral(R"("TQ-KV", "KV", "q8_0")"), 128);
        const QString old = dir.filePath(QStringLiteral("old")), fresh = dir.filePath(QStringLiteral("fresh")),
                      reused = dir.filePath(QStringLiteral("reused"));
        for (const auto& [spec, out] : {std::pair{a, old}, std::pair{b, fresh}}) {
            const auto r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet"),
                                      QStringLiteral("--no-figures")});
            QVERIFY2(r.exitCode == 0, r.err.constData());
        }
        auto r = runKvlens({QStringLiteral("--batch"), b, QStringLiteral("--reuse"), old, QStringLiteral("--out"), reused,
                            QStringLiteral("--quiet"), QStringLiteral("--no-figures")});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("reused 2 of 3 configurations from " + old.toUtf8()), r.out.constData());
        // What it wrote is what a run from scratch of the same spec writes.
        for (const char* f : {"eval_summary.csv", "eval_tokens.csv", "eval_layers.csv", "eval_proxies.csv", "report.txt"})
            QVERIFY2(readAll(reused + QLatin1Char('/') + QLatin1String(f)) == readAll(fresh + QLatin1Char('/') + QLatin1String(f)), f);
        // A run of other settings cannot lend its configurations: refused naming why, nothing written.
        // Another context reads other tokens; the same tokens read with ggml's query conversion off are
        // other settings. Either is refused naming why, nothing written.
        const QString otherCtx = specWith(QStringLiteral("c.json"), QStringLiteral(R"("TQ-KV")"), 64);
        const QString otherConversion = dir.filePath(QStringLiteral("d.json"));
        {
            QFile f(otherConversion);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QStringLiteral(R"({"kvlens_eval": 1, "model": "%1", "text": "%1/heldout.txt", "schemes": ["TQ-KV"],
                                   "budgets": [3], "ctx": 128, "chunks": 3, "query_conversion": "none"})")
                        .arg(kModel)
                        .toUtf8());
        }
        for (const auto& [spec, why] : {std::pair{otherCtx, "it read other tokens"},
                                        std::pair{otherConversion, "its settings differ"}}) {
            const QString out = dir.filePath(QStringLiteral("refused"));
            r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--reuse"), old, QStringLiteral("--out"), out,
                           QStringLiteral("--quiet")});
            QCOMPARE(r.exitCode, 2);
            QVERIFY2(r.err.contains(QByteArray("reuse: the earlier run cannot be reused: ") + why), r.err.constData());
            QVERIFY(!QFileInfo::exists(out));
        }
    }

    void helpListsTheOptions()
    {
        const auto r = runKvlens({QStringLiteral("eval"), QStringLiteral("--help")});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.err.isEmpty());
        QVERIFY2(r.out.startsWith("usage: kvlens eval --model DIR"), r.out.constData());
        for (const char* option : {"--spec EVAL.json", "--model DIR", "--schemes S,...", "--budgets n,...", "--ctx N",
                                   "--chunks N", "--calibration T", "--seeds FIRST[:COUNT]", "--residual R",
                                   "--attribution none|layers|heads", "--threads N", "--memory-limit MB", "--no-special",
                                   "--quiet", "--no-figures", "--out DIR", "--width", "--dpi", "--font-family", "--font-size"})
            QVERIFY2(r.out.contains(option), option);
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
        // A repeated option is refused, whichever it is (the last one used to win).
        QTest::newRow("ctx twice") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--text"), text,
                                                  QStringLiteral("--schemes"), QStringLiteral("KV"), QStringLiteral("--ctx"),
                                                  QStringLiteral("64"), QStringLiteral("--ctx"), QStringLiteral("128")}
                                   << QStringLiteral("kvlens eval: --ctx: is given twice; give it once");
        QTest::newRow("model twice") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--model"), kModel,
                                                    QStringLiteral("--text"), text, QStringLiteral("--schemes"), QStringLiteral("KV")}
                                     << QStringLiteral("kvlens eval: --model: is given twice; give it once");
        QTest::newRow("out twice") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--text"), text,
                                                  QStringLiteral("--schemes"), QStringLiteral("KV"), QStringLiteral("--out"),
                                                  QStringLiteral("elsewhere")}
                                   << QStringLiteral("kvlens eval: --out: is given twice; give it once");
        QTest::newRow("unknown option") << QStringList{QStringLiteral("--model"), kModel, QStringLiteral("--ctxx"), QStringLiteral("64")}
                                        << QStringLiteral("kvlens eval: --ctxx: unknown option (see kvlens eval --help)");
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
