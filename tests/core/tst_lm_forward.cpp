// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer forward pass: a one-layer model with closed-form logits (RoPE pairing, causal
// attention, GQA), Hugging Face folders against an independent PyTorch forward, the shipped model,
// and the KV-cache hook's contract (identity, causality, residual window), probe, capture,
// resumption, cancellation and refusals.
#include "common/approx.h"
#include "common/closed_form_model.h"
#include "core/io/tensor_file.h"
#include "core/lm/transformer.h"

#include <QFile>
#include <QTest>

#include <cmath>
#include <cstring>

using namespace kvlens;
using namespace kvlens::lm;
using namespace kvlens::test::closed_form;

namespace {

const std::string kModels = std::string(KVLENS_TEST_DATA_DIR) + "/models";

/// The ids of a 1-D little-endian int64 .npy file (version 1 header), which core/io's float
/// readers do not take: magic, version, header length, the header dict, then the payload.
std::vector<std::int32_t> readTokens(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot open %s", path.c_str());
    const QByteArray bytes = f.readAll();
    if (!bytes.startsWith("\x93NUMPY\x01"))
        qFatal("%s: not a version-1 .npy file", path.c_str());
    const int headerLength = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    const QByteArray header = bytes.mid(10, headerLength);
    if (!header.contains("'descr': '<i8'") || !header.contains("'fortran_order': False"))
        qFatal("%s: expected little-endian int64 in C order: %s", path.c_str(), header.constData());
    const qsizetype count = (bytes.size() - 10 - headerLength) / 8;
    std::vector<std::int32_t> ids;
    for (qsizetype i = 0; i < count; ++i) {
        std::int64_t v = 0;
        std::memcpy(&v, bytes.constData() + 10 + headerLength + 8 * i, 8);
        ids.push_back(static_cast<std::int32_t>(v));
    }
    return ids;
}

RowMatrixXf readMatrix(const std::string& path, Eigen::Index rows, Eigen::Index cols)
{
    auto t = io::readTensor(path, "");
    if (!t)
        qFatal("%s", t.error().text().c_str());
    if (static_cast<Eigen::Index>(t->data.size()) != rows * cols)
        qFatal("%s: %zu values, expected %ld", path.c_str(), t->data.size(), long(rows * cols));
    return Eigen::Map<const RowMatrixXf>(t->data.data(), rows, cols);
}

Transformer loadModel(const std::string& dir, int threads = 2)
{
    LoadOptions options;
    options.threads = threads;
    auto m = Transformer::load(dir, options);
    if (!m)
        qFatal("%s", m.error().text().c_str());
    return std::move(*m);
}

RowMatrixXf logitsOf(const Transformer& m, const std::vector<std::int32_t>& tokens, const ForwardOptions& o = {})
{
    auto r = m.forward(tokens, o);
    if (!r)
        qFatal("%s", r.error().text().c_str());
    return std::move(r->logits);
}

// ----------------------------------------------------------------------------- hooks

/// Returns K and V unchanged.
class IdentityHook : public KvCacheHook {
public:
    bool quantizes(int) const override { return true; }
    void apply(int, int, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat, RowMatrixXf& vhat) const override
    {
        khat = k;
        vhat = v;
    }
};

/// Adds `delta` to the rows `rows` selects, in the layers `layers` selects.
class PerturbHook : public KvCacheHook {
public:
    PerturbHook(std::function<bool(int)> rows, std::function<bool(int)> layers = {}, float delta = 0.5f)
        : m_rows(std::move(rows)), m_layers(std::move(layers)), m_delta(delta)
    {
    }
    bool quantizes(int layer) const override { return !m_layers || m_layers(layer); }
    void apply(int, int, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat, RowMatrixXf& vhat) const override
    {
        khat = k;
        vhat = v;
        for (Eigen::Index r = 0; r < k.rows(); ++r)
            if (m_rows(static_cast<int>(r))) {
                khat.row(r).array() += m_delta;
                vhat.row(r).array() -= m_delta;
            }
    }

private:
    std::function<bool(int)> m_rows, m_layers;
    float m_delta;
};

/// Adds deterministic pseudo-random noise of amplitude `amp` to every K and V entry.
class NoiseHook : public KvCacheHook {
public:
    explicit NoiseHook(float amp) : m_amp(amp) {}
    bool quantizes(int) const override { return true; }
    void apply(int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat,
               RowMatrixXf& vhat) const override
    {
        khat = k;
        vhat = v;
        for (Eigen::Index r = 0; r < k.rows(); ++r)
            for (Eigen::Index c = 0; c < k.cols(); ++c) {
                khat(r, c) += m_amp * noise(layer, kvHead, r, c, 1);
                vhat(r, c) += m_amp * noise(layer, kvHead, r, c, 2);
            }
    }
    /// A value in [-1, 1) from a hash of the indices.
    static float noise(int layer, int kvHead, Eigen::Index r, Eigen::Index c, int salt)
    {
        std::uint64_t h = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(1 + layer + 7 * kvHead + 131 * salt)
                          ^ static_cast<std::uint64_t>(r * 1009 + c * 31);
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        return static_cast<float>(static_cast<double>(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }

private:
    float m_amp;
};

/// Writes a wrong shape or a NaN.
class BrokenHook : public KvCacheHook {
public:
    explicit BrokenHook(bool nan) : m_nan(nan) {}
    bool quantizes(int) const override { return true; }
    void apply(int, int, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat, RowMatrixXf& vhat) const override
    {
        khat = k;
        vhat = v;
        if (m_nan)
            vhat(2, 1) = std::numeric_limits<float>::quiet_NaN();
        else
            khat.resize(k.rows() - 1, k.cols());
    }

private:
    bool m_nan;
};

double maxAbsDiff(const RowMatrixXf& a, const RowMatrixXf& b)
{
    return double((a - b).cwiseAbs().maxCoeff());
}

bool rowsEqual(const RowMatrixXf& a, const RowMatrixXf& b, Eigen::Index r)
{
    return (a.row(r).array() == b.row(r).array()).all();
}

} // namespace

class TestLmForward : public QObject {
    Q_OBJECT

private slots:
    void closedForm()
    {
        const std::vector<std::int32_t> tokens = {3, 0, 5, 1, 4, 2, 2, 5, 0, 1};
        const RowMatrixXd expected = closedFormLogits(tokens);
        for (int threads : {1, 3}) {
            const Transformer m = closedFormModel(threads);
            const RowMatrixXf got = logitsOf(m, tokens);
            QCOMPARE(got.rows(), Eigen::Index(tokens.size()));
            QCOMPARE(got.cols(), Eigen::Index(kVocab));
            for (Eigen::Index t = 0; t < got.rows(); ++t)
                for (Eigen::Index v = 0; v < got.cols(); ++v)
                    KVLENS_COMPARE_ABS(got(t, v), expected(t, v), 2e-6);
        }
    }

