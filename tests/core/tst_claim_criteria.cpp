// SPDX-License-Identifier: GPL-3.0-or-later
// Every claim's criterion can flip: on a hand-made result set the verdict is one value, on a
// mutated copy (schemes renamed, a metric scaled, a trial value changed) it is another.
#include "core/report/claims.h"
#include "core/spec/spec_json.h"

#include <QTest>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

using namespace kvlens;
using namespace kvlens::claims;

namespace {

constexpr int kQueries = 16; // per-query entries of every hand-made trial

ExperimentSpec makeSpec(const char* json)
{
    auto spec = specFromJson(json);
    if (!spec)
        qFatal("bad test spec: %s", spec.error().text().c_str());
    return *spec;
}

/// Fills one hand-made trial: (trial, point, budget n, scheme name, seed index).
using Fill = std::function<void(TrialResult&, int, int, const std::string&, int)>;

/// A result set made by hand from a spec, its trials in walk order (point, budget, scheme, seed).
ResultSet handMade(const char* json, const Fill& fill)
{
    ResultSet rs;
    rs.spec = makeSpec(json);
    rs.schemes = rs.spec.schemes;
    for (int point = 0; point < rs.spec.pointCount(); ++point)
        for (int n : rs.spec.budgets)
            for (int s = 0; s < static_cast<int>(rs.schemes.size()); ++s)
                for (int seed = 0; seed < rs.spec.seedCount; ++seed) {
                    TrialResult t;
                    t.key = TrialKey{point, s, n, seed, rs.spec.seed(seed)};
                    fill(t, point, n, rs.schemes[static_cast<std::size_t>(s)].name, seed);
                    rs.trials.push_back(std::move(t));
                }
    rs.totalTrials = static_cast<long long>(rs.trials.size());
    return rs;
}

/// kQueries distinct values base * (1 .. 1.2), shifted a little per seed: two spreads with bases
/// a factor > 1.2 apart do not overlap, and the ratio of their medians is the ratio of the bases.
std::vector<float> spread(double base, int seed)
{
    std::vector<float> v;
    for (int i = 0; i < kQueries; ++i)
        v.push_back(static_cast<float>(base * (1.0 + 0.2 * (i + 0.5 * seed) / kQueries)));
    return v;
}

/// The same result set with two schemes' names exchanged (the numbers stay where they are).
ResultSet swapped(ResultSet rs, const std::string& a, const std::string& b)
{
    for (SchemeConfig& s : rs.schemes)
        s.name = s.name == a ? b : s.name == b ? a : s.name;
    return rs;
}

ResultSet renamed(ResultSet rs, const std::string& from, const std::string& to)
{
    for (SchemeConfig& s : rs.schemes)
        if (s.name == from)
            s.name = to;
    return rs;
}

QList<bool> holdsOf(const Claim& c)
{
    QList<bool> out;
    for (const Check& k : c.checks)
        out << k.holds;
    return out;
}

/// The checks' outcomes as letters: H holds, L larger, B borderline, C contradicted, N not testable.
QString outcomesOf(const Claim& c)
{
    QString out;
    for (const Check& k : c.checks)
        out += k.outcome == Outcome::Holds ? 'H' : k.outcome == Outcome::HoldsLarger ? 'L'
               : k.outcome == Outcome::Borderline ? 'B' : k.outcome == Outcome::Contradicted ? 'C' : 'N';
    return out;
}

// ---- hand-made runs, one per claim -------------------------------------------------------

/// QKQV's score-error variance over its base (residual ratio) and over KQV's (scalar ratio),
/// as asked per budget (n = 3, 4); the eight seeds sit alternately at 0.98x and 1.02x of it, so
/// the seed mean is exactly the value asked and its 95% t interval spans +-1.8%.
ResultSet qjlRun(double residual3, double scalar3, double residual4, double scalar4)
{
    return handMade(R"({"kvlens_spec": 1, "name": "qjl", "regime": {"name": "gaussian"}, "d": 64, "tokens": 64,
        "queries": 16, "schemes": ["KV", "KQV", "QKQV"], "budgets": [3, 4], "seeds": {"first": 1, "count": 8}})",
                    [=](TrialResult& t, int, int n, const std::string& scheme, int seed) {
                        const double jitter = seed % 2 == 0 ? 0.98 : 1.02; // an even seed count: mean exact
                        const double residual = (n == 3 ? residual3 : residual4) * jitter;
                        const double scalar = (n == 3 ? scalar3 : scalar4) * jitter;
                        const double base = 0.01 * n; // QKQV's variance without its QJL residual
                        const double qkqv = residual * base;
                        if (scheme == "QKQV") {
                            t.scoreErrorVarBase = base;
                            t.scoreErrorVar = qkqv;
                        } else {
                            // KQV and KV have no key residual: their base is their variance.
                            t.scoreErrorVar = t.scoreErrorVarBase = qkqv / scalar;
                        }
                        t.scoreErrorVarPredicted = 1.0;
                    });
}

/// KQV's KL against QKQV's: QKQV = ratio(point, n) x KQV, per query.
ResultSet klRatioRun(const std::function<double(int, int)>& ratio)
{
    return handMade(R"({"kvlens_spec": 1, "name": "kl ratio", "regime": {"name": "gaussian"},
        "sweep": {"score_scale": [1, 4]}, "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"],
        "budgets": [2, 4], "seeds": {"first": 1, "count": 8}})",
                    [=](TrialResult& t, int point, int n, const std::string& scheme, int seed) {
                        t.kl = spread(scheme == "QKQV" ? 0.01 * ratio(point, n) : 0.01, seed);
                        t.meanEntropy = 3.0;
                    });
}

