// SPDX-License-Identifier: GPL-3.0-or-later
// The teaching chain: no noise is no damage, Jensen's exp(sigma^2/2), value noise averaging as N_eff^(-1/2).
#include "core/analysis/teaching_pair.h"
#include "core/metrics/teaching.h"
#include "core/spec/spec_json.h"
#include "common/approx.h"

#include <QTest>

#include <numbers>

#include <cmath>
#include <numeric>
#include <sstream>

using namespace kvlens;

namespace {

std::vector<float> gaussianVector(int n, double sigma, std::uint64_t seed)
{
    Rng rng(EngineKind::Pcg64, seed);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v)
        x = static_cast<float>(sigma * rng.normal());
    return v;
}

RowMatrixXf gaussianRows(int n, int d, std::uint64_t seed)
{
    Rng rng(EngineKind::Pcg64, seed);
    RowMatrixXf x(n, d);
    rng.fillNormal(x.data(), static_cast<std::size_t>(x.size()));
    return x;
}

TeachingConfig smallConfig()
{
    TeachingConfig c;
    c.d = 64;
    c.tokens = 512;
    c.sweepTokens = {16, 64, 256, 1024};
    c.sweepRepeats = 4;
    return c;
}

} // namespace

class TestTeaching : public QObject {
    Q_OBJECT
private slots:
    void zeroNoiseIsNoDamage()
    {
        const std::vector<float> s = gaussianVector(300, 1.5, 11);
        const RowMatrixXf v = gaussianRows(300, 32, 12);
        const ScoreNoiseChain c = scoreNoiseChain(s, s, v, v);
        QCOMPARE(c.kl, 0.0);
        QCOMPARE(c.varianceDeltaS, 0.0);
        QCOMPARE(c.jensenFactor, 1.0);
        QCOMPARE(c.measuredInflation, 1.0);
        QCOMPARE(c.outputError, 0.0);
        const std::vector<double> p = softmaxVector(s);
        for (std::size_t j = 0; j < p.size(); ++j)
            QCOMPARE(static_cast<double>(c.probsHat[j]), static_cast<double>(static_cast<float>(p[j])));
    }

    void aCommonShiftIsInvisibleToSoftmax()
    {
        // Softmax ignores a constant added to every score: p^ = p and KL = 0, and the centred
        // inflation stays 1, although every ds_j is 0.7.
        const std::vector<float> s = gaussianVector(300, 1.5, 21);
        std::vector<float> shifted = s;
        for (float& x : shifted)
            x += 0.7f;
        const RowMatrixXf v = gaussianRows(300, 32, 22);
        const ScoreNoiseChain c = scoreNoiseChain(s, shifted, v, v);
        KVLENS_COMPARE_ABS(c.meanDeltaS, 0.7, 1e-6);
        KVLENS_COMPARE_ABS(c.kl, 0.0, 1e-9);
        KVLENS_COMPARE_ABS(c.measuredInflation, 1.0, 1e-9);
        KVLENS_COMPARE_ABS(c.outputError, 0.0, 1e-5);
    }

    void jensenFactorOfGaussianNoise_data()
    {
        QTest::addColumn<double>("sigma");
        QTest::newRow("sigma 0.25") << 0.25;
        QTest::newRow("sigma 0.5") << 0.5;
        QTest::newRow("sigma 1") << 1.0;
    }

    void jensenFactorOfGaussianNoise()
    {
        // For ds ~ N(0, sigma^2), E[exp(ds)] = exp(sigma^2 / 2) exactly (log-normal mean). The
        // measured inflation is a mean of N i.i.d. exp(ds_j) with standard deviation
        // sqrt(exp(2 sigma^2) - exp(sigma^2)); allow 4 standard errors (fixed seed, so the test is
        // deterministic; the bound is what a fresh seed would pass with probability 0.99994).
        QFETCH(double, sigma);
        const int n = 8192;
        const std::vector<float> s = gaussianVector(n, 1.0, 31);
        const std::vector<float> ds = gaussianVector(n, sigma, 32);
        std::vector<float> sHat(s);
        for (int j = 0; j < n; ++j)
            sHat[static_cast<std::size_t>(j)] += ds[static_cast<std::size_t>(j)];
        const RowMatrixXf v = gaussianRows(n, 8, 33);
        const ScoreNoiseChain c = scoreNoiseChain(s, sHat, v, v);
        const double s2 = sigma * sigma;
        const double expected = std::exp(s2 / 2.0);
        const double standardError = std::sqrt((std::exp(2.0 * s2) - std::exp(s2)) / n);
        KVLENS_COMPARE_ABS(c.measuredInflation, expected, 4.0 * standardError);
        // The reported Jensen factor uses the sample variance, within 4 standard errors of sigma^2
        // (sd of a sample variance: sigma^2 sqrt(2 / n)).
        KVLENS_COMPARE_ABS(c.varianceDeltaS, s2, 4.0 * s2 * std::sqrt(2.0 / n));
        KVLENS_COMPARE_REL(c.jensenFactor, expected, 4.0 * s2 / 2.0 * std::sqrt(2.0 / n) + 1e-12);
        QVERIFY(c.measuredInflation > 1.0);
        // Small noise: KL(p || p^) ~ Var_p(ds) / 2 (second-order expansion of the log-partition).
        if (sigma <= 0.25)
            KVLENS_COMPARE_REL(c.kl, c.fisher / 2.0, 0.1);
    }

