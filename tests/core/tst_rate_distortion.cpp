// SPDX-License-Identifier: GPL-3.0-or-later
// Rate-distortion points on a hand-built result set: exact bits, seed-level t-intervals and the envelope, worked by hand.
#include "core/analysis/rate_distortion.h"
#include "core/spec/spec.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>
#include <numbers>

using namespace kvlens;

namespace {

/// KV, KQV, QKQV at n = 2, 3, seeds 1..3; no trials yet.
ResultSet emptySet(int seeds = 3)
{
    ResultSet r;
    r.spec = defaultSpec();
    r.spec.budgets = {2, 3};
    r.spec.seedCount = seeds;
    r.schemes = r.spec.schemes;
    r.totalTrials = r.spec.trialCount();
    return r;
}

/// One trial whose queries' KL are `kl`; its output error is 10 x its KL, query by query.
TrialResult trial(int scheme, int budget, int seedIndex, double keyBits, double valueBits, std::vector<float> kl)
{
    TrialResult t;
    t.key.scheme = scheme;
    t.key.budget = budget;
    t.key.seedIndex = seedIndex;
    t.key.seed = 1 + static_cast<std::uint64_t>(seedIndex);
    t.bits.key = keyBits;
    t.bits.value = valueBits;
    t.kl = std::move(kl);
    for (float v : t.kl)
        t.relMseT.push_back(10.0f * v);
    return t;
}

/// Adds three seeds of a cell whose per-seed mean KL are m0, m1, m2 (each seed: two queries, m/2 and 3m/2).
void addCell(ResultSet& r, int scheme, int budget, double keyBits, double valueBits, double m0, double m1, double m2)
{
    const double means[] = {m0, m1, m2};
    for (int i = 0; i < 3; ++i) {
        const float m = static_cast<float>(means[i]);
        // Two queries around the mean, exact in float for the values used here.
        r.trials.push_back(trial(scheme, budget, i, keyBits, valueBits, {m * 0.5f, m * 1.5f}));
    }
}

// Student-t quantiles in closed form: for 2 degrees of freedom F(t) = 1/2 + t / (2 sqrt(2 + t^2)),
// so t(0.975) = sqrt(2 q^2 / (1 - q^2)) with q = 0.95; for 1 (Cauchy) t(0.975) = tan(0.475 pi).
const double kT2 = std::sqrt(2.0 * 0.95 * 0.95 / (1.0 - 0.95 * 0.95)); // 4.3026527...
const double kT1 = std::tan(0.475 * std::numbers::pi);                   // 12.706204...

} // namespace

