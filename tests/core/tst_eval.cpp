// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluator on the shipped model: the exact cache costs nothing (KLD 0, PPL ratio 1 exactly),
// a quantized cache never lets a later token reach an earlier logit, per-token statistics against
// an independent computation from the forward's logits, attribution, and refusals.
#include "core/analysis/eval_analysis.h"
#include "core/eval/drill_down.h"
#include "core/eval/eval_files.h"
#include "core/eval/evaluator.h"
#include "core/report/claims_output.h"
#include "core/rng/rng.h"
#include "core/stats/spearman.h"
#include "core/lm/tokenizer.h"
#include "core/spec/allocation.h"
#include "core/spec/eval_spec.h"
#include "common/approx.h"
#include "common/shipped_model.h"
#include "common/closed_form_model.h"

#include <QTest>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

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

/// A hand-made evaluation for the proxy study: cells (scheme A, n = 2) with two seeds and (scheme B,
/// n = 2) with one, 8 chunks of 20 scored tokens, KLDs drawn from a fixed seed; `fill` sets a token's
/// proxies from its KLD, its cell and a second uniform draw.
EvalResult proxyEvaluation(const std::function<void(TokenProxies&, double kld, bool cellA, double noise)>& fill)
{
    EvalResult r;
    r.chunksScored = 8;
    for (int chunk = 0; chunk < 8; ++chunk)
        for (int i = 0; i < 20; ++i)
            r.scored.push_back(ScoredToken{chunk, 32 + i, 0, 0});
    std::mt19937_64 rng(2026);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (const auto& [name, seed] : {std::pair<const char*, int>{"A", 0}, {"A", 1}, {"B", 0}, {"exact", 0}}) {
        ConfigurationResult c;
        c.name = name;
        c.budget = std::string(name) == "exact" ? 0 : 2;
        c.seedIndex = seed;
        for (std::size_t t = 0; t < r.scored.size(); ++t) {
            lm::TokenStat stat;
            stat.kld = std::string(name) == "exact" ? 0.0 : std::exp(3.0 * u(rng) - 4.0);
            TokenProxies p{};
            if (std::string(name) != "exact")
                fill(p, stat.kld, std::string(name) == "A", u(rng));
            c.tokens.push_back(stat);
            c.proxies.push_back(p);
        }
        r.configurations.push_back(std::move(c));
    }
    return r;
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

    void proxiesAreTheForwardsDamageAveraged()
    {
        // Each scored token's proxies are the means over layers and heads of the damage a forward
        // through the same planned cache reports at its position; the exact cache has none; the
        // calibrated score error needs calibration queries and is finite and positive with them.
        EvalSpec spec = specFor({"exact", "TQ-KV"}, {3});
        const auto tokens = heldoutTokens(64 * 2);
        auto r = runEval(spec, model(), tokens, std::nullopt);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        const ConfigurationResult& exact = r->configurations[0];
        const ConfigurationResult& tq = r->configurations[1];
        QCOMPARE(tq.proxies.size(), tq.tokens.size());
        for (const TokenProxies& p : exact.proxies)
            for (float x : p)
                QCOMPARE(x, 0.0f);
        const auto& config = model().config();
        auto cache = CodecCache::plan(std::vector<SchemeConfig>(4, *findScheme("TQ-KV")), 3, config.kvHeads,
                                      config.headDim, spec.seed(0), nullptr);
        QVERIFY(cache.ok());
        const std::vector<std::int32_t> ids(tokens.begin() + 64, tokens.begin() + 128); // chunk 1
        lm::ForwardOptions options;
        options.cache = cache->get();
        options.damage = lm::DamageRequest{32, nullptr};
        auto f = model().forward(ids, options);
        QVERIFY(f.ok() && f->damage);
        const lm::AttentionDamage& d = *f->damage;
        for (const int i : {0, 17, 30}) {
            const TokenProxies& p = tq.proxies[static_cast<std::size_t>(31 + i)];
            double kl = 0, relV = 0;
            for (int u = 0; u < d.layers * d.heads; ++u)
                kl += d.kl[static_cast<std::size_t>(u * d.count + i)];
            for (int u = 0; u < d.layers * d.kvHeads; ++u)
                relV += d.relV[static_cast<std::size_t>(u * d.count + i)];
            KVLENS_COMPARE_REL(double(p[static_cast<int>(TokenProxy::AttnKl)]), kl / (d.layers * d.heads), 1e-5);
            KVLENS_COMPARE_REL(double(p[static_cast<int>(TokenProxy::RelV)]), relV / (d.layers * d.kvHeads), 1e-5);
            QVERIFY(p[static_cast<int>(TokenProxy::AttnKl)] > 0.0f);
            QVERIFY(std::isnan(p[static_cast<int>(TokenProxy::CalibScoreErr)])); // no calibration tokens
        }
        spec.calibrationTokens = 64;
        auto calibrated = runEval(spec, model(), heldoutTokens(64 * 3), std::nullopt);
        QVERIFY2(calibrated.ok(), calibrated.ok() ? "" : calibrated.error().text().c_str());
        for (const TokenProxies& p : calibrated->configurations[1].proxies)
            QVERIFY(std::isfinite(p[static_cast<int>(TokenProxy::CalibScoreErr)])
                    && p[static_cast<int>(TokenProxy::CalibScoreErr)] > 0.0f);
        // The per-token file carries them, and the study has one cell (the exact cache left out).
        QVERIFY(tokensCsv(*r).find(",attn_kl,fisher,a2_value_error,out_rel_err,rel_mse_k,rel_mse_v,calib_score_err\n")
                != std::string::npos);
        const auto cells = outputProxyStudy(*r, 5, 50);
        QCOMPARE(cells.size(), std::size_t{1});
        QCOMPARE(cells[0].scheme, std::string("TQ-KV"));
        QCOMPARE(cells[0].tokens, 62LL);
    }

    void proxyStudyRanksTokensWithinEachCell()
    {
        // attn_kl is KLD^2 in cell A and -KLD in cell B: rho 1 and -1, never pooled into ~0;
        // calib_score_err is a noisy increasing function of the KLD, rel_mse_k noise alone.
        const EvalResult r = proxyEvaluation([](TokenProxies& p, double kld, bool cellA, double noise) {
            p[static_cast<int>(TokenProxy::AttnKl)] = static_cast<float>(cellA ? kld * kld : -kld);
            p[static_cast<int>(TokenProxy::CalibScoreErr)] = static_cast<float>(std::log(kld) + 0.5 * noise);
            p[static_cast<int>(TokenProxy::RelK)] = static_cast<float>(noise);
            p[static_cast<int>(TokenProxy::Fisher)] = std::numeric_limits<float>::quiet_NaN(); // never finite
        });
        const auto cells = outputProxyStudy(r, 7, 200);
        QCOMPARE(cells.size(), std::size_t{2}); // A (two seeds pooled) and B; the exact cache left out
        QCOMPARE(cells[0].scheme, std::string("A"));
        QCOMPARE(cells[0].tokens, 320LL);
        QCOMPARE(cells[1].tokens, 160LL);
        const auto& klA = cells[0].rho[static_cast<int>(TokenProxy::AttnKl)];
        const auto& klB = cells[1].rho[static_cast<int>(TokenProxy::AttnKl)];
        QCOMPARE(klA.value, 1.0);
        QCOMPARE(klA.low, 1.0); // every resample ranks them perfectly
        QCOMPARE(klB.value, -1.0);
        QVERIFY(std::isnan(cells[0].rho[static_cast<int>(TokenProxy::Fisher)].value));
        // Independent: rho of calib_score_err in cell B from stats::spearman on the same pairs.
        std::vector<double> x, y;
        for (std::size_t t = 0; t < r.scored.size(); ++t) {
            x.push_back(r.configurations[2].proxies[t][static_cast<int>(TokenProxy::CalibScoreErr)]);
            y.push_back(r.configurations[2].tokens[t].kld);
        }
        KVLENS_COMPARE_ABS(cells[1].rho[static_cast<int>(TokenProxy::CalibScoreErr)].value, stats::spearman(x, y), 1e-12);
        const auto& calib = cells[1].rho[static_cast<int>(TokenProxy::CalibScoreErr)];
        QVERIFY(calib.value > 0.7 && calib.low < calib.value && calib.high > calib.value);
        QVERIFY(std::abs(cells[1].rho[static_cast<int>(TokenProxy::RelK)].value) < 0.2);
        // The paired gain is the difference on the full sample, and its interval lies above 0.
        KVLENS_COMPARE_ABS(cells[1].deployableGain.value,
                           calib.value - cells[1].rho[static_cast<int>(TokenProxy::RelK)].value, 1e-12);
        QVERIFY(cells[1].deployableGain.low > 0.5);
        // The interval against an independent bootstrap: the same draws of chunks (cell B: seed 7 + 1000),
        // each resample expanded token by token and ranked by stats::spearman, the same percentiles.
        Rng rng(EngineKind::Pcg64, 7 + 1000, Stream::Statistics);
        std::vector<double> rhos;
        for (int b = 0; b < 200; ++b) {
            std::vector<double> w(8, 0.0);
            for (int i = 0; i < 8; ++i)
                w[static_cast<std::size_t>(rng.below(8))] += 1.0;
            std::vector<double> bx, by;
            for (std::size_t t = 0; t < r.scored.size(); ++t)
                for (int copy = 0; copy < static_cast<int>(w[static_cast<std::size_t>(r.scored[t].chunk)]); ++copy) {
                    bx.push_back(x[t]);
                    by.push_back(y[t]);
                }
            rhos.push_back(stats::spearman(bx, by));
        }
        std::sort(rhos.begin(), rhos.end());
        auto at = [&](double q) {
            const double pos = q * static_cast<double>(rhos.size() - 1);
            const auto i = static_cast<std::size_t>(pos);
            return rhos[i] * (1.0 - (pos - i)) + rhos[i + 1] * (pos - i);
        };
        KVLENS_COMPARE_ABS(calib.low, at(0.025), 1e-12);
        KVLENS_COMPARE_ABS(calib.high, at(0.975), 1e-12);
        // The CSV holds one row per cell.
        const std::string csv = outputProxiesCsv(cells);
        QVERIFY(csv.find("\nA,2,320,1,1,1,") != std::string::npos);
        QVERIFY(csv.find("\nB,2,160,-1,") != std::string::npos);
    }

    void theProxyClaimFollowsTheNumbers()
    {
        // E7 holds when the calibrated score error ranks tokens and raw key error does not, and is
        // contradicted when they swap roles.
        auto claimFor = [](bool scoreSpaceRanks) {
            EvalResult r = proxyEvaluation([scoreSpaceRanks](TokenProxies& p, double kld, bool, double noise) {
                const double ranked = std::log(kld) + 0.5 * noise;
                p[static_cast<int>(TokenProxy::CalibScoreErr)] = static_cast<float>(scoreSpaceRanks ? ranked : noise);
                p[static_cast<int>(TokenProxy::RelK)] = static_cast<float>(scoreSpaceRanks ? noise : ranked);
                p[static_cast<int>(TokenProxy::Fisher)] = static_cast<float>(scoreSpaceRanks ? ranked : noise);
            });
            for (ConfigurationResult& c : r.configurations)
                if (c.name == "A")
                    c.name = "TQ-KV";
            claims::OutputRuns runs;
            runs.claims = &r;
            runs.resamples = 200;
            for (claims::Claim& c : claims::outputClaims(runs))
                if (c.id == "E7-proxies-output")
                    return c;
            return claims::Claim{};
        };
        const claims::Claim holds = claimFor(true), contradicted = claimFor(false);
        QCOMPARE(holds.checks.size(), std::size_t{2}); // TQ-KV n = 2: deployable and oracle
        QCOMPARE(holds.verdict, claims::Verdict::Holds);
        QCOMPARE(contradicted.verdict, claims::Verdict::Contradicted);
        QVERIFY2(holds.headline.find("TQ-KV n = 2") == 0, holds.headline.c_str());
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
        lm::ModelWeights weights = model().denseWeights();
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

    void theSpecsLimitsAndPathsAreWhatTheySay_data()
    {
        // memory_limit_mb as JSON numbers from 2^44 (which wrapped to a false limit once) to past 2^64
        // (undefined in a cast): each refused naming the field and its range, never converted.
        QTest::addColumn<QString>("limit");
        QTest::newRow("2^30 + 1") << QStringLiteral("1073741825");
        QTest::newRow("2^44") << QStringLiteral("17592186044416");
        QTest::newRow("2^64") << QStringLiteral("18446744073709551616");
        QTest::newRow("1e300") << QStringLiteral("1e300");
        QTest::newRow("negative") << QStringLiteral("-1");
    }
    void theSpecsLimitsAndPathsAreWhatTheySay()
    {
        QFETCH(QString, limit);
        const std::string text = R"({"kvlens_eval": 1, "model": "m", "tokens": "t.npy", "schemes": ["KV"], "memory_limit_mb": )"
                                 + limit.toStdString() + "}";
        const auto r = evalSpecFromJson(text);
        QVERIFY(!r.ok());
        QCOMPARE(r.error().field, std::string("memory_limit_mb"));
        QVERIFY2(r.error().message.find("[0, 1073741824]") != std::string::npos, r.error().message.c_str());
        // A written spec names its files by absolute path, so it runs again from any folder.
        EvalSpec s = specFor({"KV"}, {2});
        s.modelDir = "relative/model";
        s.tokensFile = "ids.npy";
        const std::string written = evalSpecToJson(s);
        const std::string cwd = std::filesystem::current_path().string();
        QVERIFY2(written.find("\"" + cwd + "/relative/model\"") != std::string::npos, written.c_str());
        QVERIFY2(written.find("\"" + cwd + "/ids.npy\"") != std::string::npos, written.c_str());
    }

    void aGroupedCodecSaysWhatItReads()
    {
        // KIVI encodes keys in per-channel groups of 32 tokens (values per token). At ctx 32 the scored
        // queries (positions 16..30) never see a complete key group: nothing of the keys is quantized,
        // and the run is refused naming the scheme, the group and the ctx it needs.
        auto r = runEval(specFor({"KIVI"}, {2}, 32), model(), heldoutTokens(32 * 3), std::nullopt);
        QVERIFY(!r.ok());
        QCOMPARE(r.error().field, std::string("schemes[0]"));
        QVERIFY2(r.error().message.find("groups of 32 tokens") != std::string::npos, r.error().text().c_str());
        QVERIFY2(r.error().message.find("ctx 32") != std::string::npos, r.error().text().c_str());
        // A residual window as long as the chunk's scored part leaves nothing quantized either.
        EvalSpec windowed = specFor({"KV"}, {2}, 32);
        windowed.residual = 32;
        r = runEval(windowed, model(), heldoutTokens(32 * 3), std::nullopt);
        QVERIFY(!r.ok());
        QVERIFY2(r.error().message.find("residual window of 32") != std::string::npos, r.error().text().c_str());
        // At ctx 64, query t (t = 32..62) reads the first 32 keys quantized and the rest (its open
        // group) exact: the share of cached keys is the mean of 32 / (t + 1); values are row-wise.
        r = runEval(specFor({"KIVI", "KV"}, {2}, 64), model(), heldoutTokens(64 * 3), std::nullopt);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        double expected = 0.0;
        for (int t = 32; t <= 62; ++t)
            expected += 32.0 / (t + 1) / 31.0;
        const ConfigurationResult& kivi = r->configurations[0];
        KVLENS_COMPARE_REL(kivi.cacheShareK, expected, 1e-12);
        QCOMPARE(kivi.cacheShareV, 1.0);
        KVLENS_COMPARE_REL(kivi.bitsSpentK(), expected * kivi.bitsK + (1.0 - expected) * 16.0, 1e-12);
        QCOMPARE(r->configurations[1].cacheShareK, 1.0); // KV encodes each token when written
        QVERIFY(kivi.summary.kld.mean > 0.0);
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
        // The convention line, the query line, where the forward ran, the column header, 62 tokens of
        // each configuration.
        QCOMPARE(static_cast<int>(std::count(tokens.begin(), tokens.end(), '\n')), 4 + 2 * 62);
        QVERIFY(tokens.find("\n# queries: converted to the key type's vec_dot_type") != std::string::npos);
        QVERIFY(tokens.find("\n# forward: CPU, 2 threads\n") != std::string::npos);
        QVERIFY(reportText(*r).find("\nforward: CPU, 2 threads\n") != std::string::npos);
        QVERIFY(summary.find(",f32,1,1,") != std::string::npos); // exact: float32 queries, every key from the cache
        QCOMPARE(escapeTokenText(std::string("a\n\t\\\x01")), std::string("a\\n\\t\\\\\\x01"));
        const std::string layers = layersCsv(*r);
        QVERIFY(layers.find("\nKV,2,1,3,all,both,") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestEval)
#include "tst_eval.moc"
