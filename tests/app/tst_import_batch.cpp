// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens --batch` on imported tensors: the shipped example writes what a synthetic run writes; every
// malformed file of the corpus is refused in one line, writing nothing.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "common/kvlens_process.h"

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;

QString writeFile(const QString& path, const QByteArray& bytes)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly))
        return {};
    f.write(bytes);
    return path;
}

/// Every file under `dir`, as sorted paths relative to it.
QStringList fileSet(const QString& dir)
{
    QStringList files;
    QDirIterator it(dir, QDir::Files, QDirIterator::Subdirectories);
    while (it.hasNext())
        files << QDir(dir).relativeFilePath(it.next());
    files.sort();
    return files;
}

/// The files tests/data/README.md lists under "Files that must be rejected": its table's first column.
QStringList rejectedCorpusFiles()
{
    QFile f(QStringLiteral(KVLENS_TEST_DATA_DIR "/README.md"));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QString text = QString::fromUtf8(f.readAll());
    const qsizetype from = text.indexOf(QLatin1String("## Files that must be rejected"));
    if (from < 0)
        return {};
    QStringList files;
    static const QRegularExpression row(QStringLiteral("^\\| `([^`]+\\.(?:npy|npz|safetensors))` \\|"),
                                        QRegularExpression::MultilineOption);
    for (auto it = row.globalMatch(text.mid(from)); it.hasNext();)
        files << it.next().captured(1);
    return files;
}

} // namespace