class TestRateDistortion : public QObject {
    Q_OBJECT
private slots:
    void pointsIntervalsAndEnvelopeByHand()
    {
        // (exact bits, per-seed mean KL). Bits per coordinate of the cache = (key + value) / 2.
        ResultSet r = emptySet();
        addCell(r, 0, 2, 2.25, 2.0, 2.0, 3.0, 4.0);  // KV n=2:   2.125 bits, damage 3, sd 1
        addCell(r, 1, 2, 2.5, 2.0, 1.0, 1.0, 1.0);   // KQV n=2:  2.25 bits, damage 1
        addCell(r, 2, 2, 2.5, 2.0, 2.0, 2.0, 2.0);   // QKQV n=2: 2.25 bits, damage 2: KQV n=2 beats it
        addCell(r, 0, 3, 3.25, 3.0, 0.5, 0.5, 0.5);  // KV n=3:   3.125 bits, damage 0.5
        addCell(r, 1, 3, 3.5, 3.0, 0.6, 0.6, 0.6);   // KQV n=3:  3.25 bits, damage 0.6: KV n=3 beats it
        addCell(r, 2, 3, 3.5, 3.0, 0.1, 0.1, 0.1);   // QKQV n=3: 3.25 bits, damage 0.1
        const RateDistortion rd = rateDistortion(r);
        QCOMPARE(rd.points.size(), std::size_t{6});
        // Walk order: (point, budget, scheme).
        const int schemes[] = {0, 1, 2, 0, 1, 2}, budgets[] = {2, 2, 2, 3, 3, 3};
        const double bits[] = {2.125, 2.25, 2.25, 3.125, 3.25, 3.25}, damage[] = {3.0, 1.0, 2.0, 0.5, 0.6, 0.1};
        const bool envelope[] = {true, true, false, true, false, true};
        for (int i = 0; i < 6; ++i) {
            const RateDistortionPoint& p = rd.points[static_cast<std::size_t>(i)];
            QCOMPARE(p.scheme, schemes[i]);
            QCOMPARE(p.budget, budgets[i]);
            QCOMPARE(p.seeds, 3);
            KVLENS_COMPARE_ABS(p.bits, bits[i], 1e-12);
            QCOMPARE(p.bitsSpread, 0.0);
            KVLENS_COMPARE_REL(p.damage, damage[i], 1e-6);
            QVERIFY2(p.onEnvelope == envelope[i], qPrintable(QString::number(i)));
            QVERIFY(p.finite && !p.exactZero);
        }
        // KV n=2: seed means 2, 3, 4: sd 1, half width t(0.975, 2) / sqrt(3).
        KVLENS_COMPARE_REL(rd.points[0].high - rd.points[0].damage, kT2 / std::sqrt(3.0), 1e-9);
        KVLENS_COMPARE_REL(rd.points[0].damage - rd.points[0].low, kT2 / std::sqrt(3.0), 1e-9);
        KVLENS_COMPARE_ABS(kT2, 4.303, 5e-4); // the printed tables (Fisher & Yates) give 4.303
        // Identical seeds: no width.
        KVLENS_COMPARE_ABS(rd.points[1].high - rd.points[1].low, 0.0, 1e-12);
        // The envelope, ascending in bits.
        QCOMPARE(rd.envelope(0), (std::vector<int>{0, 1, 3, 5}));
        QVERIFY(rd.envelope(1).empty());

        // Output error: 10 x KL query by query, so 10 x the damage and the same envelope.
        const RateDistortion out = rateDistortion(r, DamageMetric::OutputError);
        for (int i = 0; i < 6; ++i) {
            KVLENS_COMPARE_REL(out.points[static_cast<std::size_t>(i)].damage, 10.0 * damage[i], 1e-6);
            QCOMPARE(out.points[static_cast<std::size_t>(i)].onEnvelope, envelope[i]);
        }
    }

    void theUnitIsTheSeedNotTheQuery()
    {
        // Two seeds of 50 queries each, every query of a seed alike: 2 units, not 100. The seeds'
        // means 1 and 3 have sd sqrt(2): half width t(0.975, 1) sqrt(2) / sqrt(2) = t(0.975, 1).
        ResultSet r = emptySet(2);
        r.spec.budgets = {2};
        r.spec.schemes.resize(1);
        r.schemes = r.spec.schemes;
        r.totalTrials = 2;
        r.trials.push_back(trial(0, 2, 0, 2.0, 2.0, std::vector<float>(50, 1.0f)));
        r.trials.push_back(trial(0, 2, 1, 2.0, 2.0, std::vector<float>(50, 3.0f)));
        const RateDistortion rd = rateDistortion(r);
        QCOMPARE(rd.points.size(), std::size_t{1});
        QCOMPARE(rd.points[0].seeds, 2);
        KVLENS_COMPARE_ABS(rd.points[0].damage, 2.0, 1e-12);
        KVLENS_COMPARE_REL(rd.points[0].high - rd.points[0].damage, kT1, 1e-9);
        KVLENS_COMPARE_ABS(kT1, 12.706, 5e-4); // the tables: 12.706
        // A query-level interval (100 "units", sd ~1) would be about 0.2 wide: far narrower.
        QVERIFY(rd.points[0].high - rd.points[0].low > 20.0);
        QVERIFY(rd.points[0].onEnvelope); // alone at its point
    }

