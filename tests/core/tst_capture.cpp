// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens capture on the shipped model: the dump's layer-0 Q, K (after RoPE) and V against a direct
// double-precision recomputation from the stored weights, every layer's K and V against what the
// cache hook receives, Q of every layer against the attention probe's scores (grouped-query heads
// mapped), the file read back through the model regime, layer selection, and refusals.
#include "core/common/fp16.h"
#include "core/eval/capture.h"
#include "core/io/atomic_file.h"
#include "core/io/tensor_file.h"
#include "core/regimes/model_dump.h"
#include "common/approx.h"
#include "common/shipped_model.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>
#include <mutex>

using namespace kvlens;
using namespace kvlens::eval;

namespace {

const std::string kModel = kvlens::testing::shippedModelDir();
constexpr int kOffset = 100, kCtx = 96;

const lm::Transformer& model()
{
    return kvlens::testing::shippedModel();
}

/// Bytes [from, from + count) of the held-out text as token ids (the vocabulary is the 256 bytes).
std::vector<std::int32_t> heldoutTokens(std::size_t from, std::size_t count)
{
    std::ifstream in(kModel + "/heldout.txt", std::ios::binary);
    std::vector<std::int32_t> ids;
    std::size_t at = 0;
    for (char c; ids.size() < count && in.get(c); ++at)
        if (at >= from)
            ids.push_back(static_cast<unsigned char>(c));
    return ids;
}

/// A weight of the stored checkpoint, read independently of core/lm.
io::Tensor weight(const std::string& name)
{
    auto t = io::readTensor(kModel + "/model.safetensors", name);
    if (!t)
        qFatal("%s", t.error().text().c_str());
    return std::move(t).value();
}

/// Writes the capture as a dump file and returns its path.
std::string writeDump(const QTemporaryDir& dir, const CaptureResult& c, const std::string& name = "dump.safetensors")
{
    auto bytes = dumpFileBytes(c, false);
    if (!bytes)
        qFatal("%s", bytes.error().text().c_str());
    const std::string path = dir.filePath(QString::fromStdString(name)).toStdString();
    if (auto ok = writeFileAtomic(path, *bytes); !ok)
        qFatal("%s", ok.error().text().c_str());
    return path;
}

io::Tensor dumpTensor(const std::string& path, const std::string& name)
{
    auto t = io::readTensor(path, name);
    if (!t)
        qFatal("%s", t.error().text().c_str());
    return std::move(t).value();
}

/// The identity cache hook, keeping a copy of every (layer, KV head)'s K and V it is handed.
class RecordingHook final : public lm::KvCacheHook {
public:
    bool quantizes(int) const override { return true; }
    void apply(int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat,
               RowMatrixXf& vhat) const override
    {
        khat = k;
        vhat = v;
        const std::lock_guard lock(m_mutex);
        m_k[{layer, kvHead}] = k;
        m_v[{layer, kvHead}] = v;
    }
    mutable std::mutex m_mutex;
    mutable std::map<std::pair<int, int>, RowMatrixXf> m_k, m_v;
};

} // namespace

