// SPDX-License-Identifier: GPL-3.0-or-later
// The imported regime: slices of the K/V/Q example in tests/data, every refusal by its field, specs with relative paths.
#include "core/experiment/backend.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/regimes/imported.h"
#include "core/experiment/trial_cache.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace kvlens;

namespace {

std::string dataPath(const std::string& file)
{
    return std::string(KVLENS_TEST_DATA_DIR) + "/" + file;
}

/// The K/V/Q example's values (scripts/make_test_corpus.py): element i in C order of k, v, q [2, 64, 32].
float exampleK(std::int64_t i) { return static_cast<float>((i % 97 - 48) * 0.125); }
float exampleV(std::int64_t i) { return static_cast<float>(((i * 7) % 89 - 44) * 0.0625); }
float exampleQ(std::int64_t i) { return static_cast<float>(((i * 5) % 83 - 41) * 0.25); }
constexpr int kTokens = 64, kD = 32;

const Regime& regime()
{
    return *findRegime("imported");
}

Result<Dataset> load(RegimeParams params, DataShape shape)
{
    auto normalized = regime().normalize(params, shape);
    if (!normalized)
        return normalized.error();
    return regime().generate(*normalized, shape, EngineKind::Pcg64, 1);
}

/// Field of the error of normalize(), or "(accepted)".
std::string refusedField(RegimeParams params, DataShape shape, std::string* message = nullptr)
{
    auto normalized = regime().normalize(params, shape);
    if (normalized) {
        auto data = regime().generate(*normalized, shape, EngineKind::Pcg64, 1);
        if (data)
            return "(accepted)";
        if (message)
            *message = data.error().message;
        return data.error().field;
    }
    if (message)
        *message = normalized.error().message;
    return normalized.error().field;
}

/// A version 1.0 little-endian float32 .npy file of `shape` holding `values`.
void writeNpy(const std::string& path, const std::string& shape, const std::vector<float>& values)
{
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64 != 0)
        header += ' ';
    header += '\n';
    std::ofstream out(path, std::ios::binary);
    const unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    out.write(reinterpret_cast<const char*>(magic), sizeof magic);
    const unsigned char length[] = {static_cast<unsigned char>(header.size() & 0xff),
                                    static_cast<unsigned char>(header.size() >> 8)};
    out.write(reinterpret_cast<const char*>(length), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

RegimeParams exampleParams(const std::string& file = "kv_example.safetensors")
{
    return {{"file", dataPath(file)}, {"head", 1.0}, {"token_start", 8.0}, {"query_start", 4.0}};
}

} // namespace

class TestImported : public QObject {
    Q_OBJECT

private slots:
    void init() { clearImportCache(); }

    void slicesTheChosenHeadAndRanges()
    {
        const DataShape shape{kD, 40, 10, 0};
        auto data = load(exampleParams(), shape);
        QVERIFY2(data.ok(), data.ok() ? "" : data.error().text().c_str());
        QCOMPARE(data->keys.rows(), 40);
        QCOMPARE(data->keys.cols(), kD);
        QCOMPARE(data->queries.rows(), 10);
        // Head 1, token t of the slice is row 8 + t of the tensor: C index (1 * 64 + 8 + t) * 32 + j.
        for (int t : {0, 17, 39})
            for (int j : {0, 5, 31}) {
                const std::int64_t i = (1 * kTokens + 8 + t) * kD + j;
                QCOMPARE(data->keys(t, j), exampleK(i));
                QCOMPARE(data->values(t, j), exampleV(i));
            }
        for (int t : {0, 9})
            for (int j : {0, 13, 31})
                QCOMPARE(data->queries(t, j), exampleQ((1 * kTokens + 4 + t) * kD + j));
        QVERIFY(data->calibrationKeys.rows() == 0);
        QVERIFY(data->note.find("kv_example.safetensors") != std::string::npos);
        QVERIFY(data->note.find("tokens 8..47") != std::string::npos);
    }

