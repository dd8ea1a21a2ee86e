// SPDX-License-Identifier: GPL-3.0-or-later
// Claim evaluation: verdict rules, criteria, the rotated marginal, and verdicts that follow the measured numbers.
#include "core/report/claims.h"
#include "core/quant/lloyd_max.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>
#include <numbers>

using namespace kvlens;
using namespace kvlens::claims;

namespace {

ExperimentSpec makeSpec(const char* json)
{
    auto spec = specFromJson(json);
    if (!spec)
        qFatal("bad test spec: %s", spec.error().text().c_str());
    return *spec;
}

ResultSet run(const ExperimentSpec& spec)
{
    CpuBackend backend(2);
    auto result = runExperiment(spec, backend);
    if (!result)
        qFatal("run failed: %s", result.error().text().c_str());
    return std::move(result).value();
}

/// Paper A's three schemes on small Gaussian data: every claim of paper A has something to read.
const ResultSet& smallPaperA()
{
    static const ResultSet results = run(makeSpec(R"({"kvlens_spec": 1, "name": "small A", "regime": {"name": "gaussian"},
        "d": 64, "tokens": 512, "queries": 64, "schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3, 4],
        "seeds": {"first": 1, "count": 8}, "metrics": {"sample_cap": 256}})"));
    return results;
}

int holding(const Claim& c)
{
    int n = 0;
    for (const Check& k : c.checks)
        n += k.holds ? 1 : 0;
    return n;
}

/// A heavy-tail sweep result made by hand: one budget, two seeds, chosen key direction errors.
ResultSet handMadeSweep(double kqvPhiHeavy)
{
    ResultSet rs;
    rs.spec = makeSpec(R"({"kvlens_spec": 1, "name": "hand", "regime": {"name": "heavy_tail"},
        "sweep": {"regime.nu": [5, 1.05]}, "d": 16, "tokens": 8, "queries": 2,
        "schemes": ["KV", "KQV", "QKQV"], "budgets": [4], "seeds": {"first": 1, "count": 2}})");
    rs.schemes = rs.spec.schemes;
    // phi per scheme at (nu = 5, nu = 1.05): KV blows up tenfold, QKQV holds, KQV as asked.
    const double phi[3][2] = {{0.1, 1.0}, {0.1, kqvPhiHeavy}, {0.12, 0.12}};
    for (int point = 0; point < 2; ++point)
        for (int scheme = 0; scheme < 3; ++scheme)
            for (int seed = 0; seed < 2; ++seed) {
                TrialResult t;
                t.key = TrialKey{point, scheme, 4, seed, static_cast<std::uint64_t>(seed + 1)};
                t.samplesK.phi.assign(4, static_cast<float>(phi[scheme][point]));
                rs.trials.push_back(t);
            }
    return rs;
}

} // namespace

class TestClaims : public QObject {
    Q_OBJECT
private slots:
    void verdictFromChecks_data()
    {
        // H holds, L holds larger, B borderline, C contradicted, N not testable.
        QTest::addColumn<QString>("outcomes");
        QTest::addColumn<QString>("verdict");
        QTest::newRow("all hold") << "HHH" << QStringLiteral("holds");
        QTest::newRow("all hold, larger") << "LL" << QStringLiteral("holds, larger effect than claimed");
        QTest::newRow("hold and larger") << "HL" << QStringLiteral("holds");
        QTest::newRow("untestable ones left out") << "HNN" << QStringLiteral("holds");
        QTest::newRow("one borderline") << "HHB" << QStringLiteral("borderline");
        QTest::newRow("none holds") << "CC" << QStringLiteral("contradicted");
        QTest::newRow("borderline and contradicted") << "BC" << QStringLiteral("depends on setting");
        QTest::newRow("some hold") << "HCH" << QStringLiteral("depends on setting");
        QTest::newRow("one check, fails") << "C" << QStringLiteral("contradicted");
        QTest::newRow("nothing testable") << "NN" << QStringLiteral("not testable here");
        QTest::newRow("no check at all") << "" << QStringLiteral("not testable here");
    }
    void verdictFromChecks()
    {
        QFETCH(QString, outcomes);
        QFETCH(QString, verdict);
        Claim c;
        for (QChar o : outcomes)
            c.checks.push_back({"s", "m", false,
                                o == 'H' ? Outcome::Holds : o == 'L' ? Outcome::HoldsLarger : o == 'B' ? Outcome::Borderline
                                : o == 'C' ? Outcome::Contradicted : Outcome::NotTestable});
        decide(c);
        QCOMPARE(QString::fromUtf8(verdictText(c.verdict).data()), verdict);
        // holds follows the outcome.
        for (const Check& k : c.checks)
            QCOMPARE(k.holds, k.outcome == Outcome::Holds || k.outcome == Outcome::HoldsLarger);
    }