class TestCapture : public QObject {
    Q_OBJECT

private slots:
    void layerZeroMatchesADirectRecomputationFromTheWeights()
    {
        const auto tokens = heldoutTokens(kOffset, kCtx);
        auto c = captureChunk(model(), tokens, {}, "test");
        QVERIFY2(c.ok(), c.ok() ? "" : c.error().text().c_str());
        QTemporaryDir dir;
        const std::string path = writeDump(dir, *c);
        // Embedding -> RMSNorm -> q/k/v_proj -> rotate-half RoPE (theta 10000), in double, from the
        // checkpoint's own tensors.
        const io::Tensor embed = weight("model.embed_tokens.weight"), norm = weight("model.layers.0.input_layernorm.weight");
        const io::Tensor wq = weight("model.layers.0.self_attn.q_proj.weight"),
                         wk = weight("model.layers.0.self_attn.k_proj.weight"),
                         wv = weight("model.layers.0.self_attn.v_proj.weight");
        const int hidden = 256, hd = 32, half = 16;
        const io::Tensor q = dumpTensor(path, "layers.0.q"), k = dumpTensor(path, "layers.0.k"), v = dumpTensor(path, "layers.0.v");
        QCOMPARE(q.shape, (std::vector<std::int64_t>{1, 8, kCtx, hd}));
        QCOMPARE(k.shape, (std::vector<std::int64_t>{1, 2, kCtx, hd}));
        QCOMPARE(v.shape, (std::vector<std::int64_t>{1, 2, kCtx, hd}));
        QCOMPARE(q.storedType, io::DType::F16);
        double worst = 0.0;
        for (int t = 0; t < kCtx; ++t) {
            std::vector<double> h(hidden);
            double ms = 0.0;
            for (int i = 0; i < hidden; ++i) {
                h[i] = embed.data[std::size_t(tokens[std::size_t(t)]) * hidden + i];
                ms += h[i] * h[i];
            }
            const double r = 1.0 / std::sqrt(ms / hidden + 1e-5);
            for (int i = 0; i < hidden; ++i)
                h[i] *= r * norm.data[std::size_t(i)];
            auto project = [&](const io::Tensor& w, int row) {
                double s = 0.0;
                for (int i = 0; i < hidden; ++i)
                    s += w.data[std::size_t(row) * hidden + i] * h[i];
                return s;
            };
            std::string failure;
            auto check = [&](const io::Tensor& got, const io::Tensor& w, int heads, bool rope) {
                for (int head = 0; head < heads; ++head)
                    for (int i = 0; i < (rope ? half : hd); ++i) {
                        double a = project(w, head * hd + i), b = 0.0;
                        int dims = 1;
                        if (rope) {
                            b = project(w, head * hd + i + half);
                            const double angle = t * std::pow(10000.0, -2.0 * i / hd);
                            const double ra = a * std::cos(angle) - b * std::sin(angle);
                            b = b * std::cos(angle) + a * std::sin(angle);
                            a = ra;
                            dims = 2;
                        }
                        const std::pair<int, double> expected[2] = {{i, a}, {i + half, b}};
                        for (int e = 0; e < dims; ++e) {
                            const int dim = expected[e].first;
                            const double want = expected[e].second;
                            const double have = got.data[(std::size_t(head) * kCtx + t) * hd + dim];
                            // F16 keeps 11 significant bits: half an ulp is 2^-11 of the value.
                            const double tol = 4.9e-4 * std::fabs(want) + 2e-5;
                            worst = std::max(worst, std::fabs(have - want) / tol);
                            if (std::fabs(have - want) > tol) {
                                failure = got.name + ": t " + std::to_string(t) + " head " + std::to_string(head) + " dim "
                                          + std::to_string(dim) + ": dump " + std::to_string(have) + ", recomputed "
                                          + std::to_string(want);
                                return false;
                            }
                        }
                    }
                return true;
            };
            QVERIFY2(check(q, wq, 8, true), failure.c_str());
            QVERIFY2(check(k, wk, 2, true), failure.c_str());
            QVERIFY2(check(v, wv, 2, false), failure.c_str());
        }
        qInfo("worst |dump - recomputed| / tolerance: %.3f", worst);
    }

    void everyLayersKAndVAreWhatTheCacheHookReceives()
    {
        const auto tokens = heldoutTokens(kOffset, kCtx);
        auto c = captureChunk(model(), tokens, {}, "test");
        QVERIFY(c.ok());
        QTemporaryDir dir;
        const std::string path = writeDump(dir, *c);
        RecordingHook hook;
        lm::ForwardOptions o;
        o.cache = &hook;
        QVERIFY(model().forward(tokens, o).ok());
        for (int l = 0; l < 4; ++l) {
            const io::Tensor k = dumpTensor(path, "layers." + std::to_string(l) + ".k");
            const io::Tensor v = dumpTensor(path, "layers." + std::to_string(l) + ".v");
            for (int g = 0; g < 2; ++g) {
                const RowMatrixXf& hk = hook.m_k.at({l, g});
                const RowMatrixXf& hv = hook.m_v.at({l, g});
                QCOMPARE(hk.rows(), Eigen::Index(kCtx));
                for (int t = 0; t < kCtx; ++t)
                    for (int j = 0; j < 32; ++j) {
                        const std::size_t at = (std::size_t(g) * kCtx + t) * 32 + j;
                        // The same float, rounded once to F16.
                        QCOMPARE(k.data[at], roundToHalf(hk(t, j)));
                        QCOMPARE(v.data[at], roundToHalf(hv(t, j)));
                    }
            }
        }
    }