/// Per budget, the direction of each measure: +1 KQV better (lower KL, higher recall, lower
/// phi_T), 0 the two schemes measure the same, -1 KQV worse.
struct Directions {
    int kl = 1, recall = 1, phi = 1;
};

ResultSet recallRun(Directions at2, Directions at4)
{
    return handMade(R"({"kvlens_spec": 1, "name": "recall", "regime": {"name": "gaussian"}, "d": 64, "tokens": 64,
        "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [2, 4], "seeds": {"first": 1, "count": 8}})",
                    [=](TrialResult& t, int, int n, const std::string& scheme, int seed) {
                        const Directions d = n == 2 ? at2 : at4;
                        const bool q = scheme == "QKQV";
                        // QKQV's values: worse than KQV's for +1, equal for 0, better for -1.
                        auto pick = [&](int dir, double kqv, double worse, double better) {
                            return !q || dir == 0 ? kqv : dir > 0 ? worse : better;
                        };
                        t.kl = spread(pick(d.kl, 0.01, 0.03, 0.003), seed);
                        t.recall = spread(pick(d.recall, 0.5, 0.3, 0.7), seed);
                        t.phiT = spread(pick(d.phi, 0.1, 0.2, 0.05), seed);
                    });
}

/// One budget, KQV and QKQV, KL per query = spread(base(scheme)).
ResultSet klRun(const char* json, const std::function<double(const std::string&)>& base)
{
    return handMade(json, [=](TrialResult& t, int, int, const std::string& scheme, int seed) {
        t.kl = spread(base(scheme), seed);
    });
}

const char* kLowRankJson = R"({"kvlens_spec": 1, "name": "low rank", "regime": {"name": "low_rank", "rank": 4},
    "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [4],
    "seeds": {"first": 1, "count": 8}})";
const char* kHeavyTailJson = R"({"kvlens_spec": 1, "name": "heavy tail", "regime": {"name": "heavy_tail", "nu": 1.5},
    "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [4],
    "seeds": {"first": 1, "count": 8}})";

/// Key direction errors per key sample: at n <= 3 QKQV's are lower (phi 0.2 against 0.3) unless
/// `flipLow`, at n >= 4 KQV's are (0.1 against 0.15) unless `flipHigh`; `flipPoint` says at which
/// grid point the flips apply (-1: every point).
ResultSet crossoverRun(const char* json, bool flipLow, bool flipHigh, int flipPoint = -1)
{
    return handMade(json, [=](TrialResult& t, int point, int n, const std::string& scheme, int seed) {
        const bool flip = (flipPoint < 0 || point == flipPoint) && (n <= 3 ? flipLow : flipHigh);
        double kqv = n <= 3 ? 0.3 : 0.1, qkqv = n <= 3 ? 0.2 : 0.15;
        if (flip)
            std::swap(kqv, qkqv);
        t.samplesK.phi = spread(scheme == "QKQV" ? qkqv : kqv, seed);
    });
}

const char* kCrossoverJson = R"({"kvlens_spec": 1, "name": "crossover", "regime": {"name": "gaussian"}, "d": 64,
    "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [2, 4], "seeds": {"first": 1, "count": 8}})";

/// TQ-KQV's phi_T and d2 as factors of TQ-KV's, per query.
ResultSet vpathRun(double phiFactor, double d2Factor)
{
    return handMade(R"({"kvlens_spec": 1, "name": "vpath", "regime": {"name": "heavy_tail", "nu": 1.5}, "d": 64,
        "tokens": 64, "queries": 16, "schemes": ["TQ-KV", "TQ-QKV", "TQ-KQV"], "budgets": [4],
        "seeds": {"first": 1, "count": 8}})",
                    [=](TrialResult& t, int, int, const std::string& scheme, int seed) {
                        const bool v = scheme == "TQ-KQV";
                        t.phiT = spread(0.2 * (v ? phiFactor : 1.0), seed);
                        t.d2 = spread(0.04 * (v ? d2Factor : 1.0), seed);
                        t.kl = spread(scheme == "TQ-QKV" ? 0.05 : 0.02, seed);
                    });
}

/// Median d2 per (scheme, n) as the base of a spread.
using D2Base = std::function<double(const std::string&, int)>;

ResultSet d2Run(const char* json, const D2Base& base)
{
    return handMade(json, [=](TrialResult& t, int, int n, const std::string& scheme, int seed) {
        t.d2 = spread(base(scheme, n), seed);
        t.kl = spread(0.5 * base(scheme, n), seed);
    });
}

const char* kSqHeavyJson = R"({"kvlens_spec": 1, "name": "sq heavy", "regime": {"name": "heavy_tail", "nu": 1.5},
    "d": 64, "tokens": 64, "queries": 16, "schemes": ["Plain-KV", "TQ-KV", "SQ-KV"], "budgets": [2, 4],
    "seeds": {"first": 1, "count": 8}})";