    void slidingWindowApplied()
    {
        // Mistral's window: query t sees keys t - W < j <= t (a window of 4 inside a chunk of 10), in
        // the output, the probe and the damage measures alike.
        const std::vector<std::int32_t> tokens = {3, 0, 5, 1, 4, 2, 2, 5, 0, 1};
        const int window = 4;
        const RowMatrixXd expected = closedFormLogits(tokens, window);
        const RowMatrixXd unwindowed = closedFormLogits(tokens);
        QVERIFY((expected - unwindowed).cwiseAbs().maxCoeff() > 1e-2); // the window matters here
        for (int threads : {1, 3}) {
            const Transformer m = closedFormModel(threads, window);
            const RowMatrixXf got = logitsOf(m, tokens);
            for (Eigen::Index t = 0; t < got.rows(); ++t)
                for (Eigen::Index v = 0; v < got.cols(); ++v)
                    KVLENS_COMPARE_ABS(got(t, v), expected(t, v), 2e-6);
        }
        ForwardOptions o;
        o.probe = ProbeRequest{0, 0, 7};
        auto r = closedFormModel(2, window).forward(tokens, o);
        QVERIFY(r && r->probe);
        const std::vector<double> p = closedFormWeights(7, window);
        for (std::size_t j = 0; j < p.size(); ++j)
            KVLENS_COMPARE_ABS(r->probe->exactProbs[j], p[j], 1e-6);
        QCOMPARE(r->probe->exactProbs[3], 0.0); // 7 - 4 < 3 fails: outside the window
    }