    void npzAndSafetensorsGiveTheSameData()
    {
        const DataShape shape{kD, 56, 60, 0};
        auto a = load(exampleParams("kv_example.safetensors"), shape);
        auto b = load(exampleParams("kv_example.npz"), shape);
        QVERIFY(a.ok() && b.ok());
        QVERIFY(a->keys == b->keys);
        QVERIFY(a->values == b->values);
        QVERIFY(a->queries == b->queries);
        // Head 0 differs from head 1 (the slice is not ignored).
        RegimeParams head0 = exampleParams();
        head0["head"] = 0.0;
        auto c = load(head0, shape);
        QVERIFY(c.ok());
        QVERIFY(c->keys != a->keys);
        QCOMPARE(c->keys(0, 0), exampleK(8 * kD));
    }

    void separateFilesPerTensor()
    {
        // k, v and q may each name a file of their own (a .npy holds one array).
        QTemporaryDir dir;
        std::vector<float> k(2 * kTokens * kD), v(k.size()), q(k.size());
        for (std::size_t i = 0; i < k.size(); ++i) {
            k[i] = exampleK(static_cast<std::int64_t>(i));
            v[i] = exampleV(static_cast<std::int64_t>(i));
            q[i] = exampleQ(static_cast<std::int64_t>(i));
        }
        const std::string base = dir.path().toStdString();
        writeNpy(base + "/k.npy", "(2, 64, 32)", k);
        writeNpy(base + "/v.npy", "(2, 64, 32)", v);
        writeNpy(base + "/q.npy", "(2, 64, 32)", q);
        RegimeParams params = {{"k", base + "/k.npy"}, {"v", base + "/v.npy"}, {"q", base + "/q.npy"}, {"head", 1.0},
                               {"token_start", 8.0}, {"query_start", 4.0}};
        const DataShape shape{kD, 40, 10, 0};
        auto fromNpy = load(params, shape);
        auto fromSt = load(exampleParams(), shape);
        QVERIFY2(fromNpy.ok(), fromNpy.ok() ? "" : fromNpy.error().text().c_str());
        QVERIFY(fromNpy->keys == fromSt->keys && fromNpy->values == fromSt->values && fromNpy->queries == fromSt->queries);
    }

    void calibrationRowsAreTheUnscoredOnes()
    {
        // Scored tokens 8..47: calibration takes 48..63 first, then 0, 1, ...
        const DataShape shape{kD, 40, 10, 20};
        auto data = load(exampleParams(), shape);
        QVERIFY2(data.ok(), data.ok() ? "" : data.error().text().c_str());
        QCOMPARE(data->calibrationKeys.rows(), 20);
        QCOMPARE(data->calibrationKeys(0, 3), exampleK((kTokens + 48) * kD + 3));
        QCOMPARE(data->calibrationKeys(15, 0), exampleK((kTokens + 63) * kD));
        QCOMPARE(data->calibrationKeys(16, 0), exampleK((kTokens + 0) * kD));
        QCOMPARE(data->calibrationValues(19, 1), exampleV((kTokens + 3) * kD + 1));
        // Queries 4..13 scored: calibration queries 14..33.
        QCOMPARE(data->calibrationQueries(0, 0), exampleQ((kTokens + 14) * kD));
        // Calibration needs two unscored rows.
        QCOMPARE(refusedField(exampleParams(), DataShape{kD, 56, 10, 8}), std::string("(accepted)"));
        RegimeParams all = exampleParams();
        all["token_start"] = 0.0;
        QCOMPARE(refusedField(all, DataShape{kD, 63, 10, 8}), std::string("tokens"));
    }

