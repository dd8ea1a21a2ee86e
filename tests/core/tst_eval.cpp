// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluator on the shipped model: the exact cache costs nothing (KLD 0, PPL ratio 1 exactly),
// a quantized cache never lets a later token reach an earlier logit, per-token statistics against
// an independent computation from the forward's logits, attribution, and refusals.
#include "core/analysis/eval_analysis.h"
#include "core/eval/drill_down.h"
#include "core/eval/eval_files.h"
#include "core/eval/evaluator.h"
#include "core/lm/tokenizer.h"
#include "core/spec/allocation.h"
#include "common/approx.h"
#include "common/shipped_model.h"
#include "common/closed_form_model.h"

#include <QTest>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace kvlens;
using namespace kvlens::eval;

namespace {

const std::string kModel = kvlens::testing::shippedModelDir();

const lm::Transformer& model()
{
    return kvlens::testing::shippedModel();
}

/// The held-out text's bytes as token ids (the model's vocabulary is its 256 bytes).
std::vector<std::int32_t> heldoutTokens(std::size_t count)
{
    std::ifstream in(kModel + "/heldout.txt", std::ios::binary);
    std::vector<std::int32_t> ids;
    for (char c; ids.size() < count && in.get(c);)
        ids.push_back(static_cast<unsigned char>(c));
    return ids;
}

EvalSpec specFor(std::vector<std::string> schemes, std::vector<int> budgets, int ctx = 64)
{
    EvalSpec s;
    s.modelDir = kModel;
    s.tokensFile = "heldout";
    s.ctx = ctx;
    s.budgets = std::move(budgets);
    s.attribution = Attribution::None;
    s.threads = 2;
    for (const std::string& name : schemes)
        s.schemes.push_back(EvalScheme{*findScheme(name), {}, {}});
    return s;
}

/// KL(p || q) of two logit rows in long double, written out here (not lm::scoreToken's code).
long double klOf(const float* base, const float* quant, int vocab)
{
    auto logSoftmax = [vocab](const float* l) {
        long double m = l[0];
        for (int i = 1; i < vocab; ++i)
            m = std::max<long double>(m, l[i]);
        long double z = 0.0L;
        for (int i = 0; i < vocab; ++i)
            z += std::exp(static_cast<long double>(l[i]) - m);
        std::vector<long double> out(static_cast<std::size_t>(vocab));
        for (int i = 0; i < vocab; ++i)
            out[static_cast<std::size_t>(i)] = static_cast<long double>(l[i]) - m - std::log(z);
        return out;
    };
    const auto lp = logSoftmax(base), lq = logSoftmax(quant);
    long double kl = 0.0L;
    for (int i = 0; i < vocab; ++i)
        kl += std::exp(lp[static_cast<std::size_t>(i)]) * (lp[static_cast<std::size_t>(i)] - lq[static_cast<std::size_t>(i)]);
    return kl;
}

} // namespace

class TestEval : public QObject {
    Q_OBJECT

private slots:
    void theExactCacheCostsNothing_data()
    {
        QTest::addColumn<int>("residual");
        QTest::newRow("R = 0") << 0;
        QTest::newRow("R = 16") << 16;
    }
    void theExactCacheCostsNothing()
    {
        // The identity configuration goes through the whole cache path (hook, per-query masks) and
        // must give the reference's logits bit for bit: KLD 0 and a PPL ratio of exactly 1.
        QFETCH(int, residual);
        EvalSpec spec = specFor({"exact"}, {2, 3});
        spec.residual = residual;
        spec.attribution = Attribution::Layers;
        auto r = runEval(spec, model(), heldoutTokens(64 * 4), std::nullopt);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        QCOMPARE(r->configurations.size(), std::size_t{1}); // fixed width: once, whatever the budgets
        QCOMPARE(r->configurations[0].budget, 0);
        const ConfigurationResult& c = r->configurations[0];
        QCOMPARE(c.tokens.size(), std::size_t{4 * 31}); // positions 32..62 of each 64-token chunk
        for (const lm::TokenStat& t : c.tokens) {
            QCOMPARE(t.kld, 0.0);
            QCOMPARE(t.nllQ, t.nllBase);
            QVERIFY(t.sameTop());
        }
        QCOMPARE(c.summary.pplRatio.mean, 1.0);
        QCOMPARE(c.summary.logPplRatio.mean, 0.0);
        QCOMPARE(c.summary.sameTop.mean, 1.0);
        for (const AttributionRow& a : r->attribution)
            QCOMPARE(a.kld.mean, 0.0);
        QCOMPARE(r->attribution.size(), std::size_t{4 * 3}); // 4 layers x (K, V, both)
    }

