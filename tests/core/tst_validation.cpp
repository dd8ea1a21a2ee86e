// SPDX-License-Identifier: GPL-3.0-or-later
// Validation: identical runs agree; a perturbed implementation is caught; different RNGs are not blamed on the code.
#include "core/experiment/runner.h"
#include "core/experiment/spec_json.h"
#include "core/stats/validation.h"
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