const char* kSqLowRankJson = R"({"kvlens_spec": 1, "name": "sq low rank", "regime": {"name": "low_rank", "rank": 4},
    "d": 64, "tokens": 64, "queries": 16, "schemes": ["Plain-KV", "TQ-KV", "SQ-KV"], "budgets": [2, 4],
    "seeds": {"first": 1, "count": 8}})";
const char* kSqGaussJson = R"({"kvlens_spec": 1, "name": "sq gauss", "regime": {"name": "gaussian"}, "d": 64,
    "tokens": 64, "queries": 16, "schemes": ["Plain-KV", "TQ-KV", "SQ-KV"], "budgets": [2, 3, 4],
    "seeds": {"first": 1, "count": 8}})";

/// TQ-KV wins under heavy tails, SQ-KV under low rank; Gaussian: Plain-KV at `plainAt2` x TQ-KV
/// (the best) at n = 2, TQ-KV wins at n = 4, n = 3 is unchecked (Plain-KV far off there).
D2Base sqBase(int kind, double plainAt2 = 1.1)
{
    return [=](const std::string& s, int n) {
        if (kind == 0)
            return s == "TQ-KV" ? 0.1 : s == "SQ-KV" ? 0.3 : 0.5;
        if (kind == 1)
            return s == "SQ-KV" ? 0.1 : s == "TQ-KV" ? 0.3 : 0.5;
        if (n == 2)
            return s == "TQ-KV" ? 0.2 : s == "SQ-KV" ? 0.25 : 0.2 * plainAt2;
        if (n == 3)
            return s == "Plain-KV" ? 10.0 : 0.2;
        return s == "TQ-KV" ? 0.01 : s == "SQ-KV" ? 0.03 : 0.05;
    };
}

/// SQ-KV's d2 = SQU-KV's x factor(n) x a jitter (1 -+ `jitter`, alternating by query, or by seed
/// when `bySeed`).
ResultSet waterRun(const std::function<double(int)>& factor, double jitter = 0.03, bool bySeed = false)
{
    return handMade(R"({"kvlens_spec": 1, "name": "water", "regime": {"name": "low_rank", "rank": 4}, "d": 64,
        "tokens": 64, "queries": 16, "schemes": ["SQ-KV", "SQU-KV"], "budgets": [2, 4],
        "seeds": {"first": 1, "count": 8}})",
                    [=](TrialResult& t, int, int n, const std::string& scheme, int seed) {
                        t.d2 = spread(0.05, seed);
                        t.kl = t.d2;
                        if (scheme == "SQ-KV")
                            for (std::size_t i = 0; i < t.d2.size(); ++i)
                                t.d2[i] *= static_cast<float>(
                                    factor(n) * ((bySeed ? seed : static_cast<int>(i)) % 2 == 0 ? 1.0 - jitter : 1.0 + jitter));
                    });
}

/// Median KL per scheme and budget for paper C's four schemes.
ResultSet headqRun(const std::function<double(const std::string&, int)>& base)
{
    return handMade(R"({"kvlens_spec": 1, "name": "headq", "regime": {"name": "low_rank", "rank": 4}, "d": 64,
        "tokens": 64, "queries": 16, "schemes": ["KIVI", "HeadQ", "HeadQ-wrong-sign", "HeadQ-random-basis"],
        "budgets": [2, 3], "seeds": {"first": 1, "count": 8}})",
                    [=](TrialResult& t, int, int n, const std::string& scheme, int seed) {
                        t.kl = spread(base(scheme, n), seed);
                    });
}

double headqGood(const std::string& s, int)
{
    return s == "KIVI" ? 0.5 : s == "HeadQ" ? 0.1 : s == "HeadQ-wrong-sign" ? 2.0 : 0.4;
}

/// Four trials of 16 queries, KL distinct and almost independent of the trial; the raw key
/// MSE is a per-trial value unrelated to KL. `fisher` gives a query's Fisher score error from
/// (its KL, its trial's raw MSE).
/// Two schemes x two budgets x six seeds: four (scheme, budget) cells of six trials. Each
/// trial's KL grows with its seed; the raw key MSE follows a fixed shuffle of the seeds.
/// `fisher(kl, rawMse, query)` gives each query's Fisher score error.
ResultSet fisherRun(const std::function<double(double, double, int)>& fisher)
{
    return handMade(R"({"kvlens_spec": 1, "name": "fisher: hand", "regime": {"name": "gaussian"}, "d": 64,
        "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [3, 4], "seeds": {"first": 1, "count": 6}})",
                    [=](TrialResult& t, int, int n, const std::string& scheme, int seed) {
                        const double mse[6] = {0.4, 0.1, 0.6, 0.3, 0.2, 0.5};
                        t.rawMseK = mse[seed];
                        for (int i = 0; i < kQueries; ++i) {
                            const double kl = 0.001 * (1.0 + i) * (1.0 + 0.1 * seed) * (scheme == "QKQV" ? 2.0 : 1.0) * n;
                            t.kl.push_back(static_cast<float>(kl));
                            t.fisher.push_back(static_cast<float>(fisher(kl, t.rawMseK, i)));
                        }
                    });
}

} // namespace

