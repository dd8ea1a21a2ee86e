// SPDX-License-Identifier: GPL-3.0-or-later
// SpectralQuant (paper B): d_eff estimators, water-filling, the plan's budget, and SQ against TQ.
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/quant/path.h"
#include "core/quant/scheme.h"
#include "core/quant/spectral.h"
#include "core/regimes/regime.h"
#include "core/rng/rng.h"
#include "common/approx.h"

#include <QTest>

#include <numeric>

using namespace kvlens;

namespace {

Dataset lowRank(int rank, double noise, int d, int rows, std::uint64_t seed)
{
    const Regime* regime = findRegime("low_rank");
    const DataShape shape{d, 16, 4, rows};
    RegimeParams params = regime->defaults();
    params["rank"] = ParamValue(static_cast<double>(rank));
    params["noise"] = ParamValue(noise);
    auto normalized = regime->normalize(params, shape);
    if (!normalized)
        qFatal("%s", normalized.error().text().c_str());
    auto data = regime->generate(*normalized, shape, EngineKind::Pcg64, seed);
    if (!data)
        qFatal("%s", data.error().text().c_str());
    return std::move(data).value();
}

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

/// relMSE_K of a scheme at a budget, pooled over seeds.
double relMseK(const ResultSet& r, const char* scheme, int budget)
{
    double sum = 0.0;
    int count = 0;
    for (const TrialResult& t : r.trials)
        if (r.schemes[static_cast<std::size_t>(t.key.scheme)].name == scheme && t.key.budget == budget) {
            sum += t.relMseK;
            ++count;
        }
    if (count == 0)
        qFatal("no trials of %s at %d", scheme, budget);
    return sum / count;
}

} // namespace

class TestSpectral : public QObject {
    Q_OBJECT
private slots:
    void participationRatioOfEqualEigenvalues()
    {
        // k equal eigenvalues (and zeros) spread like exactly k: (k lambda)^2 / (k lambda^2) = k.
        const std::vector<double> five = {3.0, 3.0, 3.0, 3.0, 3.0, 0.0, 0.0};
        KVLENS_COMPARE_ABS(participationRatio(five), 5.0, 1e-12);
        // (1 + 1/2 + 1/4)^2 / (1 + 1/4 + 1/16) = 3.0625 / 1.3125.
        const std::vector<double> geometric = {1.0, 0.5, 0.25};
        KVLENS_COMPARE_ABS(participationRatio(geometric), 3.0625 / 1.3125, 1e-12);
        QCOMPARE(participationRatio(std::vector<double>{}), 0.0);
    }

    void gapRuleOnAHandSpectrum()
    {
        // Ratios 2, 50, 1.25: the cut is after the 2nd eigenvalue.
        const std::vector<double> spectrum = {100.0, 50.0, 1.0, 0.8};
        double ratio = 0.0;
        QCOMPARE(gapRuleDeff(spectrum, 10.0, &ratio), 2);
        KVLENS_COMPARE_ABS(ratio, 50.0, 1e-12);
        // No ratio passes a threshold of 60: the whole dimension is kept.
        QCOMPARE(gapRuleDeff(spectrum, 60.0), 4);
    }

    void bothEstimatorsRecoverTheRankOfLowRankData_data()
    {
        QTest::addColumn<int>("rank");
        QTest::newRow("r=4") << 4;
        QTest::newRow("r=8") << 8;
        QTest::newRow("r=16") << 16;
    }
    void bothEstimatorsRecoverTheRankOfLowRankData()
    {
        QFETCH(int, rank);
        // d = 128, noise sigma 0.1 against a signal variance of d/r per subspace direction.
        const Dataset data = lowRank(rank, 0.1, 128, 2048, 11);
        const SpectralAnalysis a = analyzeSpectrum(data.calibrationKeys, 10.0);
        QVERIFY2(std::abs(a.participationRatio - rank) <= 1.0,
                 qPrintable(QStringLiteral("participation ratio %1 for rank %2").arg(a.participationRatio).arg(rank)));
        QVERIFY2(std::abs(a.gapDeff - rank) <= 1,
                 qPrintable(QStringLiteral("gap-rule d_eff %1 for rank %2").arg(a.gapDeff).arg(rank)));
        // Eigenvalues descend and the basis is orthonormal.
        QVERIFY(std::is_sorted(a.eigenvalues.rbegin(), a.eigenvalues.rend()));
        QVERIFY((a.basis.transpose() * a.basis - Eigen::MatrixXd::Identity(128, 128)).cwiseAbs().maxCoeff() < 1e-9);
    }

