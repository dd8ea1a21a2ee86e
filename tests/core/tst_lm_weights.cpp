// SPDX-License-Identifier: GPL-3.0-or-later
// Loading Hugging Face safetensors weights: names, fused placement, Conv1D transposition, shards,
// and every refusal (missing, shape, dtype, NaN, memory, unsafe or missing shards) naming file and tensor.
#include "common/safetensors_writer.h"
#include "core/io/tensor_file.h"
#include "core/lm/weights.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

using namespace kvlens;
using namespace kvlens::lm;
using kvlens::test::StTensor;

namespace {

const char* kTinyConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 3, "vocab_size": 5,
  "max_position_embeddings": 16})";

/// The tensors of the tiny Llama (hidden 4, 2 heads of 2, 1 KV head, MLP 3, vocab 5), named as
/// Hugging Face names them; tensor k holds k + i / 1000 at flat index i, so placement is visible.
std::vector<StTensor> tinyTensors()
{
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>> specs = {
        {"model.embed_tokens.weight", {5, 4}},
        {"model.layers.0.input_layernorm.weight", {4}},
        {"model.layers.0.self_attn.q_proj.weight", {4, 4}},
        {"model.layers.0.self_attn.k_proj.weight", {2, 4}},
        {"model.layers.0.self_attn.v_proj.weight", {2, 4}},
        {"model.layers.0.self_attn.o_proj.weight", {4, 4}},
        {"model.layers.0.post_attention_layernorm.weight", {4}},
        {"model.layers.0.mlp.gate_proj.weight", {3, 4}},
        {"model.layers.0.mlp.up_proj.weight", {3, 4}},
        {"model.layers.0.mlp.down_proj.weight", {4, 3}},
        {"model.norm.weight", {4}},
        {"lm_head.weight", {5, 4}},
    };
    std::vector<StTensor> out;
    for (std::size_t k = 0; k < specs.size(); ++k) {
        StTensor t{specs[k].first, specs[k].second, {}, "F32"};
        std::int64_t n = 1;
        for (const auto d : t.shape)
            n *= d;
        for (std::int64_t i = 0; i < n; ++i)
            t.values.push_back(static_cast<float>(k + 1) + static_cast<float>(i) / 1000.0f);
        out.push_back(std::move(t));
    }
    return out;
}

float valueOf(std::size_t tensorIndex, std::int64_t flat)
{
    return static_cast<float>(tensorIndex + 1) + static_cast<float>(flat) / 1000.0f;
}

void writeText(const QString& path, const QByteArray& text)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text);
}

ModelConfig tinyConfig(const std::string& label)
{
    auto c = parseHfConfig(kTinyConfig, label);
    if (!c)
        qFatal("%s", c.error().text().c_str());
    return *c;
}

/// A folder with the tiny config and `tensors` in model.safetensors.
std::string writeTinyFolder(const QTemporaryDir& dir, const std::vector<StTensor>& tensors)
{
    writeText(dir.filePath("config.json"), kTinyConfig);
    test::writeSafetensors(dir.filePath("model.safetensors").toStdString(), tensors);
    return dir.path().toStdString();
}

/// Two shards (first six tensors, the rest) and an index mapping each tensor to its shard.
std::string writeShardedFolder(const QTemporaryDir& dir, const std::vector<StTensor>& tensors,
                               const std::function<void(std::string&)>& editIndex = {})
{
    writeText(dir.filePath("config.json"), kTinyConfig);
    std::vector<StTensor> a(tensors.begin(), tensors.begin() + 6), b(tensors.begin() + 6, tensors.end());
    test::writeSafetensors(dir.filePath("part-1.safetensors").toStdString(), a);
    test::writeSafetensors(dir.filePath("part-2.safetensors").toStdString(), b);
    std::string index = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {";
    for (std::size_t i = 0; i < tensors.size(); ++i)
        index += (i ? ", \"" : "\"") + tensors[i].name + "\": \"" + (i < 6 ? "part-1" : "part-2") + ".safetensors\"";
    index += "}}";
    if (editIndex)
        editIndex(index);
    writeText(dir.filePath("model.safetensors.index.json"), QByteArray::fromStdString(index));
    return dir.path().toStdString();
}

} // namespace