class TestClaimCriteria : public QObject {
    Q_OBJECT
private slots:
    void qjlVarianceFlipsWithTheVarianceRatios()
    {
        const double halfPi = std::acos(-1.0) / 2.0, twoPi = 4.0 * halfPi;
        // Checks per budget: [residual ratio ~ pi/2, scalar ratio ~ 2 pi], n = 3 then n = 4.
        const Claim exact = qjlVarianceClaim(qjlRun(halfPi, twoPi, halfPi, twoPi));
        QCOMPARE(exact.checks.size(), std::size_t{4});
        QCOMPARE(exact.verdict, Verdict::Holds);
        QCOMPARE(outcomesOf(exact), QStringLiteral("HHHH"));
        // The residual ratio is an exact expectation: its interval (+-1.8%) must contain pi/2. 8%
        // above: the claim says "at least pi/2", so a larger effect; 3% below: borderline (within 5%);
        // 10% below: contradicted.
        QCOMPARE(outcomesOf(qjlVarianceClaim(qjlRun(halfPi, twoPi, 1.08 * halfPi, twoPi))), QStringLiteral("HHLH"));
        QCOMPARE(outcomesOf(qjlVarianceClaim(qjlRun(halfPi, twoPi, 0.97 * halfPi, twoPi))), QStringLiteral("HHBH"));
        const Claim residualOff = qjlVarianceClaim(qjlRun(halfPi, twoPi, 0.90 * halfPi, twoPi));
        QCOMPARE(residualOff.verdict, Verdict::DependsOnSetting);
        QCOMPARE(outcomesOf(residualOff), QStringLiteral("HHCH"));
        // The scalar ratio in the +-25% band around 2 pi: 20% below holds, 24% below straddles the
        // bound (borderline), 30% below is outside.
        QCOMPARE(outcomesOf(qjlVarianceClaim(qjlRun(halfPi, 0.8 * twoPi, halfPi, twoPi))), QStringLiteral("HHHH"));
        QCOMPARE(outcomesOf(qjlVarianceClaim(qjlRun(halfPi, 0.755 * twoPi, halfPi, twoPi))), QStringLiteral("HBHH"));
        const Claim scalarOff = qjlVarianceClaim(qjlRun(halfPi, 0.7 * twoPi, halfPi, twoPi));
        QCOMPARE(outcomesOf(scalarOff), QStringLiteral("HCHH"));
        QCOMPARE(scalarOff.verdict, Verdict::DependsOnSetting);
        // Every ratio off (the residual ones below pi/2): nothing holds.
        QCOMPARE(qjlVarianceClaim(qjlRun(0.7 * halfPi, 2.0 * twoPi, 0.8 * halfPi, 0.5 * twoPi)).verdict,
                 Verdict::Contradicted);
        // Call KQV "QKQV": its variance over its own base is 1, over the real QKQV's 1 / (2 pi).
        const Claim names = qjlVarianceClaim(swapped(qjlRun(halfPi, twoPi, halfPi, twoPi), "KQV", "QKQV"));
        QCOMPARE(names.checks.size(), std::size_t{4});
        QCOMPARE(names.verdict, Verdict::Contradicted);
    }

    void klRatioFlipsWithTheRatioAtTheCheckedBudget()
    {
        // Two score scales, checked at n = 4 only: QKQV's KL 2.25x KQV's at both.
        const Claim paper = klRatioClaim(klRatioRun([](int, int n) { return n == 4 ? 2.25 : 1.0; }), 5, 50);
        QCOMPARE(paper.checks.size(), std::size_t{2});
        QCOMPARE(paper.verdict, Verdict::Holds);
        // n = 2 is tabulated, not checked: a reversed KL there changes nothing.
        QCOMPARE(klRatioClaim(klRatioRun([](int, int n) { return n == 4 ? 2.25 : 0.2; }), 5, 50).verdict,
                 Verdict::Holds);
        // Every query's ratio is exact here, so the interval is the point: 2.6 lies above 2.25, a
        // larger effect than claimed.
        QCOMPARE(klRatioClaim(klRatioRun([](int, int n) { return n == 4 ? 2.6 : 1.0; }), 5, 50).verdict,
                 Verdict::HoldsLarger);
        // At score scale 4 QKQV is 3x worse: larger than claimed there, as claimed at scale 1.
        const Claim tooLarge =
            klRatioClaim(klRatioRun([](int point, int n) { return n == 4 ? (point == 1 ? 3.0 : 2.25) : 1.0; }), 5, 50);
        QCOMPARE(tooLarge.verdict, Verdict::Holds);
        QCOMPARE(outcomesOf(tooLarge), QStringLiteral("HL"));
        // 2.2x: within 5% below 2.25, borderline; 1.75x at both scales: contradicted.
        QCOMPARE(klRatioClaim(klRatioRun([](int, int n) { return n == 4 ? 2.2 : 1.0; }), 5, 50).verdict,
                 Verdict::Borderline);
        QCOMPARE(klRatioClaim(klRatioRun([](int, int n) { return n == 4 ? 1.75 : 1.0; }), 5, 50).verdict,
                 Verdict::Contradicted);
        // Names swapped: the same numbers say KQV is 2.25x worse.
        const Claim reversed =
            klRatioClaim(swapped(klRatioRun([](int, int n) { return n == 4 ? 2.25 : 1.0; }), "KQV", "QKQV"), 5, 50);
        QCOMPARE(reversed.verdict, Verdict::Contradicted);
    }

