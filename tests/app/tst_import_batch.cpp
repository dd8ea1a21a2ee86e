// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens --batch` on imported tensors: the shipped example writes what a synthetic run writes; every
// malformed file of the corpus is refused in one line, writing nothing.
#include <QDir>
#include <QDirIterator>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "common/kvlens_process.h"

#include <csignal>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;
using kvlens::test::waitStopped;

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
/// The rows of the corpus README's section `heading` (up to the next "## "): file name and its last
/// column (what the error must contain).
QList<QPair<QString, QString>> corpusRows(const QString& heading)
{
    QFile f(QStringLiteral(KVLENS_TEST_DATA_DIR "/README.md"));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QString text = QString::fromUtf8(f.readAll());
    const qsizetype from = text.indexOf(heading);
    if (from < 0)
        return {};
    const qsizetype to = text.indexOf(QLatin1String("\n## "), from + 1);
    QList<QPair<QString, QString>> rows;
    static const QRegularExpression row(
        QStringLiteral("^\\| `([^`]+\\.(?:npy|npz|safetensors))` \\|.*\\| `?([^`|]*)`? \\|$"),
        QRegularExpression::MultilineOption);
    for (auto it = row.globalMatch(text.mid(from, to < 0 ? -1 : to - from)); it.hasNext();) {
        const auto m = it.next();
        rows.append({m.captured(1), m.captured(2).trimmed()});
    }
    return rows;
}

QStringList rejectedCorpusFiles()
{
    QStringList files;
    for (const auto& [file, mention] : corpusRows(QStringLiteral("## Files that must be rejected")))
        files << file;
    return files;
}


/// A .npy (version 1.0, little-endian float32, C order) of `shape` holding `values`.
QByteArray npyFile(const QList<int>& shape, const QList<float>& values)
{
    QByteArray dims;
    for (int d : shape)
        dims += QByteArray::number(d) + ", ";
    QByteArray header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    while ((10 + header.size() + 1) % 64 != 0)
        header += ' ';
    header += '\n';
    QByteArray out("\x93NUMPY\x01\x00", 8);
    out += char(header.size() & 0xff);
    out += char(header.size() >> 8);
    out += header;
    out += QByteArray(reinterpret_cast<const char*>(values.data()), values.size() * int(sizeof(float)));
    return out;
}

QByteArray readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

/// The shipped example copied into `dir` (tensors and a spec naming them relatively).
QString copyExample(const QTemporaryDir& dir)
{
    QFile::copy(QStringLiteral(KVLENS_SOURCE_DIR "/resources/examples/kv_example.safetensors"),
                dir.filePath(QStringLiteral("kv_example.safetensors")));
    QFile::setPermissions(dir.filePath(QStringLiteral("kv_example.safetensors")),
                          QFile::ReadOwner | QFile::WriteOwner);
    QByteArray spec = readAll(QStringLiteral(KVLENS_SOURCE_DIR "/resources/examples/imported.json"));
    return writeFile(dir.filePath(QStringLiteral("imported.json")), spec);
}

/// Rewrites the example's tensors with other (finite) values, same names and shapes: every 64th
/// F16 payload value becomes 1.0. Written to a new file and renamed over, as a user's re-export would.
void changeExample(const QTemporaryDir& dir)
{
    const QString path = dir.filePath(QStringLiteral("kv_example.safetensors"));
    QByteArray bytes = readAll(path);
    quint64 headerLength = 0;
    for (int i = 7; i >= 0; --i)
        headerLength = (headerLength << 8) | static_cast<unsigned char>(bytes[i]);
    for (qsizetype at = 8 + static_cast<qsizetype>(headerLength); at + 1 < bytes.size(); at += 128) {
        bytes[at] = 0x00;
        bytes[at + 1] = 0x3c; // F16 1.0
    }
    writeFile(path + QStringLiteral(".new"), bytes);
    QFile::remove(path);
    QFile::rename(path + QStringLiteral(".new"), path);
}