    void outcomeRules()
    {
        // Directional: untestable when k seeds cannot reach alpha (2/2^k > 0.01), borderline within 5x.
        const stats::PValue tiny = stats::pFromLog(std::log(0.005)), near = stats::pFromLog(std::log(0.03)),
                            far = stats::pFromLog(std::log(0.2));
        QCOMPARE(directionalOutcome(tiny, 1.0, 2.0 / 256.0), Outcome::Holds);
        QCOMPARE(directionalOutcome(tiny, -1.0, 2.0 / 256.0), Outcome::Contradicted);
        QCOMPARE(directionalOutcome(near, 1.0, 2.0 / 256.0), Outcome::Borderline);
        QCOMPARE(directionalOutcome(far, 1.0, 2.0 / 256.0), Outcome::Contradicted);
        QCOMPARE(directionalOutcome(tiny, 1.0, 2.0 / 16.0), Outcome::NotTestable); // 4 seeds
        // A claimed value against an interval.
        QCOMPARE(claimedValueOutcome(2.0, 2.5, 2.25), Outcome::Holds);
        QCOMPARE(claimedValueOutcome(2.4, 2.9, 2.25), Outcome::HoldsLarger);
        QCOMPARE(claimedValueOutcome(2.0, 2.2, 2.25), Outcome::Borderline); // 2.2 within 5% of 2.25
        QCOMPARE(claimedValueOutcome(1.5, 2.0, 2.25), Outcome::Contradicted);
        // A band.
        QCOMPARE(bandOutcome(0.9, 1.1, 0.8, 1.25), Outcome::Holds);
        QCOMPARE(bandOutcome(0.7, 0.9, 0.8, 1.25), Outcome::Borderline);
        QCOMPARE(bandOutcome(1.3, 1.6, 0.8, 1.25), Outcome::Contradicted);
        QCOMPARE(both(Outcome::Borderline, Outcome::HoldsLarger), Outcome::Borderline);
        QCOMPARE(both(Outcome::NotTestable, Outcome::Holds), Outcome::NotTestable);
    }

    void decideNamesTheSettingsOnEachSide()
    {
        Claim c;
        c.checks = {{"n = 2", "", false}, {"n = 3", "", true}, {"n = 4", "", true}};
        decide(c);
        QCOMPARE(c.verdict, Verdict::DependsOnSetting);
        QCOMPARE(QString::fromStdString(c.dependsOn),
                 QStringLiteral("Holds at: n = 3; n = 4. Does not hold at: n = 2."));
        for (Check& k : c.checks)
            k.outcome = Outcome::Holds;
        decide(c);
        QCOMPARE(c.verdict, Verdict::Holds);
        QVERIFY(c.dependsOn.empty());
    }

    void criteria_data()
    {
        QTest::addColumn<double>("p");
        QTest::addColumn<double>("logP");
        QTest::addColumn<double>("effect");
        QTest::addColumn<bool>("expected");
        QTest::newRow("significant, claimed direction") << 1e-3 << std::log(1e-3) << 0.4 << true;
        QTest::newRow("significant, wrong direction") << 1e-3 << std::log(1e-3) << -0.4 << false;
        QTest::newRow("not significant") << 0.02 << std::log(0.02) << 0.4 << false;
        QTest::newRow("exactly alpha is not below it") << 0.01 << std::log(0.01) << 0.4 << false;
        QTest::newRow("underflowed p, exact log") << 0.0 << -800.0 << 0.1 << true;
        QTest::newRow("no effect") << 1e-9 << std::log(1e-9) << 0.0 << false;
    }
    void criteria()
    {
        QFETCH(double, p);
        QFETCH(double, logP);
        QFETCH(double, effect);
        QFETCH(bool, expected);
        QCOMPARE(significantInDirection(stats::PValue{p, logP}, effect), expected);
    }