    void closedFormProbeAndCapture()
    {
        const std::vector<std::int32_t> tokens = {3, 0, 5, 1, 4, 2, 2, 5, 0, 1};
        const Transformer m = closedFormModel();
        ForwardOptions o;
        o.probe = ProbeRequest{0, 0, 7};
        o.capture = {2, 5};
        auto r = m.forward(tokens, o);
        QVERIFY(r);
        QVERIFY(r->probe);
        const std::vector<double> p = closedFormWeights(7);
        QCOMPARE(r->probe->exactProbs.size(), std::size_t(8));
        QCOMPARE(r->probe->kvHead, 0);
        for (std::size_t j = 0; j < p.size(); ++j) {
            KVLENS_COMPARE_ABS(r->probe->exactProbs[j], p[j], 1e-6);
            QCOMPARE(r->probe->cacheProbs[j], r->probe->exactProbs[j]); // no hook: the cache is exact
        }
        // Captured K after RoPE at positions 2..6: (-a u sin j, 0, a u cos j, 0).
        const double u = 1.0 / std::sqrt(0.75 + kEps);
        QCOMPARE(r->capture.size(), std::size_t(1));
        const LayerCapture& cap = r->capture[0];
        QCOMPARE(cap.k.size(), std::size_t(1 * 5 * 4));
        QCOMPARE(cap.q.size(), std::size_t(2 * 5 * 4));
        for (int i = 0; i < 5; ++i) {
            const int j = 2 + i;
            KVLENS_COMPARE_ABS(cap.k[std::size_t(i * 4 + 0)], -kA * u * std::sin(j), 1e-6);
            KVLENS_COMPARE_ABS(cap.k[std::size_t(i * 4 + 1)], 0.0, 1e-7);
            KVLENS_COMPARE_ABS(cap.k[std::size_t(i * 4 + 2)], kA * u * std::cos(j), 1e-6);
            // Head 1's query at position j (second head block): (0, a u cos(j/100), 0, a u sin(j/100)).
            KVLENS_COMPARE_ABS(cap.q[std::size_t((5 + i) * 4 + 1)], kA * u * std::cos(j / 100.0), 1e-6);
            KVLENS_COMPARE_ABS(cap.q[std::size_t((5 + i) * 4 + 3)], kA * u * std::sin(j / 100.0), 1e-6);
            // V is not rotated: (h_2, h_3, 0, 0).
            KVLENS_COMPARE_ABS(cap.v[std::size_t(i * 4 + 0)], std::cos(phi(tokens[std::size_t(j)])) * u, 1e-6);
        }
    }

    void referenceFolders_data()
    {
        QTest::addColumn<QString>("folder");
        for (const char* f : {"llama_gqa", "llama_tied_ropeparams", "qwen2_bias", "gpt2", "gpt2_prefixed", "llama_bf16_sharded"})
            QTest::newRow(f) << QString(f);
    }

    /// Each folder's logits against scripts/make_test_models.py's double-precision PyTorch forward
    /// of the same stored weights: at most 1e-4 absolute on float32 logits.
    void referenceFolders()
    {
        QFETCH(QString, folder);
        const std::string dir = kModels + "/" + folder.toStdString();
        const Transformer m = loadModel(dir);
        const auto tokens = readTokens(dir + "/tokens.npy");
        const RowMatrixXf expected = readMatrix(dir + "/reference_logits.npy", Eigen::Index(tokens.size()), m.config().vocab);
        const RowMatrixXf got = logitsOf(m, tokens);
        const double err = maxAbsDiff(got, expected);
        qInfo("%s: max |logit error| %.3g over %ld x %d logits", qPrintable(folder), err, long(got.rows()), m.config().vocab);
        KVLENS_VERIFY_IN_RANGE(err, 0.0, 1e-4);
    }