QStringList batch(const QString& spec, const QString& out, const QStringList& more = {})
{
    return QStringList{QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet"),
                       QStringLiteral("--no-figures")}
           + more;
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
        // The same files, less the teaching figure: it draws its own data from the run's law, and
        // a run on a file has none (the run says so).
        QStringList drawn = fileSet(synthetic);
        QCOMPARE(drawn.filter(QStringLiteral("figures/teaching.")).size(), 5);
        drawn.removeIf([](const QString& f) { return f.startsWith(QStringLiteral("figures/teaching.")); });
        QCOMPARE(files, drawn);
        QVERIFY2(a.out.contains("teaching figure not drawn: regime: "), a.out.constData());
        QVERIFY2(b.out.contains("teaching figure: KV against KQV at n = 2, seed 1"), b.out.constData());

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

    void theShippedModelsMapIsWrittenWithTheAdvice()
    {
        // The tiny trained model, every (layer, head) cell: the map, the sensitivity, the front,
        // the allocation and the Model map figure.
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("map"));
        const Run run = runKvlens({QStringLiteral("--batch"),
                                   QStringLiteral(KVLENS_SOURCE_DIR "/resources/examples/tiny_lm_map.json"),
                                   QStringLiteral("--out"), out, QStringLiteral("--quiet")});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        for (const char* name : {"model_map.csv", "kv_sensitivity.csv", "pareto.csv", "allocation.json",
                                 "allocation_check.csv", "figures/model_map.pdf", "figures/model_map.csv",
                                 "figures/pareto_front.pdf", "figures/pareto_front.csv"})
            QVERIFY2(QFileInfo::exists(out + QLatin1Char('/') + QLatin1String(name)), name);
        QFile map(out + QStringLiteral("/model_map.csv"));
        QVERIFY(map.open(QIODevice::ReadOnly));
        const QList<QByteArray> rows = map.readAll().trimmed().split('\n');
        QCOMPARE(rows.size(), 1 + 32 * 5 * 3 * 8); // cells (4 layers x 8 query heads) x schemes x budgets x metrics
        QVERIFY(rows.front() == "layer,head,scheme,budget,metric,value,ci_low,ci_high");
        QFile allocation(out + QStringLiteral("/allocation.json"));
        QVERIFY(allocation.open(QIODevice::ReadOnly));
        const QByteArray json = allocation.readAll();
        QVERIFY2(json.contains("\"format\": \"kvlens-allocation\"") && json.contains("\"layer\": 3"), json.constData());
        // The front figure: the predicted front and point, and every rerun allocation as measured.
        QFile front(out + QStringLiteral("/figures/pareto_front.csv"));
        QVERIFY(front.open(QIODevice::ReadOnly));
        const QByteArray frontCsv = front.readAll();
        for (const char* series : {"predicted front", "predicted advice", ",advice,", "TQ-KV n = 3", "KQV n = 3"})
            QVERIFY2(frontCsv.contains(series), series);
        QVERIFY2(run.out.contains("K-vs-V sensitivity") && run.out.contains("advisor at 3 bits/coordinate"),
                 run.out.constData());
        QVERIFY2(run.out.contains("the advice rerun as its own experiment") && run.out.contains("TQ-KV n = 3"),
                 run.out.constData());
        QVERIFY2(run.out.contains("model dump: layer 0, query head 0") && run.out.contains("causal"), run.out.constData());
    }

    void theSpecsAdvisorTargetsEachGetTheirAllocation()
    {
        // The shipped model's map with the advisor's targets from the spec (issue 31): 2.5 and 3.5
        // bits, each advised, written, exported for an inference stack and rerun as a check.
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("targets"));
        const QString spec = writeFile(dir.filePath(QStringLiteral("targets.json")), R"({"kvlens_spec": 1,
            "name": "tiny LM: two advisor targets",
            "regime": {"name": "model", "file": ")" KVLENS_SOURCE_DIR R"(/resources/examples/tiny_lm_kv.safetensors",
                       "layers": "all", "heads": "all", "token_start": 0, "query_start": 448, "causal": "on"},
            "d": 32, "tokens": 512, "queries": 64, "schemes": ["K-only", "V-only", "TQ-KV", "KQV"],
            "budgets": [2, 3, 4], "seeds": {"first": 1, "count": 2},
            "comparisons": {"bootstrap": 200, "permutations": 99},
            "advisor": {"bits": [2.5, 3.5], "objective": "mean"}})");
        const Run run = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet")});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        auto read = [&](const QString& name) {
            QFile f(out + QLatin1Char('/') + name);
            return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
        };
        // allocation.json is the first target's, byte for byte.
        QVERIFY(!read(QStringLiteral("allocation_2.5.json")).isEmpty());
        QCOMPARE(read(QStringLiteral("allocation.json")), read(QStringLiteral("allocation_2.5.json")));
        QCOMPARE(read(QStringLiteral("allocation_layers.csv")), read(QStringLiteral("allocation_layers_2.5.csv")));
        QCOMPARE(read(QStringLiteral("allocation_check.csv")), read(QStringLiteral("allocation_check_2.5.csv")));
        double bits[2] = {0, 0};
        for (const double target : {2.5, 3.5}) {
            const QString tag = QString::number(target);
            const QJsonObject json = QJsonDocument::fromJson(read(QStringLiteral("allocation_%1.json").arg(tag))).object();
            QCOMPARE(json.value(QStringLiteral("target_bits")).toDouble(), target);
            QCOMPARE(json.value(QStringLiteral("objective")).toString(), QStringLiteral("mean"));
            const double average = json.value(QStringLiteral("bits")).toDouble();
            QVERIFY2(average <= target + 1e-9 && average > 2.0, qPrintable(QString::number(average)));
            bits[target == 2.5 ? 0 : 1] = average;
            // TurboQuant widths are no llama.cpp type: no -ctk/-ctv, and the reason.
            QVERIFY(json.value(QStringLiteral("llama_cpp")).toObject().value(QStringLiteral("note")).toString()
                        .startsWith(QStringLiteral("no -ctk/-ctv: TurboQuant's widths")));
            // The CSV's rows are the JSON's layers, field for field; the layers' bits average to "bits".
            const QJsonArray layers = json.value(QStringLiteral("layers")).toArray();
            QCOMPARE(layers.size(), 4);
            const QList<QByteArray> rows = read(QStringLiteral("allocation_layers_%1.csv").arg(tag)).trimmed().split('\n');
            QCOMPARE(rows.size(), 1 + layers.size());
            QCOMPARE(rows.front(), QByteArray("layer,head,k_type,v_type,k_bits,v_bits,bits"));
            double sum = 0.0;
            for (qsizetype i = 0; i < layers.size(); ++i) {
                const QJsonObject e = layers[i].toObject();
                const QList<QByteArray> cells = rows[i + 1].split(',');
                QCOMPARE(cells.size(), 7);
                QCOMPARE(cells[0].toInt(), e.value(QStringLiteral("layer")).toInt());
                QVERIFY(cells[1].isEmpty() && cells[2].isEmpty() && cells[3].isEmpty()); // every head; no types
                QCOMPARE(cells[4].toInt(), e.value(QStringLiteral("k_bits")).toInt());
                QCOMPARE(cells[5].toInt(), e.value(QStringLiteral("v_bits")).toInt());
                QCOMPARE(cells[6].toDouble(), e.value(QStringLiteral("bits")).toDouble());
                QVERIFY(e.value(QStringLiteral("k_bits")).toInt() >= 2 && e.value(QStringLiteral("k_bits")).toInt() <= 4);
                sum += cells[6].toDouble();
            }
            QVERIFY2(std::abs(sum / 4.0 - average) < 1e-12, qPrintable(QStringLiteral("%1 vs %2").arg(sum / 4).arg(average)));
            // Each target's check: the advice measured beside the uniform schemes at the target's whole bits.
            const QByteArray check = read(QStringLiteral("allocation_check_%1.csv").arg(tag));
            QVERIFY2(check.contains("\nadvice,") && check.contains(target == 2.5 ? "TQ-KV n = 2" : "TQ-KV n = 3"),
                     check.constData());
            QVERIFY2(run.out.contains(QStringLiteral("advisor at %1 bits/coordinate").arg(tag).toUtf8()),
                     run.out.constData());
        }
        QVERIFY2(bits[1] > bits[0], "more bits allowed, more bits used");
        QCOMPARE(run.out.count("the advice rerun as its own experiment"), 2);
        QCOMPARE(run.out.count("llama.cpp: no -ctk/-ctv"), 2);
        // The figure: every target's advice, predicted and measured, one series per kind.
        const QByteArray figure = read(QStringLiteral("figures/pareto_front.csv"));
        QVERIFY2(figure.count(",advice,") == 2 && figure.count("predicted advice") == 2, figure.constData());
        QVERIFY2(figure.contains(",TQ-KV,") && figure.contains(",best uniform split,"), figure.constData());
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

    void replacingTheTensorFileMidRunDoesNotReachTheRun()
    {
        // The tensors are read once, before the first trial; a file replaced while the trials run
        // (here: while the process is stopped right after reading) cannot give some seeds other data.
        QTemporaryDir dir;
        const QString spec = copyExample(dir);
        const QString reference = dir.filePath(QStringLiteral("reference"));
        QCOMPARE(runKvlens(batch(spec, reference)).exitCode, 0);

        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("KVLENS_FAULT"), QStringLiteral("stop:inputs-read"));
        p.setProcessEnvironment(env);
        const QString during = dir.filePath(QStringLiteral("during"));
        p.start(QStringLiteral(KVLENS_EXE), batch(spec, during));
        QVERIFY(p.waitForStarted() && waitStopped(p.processId()));
        changeExample(dir);
        ::kill(static_cast<pid_t>(p.processId()), SIGCONT);
        QVERIFY(p.waitForFinished(120000));
        QCOMPARE(p.exitCode(), 0);
        QCOMPARE(readAll(during + QStringLiteral("/summary.csv")), readAll(reference + QStringLiteral("/summary.csv")));

        // The change is real: a run started now sees other numbers.
        const QString after = dir.filePath(QStringLiteral("after"));
        QCOMPARE(runKvlens(batch(spec, after)).exitCode, 0);
        QVERIFY(readAll(after + QStringLiteral("/summary.csv")) != readAll(reference + QStringLiteral("/summary.csv")));
    }

    void shardsOfChangedTensorsDoNotMergeAndMergeNeedsNoTensorFile()
    {
        QTemporaryDir dir;
        const QString spec = copyExample(dir);
        const QString whole = dir.filePath(QStringLiteral("whole"));
        const QString s0 = dir.filePath(QStringLiteral("s0")), s1 = dir.filePath(QStringLiteral("s1"));
        QCOMPARE(runKvlens(batch(spec, whole)).exitCode, 0);
        QCOMPARE(runKvlens(batch(spec, s0, {QStringLiteral("--shard"), QStringLiteral("0/2")})).exitCode, 0);
        QCOMPARE(runKvlens(batch(spec, s1, {QStringLiteral("--shard"), QStringLiteral("1/2")})).exitCode, 0);
        const QByteArray manifest = readAll(s0 + QStringLiteral("/manifest.json"));
        QVERIFY2(manifest.contains("\"data_hash\"") && !manifest.contains("\"data_hash\": \"0000000000000000\""),
                 manifest.constData());

        // The merging machine need not have the tensors: trials.bin holds every result.
        QVERIFY(QFile::rename(dir.filePath(QStringLiteral("kv_example.safetensors")),
                              dir.filePath(QStringLiteral("elsewhere.safetensors"))));
        const QString merged = dir.filePath(QStringLiteral("merged"));
        const Run m = runKvlens({QStringLiteral("merge"), s0, s1, QStringLiteral("--out"), merged, QStringLiteral("--no-figures")});
        QVERIFY2(m.exitCode == 0, m.err.constData());
        QCOMPARE(readAll(merged + QStringLiteral("/summary.csv")), readAll(whole + QStringLiteral("/summary.csv")));

        // Shard 1 again, after the tensors changed: the set no longer fits together.
        QVERIFY(QFile::rename(dir.filePath(QStringLiteral("elsewhere.safetensors")),
                              dir.filePath(QStringLiteral("kv_example.safetensors"))));
        changeExample(dir);
        const QString s1b = dir.filePath(QStringLiteral("s1b"));
        QCOMPARE(runKvlens(batch(spec, s1b, {QStringLiteral("--shard"), QStringLiteral("1/2")})).exitCode, 0);
        const QString bad = dir.filePath(QStringLiteral("bad"));
        const Run r = runKvlens({QStringLiteral("merge"), s0, s1b, QStringLiteral("--out"), bad, QStringLiteral("--no-figures")});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("the tensor file changed between the shards' runs"), r.err.constData());
        QVERIFY(!QDir(bad).exists());
    }

    void nonFiniteAndOverflowingTensorsAreRefusedAsInput_data()
    {
        QTest::addColumn<float>("value");
        QTest::addColumn<QByteArray>("mention");
        QTest::newRow("NaN") << std::numeric_limits<float>::quiet_NaN() << QByteArray("non-finite value");
        QTest::newRow("Inf") << std::numeric_limits<float>::infinity() << QByteArray("non-finite value");
        // Finite, but |k|^2 = 8e74 overflows float32: scores would be NaN, reported as KL 0.
        QTest::newRow("1e37") << 1e37f << QByteArray("squared norm overflows float32");
    }
    void nonFiniteAndOverflowingTensorsAreRefusedAsInput()
    {
        QFETCH(float, value);
        QFETCH(QByteArray, mention);
        QTemporaryDir dir;
        QList<float> values;
        for (int i = 0; i < 2 * 16 * 8; ++i)
            values << std::sin(0.37f * static_cast<float>(i));
        values[5 * 8 + 3] = value; // head 0, token 5, channel 3
        writeFile(dir.filePath(QStringLiteral("k.npy")), npyFile({2, 16, 8}, values));
        QList<float> clean = values;
        clean[5 * 8 + 3] = 0.5f;
        writeFile(dir.filePath(QStringLiteral("v.npy")), npyFile({2, 16, 8}, clean));
        writeFile(dir.filePath(QStringLiteral("q.npy")), npyFile({2, 16, 8}, clean));
        const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), R"({"regime": {"name": "imported",
            "k": "k.npy", "v": "v.npy", "q": "q.npy", "query_start": 12}, "d": 8, "tokens": 12, "queries": 4,
            "metrics": {"top_k": 2}, "schemes": ["KV"], "budgets": [2], "seeds": {"count": 1}})");
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens(batch(spec, out));
        QCOMPARE(r.exitCode, 2); // refused input, like a bad spec
        QVERIFY2(r.err.startsWith("kvlens: " + spec.toUtf8() + ": regime.k: "), r.err.constData());
        QVERIFY2(r.err.contains(mention), r.err.constData());
        QVERIFY2(r.err.contains("[0, 5"), r.err.constData()); // the first bad row is named
        QVERIFY(!QDir(out).exists());
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

    void hostileModelDumpsAreRefusedInOneLine_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("mention");
        const auto rows = corpusRows(QStringLiteral("## Hostile model dumps"));
        QVERIFY2(rows.size() >= 5, "the corpus README's hostile dump table was not found or is short");
        for (const auto& [file, mention] : rows)
            if (!mention.startsWith(QStringLiteral("—"))) // "— (loads)": valid files
                QTest::newRow(qPrintable(file)) << file << mention;
    }
    void hostileModelDumpsAreRefusedInOneLine()
    {
        // Each through the model regime, every cell of it, as a user's map spec would.
        QFETCH(QString, file);
        QFETCH(QString, mention);
        QTemporaryDir dir;
        const QString path = QStringLiteral(KVLENS_TEST_DATA_DIR "/") + file;
        const QByteArray json = "{\"regime\": {\"name\": \"model\", \"file\": \"" + path.toUtf8()
                                + "\", \"layers\": \"all\", \"heads\": \"all\", \"causal\": \"off\"}, \"d\": 4, "
                                  "\"tokens\": 4, \"queries\": 4, \"metrics\": {\"top_k\": 1}, \"schemes\": [\"KV\"], "
                                  "\"budgets\": [2], \"seeds\": {\"count\": 1}}";
        const QString spec = writeFile(dir.filePath(QStringLiteral("spec.json")), json);
        const QString out = dir.filePath(QStringLiteral("out"));
        const Run r = runKvlens({QStringLiteral("--batch"), spec, QStringLiteral("--out"), out, QStringLiteral("--quiet")});
        QCOMPARE(r.exitCode, 2);
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY2(r.err.contains(file.toUtf8()), r.err.constData());
        QVERIFY2(r.err.contains(mention.toUtf8()), r.err.constData());
        QVERIFY(!QDir(out).exists());
    }
};

QTEST_GUILESS_MAIN(TestImportBatch)
#include "tst_import_batch.moc"