    void everyLayersQueriesGiveTheProbesScores()
    {
        // Q head h reads K/V head h / 4: the dump's q . k / sqrt(32) is the forward's own score.
        const auto tokens = heldoutTokens(kOffset, kCtx);
        auto c = captureChunk(model(), tokens, {}, "test");
        QVERIFY(c.ok());
        QTemporaryDir dir;
        const std::string path = writeDump(dir, *c);
        const int t = 80;
        for (int l = 0; l < 4; ++l) {
            const int head = (5 + 3 * l) % 8;
            lm::ForwardOptions o;
            o.probe = lm::ProbeRequest{l, head, t};
            auto r = model().forward(tokens, o);
            QVERIFY(r.ok() && r->probe);
            QCOMPARE(r->probe->kvHead, head / 4);
            const io::Tensor q = dumpTensor(path, "layers." + std::to_string(l) + ".q");
            const io::Tensor k = dumpTensor(path, "layers." + std::to_string(l) + ".k");
            for (int j = 0; j <= t; ++j) {
                double dot = 0.0, qq = 0.0, kk = 0.0;
                for (int i = 0; i < 32; ++i) {
                    const double a = q.data[(std::size_t(head) * kCtx + t) * 32 + i];
                    const double b = k.data[(std::size_t(head / 4) * kCtx + j) * 32 + i];
                    dot += a * b;
                    qq += a * a;
                    kk += b * b;
                }
                const double score = dot / std::sqrt(32.0);
                // Each factor carries F16's 2^-11 relative rounding: |error| <= 2^-10 |q| |k| / sqrt(d).
                const double tol = 1.0e-3 * std::sqrt(qq * kk / 32.0) + 1e-5;
                KVLENS_COMPARE_ABS(score, double(r->probe->exactScores[std::size_t(j)]), tol);
            }
        }
    }

    void theDumpReadsBackThroughTheModelRegime()
    {
        const auto tokens = heldoutTokens(kOffset, kCtx);
        auto c = captureChunk(model(), tokens, {}, "held-out bytes 100..195");
        QVERIFY(c.ok());
        QTemporaryDir dir;
        const std::string path = writeDump(dir, *c);
        auto dump = inspectModelDump(path);
        QVERIFY2(dump.ok(), dump.ok() ? "" : dump.error().text().c_str());
        QCOMPARE(dump->layers, 4);
        QCOMPARE(dump->qHeads, 8);
        QCOMPARE(dump->kvHeads, 2);
        QCOMPARE(dump->headDim, 32);
        QCOMPARE(dump->tokens, kCtx);
        QCOMPARE(dump->queryTokens, kCtx);
        QCOMPARE(dump->metadata.at("kvlens_dump"), std::string("1"));
        QCOMPARE(dump->metadata.at("rope"), std::string("post"));
        QCOMPARE(dump->metadata.at("positions"), std::string("0..95"));
        QCOMPARE(dump->metadata.at("q_heads"), std::string("8"));
        QCOMPARE(dump->metadata.at("source"), std::string("held-out bytes 100..195"));
        // One cell through the regime: layer 3, query head 6 reads K/V head 1, causal positions.
        RegimeParams params{{"file", path}, {"layer", 3.0}, {"head", 6.0}, {"query_start", 64.0}};
        const DataShape shape{32, kCtx, 32, 0};
        auto normalized = modelRegime().normalize(params, shape);
        QVERIFY2(normalized.ok(), normalized.ok() ? "" : normalized.error().text().c_str());
        auto data = modelRegime().generate(*normalized, shape, EngineKind::Pcg64, 1);
        QVERIFY2(data.ok(), data.ok() ? "" : data.error().text().c_str());
        const io::Tensor k = dumpTensor(path, "layers.3.k"), q = dumpTensor(path, "layers.3.q");
        QCOMPARE(data->keys(10, 7), k.data[(std::size_t(1) * kCtx + 10) * 32 + 7]);
        QCOMPARE(data->queries(5, 3), q.data[(std::size_t(6) * kCtx + 69) * 32 + 3]);
        QCOMPARE(data->queryPositions[5], 69);
        // The span loss is the model's own: the held-out text costs well under a uniform guess (ln 256).
        QVERIFY(c->spanLoss > 0.1 && c->spanLoss < 3.0);
    }

