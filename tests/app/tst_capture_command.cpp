// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens capture` end to end on the shipped model: the dump it writes, a model spec run on it with
// --batch, and bad input refused in one line naming the argument (exit 2, nothing written).
#include "common/kvlens_process.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using kvlens::test::runKvlens;

namespace {

const QString kModel = QStringLiteral(KVLENS_MODELS_DIR "/tiny-llama");

/// The safetensors header of `path` as JSON.
QJsonObject headerOf(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray lengthBytes = f.read(8);
    quint64 length = 0;
    for (int i = 7; i >= 0; --i)
        length = (length << 8) | static_cast<unsigned char>(lengthBytes[i]);
    return QJsonDocument::fromJson(f.read(static_cast<qint64>(length))).object();
}

} // namespace

class TestCaptureCommand : public QObject {
    Q_OBJECT

private slots:
    void writesADumpTheModelRegimeRuns()
    {
        QTemporaryDir dir;
        const QString dump = dir.filePath(QStringLiteral("tiny.safetensors"));
        const auto r = runKvlens({QStringLiteral("capture"), QStringLiteral("--model"), kModel, QStringLiteral("--text"),
                                  kModel + QStringLiteral("/heldout.txt"), QStringLiteral("--ctx"), QStringLiteral("128"),
                                  QStringLiteral("--offset"), QStringLiteral("1000"), QStringLiteral("--meta"),
                                  QStringLiteral("note=test"), QStringLiteral("--out"), dump});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("4 layers (model layers 0,1,2,3) x 8 query heads / 2 KV heads x head_dim 32, 128 tokens"),
                 r.out.constData());
        const QJsonObject header = headerOf(dump);
        const QJsonObject meta = header.value(QStringLiteral("__metadata__")).toObject();
        QCOMPARE(meta.value(QStringLiteral("kvlens_dump")).toString(), QStringLiteral("1"));
        QCOMPARE(meta.value(QStringLiteral("tokens")).toString(), QStringLiteral("128"));
        QCOMPARE(meta.value(QStringLiteral("note")).toString(), QStringLiteral("test"));
        QVERIFY(meta.value(QStringLiteral("source")).toString().contains(QStringLiteral("tokens 1000..1127")));
        // [batch, heads, tokens, head_dim], F16; 12 tensors and the metadata.
        QCOMPARE(header.size(), 13);
        const QJsonObject q = header.value(QStringLiteral("layers.3.q")).toObject();
        QCOMPARE(q.value(QStringLiteral("dtype")).toString(), QStringLiteral("F16"));
        QCOMPARE(q.value(QStringLiteral("shape")).toVariant().toList(), (QVariantList{1, 8, 128, 32}));
        QCOMPARE(header.value(QStringLiteral("layers.0.k")).toObject().value(QStringLiteral("shape")).toVariant().toList(),
                 (QVariantList{1, 2, 128, 32}));