    void refusalsNameTheirField()
    {
        const DataShape ok{kD, 40, 10, 0};
        std::string message;
        QCOMPARE(refusedField(exampleParams(), DataShape{64, 40, 10, 0}, &message), std::string("d"));
        QVERIFY2(message.find("32") != std::string::npos, message.c_str());

        RegimeParams p = exampleParams();
        p["k"] = std::string("keys");
        QCOMPARE(refusedField(p, ok, &message), std::string("regime.k"));
        QVERIFY2(message.find("no tensor 'keys'") != std::string::npos, message.c_str());
        QVERIFY2(message.find("it has: 'k', 'v', 'q'") != std::string::npos, message.c_str());

        p = exampleParams();
        p["head"] = 2.0;
        QCOMPARE(refusedField(p, ok, &message), std::string("regime.head"));
        QVERIFY2(message.find("[0, 1]") != std::string::npos, message.c_str());

        p = exampleParams();
        p["q_head"] = 5.0;
        QCOMPARE(refusedField(p, ok), std::string("regime.q_head"));

        p = exampleParams();
        p["batch"] = 1.0; // rank 3: no batch axis
        QCOMPARE(refusedField(p, ok), std::string("regime.batch"));

        QCOMPARE(refusedField(exampleParams(), DataShape{kD, 57, 10, 0}, &message), std::string("tokens"));
        QVERIFY2(message.find("[1, 56]") != std::string::npos, message.c_str());
        QCOMPARE(refusedField(exampleParams(), DataShape{kD, 40, 61, 0}), std::string("queries"));

        p = exampleParams();
        p["token_start"] = 64.0;
        QCOMPARE(refusedField(p, ok), std::string("regime.token_start"));

        QCOMPARE(refusedField({}, ok), std::string("regime.file"));
        QCOMPARE(refusedField({{"file", dataPath("no_such_file.safetensors")}}, ok, &message), std::string("regime.file"));
        QVERIFY2(message.find("no_such_file.safetensors: no such file") != std::string::npos, message.c_str());
        // A device or a folder is refused before it is opened (reading /dev/stdin would block).
        QCOMPARE(refusedField({{"file", std::string("/dev/null.npy")}}, ok), std::string("regime.file"));
        QCOMPARE(refusedField({{"k", std::string("/dev/stdin")}, {"file", dataPath("kv_example.safetensors")}}, ok),
                 std::string("regime.k")); // not a tensor file name: names a tensor, which the file lacks
        QCOMPARE(refusedField({{"file", std::string("/dev/zero")}}, ok, &message), std::string("regime.file"));
        QVERIFY2(message.find("/dev/zero: not a regular file") != std::string::npos, message.c_str());
        QCOMPARE(refusedField({{"file", std::string(KVLENS_TEST_DATA_DIR)}}, ok, &message), std::string("regime.file"));
        QVERIFY2(message.find("not a regular file") != std::string::npos, message.c_str());
        // A malformed file is refused by the reader's rule, with the file named.
        QCOMPARE(refusedField({{"file", dataPath("st_offsets_overlap.safetensors")}}, ok, &message), std::string("regime.file"));
        QVERIFY2(message.find("st_offsets_overlap") != std::string::npos, message.c_str());

        // Only the chosen head's slice is read and counted: in the shipped example ([1, 4, 256, 64]) one head is
        // 256 * 64 floats = 0.0625 MiB, the whole tensor 0.25 MiB.
        const DataShape example{64, 192, 64, 0};
        p = {{"file", std::string(KVLENS_TEST_DATA_DIR "/../../resources/examples/kv_example.safetensors")},
             {"head", 1.0}, {"query_start", 192.0}, {"max_mb", 0.05}};
        QCOMPARE(refusedField(p, example, &message), std::string("regime.max_mb"));
        QVERIFY2(message.find("needs 0.0625 MiB") != std::string::npos, message.c_str());
        p["max_mb"] = 0.1; // below the whole tensor's 0.25 MiB
        QCOMPARE(refusedField(p, example), std::string("(accepted)"));
        p = exampleParams();
        p["max_mb"] = 0.01;
        QCOMPARE(refusedField(p, ok), std::string("(accepted)"));
    }

