// SPDX-License-Identifier: GPL-3.0-or-later
// Paper C's model-visible schemes: HeadQ and its controls, the A^2 value policy, the proxy study.
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/quant/path.h"
#include "core/quant/scheme.h"
#include "core/quant/token_policy.h"
#include "core/analysis/proxies.h"
#include "core/report/claims.h"
#include "common/approx.h"

#include <QTest>

#include <numeric>

using namespace kvlens;

namespace {

ResultSet run(const std::string& json)
{
    auto spec = specFromJson(json);
    if (!spec)
        qFatal("bad test spec: %s", spec.error().text().c_str());
    CpuBackend backend(2);
    auto result = runExperiment(*spec, backend);
    if (!result)
        qFatal("run failed: %s", result.error().text().c_str());
    return std::move(result).value();
}

int schemeIndex(const ResultSet& r, const char* name)
{
    for (std::size_t s = 0; s < r.schemes.size(); ++s)
        if (r.schemes[s].name == name)
            return static_cast<int>(s);
    qFatal("no scheme %s", name);
}

/// Mean of a per-query metric (or of a trial-level one) over a scheme's trials at a budget.
template <typename Get>
double mean(const ResultSet& r, const char* scheme, int budget, Get get)
{
    const int s = schemeIndex(r, scheme);
    double sum = 0.0;
    long long count = 0;
    for (const TrialResult& t : r.trials) {
        if (t.key.scheme != s || t.key.budget != budget)
            continue;
        for (double v : get(t)) {
            sum += v;
            ++count;
        }
    }
    return sum / static_cast<double>(count);
}

const std::vector<float>& kl(const TrialResult& t) { return t.kl; }
const std::vector<float>& fisher(const TrialResult& t) { return t.fisher; }
const std::vector<float>& outputError(const TrialResult& t) { return t.relMseT; }

} // namespace