        // The Model map's regime reads it: two cells, one scheme.
        const QString spec = dir.filePath(QStringLiteral("map.json"));
        QFile s(spec);
        QVERIFY(s.open(QIODevice::WriteOnly));
        s.write(R"({"kvlens_spec": 1, "regime": {"name": "model", "file": "tiny.safetensors", "layers": [0, 3],
                    "heads": [5], "token_start": 0, "query_start": 96, "causal": "on"},
                    "d": 32, "tokens": 128, "queries": 32, "schemes": ["K-only"], "budgets": [3],
                    "seeds": {"count": 1}, "comparisons": {"bootstrap": 100, "permutations": 49}})");
        s.close();
        const auto b = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), dir.filePath(QStringLiteral("map")),
                                  QStringLiteral("--quiet"), QStringLiteral("--no-figures")});
        QVERIFY2(b.exitCode == 0, b.err.constData());
        QVERIFY2(b.out.contains("model dump: layer 0, query head 5 (K/V head 1 of 2), keys at positions 0..127"),
                 b.out.constData());
        QVERIFY2(b.out.contains("head = 5, layer = 3  K-only"), b.out.constData());

        // Every key the dump wrote itself (layout and provenance) is refused as a --meta key, naming
        // it, before anything is loaded: a --meta model=... would have replaced the model's description.
        int refused = 0;
        for (const QString& key : meta.keys()) {
            if (key == QStringLiteral("note"))
                continue; // ours
            const QString other = dir.filePath(QStringLiteral("other.safetensors"));
            const auto m = runKvlens({QStringLiteral("capture"), QStringLiteral("--model"), kModel, QStringLiteral("--text"),
                                      kModel + QStringLiteral("/heldout.txt"), QStringLiteral("--meta"), key + QStringLiteral("=x"),
                                      QStringLiteral("--out"), other});
            QCOMPARE(m.exitCode, 2);
            QVERIFY2(m.err.startsWith("kvlens capture: --meta: key '" + key.toUtf8() + "' is not allowed: the dump writes it itself"),
                     m.err.constData());
            QCOMPARE(m.err.count('\n'), 1);
            QVERIFY(!QFile::exists(other));
            ++refused;
        }
        QVERIFY2(refused >= 13, qPrintable(meta.keys().join(' '))); // 6 layout keys, 7 or 8 of provenance
    }

    void helpListsTheOptions()
    {
        const auto r = runKvlens({QStringLiteral("capture"), QStringLiteral("--help")});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.err.isEmpty());
        QVERIFY2(r.out.startsWith("usage: kvlens capture --model DIR"), r.out.constData());
        for (const char* option : {"--model DIR", "--text FILE", "--tokens FILE.npy", "--ctx N", "--offset T", "--layers",
                                   "--dtype f16|f32", "--threads N", "--memory-limit MB", "--no-special", "--meta KEY=VALUE",
                                   "--quiet", "--out FILE.safetensors", "an integer in [1, 131072]"})
            QVERIFY2(r.out.contains(option), option);
    }

    void badInputIsRefusedAndNothingWritten_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("mention");
        const QString text = kModel + QStringLiteral("/heldout.txt");
        const QStringList base{QStringLiteral("--model"), kModel, QStringLiteral("--text"), text};
        QTest::newRow("unknown argument") << base + QStringList{QStringLiteral("--chunks"), QStringLiteral("2")}
                                          << QStringLiteral("kvlens capture: --chunks: unknown option (see kvlens capture --help)");
        QTest::newRow("no model") << QStringList{QStringLiteral("--text"), text} << QStringLiteral("kvlens capture: --model DIR is required");
        QTest::newRow("both inputs") << base + QStringList{QStringLiteral("--tokens"), text}
                                     << QStringLiteral("--text: give exactly one of");
        QTest::newRow("ctx zero") << base + QStringList{QStringLiteral("--ctx"), QStringLiteral("0")}
                                  << QStringLiteral("--ctx: must be an integer in [1, 131072], got '0'");
        QTest::newRow("ctx beyond the model") << base + QStringList{QStringLiteral("--ctx"), QStringLiteral("4096")}
                                              << QStringLiteral("--ctx: must be at most 512");
        QTest::newRow("offset past the text") << base + QStringList{QStringLiteral("--offset"), QStringLiteral("11000")}
                                              << QStringLiteral("--offset: ");
        QTest::newRow("negative offset") << base + QStringList{QStringLiteral("--offset"), QStringLiteral("-1")}
                                         << QStringLiteral("--offset: must be an integer");
        QTest::newRow("layer beyond the model") << base + QStringList{QStringLiteral("--layers"), QStringLiteral("1,4")}
                                                << QStringLiteral("--layers: layer 4 must be in [0, 3]");
        QTest::newRow("backward range") << base + QStringList{QStringLiteral("--layers"), QStringLiteral("3-1")}
                                        << QStringLiteral("--layers: range '3-1'");
        QTest::newRow("bad dtype") << base + QStringList{QStringLiteral("--dtype"), QStringLiteral("f8")}
                                   << QStringLiteral("--dtype: must be f16 or f32");
        QTest::newRow("layout key") << base + QStringList{QStringLiteral("--meta"), QStringLiteral("tokens=5")}
                                    << QStringLiteral("--meta: key 'tokens' is not allowed");
        QTest::newRow("memory limit") << base + QStringList{QStringLiteral("--memory-limit"), QStringLiteral("1")}
                                      << QStringLiteral("--memory-limit: the capture needs about");
        QTest::newRow("no model folder") << QStringList{QStringLiteral("--model"), QStringLiteral("/nonexistent/model"),
                                                        QStringLiteral("--text"), text}
                                         << QStringLiteral("/nonexistent/model");
        QTest::newRow("given twice") << base + QStringList{QStringLiteral("--ctx"), QStringLiteral("64"), QStringLiteral("--ctx"),
                                                           QStringLiteral("32")}
                                     << QStringLiteral("--ctx: is given twice; give it once");
    }
    void badInputIsRefusedAndNothingWritten()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, mention);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("dump.safetensors"));
        const auto r = runKvlens(QStringList{QStringLiteral("capture")} + args + QStringList{QStringLiteral("--out"), out});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(QString::fromUtf8(r.err).contains(mention), r.err.constData());
        QCOMPARE(QString::fromUtf8(r.err).trimmed().count(QLatin1Char('\n')), 0); // one line
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden), QStringList());
    }

    void badOutputIsRefusedBeforeAnythingRuns_data()
    {
        QTest::addColumn<QString>("out");
        QTest::addColumn<QString>("mention");
        QTest::newRow("not .safetensors") << QStringLiteral("dump.npz") << QStringLiteral("--out: must name a .safetensors file");
        QTest::newRow("missing directory") << QStringLiteral("nowhere/dump.safetensors")
                                           << QStringLiteral("--out: the directory");
        QTest::newRow("none") << QString() << QStringLiteral("kvlens capture: --out FILE.safetensors is required");
    }
    void badOutputIsRefusedBeforeAnythingRuns()
    {
        QFETCH(QString, out);
        QFETCH(QString, mention);
        QTemporaryDir dir;
        QStringList args{QStringLiteral("capture"), QStringLiteral("--model"), kModel, QStringLiteral("--text"),
                         kModel + QStringLiteral("/heldout.txt")};
        if (!out.isEmpty())
            args << QStringLiteral("--out") << dir.filePath(out);
        const auto r = runKvlens(args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(QString::fromUtf8(r.err).contains(mention), r.err.constData());
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden), QStringList());
    }
};

QTEST_GUILESS_MAIN(TestCaptureCommand)
#include "tst_capture_command.moc"