    void recallFollowsKlFlipsWhenTheDirectionsDisagree()
    {
        const Directions good{1, 1, 1};
        const Claim follows = recallFollowsKlClaim(recallRun(good, good));
        QCOMPARE(follows.checks.size(), std::size_t{2});
        QCOMPARE(follows.verdict, Verdict::Holds);
        // n = 4: QKQV has higher KL but also higher recall: recall does not follow KL there.
        const Claim recallAgainst = recallFollowsKlClaim(recallRun(good, {1, -1, 1}));
        QCOMPARE(recallAgainst.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(recallAgainst), (QList<bool>{true, false}));
        // n = 4: phi_T against KL.
        QCOMPARE(holdsOf(recallFollowsKlClaim(recallRun(good, {1, 1, -1}))), (QList<bool>{true, false}));
        // n = 2: KL does not separate the schemes but recall and phi_T do: does not follow.
        QCOMPARE(holdsOf(recallFollowsKlClaim(recallRun({0, 1, 1}, good))), (QList<bool>{false, true}));
        // n = 2: nothing separates them: follows.
        QCOMPARE(recallFollowsKlClaim(recallRun({0, 0, 0}, good)).verdict, Verdict::Holds);
        // KQV worse on every measure: the measures still move together.
        QCOMPARE(recallFollowsKlClaim(recallRun({-1, -1, -1}, {-1, -1, -1})).verdict, Verdict::Holds);
        // KQV's KL worse, its recall and phi_T better, at both budgets: nothing follows.
        QCOMPARE(recallFollowsKlClaim(recallRun({-1, 1, 1}, {-1, 1, 1})).verdict, Verdict::Contradicted);
    }