    /// The shipped model against the logits its training script computed from the saved weights:
    /// the first two 128-byte chunks of heldout.txt, at most 1e-4 absolute.
    void shippedModel()
    {
        const std::string dir = std::string(KVLENS_MODELS_DIR) + "/tiny-llama";
        const Transformer m = loadModel(dir);
        QCOMPARE(m.config().vocab, 256);
        QVERIFY(m.config().kvHeads < m.config().heads);
        QFile held(QString::fromStdString(dir + "/heldout.txt"));
        QVERIFY(held.open(QIODevice::ReadOnly));
        const QByteArray bytes = held.read(256);
        QCOMPARE(bytes.size(), 256);
        const RowMatrixXf expected = readMatrix(dir + "/reference_logits.npy", 256, 256);
        for (int chunk = 0; chunk < 2; ++chunk) {
            std::vector<std::int32_t> ids;
            for (int i = 0; i < 128; ++i)
                ids.push_back(static_cast<unsigned char>(bytes[chunk * 128 + i]));
            const RowMatrixXf got = logitsOf(m, ids);
            const double err = maxAbsDiff(got, expected.middleRows(chunk * 128, 128));
            qInfo("tiny-llama chunk %d: max |logit error| %.3g", chunk, err);
            KVLENS_VERIFY_IN_RANGE(err, 0.0, 1e-4);
        }
    }

    void identityHookIsBitIdentical()
    {
        for (const char* f : {"llama_gqa", "gpt2"}) {
            const Transformer m = loadModel(kModels + "/" + f);
            const auto tokens = readTokens(kModels + "/" + f + "/tokens.npy");
            const RowMatrixXf base = logitsOf(m, tokens);
            IdentityHook hook;
            ForwardOptions o;
            o.cache = &hook;
            QVERIFY2((logitsOf(m, tokens, o).array() == base.array()).all(), f);
        }
    }

    /// A hook that changes rows > t leaves the logits of positions <= t bit for bit unchanged
    /// (residual 0): the codec is causal and so is attention.
    void causality()
    {
        const Transformer m = loadModel(kModels + "/llama_gqa");
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        const RowMatrixXf base = logitsOf(m, tokens);
        for (int t : {0, 9, 20}) {
            PerturbHook hook([t](int row) { return row > t; });
            ForwardOptions o;
            o.cache = &hook;
            const RowMatrixXf q = logitsOf(m, tokens, o);
            for (int r = 0; r <= t; ++r)
                QVERIFY2(rowsEqual(q, base, r), qPrintable(QString("row %1 changed, t = %2").arg(r).arg(t)));
            QVERIFY((q.bottomRows(q.rows() - t - 1) - base.bottomRows(q.rows() - t - 1)).cwiseAbs().maxCoeff() > 1e-3f);
        }
        // Residual 0: a query reads its own token's key from the cache too.
        PerturbHook first([](int row) { return row == 0; });
        ForwardOptions o;
        o.cache = &first;
        QVERIFY(!rowsEqual(logitsOf(m, tokens, o), base, 0));
    }

    void residualWindow()
    {
        const Transformer m = loadModel(kModels + "/qwen2_bias");
        const auto tokens = readTokens(kModels + "/qwen2_bias/tokens.npy");
        const int T = static_cast<int>(tokens.size());
        const RowMatrixXf base = logitsOf(m, tokens);
        PerturbHook all([](int) { return true; });
        ForwardOptions o;
        o.cache = &all;
        o.residual = T; // every key of every query is inside the window: the hook has no effect
        QVERIFY((logitsOf(m, tokens, o).array() == base.array()).all());
        o.residual = 1;
        QVERIFY(maxAbsDiff(logitsOf(m, tokens, o), base) > 1e-3);

        // Only key 0 is changed, R = T - 1: query t reads key 0 from the cache iff t - 0 >= R, so
        // only the last position moves, in every layer, and all the others stay bit-identical.
        PerturbHook first([](int row) { return row == 0; });
        o.cache = &first;
        o.residual = T - 1;
        const RowMatrixXf q = logitsOf(m, tokens, o);
        for (int r = 0; r < T - 1; ++r)
            QVERIFY2(rowsEqual(q, base, r), qPrintable(QString("row %1").arg(r)));
        QVERIFY(!rowsEqual(q, base, T - 1));
        o.residual = T - 2; // now the last two
        const RowMatrixXf q2 = logitsOf(m, tokens, o);
        QVERIFY(rowsEqual(q2, base, T - 3));
        QVERIFY(!rowsEqual(q2, base, T - 2));
    }