    void oneSeedZeroAndNonFiniteCellsSaySo()
    {
        ResultSet r = emptySet(1);
        r.spec.budgets = {2};
        r.totalTrials = 3;
        r.trials.push_back(trial(0, 2, 0, 2.0, 2.0, {0.0f, 0.0f}));            // KL = 0 exactly: dominates
        r.trials.push_back(trial(1, 2, 0, 3.0, 2.0, {1.0f, std::nanf("")}));   // a NaN query
        r.trials.push_back(trial(2, 2, 0, 1.0, 2.0, {4.0f, 2.0f}));            // fewer bits: on the envelope too
        const RateDistortion rd = rateDistortion(r);
        QCOMPARE(rd.points.size(), std::size_t{3});
        QVERIFY(rd.points[0].exactZero && rd.points[0].finite);
        QCOMPARE(rd.points[0].damage, 0.0);
        QVERIFY(std::isnan(rd.points[0].low) && std::isnan(rd.points[0].high)); // one seed: no interval
        QVERIFY(rd.points[0].onEnvelope);
        QVERIFY(!rd.points[1].finite && std::isnan(rd.points[1].damage) && !rd.points[1].onEnvelope);
        QVERIFY(!rd.points[1].exactZero);
        QVERIFY(rd.points[2].onEnvelope); // 1.5 bits < 2 bits
        QCOMPARE(rd.envelope(0), (std::vector<int>{2, 0}));

        const QString csv = QString::fromStdString(rateDistortionCsv(r, rd));
        const QStringList lines = csv.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 4);
        QCOMPARE(lines[0], QStringLiteral("point,point_label,scheme,budget_nominal,bits_exact,bits_spread,metric,unit,"
                                          "damage,ci_low,ci_high,interval,seeds,on_envelope"));
        QCOMPARE(lines[1], QStringLiteral("0,,KV,2,2,0,mean_kl,nats,0,nan,nan,none_one_seed,1,1"));
        QCOMPARE(lines[2], QStringLiteral("0,,KQV,2,2.5,0,mean_kl,nats,nan,nan,nan,none_not_finite,1,0"));
        QVERIFY(lines[3].startsWith(QStringLiteral("0,,QKQV,2,1.5,0,mean_kl,nats,3,")));
    }

    void bitsThatVaryBySeedAreAveragedAndTheirSpreadKept()
    {
        ResultSet r = emptySet(2);
        r.spec.budgets = {2};
        r.spec.schemes.resize(1);
        r.schemes = r.spec.schemes;
        r.trials.push_back(trial(0, 2, 0, 3.0, 2.0, {1.0f}));
        r.trials.push_back(trial(0, 2, 1, 3.5, 2.0, {1.0f}));
        const RateDistortion rd = rateDistortion(r);
        KVLENS_COMPARE_ABS(rd.points[0].bits, (2.5 + 2.75) / 2.0, 1e-12);
        KVLENS_COMPARE_ABS(rd.points[0].bitsSpread, 0.25, 1e-12);
    }

    void poolingGridPointsAveragesEachSeedOverThem()
    {
        // Two grid points (a model's two heads, say): per seed, the mean over the points of their
        // seed means; the interval is still over the seeds (2 units).
        ResultSet r = emptySet(2);
        r.spec.budgets = {2};
        r.spec.schemes.resize(1);
        r.spec.sweep = {SweepAxis{SweepParameter::D, "", {32.0, 64.0}}};
        r.schemes = r.spec.schemes;
        auto at = [](int point, int seed, double keyBits, float kl) {
            TrialResult t = trial(0, 2, seed, keyBits, 2.0, {kl, kl});
            t.key.point = point;
            return t;
        };
        r.trials = {at(0, 0, 2.0, 1.0f), at(0, 1, 2.0, 3.0f), at(1, 0, 4.0, 3.0f), at(1, 1, 4.0, 5.0f)};
        const RateDistortion per = rateDistortion(r);
        QCOMPARE(per.points.size(), std::size_t{2});
        QCOMPARE(per.pooledPoints, 0);
        const RateDistortion pooled = rateDistortionPooled(r);
        QCOMPARE(pooled.pooledPoints, 2);
        QCOMPARE(pooled.points.size(), std::size_t{1});
        const RateDistortionPoint& p = pooled.points[0];
        // Seed 0: (1 + 3) / 2 = 2; seed 1: (3 + 5) / 2 = 4. Mean 3, sd sqrt(2): half width t(0.975, 1).
        KVLENS_COMPARE_ABS(p.damage, 3.0, 1e-12);
        QCOMPARE(p.seeds, 2);
        KVLENS_COMPARE_REL(p.high - p.damage, kT1, 1e-9);
        // Bits (2 + 2) / 2 = 2 at point 0 and (4 + 2) / 2 = 3 at point 1: mean 2.5, spread 1.
        KVLENS_COMPARE_ABS(p.bits, 2.5, 1e-12);
        KVLENS_COMPARE_ABS(p.bitsSpread, 1.0, 1e-12);
        QVERIFY(p.onEnvelope);
        const QString csv = QString::fromStdString(rateDistortionCsv(r, pooled));
        QVERIFY2(csv.section(QLatin1Char('\n'), 1, 1).startsWith(QStringLiteral("all,pooled over 2 grid points,KV,2,2.5,1,")),
                 qPrintable(csv));
    }
};

QTEST_APPLESS_MAIN(TestRateDistortion)
#include "tst_rate_distortion.moc"