class TestLmWeights : public QObject {
    Q_OBJECT

private slots:
    void placesFusedTensors()
    {
        QTemporaryDir dir;
        const std::string folder = writeTinyFolder(dir, tinyTensors());
        const ModelConfig config = tinyConfig(folder + "/config.json");
        auto w = loadWeights(folder, config);
        QVERIFY2(w, w ? "" : w.error().text().c_str());
        QVERIFY(checkWeightShapes(config, *w));
        QCOMPARE(w->embed(2, 3), valueOf(0, 2 * 4 + 3));
        const LayerWeights& l = w->layers[0];
        QCOMPARE(l.attnNorm(1), valueOf(1, 1));
        // q|k|v fused: q rows 0..3, k rows 4..5, v rows 6..7.
        QCOMPARE(l.qkv.rows(), 8);
        QCOMPARE(l.qkv(3, 2), valueOf(2, 3 * 4 + 2));
        QCOMPARE(l.qkv(4, 0), valueOf(3, 0));
        QCOMPARE(l.qkv(5, 3), valueOf(3, 1 * 4 + 3));
        QCOMPARE(l.qkv(6, 1), valueOf(4, 1));
        QCOMPARE(l.qkv(7, 3), valueOf(4, 7));
        QCOMPARE(l.qkvBias.size(), 0);
        QCOMPARE(l.out(2, 1), valueOf(5, 2 * 4 + 1));
        QCOMPARE(l.mlpNorm(3), valueOf(6, 3));
        // gate rows 0..2, then up rows 3..5.
        QCOMPARE(l.up.rows(), 6);
        QCOMPARE(l.up(2, 3), valueOf(7, 2 * 4 + 3));
        QCOMPARE(l.up(3, 0), valueOf(8, 0));
        QCOMPARE(l.down(3, 2), valueOf(9, 3 * 3 + 2));
        QCOMPARE(w->finalNorm(0), valueOf(10, 0));
        QCOMPARE(w->lmHead(4, 3), valueOf(11, 19));
        QCOMPARE(&w->head(), &w->lmHead);
    }

    void gpt2Conv1DIsTransposed()
    {
        const std::string folder = std::string(KVLENS_TEST_DATA_DIR) + "/models/gpt2";
        auto config = loadHfConfig(folder);
        QVERIFY(config);
        auto w = loadWeights(folder, *config);
        QVERIFY2(w, w ? "" : w.error().text().c_str());
        auto stored = io::readTensor(folder + "/model.safetensors", "h.1.attn.c_attn.weight");
        QVERIFY(stored);
        const std::int64_t d = config->hidden;
        QCOMPARE(stored->shape, (std::vector<std::int64_t>{d, 3 * d}));
        const RowMatrixXf& qkv = w->layers[1].qkv; // [3d x d] = stored^T
        for (std::int64_t i = 0; i < d; ++i)
            for (std::int64_t o = 0; o < 3 * d; ++o)
                QCOMPARE(qkv(o, i), stored->data[static_cast<std::size_t>(i * 3 * d + o)]);
        QVERIFY(w->lmHead.size() == 0);
        QCOMPARE(&w->head(), &w->embed); // tied
        QCOMPARE(w->positions.rows(), Eigen::Index(config->maxPositions));
    }

    void shardsLoad()
    {
        QTemporaryDir dir;
        const std::string folder = writeShardedFolder(dir, tinyTensors());
        auto w = loadWeights(folder, tinyConfig(folder + "/config.json"));
        QVERIFY2(w, w ? "" : w.error().text().c_str());
        QCOMPARE(w->lmHead(0, 1), valueOf(11, 1));
        QCOMPARE(w->layers[0].qkv(6, 0), valueOf(4, 0));
    }

    void expectedNames()
    {
        const ModelConfig config = tinyConfig("c");
        const auto expected = expectedTensors(config);
        const auto tensors = tinyTensors();
        QCOMPARE(expected.size(), tensors.size());
        for (const StTensor& t : tensors) {
            const auto it = std::find_if(expected.begin(), expected.end(), [&](const ExpectedTensor& e) { return e.name == t.name; });
            QVERIFY2(it != expected.end(), t.name.c_str());
            QCOMPARE(it->shape, t.shape);
        }
    }