    void probeWithHook()
    {
        const Transformer m = loadModel(kModels + "/llama_gqa");
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        PerturbHook all([](int) { return true; }, {}, 0.25f);
        ForwardOptions o;
        o.cache = &all;
        o.probe = ProbeRequest{1, 3, 17};
        auto r = m.forward(tokens, o);
        QVERIFY(r && r->probe);
        QCOMPARE(r->probe->kvHead, 1); // 4 query heads over 2 KV heads: head 3 reads KV head 1
        QCOMPARE(r->probe->exactScores.size(), std::size_t(18));
        double se = 0, sc = 0, diff = 0;
        for (std::size_t j = 0; j < 18; ++j) {
            se += r->probe->exactProbs[j];
            sc += r->probe->cacheProbs[j];
            diff = std::max(diff, std::abs(double(r->probe->exactScores[j] - r->probe->cacheScores[j])));
        }
        KVLENS_COMPARE_ABS(se, 1.0, 1e-12);
        KVLENS_COMPARE_ABS(sc, 1.0, 1e-12);
        QVERIFY(diff > 1e-3); // the perturbed keys move every score
        // The cache scores are the query against the perturbed keys: q.(k + 0.25) = q.k + 0.25 sum(q),
        // so exact - cache is the same for every key j.
        const double offset = double(r->probe->cacheScores[0] - r->probe->exactScores[0]);
        for (std::size_t j = 1; j < 18; ++j)
            KVLENS_COMPARE_ABS(double(r->probe->cacheScores[j] - r->probe->exactScores[j]), offset, 1e-4);
    }

    void damageMatchesProbeAndCapture_data()
    {
        QTest::addColumn<int>("residual");
        QTest::newRow("every key from the cache") << 0;
        QTest::newRow("residual window of 5") << 5;
    }