    void statisticsAgreeWithTheForwardsLogits()
    {
        // TQ-KV at 3 bits: the evaluator's per-token KLD equals KL computed here in long double from
        // the logits of the exact forward and of a forward through the same planned cache.
        EvalSpec spec = specFor({"TQ-KV"}, {3});
        const auto tokens = heldoutTokens(64 * 2);
        auto r = runEval(spec, model(), tokens, std::nullopt);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        const auto& config = model().config();
        auto cache = CodecCache::plan(std::vector<SchemeConfig>(4, *findScheme("TQ-KV")), 3, config.kvHeads,
                                      config.headDim, spec.seed(0), nullptr);
        QVERIFY(cache.ok());
        for (int chunk = 0; chunk < 2; ++chunk) {
            const std::vector<std::int32_t> ids(tokens.begin() + 64 * chunk, tokens.begin() + 64 * (chunk + 1));
            auto base = model().forward(ids);
            lm::ForwardOptions options;
            options.cache = cache->get();
            auto quant = model().forward(ids, options);
            QVERIFY(base.ok() && quant.ok());
            for (int i = 0; i < 31; ++i) {
                const int t = 32 + i;
                const long double kl = klOf(base->logits.row(t).data(), quant->logits.row(t).data(), config.vocab);
                const lm::TokenStat& s = r->configurations[0].tokens[static_cast<std::size_t>(chunk * 31 + i)];
                KVLENS_COMPARE_ABS(s.kld, static_cast<double>(kl), 1e-9);
                QCOMPARE(r->scored[static_cast<std::size_t>(chunk * 31 + i)].next, ids[static_cast<std::size_t>(t + 1)]);
            }
        }
        // A 3-bit cache does damage, and less than a 2-bit one would: the statistics are not empty.
        QVERIFY(r->configurations[0].summary.kld.mean > 1e-4);
        QVERIFY(r->configurations[0].summary.sameTop.mean < 1.0);
    }

    void aQuantizedCacheNeverReadsALaterToken_data()
    {
        QTest::addColumn<QString>("scheme");
        for (const char* s : {"KIVI", "KIVI-A2", "KVQuant-DS", "QKQV", "SQ-QKV", "HeadQ", "q4_0", "K=q8_0,V=q4_1"})
            QTest::newRow(s) << QString(s);
    }
    void aQuantizedCacheNeverReadsALaterToken()
    {
        // The token at position p changed: the logits at every position before p are bit-identical,
        // for codecs that encode groups of tokens together (KIVI's 32-token key groups, the A^2
        // allocation group, KVQuant's outlier pool): a query reads a group's codes only once the
        // group is complete, and the exact rows of its own open group (KvCacheHook::causalGroup).
        QFETCH(QString, scheme);
        const auto& config = model().config();
        const auto text = heldoutTokens(128 + 160);
        // Calibration rows from a separate part of the text, as the evaluator takes them.
        CodecCache::Calibration calibration;
        {
            lm::ForwardOptions options;
            options.capture = lm::CaptureRequest{0, 128};
            auto pass = model().forward(std::span<const std::int32_t>(text.data(), 128), options);
            QVERIFY(pass.ok());
            const int group = config.heads / config.kvHeads;
            calibration.keys.assign(4, std::vector<RowMatrixXf>(static_cast<std::size_t>(config.kvHeads)));
            calibration.values = calibration.queries = calibration.keys;
            for (int l = 0; l < 4; ++l)
                for (int h = 0; h < config.kvHeads; ++h) {
                    auto rows = [&](const std::vector<float>& from, int head) {
                        RowMatrixXf m(128, config.headDim);
                        for (int t = 0; t < 128; ++t)
                            for (int j = 0; j < config.headDim; ++j)
                                m(t, j) = from[(static_cast<std::size_t>(head) * 128 + t) * config.headDim + j];
                        return m;
                    };
                    const auto& c = pass->capture[static_cast<std::size_t>(l)];
                    calibration.keys[l][h] = rows(c.k, h);
                    calibration.values[l][h] = rows(c.v, h);
                    RowMatrixXf q(128 * group, config.headDim);
                    for (int g = 0; g < group; ++g)
                        q.middleRows(128 * g, 128) = rows(c.q, h * group + g);
                    calibration.queries[l][h] = q;
                }
        }
        auto cache = CodecCache::plan(std::vector<SchemeConfig>(4, *findScheme(scheme.toStdString())), 2, config.kvHeads,
                                      config.headDim, 7, &calibration);
        QVERIFY2(cache.ok(), cache.ok() ? "" : cache.error().text().c_str());
        std::vector<std::int32_t> ids(text.begin() + 128, text.begin() + 288);
        lm::ForwardOptions options;
        options.cache = cache->get();
        auto before = model().forward(ids, options);
        QVERIFY(before.ok());
        for (const int p : {40, 64, 100, 159}) {
            std::vector<std::int32_t> changed = ids;
            changed[static_cast<std::size_t>(p)] = (changed[static_cast<std::size_t>(p)] + 97) % 256;
            auto after = model().forward(changed, options);
            QVERIFY(after.ok());
            for (int t = 0; t < p; ++t)
                QVERIFY2(before->logits.row(t) == after->logits.row(t),
                         qPrintable(QStringLiteral("%1: logits at %2 changed when token %3 did").arg(scheme).arg(t).arg(p)));
            QVERIFY(before->logits.row(p) != after->logits.row(p));
        }
    }