    void relativeAndEquivalence()
    {
        QVERIFY(withinRelative(1.5, std::numbers::pi / 2, 0.10));  // 4.5% off
        QVERIFY(!withinRelative(1.3, std::numbers::pi / 2, 0.10)); // 17% off
        QVERIFY(!withinRelative(NAN, 1.0, 0.5));
        QVERIFY(!withinRelative(1.0, 0.0, 0.5));
        QVERIFY(equivalentRatio(0.85, 1.2, 1.25));
        QVERIFY(!equivalentRatio(0.75, 1.0, 1.25));
        QVERIFY(!equivalentRatio(1.0, 1.3, 1.25));
    }

    void formatsTinyPValuesFromTheirLog()
    {
        QCOMPARE(QString::fromStdString(formatP(stats::PValue{0.0032, std::log(0.0032)})), QStringLiteral("0.0032"));
        // log p = -800 nats: p = 10^-347.43, far below what a double holds: a bound, not digits.
        QCOMPARE(QString::fromStdString(formatP(stats::PValue{0.0, -800.0})), QStringLiteral("< 1e-300"));
        QCOMPARE(QString::fromStdString(pEquals(stats::PValue{0.0, -800.0})), QStringLiteral("p < 1e-300"));
        QCOMPARE(QString::fromStdString(pEquals(stats::PValue{2e-300, std::log(2e-300)})), QStringLiteral("p = 2e-300"));
        QCOMPARE(QString::fromStdString(formatSig(0.027123, 3)), QStringLiteral("0.0271"));
        QCOMPARE(QString::fromStdString(formatSig(NAN)), QStringLiteral("n/a"));
    }