    void nonFiniteValuesAreRefusedWithCountAndFirstIndex()
    {
        QTemporaryDir dir;
        const std::string path = dir.path().toStdString() + "/nan.npy";
        std::vector<float> values(1 * 8 * 4, 0.5f);
        values[3 * 4 + 2] = std::numeric_limits<float>::quiet_NaN();
        values[5 * 4 + 1] = std::numeric_limits<float>::infinity();
        writeNpy(path, "(1, 8, 4)", values);
        std::vector<float> clean(values.size(), 0.25f);
        writeNpy(dir.path().toStdString() + "/clean.npy", "(1, 8, 4)", clean);
        const std::string cleanPath = dir.path().toStdString() + "/clean.npy";
        RegimeParams p = {{"k", path}, {"v", cleanPath}, {"q", cleanPath}};
        std::string message;
        QCOMPARE(refusedField(p, DataShape{4, 6, 4, 0}, &message), std::string("regime.k"));
        QVERIFY2(message.find("2 non-finite values") != std::string::npos, message.c_str());
        QVERIFY2(message.find("[0, 3, 2]") != std::string::npos, message.c_str());
        // The whole head's rows are checked, whatever token range is scored; q is named as q.
        p = {{"k", cleanPath}, {"v", cleanPath}, {"q", path}};
        QCOMPARE(refusedField(p, DataShape{4, 6, 2, 0}, &message), std::string("regime.q"));
        QVERIFY2(message.find("nan.npy") != std::string::npos, message.c_str());
    }

    void specPathsAreRelativeToTheSpecFile()
    {
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        std::filesystem::copy_file(dataPath("kv_example.safetensors"), base + "/example.safetensors");
        {
            std::ofstream spec(base + "/spec.json");
            spec << R"({"kvlens_spec": 1, "regime": {"name": "imported", "file": "example.safetensors", "head": 1},
                       "d": 32, "tokens": 48, "queries": 16, "schemes": ["KV", "KQV"], "budgets": [3],
                       "seeds": {"first": 1, "count": 2}})";
        }
        auto spec = loadSpecFile(base + "/spec.json");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        const std::string file = paramText(spec->regimeParams, "file");
        QVERIFY2(std::filesystem::path(file).is_absolute(), file.c_str());
        QVERIFY(std::filesystem::equivalent(file, base + "/example.safetensors"));
        // The exported spec names the absolute file, so it reloads from anywhere.
        auto again = specFromJson(specToJson(*spec));
        QVERIFY(again.ok());
        QCOMPARE(paramText(again->regimeParams, "file"), file);

