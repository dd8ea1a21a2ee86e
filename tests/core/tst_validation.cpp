// SPDX-License-Identifier: GPL-3.0-or-later
// Validation: identical runs agree; a perturbed implementation is caught; different RNGs are not blamed on the code.
#include "core/common/fp16.h"
#include "core/experiment/boundary_decisions.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/analysis/validation.h"
#include "common/approx.h"

#include <QTest>

using namespace kvlens;

namespace {

ResultSet run(const char* json, EngineKind engine)
{
    auto spec = specFromJson(json);
    Q_ASSERT(spec.ok());
    spec->engine = engine;
    CpuBackend backend(2);
    auto r = runExperiment(*spec, backend);
    Q_ASSERT(r.ok());
    return std::move(r).value();
}

const char* kSpec = R"({"d": 64, "tokens": 256, "queries": 16, "budgets": [3, 4], "seeds": {"count": 12},
                        "schemes": ["KV", "QKQV"]})";

} // namespace

class TestValidation : public QObject {
    Q_OBJECT
private slots:
    void identicalRunsAgree()
    {
        const ResultSet a = run(kSpec, EngineKind::Mt19937_64);
        const ResultSet b = run(kSpec, EngineKind::Mt19937_64);
        const ResultSet c = run(kSpec, EngineKind::Pcg64);
        const auto report = stats::validateRuns(a, &b, c);
        QCOMPARE(report.rows.size(), std::size_t{2 * 2 * 8});
        QCOMPARE(report.implementationDifferences(), 0);
        for (const auto& row : report.rows) {
            QCOMPARE(row.implMaxRelDiff, 0.0);
            QCOMPARE(row.implKsD, 0.0);
            // Twelve seeds per RNG: the KS test sees seed variance, not a shift.
            QVERIFY2(row.seedKsP.p > 1e-3, row.metric.c_str());
        }
    }

    void perturbedImplementationIsCaught()
    {
        const ResultSet a = run(kSpec, EngineKind::Mt19937_64);
        ResultSet b = a;
        for (auto& t : b.trials)
            if (t.key.scheme == 1)
                t.sixD.phiK *= 1.001; // 1e-3 relative: ten times the tolerance
        const ResultSet c = run(kSpec, EngineKind::Pcg64);
        const auto report = stats::validateRuns(a, &b, c, 1e-4);
        int flagged = 0;
        for (const auto& row : report.rows) {
            const bool expected = row.scheme == 1 && row.metric == "phi_k";
            QCOMPARE(row.verdict == "implementation difference", expected);
            flagged += expected ? 1 : 0;
            if (expected)
                KVLENS_COMPARE_REL(row.implMaxRelDiff, 1e-3 / 1.001, 1e-3);
        }
        QCOMPARE(flagged, 2); // both budgets
        QCOMPARE(report.implementationDifferences(), 2);
        QVERIFY(stats::validationCsv(a, report).find("implementation difference") != std::string::npos);
    }

    void aDecisionOnABoundaryIsNotBlamedOnTheImplementation()
    {
        // One trial off by 1e-3: an implementation difference, unless that trial has a decision on a
        // rounding boundary (what --validate computes with trialBoundaryDecisions).
        const ResultSet a = run(kSpec, EngineKind::Mt19937_64);
        ResultSet b = a;
        TrialResult* moved = nullptr;
        for (auto& t : b.trials)
            if (t.key.scheme == 1 && t.key.budget == 3 && t.key.seedIndex == 5)
                moved = &t;
        QVERIFY(moved);
        moved->sixD.phiT *= 1.001;
        const ResultSet c = run(kSpec, EngineKind::Pcg64);
        auto verdictOf = [&](const stats::ValidationReport& report) {
            for (const auto& row : report.rows)
                if (row.scheme == 1 && row.budget == 3 && row.metric == "phi_t")
                    return row;
            return stats::ValidationRow{};
        };
        const auto blind = stats::validateRuns(a, &b, c, 1e-4);
        QCOMPARE(verdictOf(blind).verdict, std::string("implementation difference"));
        const auto none = stats::validateRuns(a, &b, c, 1e-4, [](const TrialResult&) { return 0; });
        QCOMPARE(none.implementationDifferences(), 1);
        const auto onBoundary = stats::validateRuns(a, &b, c, 1e-4, [](const TrialResult& t) {
            return t.key.seedIndex == 5 ? 1 : 0;
        });
        QCOMPARE(onBoundary.implementationDifferences(), 0);
        QCOMPARE(verdictOf(onBoundary).verdict, std::string("agree (boundary decision)"));
        QCOMPARE(verdictOf(onBoundary).boundaryTrials, 1);
        // A trial on a boundary does not excuse another trial that moved.
        const auto otherTrial = stats::validateRuns(a, &b, c, 1e-4, [](const TrialResult& t) {
            return t.key.seedIndex == 4 ? 1 : 0;
        });
        QCOMPARE(otherTrial.implementationDifferences(), 1);
    }

    void boundaryDecisionsAreFoundWhereTheyAre()
    {
        // KV's key path at n = 3: WHT, the Beta Lloyd-Max codebook, fp16 norms.
        const auto scheme = *findScheme("KV");
        const PathPlan plan = planPath(scheme.key, 3, 64, PathSite::Keys, PlanInputs{}, EngineKind::Pcg64, 7);
        // A generic row is nowhere near a boundary at a margin of 1e-9.
        RowMatrixXf x = RowMatrixXf::Zero(2, 64);
        for (int c = 0; c < 64; ++c)
            x(0, c) = static_cast<float>(std::sin(1.3 * c + 0.2));
        QCOMPARE(boundaryDecisions(plan, x.topRows(1), 1e-9), 0);
        // Row 1: x(0) scaled so that its norm (the WHT keeps norms) lies on the fp16 midpoint
        // between 8.0 and 8.0078125.
        const float midpoint = 0.5f * (8.0f + halfBitsToFloat(floatToHalfBits(8.0f) + 1));
        x.row(1) = x.row(0) * (midpoint / x.row(0).norm());
        QVERIFY(boundaryDecisions(plan, x, 1e-5) >= 1);
        QCOMPARE(boundaryDecisions(plan, x.topRows(1), 1e-9), 0);
        // Uniform paths are not modelled.
        const auto kivi = *findScheme("KIVI");
        const PathPlan uniform = planPath(kivi.key, 3, 64, PathSite::Keys, PlanInputs{}, EngineKind::Pcg64, 7);
        QCOMPARE(boundaryDecisions(uniform, x, 1e-5), 0);
        // The default experiment's KQV n = 4 trial of seed 2 is such a case (one value norm 8.5e-8
        // from an fp16 midpoint): it has boundary decisions at the default margin.
        const ExperimentSpec spec = *normalizeSpec(defaultSpec());
        QVERIFY(trialBoundaryDecisions(spec, TrialKey{0, 1, 4, 1, spec.seed(1)}) >= 1);
    }

    void withoutAnImplementationOnlyTheSeedsAreCompared()
    {
        const ResultSet a = run(kSpec, EngineKind::Mt19937_64);
        const ResultSet c = run(kSpec, EngineKind::Pcg64);
        const auto report = stats::validateRuns(a, nullptr, c);
        QVERIFY(!report.implementationRan);
        QCOMPARE(report.implementationDifferences(), 0);
        QVERIFY(report.rows.front().seedKsD > 0.0);
    }
};

QTEST_APPLESS_MAIN(TestValidation)
#include "tst_validation.moc"