class TestCalibrated : public QObject {
    Q_OBJECT
private slots:
    void headqCorrectsTheScoresItsQueriesSee()
    {
        // Queries (and data) in a rank-4 subspace; HeadQ's basis is the rank-4 PCA of the
        // calibration queries and its side code has q = 8 bits per coordinate.
        const ResultSet r = run(R"({"regime": {"name": "low_rank", "rank": 4, "noise": 0.1}, "d": 128, "tokens": 512,
            "queries": 32, "budgets": [2], "seeds": {"count": 2},
            "schemes": ["KIVI", "HeadQ", "HeadQ-wrong-sign", "HeadQ-random-basis"]})");
        QCOMPARE(findScheme("HeadQ")->key.part("headq")->integer("bits"), 8);
        QCOMPARE(findScheme("HeadQ")->key.part("headq")->integer("rank"), 4);
        const double kiviFisher = mean(r, "KIVI", 2, fisher), headqFisher = mean(r, "HeadQ", 2, fisher);
        QVERIFY2(headqFisher * 10.0 <= kiviFisher,
                 qPrintable(QStringLiteral("Fisher: HeadQ %1, KIVI %2").arg(headqFisher).arg(kiviFisher)));
        const double kiviKl = mean(r, "KIVI", 2, kl);
        const double wrongKl = mean(r, "HeadQ-wrong-sign", 2, kl);
        const double randomKl = mean(r, "HeadQ-random-basis", 2, kl);
        QVERIFY2(wrongKl > kiviKl, qPrintable(QStringLiteral("KL: wrong sign %1, KIVI %2").arg(wrongKl).arg(kiviKl)));
        QVERIFY2(std::abs(randomKl - kiviKl) <= 0.2 * kiviKl,
                 qPrintable(QStringLiteral("KL: random basis %1, KIVI %2").arg(randomKl).arg(kiviKl)));
        // The side code is counted: rank 4 x 8 bits plus one fp16 scale and offset per token, over d = 128.
        const TrialResult* kivi = r.find(0, schemeIndex(r, "KIVI"), 2, 0);
        const TrialResult* headq = r.find(0, schemeIndex(r, "HeadQ"), 2, 0);
        KVLENS_COMPARE_ABS(headq->bits.key - kivi->bits.key, (4 * 8 + 32) / 128.0, 1e-12);
        KVLENS_COMPARE_ABS(headq->bits.value, kivi->bits.value, 1e-12);
    }

    void a2TokenBitsKeepTheTotalAndFollowTheWeights()
    {
        // Three tokens; two queries that attend almost only to token 0: it gets the most bits,
        // the total stays bits x tokens, and everyone keeps at least one bit.
        RowMatrixXf keys(3, 2), values(3, 2), queries(2, 2);
        keys << 1, 0, 0, 1, -1, 0;
        values << 1, 1, 1, 1, 1, 1;
        queries << 20, 0, 20, 0.5;
        const std::vector<int> bits = a2TokenBits(keys, queries, values, 3, 1.0f);
        QCOMPARE(std::accumulate(bits.begin(), bits.end(), 0), 9);
        QVERIFY(bits[0] > bits[1] && bits[0] > bits[2]);
        QVERIFY(*std::min_element(bits.begin(), bits.end()) >= 1);
    }

    void a2PolicyLowersTheOutputErrorOfKiviValuesInTheFocusedRegime()
    {
        // Focused attention on a pool of 32 heavy hitters: the calibration queries find them,
        // and the A^2 policy moves value bits there at the same total.
        const ResultSet r = run(R"({"regime": {"name": "focused", "pool": 32}, "d": 128, "tokens": 512, "queries": 32,
            "budgets": [2, 3], "seeds": {"count": 2}, "schemes": ["KIVI", "KIVI-A2"]})");
        for (int budget : {2, 3}) {
            const TrialResult* kivi = r.find(0, 0, budget, 0);
            const TrialResult* a2 = r.find(0, 1, budget, 0);
            KVLENS_COMPARE_ABS(a2->bits.value, kivi->bits.value, 1e-12); // equal total bits
            const double base = mean(r, "KIVI", budget, outputError), weighted = mean(r, "KIVI-A2", budget, outputError);
            QVERIFY2(weighted < base,
                     qPrintable(QStringLiteral("n=%1 output relMSE: A2 %2, KIVI %3").arg(budget).arg(weighted).arg(base)));
            // Keys are untouched, so the scores (and KL) are identical.
            KVLENS_COMPARE_ABS(mean(r, "KIVI-A2", budget, kl), mean(r, "KIVI", budget, kl), 1e-12);
        }
    }

    void fisherPredictsKlBetterThanKeyMse()
    {
        const ResultSet r = run(R"({"regime": {"name": "gaussian"}, "d": 128, "tokens": 512, "queries": 64,
            "budgets": [2, 3], "seeds": {"count": 3}, "schemes": ["KIVI", "TQ-KV"]})");
        const int kivi = schemeIndex(r, "KIVI");
        const double rhoFisher = stats::proxyRho(r, stats::Proxy::Fisher, {kivi}, {2, 3});
        const double rhoRelMse = stats::proxyRho(r, stats::Proxy::RelMseK, {kivi}, {2, 3});
        QVERIFY2(rhoFisher > rhoRelMse, qPrintable(QStringLiteral("rho Fisher %1, relMSE_K %2").arg(rhoFisher).arg(rhoRelMse)));
        // The study has one row per scheme and one pooled, each over every query of its trials.
        const auto rows = stats::proxyStudy(r);
        QCOMPARE(rows.size(), std::size_t{3});
        QCOMPARE(rows[0].group, std::string("KIVI"));
        QCOMPARE(rows[2].group, std::string("(pooled)"));
        QCOMPARE(rows[0].queries, 64LL * 3 * 2);
        QCOMPARE(rows[2].queries, 64LL * 3 * 2 * 2);
        KVLENS_COMPARE_ABS(rows[0].rho[static_cast<std::size_t>(stats::Proxy::Fisher)],
                           stats::proxyRho(r, stats::Proxy::Fisher, {kivi}, {}), 1e-12);
        // The CSV has a header and one line per row.
        const std::string csv = stats::proxiesCsv(r, rows);
        QCOMPARE(std::count(csv.begin(), csv.end(), '\n'), 4L);
        QVERIFY(csv.rfind("regime,group,queries,rho_raw_mse_k,rho_rel_mse_k,rho_rel_mse_v,rho_fisher,rho_a2_value_error,rho_d2", 0) == 0);
    }

    void proxyRhoIsOneForAMonotoneProxy()
    {
        // Independent check: a hand-built result whose KL is a strictly increasing function of
        // the Fisher error, and decreasing in the A^2 error.
        ResultSet r;
        r.schemes.push_back(*findScheme("KIVI"));
        TrialResult t;
        for (int q = 0; q < 10; ++q) {
            t.fisher.push_back(static_cast<float>(q));
            t.kl.push_back(static_cast<float>(q * q + 1));
            t.a2.push_back(static_cast<float>(-q));
            t.d2.push_back(1.0f);
        }
        r.trials.push_back(t);
        KVLENS_COMPARE_ABS(stats::proxyRho(r, stats::Proxy::Fisher, {}, {}), 1.0, 1e-12);
        KVLENS_COMPARE_ABS(stats::proxyRho(r, stats::Proxy::A2, {}, {}), -1.0, 1e-12);
        // All tied: rho is undefined, and reported as such (NaN), never as a measured 0.
        QVERIFY(std::isnan(stats::proxyRho(r, stats::Proxy::D2, {}, {})));
    }

    void theDeployableProxyNeverSeesTheEvaluatedQueries()
    {
        // Two cells (n = 3, 4) of six trials (seeds). Each trial's odd (held-out) queries have Fisher = 2 KL
        // exactly, so the same-query oracle is perfect; its even (calibration) queries carry a
        // Fisher that falls as the trial's held-out KL rises. The deployable row must follow
        // the calibration queries (rho = -1), not the evaluated ones (+1).
        ResultSet r;
        r.spec = *specFromJson(R"({"d": 16, "tokens": 8, "queries": 8, "budgets": [3, 4], "seeds": {"count": 6},
                                   "schemes": ["KIVI"]})");
        r.schemes = r.spec.schemes;
        for (int budget : {3, 4}) {
            for (int seed = 0; seed < 6; ++seed) {
                TrialResult t;
                t.key = TrialKey{0, 0, budget, seed, r.spec.seed(seed)};
                t.rawMseK = 1.0 + seed; // raw MSE rises with the held-out KL: rho = +1
                for (int q = 0; q < 8; ++q) {
                    const float kl = static_cast<float>((seed + 1) * (q + 1));
                    t.kl.push_back(kl);
                    t.fisher.push_back(q % 2 ? 2.0f * kl : static_cast<float>(100 - 10 * seed + q));
                }
                r.trials.push_back(t);
            }
        }
        const TrialResult& first = r.trials.front();
        KVLENS_COMPARE_ABS(stats::deployableProxy(first, stats::Proxy::Fisher), (100 + 102 + 104 + 106) / 4.0, 1e-12);
        KVLENS_COMPARE_ABS(stats::heldOutKl(first), (2 + 4 + 6 + 8) / 4.0, 1e-12);
        const auto cells = stats::deployableProxyStudy(r);
        QCOMPARE(cells.size(), std::size_t{2});
        QCOMPARE(cells[0].trials, 6);
        KVLENS_COMPARE_ABS(cells[0].rho[static_cast<std::size_t>(stats::Proxy::Fisher)], -1.0, 1e-12);
        KVLENS_COMPARE_ABS(cells[0].rho[static_cast<std::size_t>(stats::Proxy::RawMseK)], 1.0, 1e-12);
        KVLENS_COMPARE_ABS(cells[0].oracleFisher, 1.0, 1e-12); // held-out queries: Fisher = 2 KL
        // Changing what the evaluated queries' Fisher says changes nothing deployable.
        ResultSet other = r;
        for (TrialResult& t : other.trials)
            for (std::size_t q = 1; q < t.fisher.size(); q += 2)
                t.fisher[q] = -t.fisher[q];
        const auto again = stats::deployableProxyStudy(other);
        for (auto proxy : {stats::Proxy::Fisher, stats::Proxy::RawMseK})
            QCOMPARE(again[0].rho[static_cast<std::size_t>(proxy)], cells[0].rho[static_cast<std::size_t>(proxy)]);
        // And the claim reads the deployable row: raw MSE wins here, whatever the oracle says.
        const claims::Claim c = claims::fisherProxyClaim({&r}, 1, 200);
        QCOMPARE(c.verdict, claims::Verdict::Contradicted);
    }
};

QTEST_GUILESS_MAIN(TestCalibrated)
#include "tst_calibrated.moc"