    void oneSpuriousEigenvalueMovesTheGapRuleByAtMostOne()
    {
        const int rank = 8;
        Dataset data = lowRank(rank, 0.1, 128, 2048, 12);
        const SpectralAnalysis clean = analyzeSpectrum(data.calibrationKeys, 10.0);
        // One extra direction, outside the subspace's span in general, with 16x the variance of
        // a subspace direction (d/r = 16): a spurious eigenvalue of about 256 on top of ~16s.
        Rng rng(EngineKind::Pcg64, 99, Stream::SchemeExtra);
        const Eigen::VectorXf u = randomOrthonormal(128, 1, rng).col(0).cast<float>();
        for (Eigen::Index r = 0; r < data.calibrationKeys.rows(); ++r)
            data.calibrationKeys.row(r) += static_cast<float>(64.0 * rng.normal()) * u.transpose();
        const SpectralAnalysis spurious = analyzeSpectrum(data.calibrationKeys, 10.0);
        QVERIFY2(spurious.eigenvalues[0] > 10.0 * spurious.eigenvalues[1], "the spurious direction dominates");
        QVERIFY2(std::abs(spurious.gapDeff - clean.gapDeff) <= 1,
                 qPrintable(QStringLiteral("gap rule: %1 -> %2").arg(clean.gapDeff).arg(spurious.gapDeff)));
        // The participation ratio, by contrast, collapses towards 1.
        QVERIFY2(spurious.participationRatio < clean.participationRatio - 3.0,
                 qPrintable(QStringLiteral("PR: %1 -> %2").arg(clean.participationRatio).arg(spurious.participationRatio)));
    }

    void waterFillingMatchesAHandWorkedExample()
    {
        // Reverse water-filling on variances (64, 16, 4, 1) with 10 bits: b_i = 10/4 + log2(lambda_i / g) / 2
        // with g the geometric mean 8 gives exactly (4, 3, 2, 1); the greedy integer allocation agrees.
        const std::vector<double> variances = {64.0, 16.0, 4.0, 1.0};
        QCOMPARE(waterFillBits(variances, 10), (std::vector<int>{4, 3, 2, 1}));
        // 2 bits: both go to the largest (64 -> 16 -> 4 beats 16).
        QCOMPARE(waterFillBits(variances, 2), (std::vector<int>{2, 0, 0, 0}));
        // The cap: 3 bits at most each, 9 bits over 4 coordinates. Distortion sum v 4^-b:
        // (3,3,2,1) gives 1 + 1/4 + 1/4 + 1/4 = 1.75, below (3,2,2,2)'s 2.3125 and (3,3,1,2)'s 2.3125.
        QCOMPARE(waterFillBits(variances, 9, 3), (std::vector<int>{3, 3, 2, 1}));
        QCOMPARE(uniformBits(4, 10), (std::vector<int>{3, 3, 2, 2}));
    }

    void theSpectralPlanSpendsExactlyTheBudget()
    {
        const Dataset data = lowRank(8, 0.1, 128, 1024, 13);
        for (const char* name : {"SQ-KV", "SQU-KV", "SQ-QKV"}) {
            const SchemeConfig s = *findScheme(name);
            for (int budget : {2, 3, 4}) {
                PlanInputs inputs;
                inputs.calibration = &data.calibrationKeys;
                const PathPlan plan = planPath(s.key, budget, 128, PathSite::Keys, inputs, EngineKind::Pcg64, 13);
                QCOMPARE(plan.dimension().used, 8);
                const std::vector<int> coordBits = plan.quantizer->coordinateBits();
                const int codeBits = std::accumulate(coordBits.begin(), coordBits.end(), 0);
                const int sketch = plan.residuals.empty() ? 0 : plan.residuals.front()->projectionColumns();
                // Code bits plus sketch sign bits are the budget; the lead saturates at 8 bits and
                // the tail keeps its floor and takes what the lead cannot use.
                QCOMPARE(codeBits + sketch, budget * 128);
                QCOMPARE(sketch, s.key.has("qjl") ? 8 : 0);
                for (int i = 0; i < 128; ++i)
                    QVERIFY(coordBits[static_cast<std::size_t>(i)] >= (i < 8 ? 1 : s.key.quantizer.integer("tail_bits")));
                // The accounting adds only the sketch's residual norm (16 bits) to the budget.
                KVLENS_COMPARE_ABS(pathBitsPerCoordinate(plan, 1024), budget + (sketch > 0 ? 16.0 / 128.0 : 0.0), 1e-12);
                KVLENS_COMPARE_ABS(pathBitsPerCoordinate(s.key, budget, 128, 1024), pathBitsPerCoordinate(plan, 1024), 1e-12);
            }
        }
    }