    /// The per-query damage against independent computations: KL and Fisher from the probe's exact and
    /// cache scores of the same query, the attention outputs and the key and value errors from the
    /// captured K, V and the hook's own output, the calibrated score error with a known moment.
    void damageMatchesProbeAndCapture()
    {
        QFETCH(int, residual);
        const Transformer m = loadModel(kModels + "/llama_gqa");
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        const ModelConfig& c = m.config();
        const int T = static_cast<int>(tokens.size()), start = 12, hd = c.headDim;
        const NoiseHook hook(0.3f);
        // M = 2 I in layer 0, 3 I in layer 1: the score error is M's scale times ||k - k^||^2 / d.
        std::vector<std::vector<Eigen::MatrixXf>> moments(static_cast<std::size_t>(c.layers));
        for (int l = 0; l < c.layers; ++l)
            moments[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(c.kvHeads),
                                                        Eigen::MatrixXf::Identity(hd, hd) * float(2 + l));
        ForwardOptions o;
        o.cache = &hook;
        o.residual = residual;
        o.damage = DamageRequest{start, &moments};
        o.capture = {0, T};
        auto full = m.forward(tokens, o);
        QVERIFY(full && full->damage);
        const AttentionDamage& d = *full->damage;
        QCOMPARE(d.count, T - start);
        QCOMPARE(d.kl.size(), std::size_t(c.layers * c.heads * (T - start)));
        QCOMPARE(d.relK.size(), std::size_t(c.layers * c.kvHeads * (T - start)));
        int checked = 0;
        for (int layer = 0; layer < c.layers; ++layer)
            for (int head : {0, 3})
                for (int t : {start, 20, T - 1}) {
                    ForwardOptions po = o;
                    po.damage.reset();
                    po.capture = {};
                    po.probe = ProbeRequest{layer, head, t};
                    auto pr = m.forward(tokens, po);
                    QVERIFY(pr && pr->probe);
                    const AttentionProbe& p = *pr->probe;
                    double kl = 0, m1 = 0, m2 = 0;
                    for (int j = 0; j <= t; ++j) {
                        const double pj = p.exactProbs[std::size_t(j)];
                        const double delta = double(p.cacheScores[std::size_t(j)]) - p.exactScores[std::size_t(j)];
                        kl += pj * std::log(pj / p.cacheProbs[std::size_t(j)]);
                        m1 += pj * delta;
                        m2 += pj * delta * delta;
                    }
                    const std::size_t at = std::size_t((layer * c.heads + head) * d.count + (t - start));
                    QVERIFY(kl > 1e-4); // the noise moves the weights
                    KVLENS_COMPARE_REL(double(d.kl[at]), kl, 1e-3);
                    KVLENS_COMPARE_REL(double(d.fisher[at]), m2 - m1 * m1, 1e-3);

                    // Outputs: o from the exact weights over the captured V, o^ from the cache's weights over
                    // the values the query read (the hook's beyond the residual window).
                    const LayerCapture& cap = full->capture[std::size_t(layer)];
                    const int g = p.kvHead;
                    auto at3 = [&](const std::vector<float>& x, int j, int i) {
                        return double(x[std::size_t((g * T + j) * hd + i)]);
                    };
                    const int cached = residual > 0 ? t - residual + 1 : t + 1; // keys [0, cached) read the hook's
                    Eigen::VectorXd oe = Eigen::VectorXd::Zero(hd), oq = oe;
                    double a2 = 0;
                    for (int j = 0; j <= t; ++j) {
                        double err = 0;
                        for (int i = 0; i < hd; ++i) {
                            const double v = at3(cap.v, j, i);
                            const double vh = j < cached ? v + 0.3 * double(NoiseHook::noise(layer, g, j, i, 2)) : v;
                            oe(i) += p.exactProbs[std::size_t(j)] * v;
                            oq(i) += p.cacheProbs[std::size_t(j)] * vh;
                            err += (v - vh) * (v - vh);
                        }
                        a2 += p.exactProbs[std::size_t(j)] * p.exactProbs[std::size_t(j)] * err;
                    }
                    KVLENS_COMPARE_REL(double(d.outErr[at]), (oe - oq).squaredNorm() / oe.squaredNorm(), 2e-3);
                    KVLENS_COMPARE_REL(double(d.a2[at]), a2 / oe.squaredNorm(), 1e-3);

                    // The cache side of this query's KV head.
                    double keyErr = 0, keyEnergy = 0, valueErr = 0, valueEnergy = 0;
                    for (int j = 0; j <= t; ++j)
                        for (int i = 0; i < hd; ++i) {
                            const double k = at3(cap.k, j, i), v = at3(cap.v, j, i);
                            const double ek = j < cached ? 0.3 * double(NoiseHook::noise(layer, g, j, i, 1)) : 0.0;
                            const double ev = j < cached ? 0.3 * double(NoiseHook::noise(layer, g, j, i, 2)) : 0.0;
                            keyErr += ek * ek;
                            valueErr += ev * ev;
                            keyEnergy += k * k;
                            valueEnergy += v * v;
                        }
                    const std::size_t side = std::size_t((layer * c.kvHeads + g) * d.count + (t - start));
                    KVLENS_COMPARE_REL(double(d.relK[side]), keyErr / keyEnergy, 1e-4);
                    KVLENS_COMPARE_REL(double(d.relV[side]), valueErr / valueEnergy, 1e-4);
                    KVLENS_COMPARE_REL(double(d.calibScoreErr[side]), (2 + layer) * keyErr / hd / (t + 1), 1e-4);
                    ++checked;
                }
        QCOMPARE(checked, c.layers * 2 * 3);
    }