    void attributionOfTheOnlyLayersAddsUp()
    {
        // Quantizing every layer but measuring one at a time: each layer alone does less damage than
        // all four together (on this model's text), K-only and V-only rows exist for every layer,
        // and a per-layer allocation that quantizes layer 1 alone reproduces that layer's row.
        EvalSpec spec = specFor({"TQ-KV"}, {2});
        spec.attribution = Attribution::Layers;
        const auto tokens = heldoutTokens(64 * 3);
        auto r = runEval(spec, model(), tokens, std::nullopt);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        const double all = r->configurations[0].summary.kld.mean;
        double layerOne = -1.0;
        for (const AttributionRow& a : r->attribution) {
            QVERIFY(a.kld.mean > 0.0);
            QVERIFY2(a.kld.mean < all, qPrintable(QStringLiteral("layer %1 alone %2 >= all layers %3").arg(a.layer).arg(a.kld.mean).arg(all)));
            QVERIFY(a.kldLow <= a.kld.mean && a.kld.mean <= a.kldHigh);
            if (a.layer == 1 && a.path == AttributionPath::Both)
                layerOne = a.kld.mean;
        }
        EvalSpec allocated = specFor({"TQ-KV"}, {2});
        EvalScheme onlyOne;
        onlyOne.origin = "test";
        const SchemeConfig exact = *findScheme("exact"), tq = *findScheme("TQ-KV");
        onlyOne.layers = {exact, tq, exact, exact};
        onlyOne.scheme = tq;
        onlyOne.scheme.name = "layer 1 only";
        allocated.schemes = {onlyOne};
        auto a = runEval(allocated, model(), tokens, std::nullopt);
        QVERIFY2(a.ok(), a.ok() ? "" : a.error().text().c_str());
        KVLENS_COMPARE_ABS(a->configurations[0].summary.kld.mean, layerOne, 1e-12);
    }

    void attributionAndAdviceFindTheOnlyLayerThatMatters()
    {
        // The shipped model with the attention output of layers 1-3 zeroed: whatever their caches
        // hold, only layer 0's reaches the output. The attribution must put layer 0 first (the others
        // exactly 0) and the advisor, fed the end-to-end curves, must give layer 0 more bits.
        lm::ModelWeights weights = model().weights();
        for (std::size_t l = 1; l < weights.layers.size(); ++l)
            weights.layers[l].out.setZero();
        auto edited = lm::Transformer::create(model().config(), weights, 2);
        QVERIFY2(edited.ok(), edited.ok() ? "" : edited.error().text().c_str());
        EvalSpec spec = specFor({"TQ-KV"}, {2, 3, 4});
        spec.attribution = Attribution::Layers;
        auto r = runEval(spec, *edited, heldoutTokens(64 * 3), std::nullopt);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        for (const AttributionRow& a : r->attribution) {
            if (a.layer == 0)
                QVERIFY2(a.kld.mean > 0.0, attributionPathName(a.path));
            else
                QCOMPARE(a.kld.mean, 0.0);
        }
        auto curves = endToEndCurves(*r, "TQ-KV");
        QVERIFY2(curves.ok(), curves.ok() ? "" : curves.error().text().c_str());
        QCOMPARE(curves->size(), std::size_t{4});
        const auto advice = allocate(*curves, 3.0);
        QVERIFY(advice.has_value());
        for (std::size_t l = 1; l < advice->layers.size(); ++l)
            QVERIFY2(advice->kBits[0] + advice->vBits[0] > advice->kBits[l] + advice->vBits[l],
                     qPrintable(QStringLiteral("layer 0: K%1/V%2, layer %3: K%4/V%5")
                                    .arg(advice->kBits[0]).arg(advice->vBits[0]).arg(l).arg(advice->kBits[l]).arg(advice->vBits[l])));
    }