    void lowRankFlipsWithTheKlRatio()
    {
        const ResultSet lowRank = klRun(kLowRankJson, [](const std::string&) { return 1.0; });
        const ResultSet heavy = klRun(kHeavyTailJson, [](const std::string&) { return 0.005; });
        // Low rank 200x the heavy tail's KL for both schemes; marginals may be absent.
        const Claim big = lowRankClaim(lowRank, heavy, nullptr, nullptr);
        QCOMPARE(big.checks.size(), std::size_t{2});
        QCOMPARE(big.verdict, Verdict::Holds);
        QCOMPARE(big.tables.size(), std::size_t{1}); // no premise table without marginals
        // The threshold is two decades, against the ratio's interval (it resamples each run's seeds):
        // 111x holds, exactly 100x straddles it (borderline), 91x does not hold.
        QCOMPARE(lowRankClaim(lowRank, klRun(kHeavyTailJson, [](const std::string&) { return 0.009; }), nullptr,
                              nullptr)
                     .verdict,
                 Verdict::Holds);
        QCOMPARE(lowRankClaim(lowRank, klRun(kHeavyTailJson, [](const std::string&) { return 0.01; }), nullptr,
                              nullptr)
                     .verdict,
                 Verdict::Borderline);
        QCOMPARE(lowRankClaim(lowRank, klRun(kHeavyTailJson, [](const std::string&) { return 0.011; }), nullptr,
                              nullptr)
                     .verdict,
                 Verdict::Contradicted);
        // Four seeds a run cannot reach p < 0.01 between the runs (at best 2 / C(8, 4) = 0.029).
        const char* fewLow = R"({"kvlens_spec": 1, "name": "low rank", "regime": {"name": "low_rank", "rank": 4},
            "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [4],
            "seeds": {"first": 1, "count": 4}})";
        const char* fewHeavy = R"({"kvlens_spec": 1, "name": "heavy tail", "regime": {"name": "heavy_tail", "nu": 1.5},
            "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [4],
            "seeds": {"first": 1, "count": 4}})";
        QCOMPARE(lowRankClaim(klRun(fewLow, [](const std::string&) { return 1.0; }),
                              klRun(fewHeavy, [](const std::string&) { return 0.005; }), nullptr, nullptr)
                     .verdict,
                 Verdict::NotTestable);
        // QKQV's heavy-tail KL four times larger: 50x, one decade and a half.
        const Claim split = lowRankClaim(
            lowRank, klRun(kHeavyTailJson, [](const std::string& s) { return s == "QKQV" ? 0.02 : 0.005; }), nullptr,
            nullptr);
        QCOMPARE(split.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(split), (QList<bool>{true, false}));
        // The runs the other way round: the "low-rank" KL is lower.
        QCOMPARE(lowRankClaim(heavy, lowRank, nullptr, nullptr).verdict, Verdict::Contradicted);
        // A scheme the heavy-tail run lacks is not compared.
        const Claim one = lowRankClaim(lowRank, renamed(heavy, "QKQV", "TQ-QKQV"), nullptr, nullptr);
        QCOMPARE(one.checks.size(), std::size_t{1});
        // The premise (same marginal) is reported, not counted: disjoint marginals leave the verdict.
        MarginalHistogram a, b;
        for (int i = 0; i < 50; ++i) {
            a.sample.push_back(-2.0 + 0.01 * i);
            b.sample.push_back(1.0 + 0.01 * i);
        }
        const Claim premise = lowRankClaim(lowRank, heavy, &a, &b);
        QCOMPARE(premise.verdict, Verdict::Holds);
        QCOMPARE(premise.checks.size(), std::size_t{2});
        QCOMPARE(premise.tables.size(), std::size_t{2});
        QCOMPARE(QString::fromStdString(premise.tables[0].rows[0][4]), QStringLiteral("no"));
    }

    void crossoverFlipsWhenEitherSideTurns()
    {
        const ResultSet good = crossoverRun(kCrossoverJson, false, false);
        const Claim c = crossoverClaim({&good});
        QCOMPARE(c.checks.size(), std::size_t{1});
        QCOMPARE(c.verdict, Verdict::Holds);
        // KQV no longer better at n = 4, or QKQV no longer better at n = 2: the check fails.
        const ResultSet highFlipped = crossoverRun(kCrossoverJson, false, true);
        const ResultSet lowFlipped = crossoverRun(kCrossoverJson, true, false);
        QCOMPARE(crossoverClaim({&highFlipped}).verdict, Verdict::Contradicted);
        QCOMPARE(crossoverClaim({&lowFlipped}).verdict, Verdict::Contradicted);
        // Scheme names swapped: both sides turn.
        const ResultSet namesSwapped = swapped(good, "KQV", "QKQV");
        QCOMPARE(crossoverClaim({&namesSwapped}).verdict, Verdict::Contradicted);
        // One run each way.
        const Claim two = crossoverClaim({&good, &highFlipped});
        QCOMPARE(two.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(two), (QList<bool>{true, false}));
        // A run without budgets on both sides of 4 is skipped, whatever its numbers.
        const ResultSet highOnly = crossoverRun(R"({"kvlens_spec": 1, "name": "high", "regime": {"name": "gaussian"},
            "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"], "budgets": [4, 5],
            "seeds": {"first": 1, "count": 8}})",
                                                true, true);
        const Claim skipped = crossoverClaim({&good, &highOnly});
        QCOMPARE(skipped.checks.size(), std::size_t{1});
        QCOMPARE(skipped.runs.size(), std::size_t{1});
        QCOMPARE(skipped.verdict, Verdict::Holds);
        // A score-scale sweep has the same keys at every point: only point 0 is checked.
        const char* scoreSweep = R"({"kvlens_spec": 1, "name": "score", "regime": {"name": "gaussian"},
            "sweep": {"score_scale": [1, 4]}, "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"],
            "budgets": [2, 4], "seeds": {"first": 1, "count": 8}})";
        const ResultSet scoreLate = crossoverRun(scoreSweep, false, true, 1);
        QCOMPARE(crossoverClaim({&scoreLate}).checks.size(), std::size_t{1});
        QCOMPARE(crossoverClaim({&scoreLate}).verdict, Verdict::Holds);
        const ResultSet scoreEarly = crossoverRun(scoreSweep, false, true, 0);
        QCOMPARE(crossoverClaim({&scoreEarly}).verdict, Verdict::Contradicted);
        // A sweep over the keys' regime checks every point.
        const ResultSet nuSweep = crossoverRun(R"({"kvlens_spec": 1, "name": "nu", "regime": {"name": "heavy_tail"},
            "sweep": {"regime.nu": [5, 1.05]}, "d": 64, "tokens": 64, "queries": 16, "schemes": ["KQV", "QKQV"],
            "budgets": [2, 4], "seeds": {"first": 1, "count": 8}})",
                                               false, true, 1);
        const Claim perNu = crossoverClaim({&nuSweep});
        QCOMPARE(holdsOf(perNu), (QList<bool>{true, false}));
        QCOMPARE(perNu.verdict, Verdict::DependsOnSetting);
    }

    void vpathVerdictsFlipWithTheOutputError()
    {
        // TQ-KQV halves TQ-KV's phi_T and d2: paper A's verdict holds, paper B's does not.
        const ResultSet lower = vpathRun(0.5, 0.5);
        const Claim aLower = vpathPaperAClaim({&lower}, 9, 50), bLower = vpathPaperBClaim({&lower}, 9, 50);
        QCOMPARE(aLower.checks.size(), std::size_t{2});
        QCOMPARE(aLower.verdict, Verdict::Holds);
        QCOMPARE(bLower.checks.size(), std::size_t{2});
        QCOMPARE(bLower.verdict, Verdict::Contradicted);
        // Doubled: the other way round.
        const ResultSet higher = vpathRun(2.0, 2.0);
        QCOMPARE(vpathPaperAClaim({&higher}, 9, 50).verdict, Verdict::Contradicted);
        QCOMPARE(vpathPaperBClaim({&higher}, 9, 50).verdict, Verdict::Holds);
        // The same by renaming: TQ-KV's numbers called TQ-KQV.
        const ResultSet renamedLower = swapped(lower, "TQ-KV", "TQ-KQV");
        QCOMPARE(vpathPaperAClaim({&renamedLower}, 9, 50).verdict, Verdict::Contradicted);
        QCOMPARE(vpathPaperBClaim({&renamedLower}, 9, 50).verdict, Verdict::Holds);
        // phi_T lower, d2 higher: both papers get one metric each.
        const ResultSet mixed = vpathRun(0.5, 2.0);
        const Claim aMixed = vpathPaperAClaim({&mixed}, 9, 50), bMixed = vpathPaperBClaim({&mixed}, 9, 50);
        QCOMPARE(aMixed.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(aMixed), (QList<bool>{true, false}));
        QCOMPARE(bMixed.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(bMixed), (QList<bool>{false, true}));
        // No difference: neither paper's verdict (the two are not complements).
        const ResultSet same = vpathRun(1.0, 1.0);
        QCOMPARE(vpathPaperAClaim({&same}, 9, 50).verdict, Verdict::Contradicted);
        QCOMPARE(vpathPaperBClaim({&same}, 9, 50).verdict, Verdict::Contradicted);
        // Without TQ-QKV the run is not read.
        const ResultSet noK = renamed(lower, "TQ-QKV", "TQ-QKQV");
        QVERIFY(vpathPaperAClaim({&noK}, 9, 50).checks.empty());
        // Two runs, one each way: depends on the setting.
        QCOMPARE(vpathPaperAClaim({&lower, &higher}, 9, 50).verdict, Verdict::DependsOnSetting);
    }

    void sqVsTqFlipsByRegime()
    {
        const ResultSet heavy = d2Run(kSqHeavyJson, sqBase(0)), lowRank = d2Run(kSqLowRankJson, sqBase(1)),
                        gauss = d2Run(kSqGaussJson, sqBase(2));
        // Heavy tail n = 2, 4; low rank n = 2, 4; Gaussian n = 2 (Plain-KV competitive), n = 4 (n = 3 unchecked).
        const Claim all = sqVsTqClaim(&gauss, &heavy, &lowRank, 11, 50);
        QCOMPARE(all.checks.size(), std::size_t{6});
        QCOMPARE(all.verdict, Verdict::Holds);
        // Heavy tail with TQ-KV and SQ-KV swapped: SQ-KV wins there, against the claim.
        const ResultSet heavySwapped = swapped(heavy, "TQ-KV", "SQ-KV");
        const Claim heavyWrong = sqVsTqClaim(&gauss, &heavySwapped, &lowRank, 11, 50);
        QCOMPARE(heavyWrong.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(heavyWrong), (QList<bool>{false, false, true, true, true, true}));
        QCOMPARE(sqVsTqClaim(nullptr, &heavySwapped, nullptr, 11, 50).verdict, Verdict::Contradicted);
        // Low rank swapped: TQ-KV wins there.
        const ResultSet lowSwapped = swapped(lowRank, "TQ-KV", "SQ-KV");
        QCOMPARE(holdsOf(sqVsTqClaim(&gauss, &heavy, &lowSwapped, 11, 50)),
                 (QList<bool>{true, true, false, false, true, true}));
        // Gaussian n = 2: Plain-KV at 1.2x the best is competitive, at 1.3x it is not.
        const ResultSet plainClose = d2Run(kSqGaussJson, sqBase(2, 1.2)), plainFar = d2Run(kSqGaussJson, sqBase(2, 1.3));
        QCOMPARE(sqVsTqClaim(&plainClose, nullptr, nullptr, 11, 50).verdict, Verdict::Holds);
        const Claim far = sqVsTqClaim(&plainFar, nullptr, nullptr, 11, 50);
        QCOMPARE(far.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(far), (QList<bool>{false, true}));
        // Gaussian n = 4 with the names swapped: SQ-KV wins at n = 4; Plain-KV is still competitive at n = 2.
        const ResultSet gaussSwapped = swapped(gauss, "TQ-KV", "SQ-KV");
        QCOMPARE(holdsOf(sqVsTqClaim(&gaussSwapped, nullptr, nullptr, 11, 50)), (QList<bool>{true, false}));
    }

    void waterFillingFlipsWithTheIntervalNotThePoint()
    {
        // SQ-KV within 3% of SQU-KV query by query at both budgets: equivalent.
        const ResultSet equal = waterRun([](int) { return 1.0; });
        const Claim same = waterFillingClaim({&equal}, 13, 200);
        QCOMPARE(same.checks.size(), std::size_t{2});
        QCOMPARE(same.verdict, Verdict::Holds);
        // 15% worse is still inside [0.8, 1.25].
        const ResultSet worse15 = waterRun([](int) { return 1.15; });
        QCOMPARE(waterFillingClaim({&worse15}, 13, 200).verdict, Verdict::Holds);
        // 50% worse at n = 4 only.
        const ResultSet worseAt4 = waterRun([](int n) { return n == 4 ? 1.5 : 1.0; });
        const Claim split = waterFillingClaim({&worseAt4}, 13, 200);
        QCOMPARE(split.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(split), (QList<bool>{true, false}));
        // 30% better is not equivalent either.
        const ResultSet better30 = waterRun([](int) { return 0.7; });
        QCOMPARE(waterFillingClaim({&better30}, 13, 200).verdict, Verdict::Contradicted);
        const ResultSet queryScatter = waterRun([](int) { return 1.0; }, 0.6);
        QCOMPARE(waterFillingClaim({&queryScatter}, 13, 200).verdict, Verdict::Holds);
        // Alternate seeds at 0.4x and 1.6x: the ratio of medians sits inside the margins but its
        // interval, which resamples seeds, does not: equivalence needs the whole interval, so each
        // check straddles a margin (borderline), never holds.
        const ResultSet scattered = waterRun([](int) { return 1.0; }, 0.6, true);
        const Claim wide = waterFillingClaim({&scattered}, 13, 200);
        QCOMPARE(wide.verdict, Verdict::Borderline);
        // The same scatter across the queries of every seed does not widen a seed-level interval.
        QCOMPARE(waterFillingClaim({&equal}, 13, 200).verdict, Verdict::Holds);
        const Series& ratios = wide.figures[0].series[0];
        QCOMPARE(ratios.y.size(), std::size_t{2});
        for (std::size_t i = 0; i < ratios.y.size(); ++i) {
            QVERIFY2(ratios.y[i] >= 0.8 && ratios.y[i] <= 1.25, qPrintable(QString::number(ratios.y[i])));
            QVERIFY2(ratios.low[i] < 0.8 || ratios.high[i] > 1.25,
                     qPrintable(QString::number(ratios.low[i]) + " " + QString::number(ratios.high[i])));
        }
    }

    void headqFlipsWithEachControl()
    {
        // Checks per budget (n = 2, 3): HeadQ beats KIVI, wrong sign worse than KIVI, random basis worse than HeadQ.
        const Claim good = headqClaim(headqRun(headqGood), 17, 50);
        QCOMPARE(good.checks.size(), std::size_t{6});
        QCOMPARE(good.verdict, Verdict::Holds);
        // The random basis does HeadQ's job (same KL): its check fails at both budgets.
        const Claim randomWorks = headqClaim(
            headqRun([](const std::string& s, int n) { return s == "HeadQ-random-basis" ? 0.1 : headqGood(s, n); }), 17,
            50);
        QCOMPARE(randomWorks.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(randomWorks), (QList<bool>{true, true, false, true, true, false}));
        // The wrong sign beats KIVI at n = 3.
        const Claim wrongHelps = headqClaim(
            headqRun([](const std::string& s, int n) { return s == "HeadQ-wrong-sign" && n == 3 ? 0.3 : headqGood(s, n); }),
            17, 50);
        QCOMPARE(holdsOf(wrongHelps), (QList<bool>{true, true, true, true, false, true}));
        // HeadQ and KIVI names swapped: HeadQ no longer beats KIVI nor the random basis.
        QCOMPARE(holdsOf(headqClaim(swapped(headqRun(headqGood), "HeadQ", "KIVI"), 17, 50)),
                 (QList<bool>{false, true, false, false, true, false}));
        // All four the same: nothing holds.
        QCOMPARE(headqClaim(headqRun([](const std::string&, int) { return 0.5; }), 17, 50).verdict,
                 Verdict::Contradicted);
        // A control missing: no check, nothing to decide.
        const Claim missing = headqClaim(renamed(headqRun(headqGood), "HeadQ-random-basis", "KIVI-A2"), 17, 50);
        QVERIFY(missing.checks.empty());
        QCOMPARE(missing.verdict, Verdict::NotTestable);
    }

    void fisherProxyFlipsWithTheFisherRanking()
    {
        // Deployable Fisher (mean over each trial's calibration queries) a multiple of KL: rho = 1
        // against the held-out KL in every cell; raw MSE shuffled: Fisher ranks better.
        const ResultSet good = fisherRun([](double kl, double, int) { return 3.0 * kl; });
        const Claim c = fisherProxyClaim({&good}, 19, 200);
        QCOMPARE(c.checks.size(), std::size_t{1});
        QCOMPARE(c.verdict, Verdict::Holds);
        QCOMPARE(QString::fromStdString(c.tables[0].rows[0][1]), QStringLiteral("4")); // cells
        QCOMPARE(QString::fromStdString(c.tables[0].rows[0][2]), QStringLiteral("1"));
        // Fisher reversed against KL (rho = -1): worse than raw MSE.
        const ResultSet reversed = fisherRun([](double kl, double, int) { return 1.0 / kl; });
        QCOMPARE(fisherProxyClaim({&reversed}, 19, 200).verdict, Verdict::Contradicted);
        // Fisher carrying exactly the raw MSE's information: no better, and a tie is not a win.
        const ResultSet tie = fisherRun([](double, double mse, int) { return mse; });
        const Claim tied = fisherProxyClaim({&tie}, 19, 200);
        QCOMPARE(tied.verdict, Verdict::Contradicted);
        QCOMPARE(QString::fromStdString(tied.tables[0].rows[0][2]), QString::fromStdString(tied.tables[0].rows[0][3]));
        // Only the calibration (even) queries count: anything on the held-out queries, here NaN
        // or a perfect same-query Fisher, leaves the deployable row as it is.
        const ResultSet heldOutNan = fisherRun([](double kl, double, int i) { return i % 2 ? NAN : 3.0 * kl; });
        const Claim partial = fisherProxyClaim({&heldOutNan}, 19, 200);
        QCOMPARE(partial.verdict, Verdict::Holds);
        QCOMPARE(partial.tables[0].rows[0][2], c.tables[0].rows[0][2]);
        const ResultSet oracleOnly = fisherRun([](double kl, double, int i) { return i % 2 ? 2.0 * kl : 1.0 / kl; });
        const Claim oracle = fisherProxyClaim({&oracleOnly}, 19, 200);
        QCOMPARE(oracle.verdict, Verdict::Contradicted);
        QCOMPARE(QString::fromStdString(oracle.tables[0].rows[0][5]), QStringLiteral("1")); // the oracle row
        // One run each way.
        const Claim two = fisherProxyClaim({&good, &reversed}, 19, 200);
        QCOMPARE(two.verdict, Verdict::DependsOnSetting);
        QCOMPARE(holdsOf(two), (QList<bool>{true, false}));
    }
};

QTEST_APPLESS_MAIN(TestClaimCriteria)
#include "tst_claim_criteria.moc"