    /// A constant shift of every key moves every score of a query by q.shift: the softmax, so the KL
    /// and the Fisher error, do not see it, while the key error does; no hook: no damage at all.
    void damageIgnoresAShiftTheSoftmaxCannotSee()
    {
        const Transformer m = loadModel(kModels + "/llama_gqa");
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        PerturbHook keysShifted([](int) { return true; }, {}, 0.25f);
        ForwardOptions o;
        o.damage = DamageRequest{4, nullptr};
        auto exact = m.forward(tokens, o);
        QVERIFY(exact && exact->damage);
        for (const auto* v : {&exact->damage->kl, &exact->damage->fisher, &exact->damage->relK, &exact->damage->outErr})
            QVERIFY(std::all_of(v->begin(), v->end(), [](float x) { return x == 0.0f; }));
        QVERIFY(std::isnan(exact->damage->calibScoreErr.front())); // no calibration queries
        o.cache = &keysShifted;
        auto shifted = m.forward(tokens, o);
        QVERIFY(shifted && shifted->damage);
        const AttentionDamage& d = *shifted->damage;
        const double maxKl = *std::max_element(d.kl.begin(), d.kl.end());
        const double maxFisher = *std::max_element(d.fisher.begin(), d.fisher.end());
        const double minRelK = *std::min_element(d.relK.begin(), d.relK.end());
        QVERIFY2(maxKl < 1e-6 && maxFisher < 1e-6, qPrintable(QString("KL %1, Fisher %2").arg(maxKl).arg(maxFisher)));
        QVERIFY(minRelK > 1e-3);
    }

    /// Starting at layer L from the captured input of layer L gives the full pass's logits, with or
    /// without a hook that quantizes only layer L (per-layer attribution).
    void resumption()
    {
        const Transformer m = loadModel(kModels + "/llama_bf16_sharded");
        const auto tokens = readTokens(kModels + "/llama_bf16_sharded/tokens.npy");
        std::vector<RowMatrixXf> inputs;
        ForwardOptions ref;
        ref.layerInputs = &inputs;
        const RowMatrixXf base = logitsOf(m, tokens, ref);
        QCOMPARE(inputs.size(), std::size_t(m.config().layers));
        for (int layer = 0; layer < m.config().layers; ++layer) {
            PerturbHook only([](int) { return true; }, [layer](int l) { return l == layer; });
            ForwardOptions full;
            full.cache = &only;
            const RowMatrixXf fromStart = logitsOf(m, tokens, full);
            ForwardOptions resumed = full;
            resumed.startLayer = layer;
            resumed.startHidden = &inputs[std::size_t(layer)];
            QVERIFY((logitsOf(m, tokens, resumed).array() == fromStart.array()).all());
            resumed.cache = nullptr;
            QVERIFY((logitsOf(m, tokens, resumed).array() == base.array()).all());
            QVERIFY(maxAbsDiff(fromStart, base) > 1e-3);
        }
        // The state entering layer 0 is the embedding of the tokens (Llama: no positions added).
        for (std::size_t t = 0; t < tokens.size(); ++t)
            QVERIFY((inputs[0].row(Eigen::Index(t)).array() == m.denseWeights().embed.row(tokens[t]).array()).all());
    }

    void logitsStartAndThreads()
    {
        const auto tokens = readTokens(kModels + "/gpt2_prefixed/tokens.npy");
        const Transformer one = loadModel(kModels + "/gpt2_prefixed", 1), three = loadModel(kModels + "/gpt2_prefixed", 3);
        const RowMatrixXf full = logitsOf(one, tokens);
        ForwardOptions o;
        o.logitsStart = 16;
        const RowMatrixXf half = logitsOf(one, tokens, o);
        QCOMPARE(half.rows(), full.rows() - 16);
        KVLENS_VERIFY_IN_RANGE(maxAbsDiff(half, full.bottomRows(full.rows() - 16)), 0.0, 1e-6);
        KVLENS_VERIFY_IN_RANGE(maxAbsDiff(logitsOf(three, tokens), full), 0.0, 1e-5);
    }

    void cancellation()
    {
        const Transformer m = loadModel(kModels + "/llama_gqa");
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        int polls = 0;
        ForwardOptions o;
        o.cancelled = [&] { return ++polls > 1000; };
        QVERIFY(m.forward(tokens, o));
        QCOMPARE(polls, m.config().layers + 1); // before each layer and before the head
        polls = 0;
        o.cancelled = [&] { return ++polls == 2; };
        auto r = m.forward(tokens, o);
        QVERIFY(!r);
        QCOMPARE(r.error().text(), std::string("cancelled"));
        QVERIFY(r.error().cancelled()); // callers branch on the kind, not on the text
    }