    void theDrillDownShowsTheKnownWeights()
    {
        // The one-layer closed-form model (tests/common/closed_form_model.h): head 0's exact attention
        // of query t is softmax_j of (a u)^2 / 2 sin(t - j). The drill-down's exact strip must be it;
        // through the exact scheme the quantized strip is the same; through a 1-bit cache it is not,
        // and the head ranking puts the changed head first.
        using namespace kvlens::test::closed_form;
        const lm::Transformer m = closedFormModel(2);
        std::vector<std::int32_t> tokens;
        for (int i = 0; i < 64; ++i)
            tokens.push_back((i * 7 + 3) % kVocab);
        EvalSpec spec = specFor({"exact", "KV"}, {1}, 16);
        auto r = runEval(spec, m, tokens, std::nullopt);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        for (const int scored : {0, 5, 20}) {
            auto a = probeToken(m, *r, 0, scored, 0, 0);
            QVERIFY2(a.ok(), a.ok() ? "" : a.error().text().c_str());
            const std::vector<double> expected = closedFormWeights(a->position);
            QCOMPARE(a->exact.size(), expected.size());
            for (std::size_t j = 0; j < expected.size(); ++j) {
                KVLENS_COMPARE_ABS(a->exact[j], expected[j], 1e-5);
                QCOMPARE(a->quantized[j], a->exact[j]);
            }
            QCOMPARE(a->kl, 0.0);
            QCOMPARE(a->keys.back(), r->scored[static_cast<std::size_t>(scored)].token); // the query's own token
        }
        auto q = probeToken(m, *r, 1, 20, 0, 0);
        QVERIFY(q.ok());
        QVERIFY(q->kl > 0.0);
        auto ranked = headChanges(m, *r, 1, 20);
        QVERIFY(ranked.ok());
        QCOMPARE(ranked->size(), std::size_t{2});
        QVERIFY((*ranked)[0].kl >= (*ranked)[1].kl);
        // Out of range: named.
        auto bad = probeToken(m, *r, 0, 20, 0, 5);
        QVERIFY(!bad.ok());
        QCOMPARE(bad.error().field, std::string("head"));
    }

    void badInputIsRefusedNamingTheField()
    {
        const auto tokens = heldoutTokens(64 * 3);
        // Fewer than two chunks after calibration.
        auto r = runEval(specFor({"KV"}, {2}, 64), model(), heldoutTokens(100), std::nullopt);
        QVERIFY(!r.ok());
        QCOMPARE(r.error().field, std::string("tokens"));
        QVERIFY(r.error().message.find("fewer than two chunks") != std::string::npos);
        // A token id outside the vocabulary, named with its index.
        auto bad = tokens;
        bad[70] = 256;
        r = runEval(specFor({"KV"}, {2}), model(), bad, std::nullopt);
        QVERIFY(!r.ok());
        QVERIFY2(r.error().text().find("70") != std::string::npos, r.error().text().c_str());
        // A chunk longer than the model's context.
        r = runEval(specFor({"KV"}, {2}, 1024), model(), heldoutTokens(4096), std::nullopt);
        QVERIFY(!r.ok());
        QCOMPARE(r.error().field, std::string("ctx"));
        // An allocation for another number of layers.
        EvalSpec spec = specFor({"KV"}, {2});
        spec.schemes[0].layers = {*findScheme("KV"), *findScheme("KV")};
        spec.schemes[0].origin = "allocation.json";
        r = runEval(spec, model(), tokens, std::nullopt);
        QVERIFY(!r.ok());
        QCOMPARE(r.error().field, std::string("schemes[0].allocation"));
        // A scheme that does not fit the head dimension (32): ggml blocks need multiples of 32, HeadQ's rank <= 32.
        spec = specFor({"KV"}, {2});
        spec.schemes[0].scheme.key.residuals = {CodecPart("headq", {{"rank", 40.0}})};
        r = runEval(spec, model(), tokens, std::nullopt);
        QVERIFY(!r.ok());
        QVERIFY2(r.error().field.find("schemes[0].k.residuals[0]") == 0, r.error().field.c_str());
    }

    void filesSayWhatTheyHold()
    {
        EvalSpec spec = specFor({"exact", "KV"}, {2});
        spec.attribution = Attribution::Layers;
        auto r = runEval(spec, model(), heldoutTokens(64 * 2), std::nullopt);
        QVERIFY(r.ok());
        const std::string summary = summaryCsv(*r);
        QVERIFY(summary.rfind("# scored: positions ctx/2 .. ctx-2", 0) == 0);
        QVERIFY(summary.find("\nexact,fixed,1,32,32,62,") != std::string::npos);
        const std::string tokens = tokensCsv(*r);
        QCOMPARE(static_cast<int>(std::count(tokens.begin(), tokens.end(), '\n')), 2 + 2 * 62);
        QCOMPARE(escapeTokenText(std::string("a\n\t\\\x01")), std::string("a\\n\\t\\\\\\x01"));
        const std::string layers = layersCsv(*r);
        QVERIFY(layers.find("\nKV,2,1,3,all,both,") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestEval)
#include "tst_eval.moc"