        // A relative path that exists nowhere is refused naming the field.
        auto missing = specFromJson(R"({"regime": {"name": "imported", "file": "nowhere.safetensors"}, "d": 32,
                                        "tokens": 16, "queries": 4})",
                                    base);
        QVERIFY(!missing.ok());
        QCOMPARE(missing.error().field, std::string("regime.file"));

        // End to end: the run scores the imported data, and every seed sees the same data.
        CpuBackend backend(1);
        auto run = runExperiment(*spec, backend);
        QVERIFY2(run.ok(), run.ok() ? "" : run.error().text().c_str());
        QCOMPARE(static_cast<int>(run->trials.size()), 4);
        QVERIFY(run->regimeNote.find("example.safetensors") != std::string::npos);
        for (const TrialResult& t : run->trials) {
            QCOMPARE(static_cast<int>(t.kl.size()), 16);
            for (float kl : t.kl)
                QVERIFY(std::isfinite(kl) && kl >= 0.0f);
        }
        // KV (no rotation, no randomness) quantizes identical data identically for both seeds.
        const TrialResult* kv1 = run->find(0, 0, 3, 0);
        const TrialResult* kv2 = run->find(0, 0, 3, 1);
        QVERIFY(kv1 && kv2);
        QCOMPARE(kv1->relMseK, kv2->relMseK);
        QVERIFY(kv1->relMseK > 0.0);
    }

    void aHeaderIsParsedOncePerFileNotPerTensorOrDraw()
    {
        // A header with a million metadata keys took 32 s when it was parsed for each of K, V and Q,
        // each normalization and each trial group. Counted, not timed: one parse for the whole run.
        clearImportCache();
        const long long before = importHeaderParses();
        auto spec = specFromJson(R"({"regime": {"name": "imported", "file": ")" + dataPath("kv_example.safetensors")
                                 + R"(", "head": 1, "query_start": 48}, "d": 32, "tokens": 48, "queries": 16,
                                 "metrics": {"top_k": 2}, "schemes": ["KV", "KQV"], "budgets": [2, 3],
                                 "seeds": {"count": 6}, "sweep": {"tokens": [32, 48]}})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        CpuBackend backend(2);
        auto run = runExperiment(*spec, backend);
        QVERIFY(run.ok());
        QCOMPARE(static_cast<int>(run->trials.size()), 2 * 2 * 2 * 6);
        QCOMPARE(importHeaderParses() - before, 1LL);
        QVERIFY(run->dataHash != 0);
        // A rewritten file (another modification time) is parsed again, and hashes alike when equal.
        QTemporaryDir dir;
        const std::string copy = dir.path().toStdString() + "/copy.safetensors";
        std::filesystem::copy_file(dataPath("kv_example.safetensors"), copy);
        ExperimentSpec other = *spec;
        other.regimeParams["file"] = copy;
        auto again = runExperiment(*normalizeSpec(other), backend);
        QVERIFY(again.ok());
        QCOMPARE(importHeaderParses() - before, 2LL);
        QCOMPARE(again->dataHash, run->dataHash); // the same bytes read
    }

    void aTrialCacheNeverServesAReplacedFilesTrials()
    {
        // Same path, same shape, other numbers: the cached trials belong to the old contents.
        QTemporaryDir dir;
        const std::string base = dir.path().toStdString();
        std::vector<float> k(2 * kTokens * kD), v(k.size()), q(k.size());
        auto write = [&](float shift) {
            for (std::size_t i = 0; i < k.size(); ++i) {
                k[i] = exampleK(static_cast<std::int64_t>(i)) + shift;
                v[i] = exampleV(static_cast<std::int64_t>(i));
                q[i] = exampleQ(static_cast<std::int64_t>(i));
            }
            for (const char* name : {"k", "v", "q"})
                writeNpy(base + "/" + name + ".npy", "(2, 64, 32)", name[0] == 'k' ? k : name[0] == 'v' ? v : q);
        };
        write(0.0f);
        auto spec = specFromJson(R"({"regime": {"name": "imported", "k": ")" + base + R"(/k.npy", "v": ")" + base
                                 + R"(/v.npy", "q": ")" + base + R"(/q.npy", "head": 1, "query_start": 48},
                                 "d": 32, "tokens": 48, "queries": 16, "schemes": ["KV", "KQV"], "budgets": [2, 3],
                                 "seeds": {"count": 2}})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        CpuBackend backend(2);
        TrialCache cache;
        auto first = runExperiment(*spec, backend, nullptr, {}, &cache);
        QVERIFY(first.ok());
        auto same = runExperiment(*spec, backend, nullptr, {}, &cache);
        QVERIFY(same.ok());
        QCOMPARE(same->reusedTrials, 8LL); // unchanged file: all from the cache
        write(0.5f);
        std::filesystem::last_write_time(base + "/k.npy",
                                         std::filesystem::last_write_time(base + "/k.npy") + std::chrono::seconds(2));
        auto replaced = runExperiment(*spec, backend, nullptr, {}, &cache);
        QVERIFY(replaced.ok());
        QCOMPARE(replaced->reusedTrials, 0LL);
        QVERIFY(replaced->dataHash != first->dataHash);
        QVERIFY(replaced->trials[0].relMseK != first->trials[0].relMseK || replaced->trials[0].kl != first->trials[0].kl);
    }
};

QTEST_GUILESS_MAIN(TestImported)
#include "tst_imported.moc"