    void logLogSlopeOfAPowerLaw()
    {
        const std::vector<double> x = {1, 2, 4, 8, 16, 100};
        std::vector<double> y;
        for (double v : x)
            y.push_back(3.0 * std::pow(v, -0.37));
        KVLENS_COMPARE_ABS(logLogSlope(x, y), -0.37, 1e-12);
        QVERIFY(std::isnan(logLogSlope(std::vector<double>{1.0}, std::vector<double>{2.0})));
    }

    void histogramIsADensity()
    {
        const std::vector<float> v = gaussianVector(5000, 1.0, 41);
        std::vector<double> edges;
        for (int b = 0; b <= 40; ++b)
            edges.push_back(-6.0 + 0.3 * b);
        const std::vector<double> density = densityHistogram(v, edges);
        double mass = 0.0;
        for (std::size_t b = 0; b < density.size(); ++b)
            mass += density[b] * (edges[b + 1] - edges[b]);
        KVLENS_COMPARE_ABS(mass, 1.0, 1e-12);
        // The bin holding 0 has about the N(0,1) density at 0, 1/sqrt(2 pi) = 0.3989.
        KVLENS_COMPARE_ABS(density[20], 0.3989, 0.04);
    }

    void valueNoiseAveragesKeyNoiseDoesNot()
    {
        // Same relative noise on values and on keys; N_eff varied through N at a fixed score scale.
        ValuePathConfig config;
        config.d = 128;
        config.noiseLevel = 0.3;
        config.scoreScale = 1.0;
        config.repeats = 8;
        const auto sweep = valuePathSweep(config);
        QVERIFY2(sweep.ok(), sweep.ok() ? "" : sweep.error().text().c_str());
        qInfo("value slope %.3f, key slope %.3f, score noise sd %.3f", sweep->valueSlope, sweep->keySlope,
              sweep->scoreNoiseStd);
        KVLENS_VERIFY_IN_RANGE(sweep->valueSlope, -0.65, -0.35);
        KVLENS_VERIFY_IN_RANGE(sweep->keySlope, -0.15, 0.15);
        QVERIFY(sweep->keySlope > sweep->valueSlope + 0.3);
        QCOMPARE(sweep->points.size(), config.tokens.size());
        for (const ValuePathPoint& p : sweep->points) {
            // E ||sum p_j e_j||^2 / E||e||^2 = sum p_j^2 = 1 / N_eff exactly.
            KVLENS_COMPARE_REL(p.valueError * std::sqrt(p.effectiveTokens), 1.0, 0.25);
            // The moved mass stays at the level the score noise sets, whatever N.
            KVLENS_VERIFY_IN_RANGE(p.keyMassMoved, 0.05, 0.25);
        }
        // Gaussian keys and query, scale 1: score noise sd = eta * ||q|| / sqrt(d) ~ 0.3.
        KVLENS_COMPARE_REL(sweep->scoreNoiseStd, 0.3, 0.15);
        // KL of the key noise ~ sigma_s^2 / 2 at every N (it is a property of each weight, not of N).
        const double s2 = sweep->scoreNoiseStd * sweep->scoreNoiseStd;
        KVLENS_COMPARE_REL(sweep->points.back().keyKl, s2 / 2.0, 0.3);
    }