class TestImportBatch : public QObject {
    Q_OBJECT
private slots:
    void shippedExampleWritesTheSameFilesAsASyntheticRun()
    {
        QTemporaryDir dir;
        const QString imported = dir.filePath(QStringLiteral("imported"));
        const QString synthetic = dir.filePath(QStringLiteral("synthetic"));
        const Run a = runKvlens({QStringLiteral("--batch"), QStringLiteral(KVLENS_SOURCE_DIR "/resources/examples/imported.json"),
                                 QStringLiteral("--out"), imported, QStringLiteral("--quiet")});
        QVERIFY2(a.exitCode == 0, a.err.constData());
        QVERIFY2(a.out.contains("regime imported, d = 64, N = 192, Q = 64"), a.out.constData());
        QVERIFY2(a.out.contains("kv_example.safetensors: K 'k' [1, 4, 256, 64] F16, slice [0, 1]"), a.out.constData());

        // The same experiment on drawn data.
        const QString spec = writeFile(dir.filePath(QStringLiteral("synthetic.json")), R"({"kvlens_spec": 1,
            "regime": {"name": "gaussian"}, "d": 64, "tokens": 192, "queries": 64, "schemes": ["KV", "KQV", "QKQV"],
            "budgets": [2, 3, 4], "seeds": {"first": 1, "count": 4}, "rng": "mt19937_64", "backend": "cpu"})");
        const Run b = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), synthetic, QStringLiteral("--quiet")});
        QVERIFY2(b.exitCode == 0, b.err.constData());

        const QStringList files = fileSet(imported);
        QVERIFY2(files.size() > 20, qPrintable(files.join(QLatin1Char(' '))));
        QVERIFY(files.contains(QStringLiteral("summary.csv")) && files.contains(QStringLiteral("spec.json")));
        QCOMPARE(files, fileSet(synthetic));

        // The written spec names the example by absolute path, so it reruns from anywhere with the same result.
        QFile written(imported + QStringLiteral("/spec.json"));
        QVERIFY(written.open(QIODevice::ReadOnly));
        const QByteArray json = written.readAll();
        QVERIFY2(json.contains(KVLENS_SOURCE_DIR "/resources/examples/kv_example.safetensors"), json.constData());
        const QString again = dir.filePath(QStringLiteral("again"));
        QCOMPARE(runKvlens({QStringLiteral("--batch"), imported + QStringLiteral("/spec.json"), QStringLiteral("--out"),
                            again, QStringLiteral("--quiet"), QStringLiteral("--no-figures")})
                     .exitCode,
                 0);
        QFile s1(imported + QStringLiteral("/summary.csv")), s2(again + QStringLiteral("/summary.csv"));
        QVERIFY(s1.open(QIODevice::ReadOnly) && s2.open(QIODevice::ReadOnly));
        QCOMPARE(s1.readAll(), s2.readAll()); // summary.csv holds no timings
    }

    void openclAbsentFallsBackToTheCpu()
    {
        // OCL_ICD_VENDORS pointing nowhere: the ICD loader finds no platform at all.
        const QStringList noOpenCl = {QStringLiteral("OCL_ICD_VENDORS=/nonexistent-kvlens-vendors"),
                                      QStringLiteral("QT_QPA_PLATFORM=offscreen")};
        const QString example = QStringLiteral(KVLENS_SOURCE_DIR "/resources/examples/imported.json");
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("batch"));
        const Run batch = runKvlens({QStringLiteral("--batch"), example, QStringLiteral("--out"), out, QStringLiteral("--quiet"),
                                     QStringLiteral("--no-figures"), QStringLiteral("--backend"), QStringLiteral("opencl")},
                                    noOpenCl);
        QVERIFY2(batch.exitCode == 0, batch.err.constData());
        QVERIFY2(batch.err.startsWith("kvlens: OpenCL unavailable, running on the CPU backend: "), batch.err.constData());
        QCOMPARE(batch.err.count('\n'), 1);
        QFile spec(out + QStringLiteral("/spec.json"));
        QVERIFY(spec.open(QIODevice::ReadOnly));
        const QByteArray json = spec.readAll();
        QVERIFY2(json.contains("\"backend\": \"cpu (fallback: "), json.constData());

        // The window does the same: it runs, says so on stderr, and exits 0 after its screenshot.
        const QString png = dir.filePath(QStringLiteral("window.png"));
        const Run window = runKvlens({QStringLiteral("--spec"), example, QStringLiteral("--backend"), QStringLiteral("opencl"),
                                      QStringLiteral("--screenshot"), png},
                                     noOpenCl);
        QVERIFY2(window.exitCode == 0, window.err.constData());
        QVERIFY2(window.err.contains("kvlens: OpenCL unavailable, running on the CPU backend: "), window.err.constData());
        QVERIFY(QFileInfo(png).size() > 10000);
    }

    void malformedCorpusFilesAreRefusedInOneLine_data()
    {
        QTest::addColumn<QString>("file");
        const QStringList files = rejectedCorpusFiles();
        QVERIFY2(files.size() >= 30, "the corpus README's rejected-files table was not found or is short");
        for (const QString& f : files)
            QTest::newRow(qPrintable(f)) << f;
    }
    void malformedCorpusFilesAreRefusedInOneLine()
    {
        QFETCH(QString, file);
        QTemporaryDir dir;
        const QString path = QStringLiteral(KVLENS_TEST_DATA_DIR "/") + file;
        QVERIFY(QFile::exists(path));
        // The bad file holds every tensor; a valid-looking spec points at it.
        const QByteArray json = "{\"regime\": {\"name\": \"imported\", \"file\": \"" + path.toUtf8()
                                + "\", \"k\": \"a\", \"v\": \"a\", \"q\": \"a\"}, \"d\": 4, \"tokens\": 8, "
                                  "\"queries\": 1, \"metrics\": {\"top_k\": 1}, \"schemes\": [\"KV\"], \"budgets\": [2], \"seeds\": {\"count\": 1}}";
        const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), json);
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet")});
        QVERIFY2(r.exitCode != 0, r.out.constData());
        QVERIFY2(r.err.startsWith("kvlens: "), r.err.constData());
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.contains(file.toUtf8()), r.err.constData()); // the file is named
        QVERIFY2(r.err.contains("regime.file"), r.err.constData());  // and the spec field that led to it
        QVERIFY(r.out.isEmpty());
        QVERIFY(!QDir(out).exists());
    }
};

QTEST_GUILESS_MAIN(TestImportBatch)
#include "tst_import_batch.moc"