    void memoryEstimate()
    {
        QTemporaryDir dir;
        const std::string folder = writeTinyFolder(dir, tinyTensors());
        const ModelConfig config = tinyConfig(folder + "/config.json");
        LoadOptions options;
        options.contextTokens = 16;
        options.threads = 1;
        options.forwardsInFlight = 2;
        auto e = estimateMemory(folder, config, options);
        QVERIFY(e);
        // The matrices as stored (F32), mapped: 20 + 16 + 8 + 8 + 16 + 12 + 12 + 12 + 20 = 124 floats.
        QCOMPARE(e->mappedBytes, std::uint64_t(124 * 4));
        // The norms widened to float32: 4 + 4 + 4.
        QCOMPARE(e->residentBytes, std::uint64_t(12 * 4));
        QCOMPARE(e->activationBytes, 2 * forwardBytes(config, 16, 1));
        // One worker converts at most a whole matrix of this size at once: embed or lm_head, 5 x 4 floats.
        QCOMPARE(e->transientBytes, std::uint64_t(80));
        QCOMPARE(e->total(), std::uint64_t(124 * 4 + 12 * 4 + 80) + 2 * forwardBytes(config, 16, 1));
    }

    void indexRefusals_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QString>("expected");
        QTest::newRow("parent") << QByteArray(R"({"weight_map": {"a": "../x.safetensors"}})") << "'../x.safetensors'";
        QTest::newRow("dotdot") << QByteArray(R"({"weight_map": {"a": ".."}})") << "'..'";
        QTest::newRow("absolute") << QByteArray(R"({"weight_map": {"a": "/etc/x.safetensors"}})") << "'/etc/x.safetensors'";
        QTest::newRow("subfolder") << QByteArray(R"({"weight_map": {"a": "sub/x.safetensors"}})") << "plain file name";
        QTest::newRow("backslash") << QByteArray(R"({"weight_map": {"a": "..\\x.safetensors"}})") << "plain file name";
        QTest::newRow("control") << QByteArray(R"({"weight_map": {"a": "x\n.safetensors"}})") << "plain file name";
        QTest::newRow("not safetensors") << QByteArray(R"({"weight_map": {"a": "pytorch_model.bin"}})") << ".safetensors files";
        QTest::newRow("not a string") << QByteArray(R"({"weight_map": {"a": 3}})") << "'weight_map' entry 'a' is the number 3";
        QTest::newRow("empty map") << QByteArray(R"({"weight_map": {}})") << "non-empty object";
        QTest::newRow("no map") << QByteArray(R"({"metadata": {}})") << "'weight_map' is missing";
        QTest::newRow("bad metadata") << QByteArray(R"({"metadata": 1, "weight_map": {"a": "x.safetensors"}})") << "'metadata'";
        QTest::newRow("duplicate") << QByteArray(R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})") << "'a'";
        QTest::newRow("not json") << QByteArray(R"({"weight_map": )") << "index.json";
    }

    void indexRefusals()
    {
        QFETCH(QByteArray, text);
        QFETCH(QString, expected);
        const std::string label = "m/model.safetensors.index.json";
        auto index = parseWeightIndex(std::string_view(text.constData(), static_cast<std::size_t>(text.size())), label);
        QVERIFY(!index);
        const QString message = QString::fromStdString(index.error().text());
        QVERIFY2(message.startsWith(QString::fromStdString(label)), qPrintable(message));
        QVERIFY2(message.contains(expected), qPrintable(message));
    }

    void indexParses()
    {
        auto index = parseWeightIndex(R"({"metadata": {"total_size": 10}, "weight_map": {"a": "s2.safetensors",
            "b": "s1.safetensors", "c": "s2.safetensors"}})", "i");
        QVERIFY(index);
        QCOMPARE(index->weightMap.at("a"), std::string("s2.safetensors"));
        QCOMPARE(index->shards, (std::vector<std::string>{"s1.safetensors", "s2.safetensors"}));
    }

    /// Each row breaks the tiny model's folder one way; the load must fail naming the file and
    /// the tensor or field.
    void loadRefusals_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("expected");
        QTest::newRow("missing tensor") << 0 << "model.safetensors" << "tensor 'model.layers.0.mlp.up_proj.weight' is missing (expected shape [3, 4]";
        QTest::newRow("wrong shape") << 1 << "model.safetensors" << "tensor 'model.layers.0.self_attn.k_proj.weight': expected shape [2, 4], got [4, 2]";
        QTest::newRow("wrong dtype") << 2 << "model.safetensors" << "tensor 'model.norm.weight' has dtype F64";
        QTest::newRow("NaN") << 3 << "model.safetensors" << "tensor 'model.layers.0.self_attn.o_proj.weight' holds NaN at flat index 6";
        QTest::newRow("Inf") << 4 << "model.safetensors" << "tensor 'lm_head.weight' holds Inf at flat index 13";
        QTest::newRow("memory") << 5 << "model.safetensors" << "MiB), more than the limit of 0 MiB";
        QTest::newRow("index parent") << 6 << "model.safetensors.index.json" << "'../part-2.safetensors'";
        QTest::newRow("index absolute") << 7 << "model.safetensors.index.json" << "'/tmp/part-2.safetensors'";
        QTest::newRow("missing shard") << 8 << "model.safetensors.index.json" << "shard 'part-3.safetensors' does not exist";
        QTest::newRow("shard is a folder") << 9 << "model.safetensors.index.json" << "shard 'dir.safetensors' is not a regular file";
        QTest::newRow("link outside") << 10 << "model.safetensors.index.json" << "outside the model folder";
        QTest::newRow("two shards") << 11 << "model.safetensors.index.json" << "tensor 'model.norm.weight' is held by two shards";
        QTest::newRow("mapped to wrong shard") << 12 << "model.safetensors.index.json" << "tensor 'lm_head.weight' is mapped to shard 'part-1.safetensors' but held by 'part-2.safetensors'";
        QTest::newRow("in no shard") << 13 << "model.safetensors.index.json" << "tensor 'model.norm.weight' is missing";
        QTest::newRow("no weights") << 14 << "" << "no model.safetensors and no model.safetensors.index.json";
        QTest::newRow("bf16 wrong shape") << 15 << "model.safetensors" << "expected shape [5, 4], got [5, 3]";
        // A checkpoint with a layer more than its config says (or any tensor the architecture does
        // not read) would evaluate another model: refused naming the first such tensor.
        QTest::newRow("extra layer") << 16 << "model.safetensors" << "tensor 'model.layers.1.mlp.up_proj.weight' is not used by LlamaForCausalLM: 1 layers";
        QTest::newRow("undeclared bias") << 17 << "model.safetensors" << "tensor 'model.layers.0.self_attn.q_proj.bias' is not used";
    }

    void loadRefusals()
    {
        QFETCH(int, kind);
        QFETCH(QString, file);
        QFETCH(QString, expected);
        QTemporaryDir dir, outside;
        std::vector<StTensor> t = tinyTensors();
        const auto find = [&](const std::string& name) -> StTensor& {
            return *std::find_if(t.begin(), t.end(), [&](const StTensor& s) { return s.name == name; });
        };
        LoadOptions options;
        std::string folder;
        switch (kind) {
        case 0: t.erase(t.begin() + 8); folder = writeTinyFolder(dir, t); break;
        case 1: find("model.layers.0.self_attn.k_proj.weight").shape = {4, 2}; folder = writeTinyFolder(dir, t); break;
        case 2: find("model.norm.weight").dtype = "F64"; folder = writeTinyFolder(dir, t); break;
        case 3: find("model.layers.0.self_attn.o_proj.weight").values[6] = std::numeric_limits<float>::quiet_NaN();
            folder = writeTinyFolder(dir, t); break;
        case 4: find("lm_head.weight").values[13] = -std::numeric_limits<float>::infinity();
            folder = writeTinyFolder(dir, t); break;
        case 5: options.memoryLimitMiB = 0; folder = writeTinyFolder(dir, t); break;
        case 6: folder = writeShardedFolder(dir, t, [](std::string& s) {
                    s.replace(s.rfind("\"part-2"), 7, "\"../part-2"); }); break;
        case 7: folder = writeShardedFolder(dir, t, [](std::string& s) {
                    s.replace(s.rfind("\"part-2"), 7, "\"/tmp/part-2"); }); break;
        case 8: folder = writeShardedFolder(dir, t, [](std::string& s) {
                    s.replace(s.rfind("part-2"), 6, "part-3"); }); break;
        case 9: QVERIFY(QDir(dir.path()).mkdir("dir.safetensors"));
            folder = writeShardedFolder(dir, t, [](std::string& s) { s.replace(s.rfind("part-2"), 6, "dir"); }); break;
        case 10: {
            test::writeSafetensors(outside.filePath("elsewhere.safetensors").toStdString(), {t.back()});
            std::filesystem::create_symlink(outside.filePath("elsewhere.safetensors").toStdString(),
                                            dir.filePath("link.safetensors").toStdString());
            folder = writeShardedFolder(dir, t, [](std::string& s) { s.replace(s.rfind("part-2"), 6, "link"); });
            break;
        }
        case 11: {
            folder = writeShardedFolder(dir, t);
            std::vector<StTensor> a(t.begin(), t.begin() + 6);
            a.push_back(find("model.norm.weight")); // also in part-2
            test::writeSafetensors(dir.filePath("part-1.safetensors").toStdString(), a);
            break;
        }
        case 12: folder = writeShardedFolder(dir, t, [](std::string& s) {
                     s.replace(s.rfind("part-2"), 6, "part-1"); }); break; // lm_head is the last entry
        case 13: {
            std::vector<StTensor> noNorm = t;
            noNorm.erase(noNorm.begin() + 10);
            folder = writeShardedFolder(dir, noNorm);
            break;
        }
        case 14: writeText(dir.filePath("config.json"), kTinyConfig); folder = dir.path().toStdString(); break;
        case 15: find("model.embed_tokens.weight").shape = {5, 3};
            find("model.embed_tokens.weight").values.resize(15);
            for (StTensor& s : t)
                s.dtype = "BF16";
            folder = writeTinyFolder(dir, t);
            break;
        case 16: t.push_back(StTensor{"model.layers.1.mlp.up_proj.weight", {3, 4}, std::vector<float>(12, 0.5f), "F32"});
            folder = writeTinyFolder(dir, t); break;
        case 17: t.push_back(StTensor{"model.layers.0.self_attn.q_proj.bias", {4}, std::vector<float>(4, 0.5f), "F32"});
            folder = writeTinyFolder(dir, t); break;
        }
        const ModelConfig config = tinyConfig(folder + "/config.json");
        auto w = loadWeights(folder, config, options);
        QVERIFY(!w);
        const QString message = QString::fromStdString(w.error().text());
        QVERIFY2(message.contains(QString::fromStdString(folder + "/") + file) || (file.isEmpty() && message.contains(QString::fromStdString(folder))),
                 qPrintable(message));
        QVERIFY2(message.contains(expected), qPrintable(message));
        QVERIFY2(!message.contains('\n'), qPrintable(message));
        if (kind == 5) {
            // Both numbers: the need and the limit.
            QVERIFY2(message.contains("the model needs about 1 MiB") || message.contains("needs about"), qPrintable(message));
        }
    }

    void knownExtrasAreNoted()
    {
        // Older Llama checkpoints save a rotary cache per layer: not a weight, accepted and noted.
        QTemporaryDir dir;
        std::vector<StTensor> t = tinyTensors();
        t.push_back(StTensor{"model.layers.0.self_attn.rotary_emb.inv_freq", {1}, {1.0f}, "F32"});
        const std::string folder = writeTinyFolder(dir, t);
        auto loaded = loadTensors(folder, tinyConfig(folder + "/config.json"));
        QVERIFY2(loaded, loaded ? "" : loaded.error().text().c_str());
        QCOMPARE(loaded->notes.ignoredExtras,
                 std::string("1 tensor the forward does not read (model.layers.0.self_attn.rotary_emb.inv_freq)"));
        QCOMPARE(loaded->tensors.storedTypes(), std::string("f32"));
        QCOMPARE(loaded->tensors.storedBytes(), std::uint64_t(124 * 4));
    }

    void shapeCheckOfHandBuiltWeights()
    {
        const ModelConfig config = tinyConfig("hand-built");
        ModelWeights w;
        auto s = checkWeightShapes(config, w);
        QVERIFY(!s);
        QVERIFY2(QString::fromStdString(s.error().text()).contains("embed: expected shape [5, 4], got [0, 0]"),
                 s.error().text().c_str());
    }
};

QTEST_APPLESS_MAIN(TestLmWeights)
#include "tst_lm_weights.moc"