    void schemePairOnOneQuery()
    {
        TeachingConfig config = smallConfig();
        config.d = 128;
        config.tokens = 1024;
        const auto r = computeTeaching(config);
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().text().c_str());
        const TeachingScheme& kqv = r->schemes[0];
        const TeachingScheme& qkqv = r->schemes[1];
        QCOMPARE(QString::fromStdString(kqv.name), QStringLiteral("KQV"));
        QCOMPARE(QString::fromStdString(qkqv.name), QStringLiteral("QKQV"));
        qInfo("n=3: Var ds KQV %.4g QKQV %.4g (ratio %.2f); KL %.4g vs %.4g; Jensen %.4f vs measured %.4f (KQV), "
              "%.4f vs %.4f (QKQV); output error %.4f vs %.4f (key path only %.4f vs %.4f, value path %.4f)",
              kqv.chain.varianceDeltaS, qkqv.chain.varianceDeltaS, qkqv.chain.varianceDeltaS / kqv.chain.varianceDeltaS,
              kqv.chain.kl, qkqv.chain.kl, kqv.chain.jensenFactor, kqv.chain.measuredInflation,
              qkqv.chain.jensenFactor, qkqv.chain.measuredInflation, kqv.chain.outputError, qkqv.chain.outputError,
              kqv.chain.keyOutputError, qkqv.chain.keyOutputError, kqv.chain.valueOutputError);
        // Paper A: "(n-1)-bit scalar + QJL" has about 2 pi times the score variance of the n-bit scalar.
        // One query over 1024 tokens measures 7.88 at this seed; within 35% of 2 pi (the range
        // [3, 12] this replaces passed for anything from half to twice the claim).
        KVLENS_COMPARE_REL(qkqv.chain.varianceDeltaS / kqv.chain.varianceDeltaS, 2.0 * std::numbers::pi, 0.35);
        QVERIFY(qkqv.chain.kl > kqv.chain.kl);
        QVERIFY(qkqv.chain.keyOutputError > kqv.chain.keyOutputError);
        // The two schemes store values the same way (same plan, same seed streams).
        QCOMPARE(kqv.chain.valueOutputError, qkqv.chain.valueOutputError);
        QCOMPARE(kqv.valueBits, qkqv.valueBits);
        // Jensen's factor against the measured inflation: the score noise is close to Gaussian,
        // so log(measured) = sigma^2 / 2 within 15% (the mean of 1024 exp(ds_j) is far more precise).
        for (const TeachingScheme& t : r->schemes) {
            KVLENS_COMPARE_REL(std::log(t.chain.measuredInflation), std::log(t.chain.jensenFactor), 0.15);
            double sum = 0.0;
            for (float p : t.chain.probsHat)
                sum += p;
            KVLENS_COMPARE_ABS(sum, 1.0, 1e-5);
            double mass = 0.0;
            for (std::size_t b = 0; b < t.histogram.size(); ++b)
                mass += t.histogram[b] * (r->binEdges[b + 1] - r->binEdges[b]);
            KVLENS_COMPARE_ABS(mass, 1.0, 1e-9);
        }
        // Top tokens come in decreasing p.
        QCOMPARE(r->topTokens.size(), std::size_t{10});
        for (std::size_t i = 1; i < r->topTokens.size(); ++i)
            QVERIFY(r->probs[static_cast<std::size_t>(r->topTokens[i - 1])] >= r->probs[static_cast<std::size_t>(r->topTokens[i])]);
        // N_eff recomputed from the shown weights: 1 / sum p_j^2.
        double sumSquares = 0.0;
        for (double p : r->probs)
            sumSquares += p * p;
        KVLENS_COMPARE_REL(r->effectiveTokens, 1.0 / sumSquares, 1e-12);
        QVERIFY(r->effectiveTokens > 1.5 && r->effectiveTokens < 1024.0);
        // The sweep's noise level is the noisier key path's relative error.
        KVLENS_COMPARE_ABS(r->valuePath.config.noiseLevel, std::max(kqv.keyRelativeError, qkqv.keyRelativeError), 0.0);
    }

    void moreBitsLessDamage()
    {
        TeachingConfig config = smallConfig();
        config.sweepRepeats = 0;
        double previous = INFINITY;
        for (int n : {2, 3, 4}) {
            config.budget = n;
            const auto r = computeTeaching(config);
            QVERIFY(r.ok());
            QVERIFY2(r->schemes[1].chain.varianceDeltaS < previous, qPrintable(QString::number(n)));
            previous = r->schemes[1].chain.varianceDeltaS;
        }
    }

    void deterministicForASeed()
    {
        const TeachingConfig config = smallConfig();
        const auto a = computeTeaching(config);
        const auto b = computeTeaching(config);
        QVERIFY(a.ok() && b.ok());
        QCOMPARE(teachingCsv(*a), teachingCsv(*b));
        TeachingConfig other = config;
        other.seed = 2;
        const auto c = computeTeaching(other);
        QVERIFY(c.ok());
        QVERIFY(teachingCsv(*a) != teachingCsv(*c));
    }

    void badInputNamesTheField_data()
    {
        QTest::addColumn<QString>("what");
        QTest::addColumn<QString>("field");
        QTest::newRow("budget 1") << "budget" << "teaching.schemes[0]";
        QTest::newRow("unknown regime") << "regime" << "teaching.regime";
        QTest::newRow("scale 0") << "scale" << "teaching.score_scale";
        QTest::newRow("calibrated scheme") << "scheme" << "teaching.schemes[1]";
    }

    void badInputNamesTheField()
    {
        QFETCH(QString, what);
        QFETCH(QString, field);
        TeachingConfig config = smallConfig();
        if (what == "budget")
            config.budget = 1;
        else if (what == "regime")
            config.regime = "nope";
        else if (what == "scale")
            config.scoreScale = 0.0;
        else
            config.schemes[1] = "SQ-KV";
        const auto r = computeTeaching(config);
        QVERIFY(!r.ok());
        // The scheme checks name the path field below the scheme ("teaching.schemes[0].v.bits").
        QVERIFY2(QString::fromStdString(r.error().field).startsWith(field), r.error().text().c_str());
    }

    /// The fields of a teaching configuration a run sets, on one line ("gaussian KV/KQV n=2 d=128 N=1024 c=1 seed=1").
    static std::string describe(const kvlens::TeachingConfig& c)
    {
        std::ostringstream out;
        out << c.regime << ' ' << c.schemes[0] << '/' << c.schemes[1] << " n=" << c.budget << " d=" << c.d
            << " N=" << c.tokens << " c=" << c.scoreScale << " seed=" << c.seed;
        return out.str();
    }

    void aRunsFirstSchemePairOnItsOwnData()
    {
        // The default run: gaussian, d = 128, N = 1024, KV, KQV, QKQV at 2, 3, 4 bits, seeds from 1.
        auto config = kvlens::teachingConfigForRun(kvlens::defaultSpec());
        QVERIFY2(config.ok(), config ? "" : config.error().text().c_str());
        QCOMPARE(describe(*config), std::string("gaussian KV/KQV n=2 d=128 N=1024 c=1 seed=1"));

        // A calibrated scheme is passed over; the first grid point's values are used; the seed, scale and law follow.
        auto spec = kvlens::specFromJson(R"({"regime": {"name": "heavy_tail", "nu": 3}, "d": 32, "tokens": 300,
            "score_scale": 2.0, "budgets": [3, 4], "seeds": {"first": 7, "count": 2}, "schemes": ["SQ-KV", "KQV", "QKQV"],
            "sweep": {"d": [16, 64]}})");
        QVERIFY2(spec.ok(), spec ? "" : spec.error().text().c_str());
        config = kvlens::teachingConfigForRun(*spec);
        QVERIFY2(config.ok(), config ? "" : config.error().text().c_str());
        QCOMPARE(describe(*config), std::string("heavy_tail KQV/QKQV n=3 d=16 N=300 c=2 seed=7"));
        QCOMPARE(std::get<double>(config->regimeParams.at("nu")), 3.0);
        // And the chain computes on it.
        auto result = kvlens::computeTeaching(*config);
        QVERIFY2(result.ok(), result ? "" : result.error().text().c_str());
        QCOMPARE(result->schemes[1].name, std::string("QKQV"));

        // One scheme is not a pair; the fields are named.
        spec = kvlens::specFromJson(R"({"schemes": ["KQV"], "budgets": [3]})");
        QVERIFY(spec.ok());
        config = kvlens::teachingConfigForRun(*spec);
        QVERIFY(!config.ok());
        QCOMPARE(config.error().field, std::string("schemes"));
    }

    void cancelStopsEarly()
    {
        std::atomic<bool> cancel{true};
        const auto r = computeTeaching(smallConfig(), &cancel);
        QVERIFY(!r.ok());
        QCOMPARE(QString::fromStdString(r.error().message), QStringLiteral("cancelled"));
        QVERIFY(r.error().cancelled());
    }
};

QTEST_APPLESS_MAIN(TestTeaching)
#include "tst_teaching.moc"