    void aFileOrTokenIdsAndChosenLayers()
    {
        QTemporaryDir dir;
        const std::string npy = dir.filePath(QStringLiteral("ids.npy")).toStdString();
        {
            const auto ids = heldoutTokens(0, 400);
            std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (" + std::to_string(ids.size()) + ",), }";
            while ((10 + header.size() + 1) % 64 != 0)
                header += ' ';
            header += '\n';
            std::ofstream out(npy, std::ios::binary);
            out.write("\x93NUMPY\x01\x00", 8);
            const std::uint16_t n = static_cast<std::uint16_t>(header.size());
            out.write(reinterpret_cast<const char*>(&n), 2);
            out << header;
            out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
        }
        CaptureSpec spec;
        spec.modelDir = kModel;
        spec.textFile = kModel + "/heldout.txt";
        spec.ctx = kCtx;
        spec.offset = kOffset;
        spec.threads = 2;
        spec.metadata = {{"note", "a test"}};
        auto fromText = runCapture(spec);
        QVERIFY2(fromText.ok(), fromText.ok() ? "" : fromText.error().text().c_str());
        QCOMPARE(fromText->metadata.at("note"), std::string("a test"));
        QVERIFY(fromText->metadata.at("source").find("tokens 100..195 (bytes tokenizer)") != std::string::npos);
        spec.textFile.clear();
        spec.tokensFile = npy;
        spec.layers = {1, 3};
        auto fromIds = runCapture(spec);
        QVERIFY2(fromIds.ok(), fromIds.ok() ? "" : fromIds.error().text().c_str());
        QCOMPARE(fromIds->captured.size(), std::size_t(2));
        QCOMPARE(fromIds->metadata.at("model_layers"), std::string("1,3"));
        for (int i = 0; i < 2; ++i) {
            const lm::LayerCapture& a = fromIds->captured[std::size_t(i)];
            const lm::LayerCapture& b = fromText->captured[std::size_t(i == 0 ? 1 : 3)];
            QVERIFY(a.q == b.q && a.k == b.k && a.v == b.v);
        }
        const std::string path = writeDump(dir, *fromIds, "two.safetensors");
        auto dump = inspectModelDump(path);
        QVERIFY(dump.ok());
        QCOMPARE(dump->layers, 2);
    }

    void refusals_data()
    {
        QTest::addColumn<int>("which");
        QTest::addColumn<QString>("mention");
        QTest::newRow("ctx beyond the model") << 0 << "ctx: must be at most 512";
        QTest::newRow("chunk past the text") << 1 << "offset: ";
        QTest::newRow("layer the model lacks") << 2 << "layers: layer 4 must be in [0, 3]";
        QTest::newRow("memory limit") << 3 << "memory_limit_mb: the capture needs about";
        QTest::newRow("a layout key in the metadata") << 4 << "metadata: key 'tokens' is not allowed";
        QTest::newRow("both inputs") << 5 << "text: give exactly one";
        QTest::newRow("cancelled") << 6 << "cancelled";
        QTest::newRow("layers not increasing") << 7 << "layers: must be increasing";
    }
    void refusals()
    {
        QFETCH(int, which);
        QFETCH(QString, mention);
        CaptureSpec spec;
        spec.modelDir = kModel;
        spec.textFile = kModel + "/heldout.txt";
        spec.ctx = 64;
        spec.threads = 2;
        std::function<bool()> cancelled;
        switch (which) {
        case 0: spec.ctx = 600; break;
        case 1: spec.offset = 11358 - 63; break;
        case 2: spec.layers = {0, 4}; break;
        case 3: spec.memoryLimitMb = 1; break;
        case 4: spec.metadata = {{"tokens", "5"}}; break;
        case 5: spec.tokensFile = "ids.npy"; break;
        case 6: cancelled = [] { return true; }; break;
        case 7: spec.layers = {2, 1}; break;
        }
        auto r = runCapture(spec, cancelled);
        QVERIFY(!r.ok());
        QVERIFY2(QString::fromStdString(r.error().text()).contains(mention), r.error().text().c_str());
    }

    void aValueBeyondF16IsRefusedAndF32HoldsIt()
    {
        CaptureResult c;
        c.qHeads = c.kvHeads = 1;
        c.headDim = 2;
        c.tokens = 2;
        c.layers = {0};
        lm::LayerCapture layer;
        layer.q = {1, 2, 3, 4};
        layer.k = {1, 2, 3, 4};
        layer.v = {1, 2, 7e4f, 4};
        c.captured = {layer};
        auto f16 = dumpFileBytes(c, false);
        QVERIFY(!f16.ok());
        QCOMPARE(f16.error().field, std::string("layers.0.v"));
        QVERIFY2(f16.error().message.find("flat index 2") != std::string::npos, f16.error().message.c_str());
        c.captured[0].v[2] = 65519.0f; // still rounds to 65504
        QVERIFY(dumpFileBytes(c, false).ok());
        c.captured[0].v[2] = 7e4f;
        auto f32 = dumpFileBytes(c, true);
        QVERIFY(f32.ok());
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("f32.safetensors")).toStdString();
        QVERIFY(writeFileAtomic(path, *f32).ok());
        const io::Tensor v = dumpTensor(path, "layers.0.v");
        QCOMPARE(v.storedType, io::DType::F32);
        QCOMPARE(v.data, (std::vector<float>{1, 2, 7e4f, 4}));
    }
};

QTEST_GUILESS_MAIN(TestCapture)
#include "tst_capture.moc"