    void refusals_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<QString>("expected");
        QTest::newRow("no tokens") << 0 << "tokens: no tokens";
        QTest::newRow("token out of range") << 1 << "tokens[3]: id 300 is outside the vocabulary [0, 299]";
        QTest::newRow("negative token") << 2 << "tokens[0]: id -1";
        QTest::newRow("learned positions") << 3 << "/models/gpt2/config.json: 'n_positions' = 64: a chunk of 65 tokens";
        QTest::newRow("context") << 4 << "closed-form: 'max_position_embeddings' = 64: a chunk of 65 tokens";
        QTest::newRow("residual") << 5 << "residual: must be >= 0";
        QTest::newRow("logitsStart") << 6 << "logitsStart: must be in [0, 31]";
        QTest::newRow("startLayer") << 7 << "startLayer: must be in [0, 2]";
        QTest::newRow("startHidden missing") << 8 << "startHidden: is needed";
        QTest::newRow("startHidden shape") << 9 << "startHidden: has shape [32 x 63]";
        QTest::newRow("capture") << 10 << "capture: positions [30, +5)";
        QTest::newRow("probe head") << 11 << "probe: head 4 must be in [0, 3]";
        QTest::newRow("probe position") << 12 << "probe: position 32 must be in [0, 31]";
        QTest::newRow("hook shape") << 13 << "cache: the cache hook returned khat of shape [31 x 16] for layer 0, KV head";
        QTest::newRow("hook NaN") << 14 << "cache: the cache hook returned a non-finite vhat value for layer 0, KV head";
        QTest::newRow("damage start") << 15 << "damage: start 32 must be in [0, 31]";
        QTest::newRow("damage moments") << 16 << "damage: queryMoments must hold a finite [16 x 16] matrix per layer (2)";
    }

    void refusals()
    {
        QFETCH(int, kind);
        QFETCH(QString, expected);
        const Transformer m = loadModel(kModels + "/llama_gqa");
        std::vector<std::int32_t> tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        ForwardOptions o;
        RowMatrixXf hidden = RowMatrixXf::Zero(32, 63);
        BrokenHook shape(false), nan(true);
        const std::vector<std::vector<Eigen::MatrixXf>> badMoments(2, std::vector<Eigen::MatrixXf>(2, Eigen::MatrixXf::Zero(8, 8)));
        Result<ForwardResult> r = Error{"", "not run"};
        switch (kind) {
        case 0: tokens.clear(); break;
        case 1: tokens[3] = 300; break;
        case 2: tokens[0] = -1; break;
        case 3: {
            const Transformer g = loadModel(kModels + "/gpt2");
            r = g.forward(std::vector<std::int32_t>(65, 1));
            break;
        }
        case 4: r = closedFormModel(2, 8).forward(std::vector<std::int32_t>(65, 1)); break;
        case 5: o.residual = -1; break;
        case 6: o.logitsStart = 32; break;
        case 7: o.startLayer = 3; break;
        case 8: o.startLayer = 1; break;
        case 9: o.startLayer = 1; o.startHidden = &hidden; break;
        case 10: o.capture = {30, 5}; break;
        case 11: o.probe = ProbeRequest{0, 4, 0}; break;
        case 12: o.probe = ProbeRequest{0, 0, 32}; break;
        case 13: o.cache = &shape; break;
        case 14: o.cache = &nan; break;
        case 15: o.damage = DamageRequest{32, nullptr}; break;
        case 16: o.damage = DamageRequest{0, &badMoments}; break;
        }
        if (kind != 3 && kind != 4)
            r = m.forward(tokens, o);
        QVERIFY(!r);
        const QString message = QString::fromStdString(r.error().text());
        QVERIFY2(message.contains(expected), qPrintable(message));
    }
};

QTEST_APPLESS_MAIN(TestLmForward)
#include "tst_lm_forward.moc"