    void rotatedMarginalIsTheBetaLawWhateverTheTails()
    {
        ExperimentSpec gauss = makeSpec(R"({"kvlens_spec": 1, "regime": {"name": "gaussian"}, "d": 64, "tokens": 512,
            "queries": 4, "schemes": ["KV"]})");
        ExperimentSpec heavy = makeSpec(R"({"kvlens_spec": 1, "regime": {"name": "heavy_tail", "nu": 5}, "d": 64,
            "tokens": 512, "queries": 4, "schemes": ["KV"]})");
        const auto g = rotatedKeyMarginal(gauss, 32, 5000);
        const auto h = rotatedKeyMarginal(heavy, 32, 5000);
        QVERIFY(g.ok() && h.ok());
        QCOMPARE(g->edges.size(), std::size_t{33});
        double mass = 0.0;
        for (std::size_t b = 0; b < g->density.size(); ++b)
            mass += g->density[b] * (g->edges[b + 1] - g->edges[b]);
        // Beta((d-1)/2, (d-1)/2) scaled by sqrt(d) is close to N(0, 1): almost no mass beyond +-4.
        KVLENS_COMPARE_ABS(mass, 1.0, 1e-3);
        // Density at the centre: N(0,1) gives 0.399; the Beta law at d = 64 slightly more.
        KVLENS_COMPARE_ABS(g->density[16], 0.40, 0.03);
        // Raw excess kurtosis: 0 for Gaussian coordinates, 6 for Student-t(5) (heavy, noisy estimate).
        KVLENS_COMPARE_ABS(g->rawExcessKurtosis, 0.0, 0.15);
        QVERIFY2(h->rawExcessKurtosis > 2.0, qPrintable(QString::number(h->rawExcessKurtosis)));
        QCOMPARE(g->sample.size(), std::size_t{5000});
    }

    void qjlVarianceRatiosAreMeasured()
    {
        const Claim c = qjlVarianceClaim(smallPaperA());
        QCOMPARE(c.checks.size(), std::size_t{6}); // two per budget
        // The residual ratio is pi/2 up to the <q, r>^2 term (design section 4): within 10% at every budget.
        for (std::size_t i = 0; i < c.checks.size(); i += 2)
            QVERIFY2(c.checks[i].holds, c.checks[i].measured.c_str());
        QCOMPARE(c.tables.size(), std::size_t{1});
        const double ratio = std::stod(c.tables[0].rows[2][2]); // n = 4, "mean [low, high]"
        KVLENS_COMPARE_REL(ratio, std::numbers::pi / 2, 0.10);
        QCOMPARE(c.figures.size(), std::size_t{1});
        QCOMPARE(c.figures[0].series.size(), std::size_t{5});
    }

    void verdictFollowsTheNumbersNotTheNames()
    {
        const Claim direct = kqvBeatsQkqvClaim(smallPaperA(), 1, 100);
        QCOMPARE(direct.checks.size(), std::size_t{3});
        QCOMPARE(direct.verdict, Verdict::Holds);
        // Swap which scheme is called KQV: the same numbers now contradict the claim everywhere.
        ResultSet swapped = smallPaperA();
        std::swap(swapped.schemes[1].name, swapped.schemes[2].name);
        const Claim reversed = kqvBeatsQkqvClaim(swapped, 1, 100);
        QCOMPARE(holding(reversed), 0);
        QCOMPARE(reversed.verdict, Verdict::Contradicted);
    }

    void heavyTailThresholds()
    {
        // KQV at 0.1 rad for both nu: stable; KV tenfold in phi: fails; QKQV flat.
        const Claim stable = heavyTailClaim(handMadeSweep(0.1));
        QCOMPARE(stable.checks.size(), std::size_t{3});
        QCOMPARE(stable.verdict, Verdict::Holds);
        // eps = 1 - cos(phi): doubling phi roughly quadruples eps, past the 1.5x stability bound.
        const Claim unstable = heavyTailClaim(handMadeSweep(0.2));
        QCOMPARE(unstable.verdict, Verdict::DependsOnSetting);
        QVERIFY(!unstable.checks[0].holds);
        QVERIFY(unstable.dependsOn.find("KQV stable") != std::string::npos);
        QCOMPARE(unstable.checks[0].outcome, Outcome::Contradicted);
        // 1.2x in phi is 1.44x in eps: still stable.
        QCOMPARE(heavyTailClaim(handMadeSweep(0.12)).verdict, Verdict::Holds);
    }

    void fisherRanksKlBetterThanRawMse()
    {
        // The same-query Fisher is the second-order expansion of the KL it is compared with: the
        // oracle row is near 1 by construction. The deployable Fisher (calibration queries) ranks
        // the held-out KL of 4 seeds per cell far less well: the built-in advantage is gone.
        const Claim c = fisherProxyClaim({&smallPaperA()}, 3, 60);
        QCOMPARE(c.checks.size(), std::size_t{1});
        QCOMPARE(c.tables[0].rows[0][1], std::string("9")); // 3 schemes x 3 budgets
        const double rhoFisher = std::stod(c.tables[0].rows[0][2]), oracle = std::stod(c.tables[0].rows[0][5]);
        QVERIFY2(oracle > 0.95, c.tables[0].rows[0][5].c_str());
        QVERIFY2(rhoFisher < oracle - 0.3, c.tables[0].rows[0][2].c_str());
        QCOMPARE(c.tables[1].rows.size(), std::size_t{9}); // one row per cell
    }

    void klRatioAcrossRegimesAgainstItsClosedForm()
    {
        // The across-regimes table of A3: the mean-KL ratio QKQV / KQV at n = 4 recomputed from
        // the trials, and the closed form (pi/2) D_3 / D_4 of the Beta(64) codebooks.
        const ResultSet& a = smallPaperA();
        const Claim c = klRatioClaim(a, 1, 50, {&a});
        QCOMPARE(c.tables.size(), std::size_t{2});
        const Table& across = c.tables[1];
        QCOMPARE(across.rows.size(), std::size_t{1});
        double kqv = 0.0, qkqv = 0.0;
        for (const TrialResult& t : a.trials) {
            const std::string& name = a.schemes[static_cast<std::size_t>(t.key.scheme)].name;
            if (t.key.budget != 4 || (name != "KQV" && name != "QKQV"))
                continue;
            for (float kl : t.kl)
                (name == "KQV" ? kqv : qkqv) += kl;
        }
        const std::string meanRatio = across.rows[0][4];
        KVLENS_COMPARE_REL(std::stod(meanRatio), qkqv / kqv, 1e-2); // printed to 3 significant digits
        const Codebook d3 = designBetaCodebook(64, 3), d4 = designBetaCodebook(64, 4);
        KVLENS_COMPARE_REL(std::stod(across.rows[0][6]), std::numbers::pi / 2 * (d3.mse / d3.variance) / (d4.mse / d4.variance),
                           1e-2);
    }

    void everyClaimOfTheRunsPresentIsEvaluated()
    {
        Runs runs;
        runs.paperA = &smallPaperA();
        runs.resamples = 50;
        const std::vector<Claim> claims = evaluateClaims(runs);
        QStringList ids;
        for (const Claim& c : claims) {
            ids << QString::fromStdString(c.id);
            QVERIFY(!c.checks.empty());
            QVERIFY(!c.criterion.empty());
        }
        QCOMPARE(ids, (QStringList{"A1-qjl-variance", "A2-kqv-vs-qkqv", "C2-fisher-proxy"}));
    }
};

QTEST_APPLESS_MAIN(TestClaims)
#include "tst_claims.moc"