    void waterFillingFavoursTheLargeEigenvalues()
    {
        // A decaying spectrum at a budget the lead cannot saturate: water-filling gives the
        // first eigen-coordinate more bits than the last lead one; uniform gives them equal bits.
        const Regime* regime = findRegime("spectral_decay");
        const DataShape shape{64, 16, 4, 2048};
        RegimeParams params = regime->defaults();
        auto data = regime->generate(*regime->normalize(params, shape), shape, EngineKind::Pcg64, 5);
        QVERIFY(data.ok());
        PlanInputs inputs;
        inputs.calibration = &data->calibrationKeys;
        SchemeConfig sq = *findScheme("SQ-KV"), squ = *findScheme("SQU-KV");
        sq.key.quantizer.options["deff_rule"] = squ.key.quantizer.options["deff_rule"] = std::string("participation");
        const PathPlan water = planPath(sq.key, 2, 64, PathSite::Keys, inputs, EngineKind::Pcg64, 5);
        const PathPlan even = planPath(squ.key, 2, 64, PathSite::Keys, inputs, EngineKind::Pcg64, 5);
        const int waterDeff = water.dimension().used, evenDeff = even.dimension().used;
        const std::vector<int> waterBits = water.quantizer->coordinateBits(), evenBits = even.quantizer->coordinateBits();
        QVERIFY(waterDeff >= 2);
        QVERIFY(waterBits.front() > waterBits[static_cast<std::size_t>(waterDeff - 1)]);
        QVERIFY(std::abs(evenBits.front() - evenBits[static_cast<std::size_t>(evenDeff - 1)]) <= 1);
    }

    void sqBeatsTqOnLowRankAndLosesOnHeavyTails()
    {
        // Equal budgets; SQ calibrates on the regime's separate calibration draw.
        const ResultSet lowRankRun = run(R"({"regime": {"name": "low_rank", "rank": 8, "noise": 0.1}, "d": 128,
            "tokens": 512, "queries": 16, "budgets": [2, 3, 4], "seeds": {"count": 2}, "schemes": ["TQ-KV", "SQ-KV"]})");
        const ResultSet heavyRun = run(R"({"regime": {"name": "heavy_tail", "nu": 1.5}, "d": 128,
            "tokens": 512, "queries": 16, "budgets": [2, 3, 4], "seeds": {"count": 2}, "schemes": ["TQ-KV", "SQ-KV"]})");
        for (int budget : {2, 3, 4}) {
            const double sqLow = relMseK(lowRankRun, "SQ-KV", budget), tqLow = relMseK(lowRankRun, "TQ-KV", budget);
            QVERIFY2(sqLow < tqLow, qPrintable(QStringLiteral("low_rank n=%1: SQ %2 vs TQ %3").arg(budget).arg(sqLow).arg(tqLow)));
            const double sqHeavy = relMseK(heavyRun, "SQ-KV", budget), tqHeavy = relMseK(heavyRun, "TQ-KV", budget);
            QVERIFY2(sqHeavy > tqHeavy,
                     qPrintable(QStringLiteral("heavy_tail n=%1: SQ %2 vs TQ %3").arg(budget).arg(sqHeavy).arg(tqHeavy)));
        }
        // The trials report both d_eff estimates and which decided.
        const TrialResult* t = lowRankRun.find(0, 1, 2, 0);
        QVERIFY(t && t->deffK.valid() && t->deffV.valid());
        QCOMPARE(t->deffK.used, 8);
        QVERIFY(t->deffK.byGap);
        QVERIFY(std::abs(t->deffK.participationRatio - 8.0) <= 1.0);
        QVERIFY(!lowRankRun.find(0, 0, 2, 0)->deffK.valid());
    }
};

QTEST_GUILESS_MAIN(TestSpectral)
#include "tst_spectral.moc"
