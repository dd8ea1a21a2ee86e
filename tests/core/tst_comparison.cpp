// SPDX-License-Identifier: GPL-3.0-or-later
// The comparison table on real runs: the headline KQV vs QKQV test, sign convention, Holm, pairs.
#include "core/experiment/runner.h"
#include "core/model/spec_json.h"
#include "core/analysis/comparison.h"
#include "core/stats/mann_whitney.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>

using namespace kvlens;

namespace {

ResultSet run(const char* json)
{
    auto spec = specFromJson(json);
    if (!spec)
        qFatal("bad spec: %s", spec.error().text().c_str());
    CpuBackend backend(2);
    auto r = runExperiment(*spec, backend);
    if (!r)
        qFatal("run failed: %s", r.error().text().c_str());
    return std::move(r).value();
}

} // namespace

class TestComparison : public QObject {
    Q_OBJECT
private slots:
    void headlineKqvAgainstQkqv()
    {
        const ResultSet r = run(R"({"d": 128, "tokens": 512, "queries": 32, "budgets": [2, 4], "seeds": {"count": 4},
                                   "schemes": ["KV", "KQV", "QKQV"], "comparisons": {"bootstrap": 500, "permutations": 199}})");
        const auto rows = stats::compareSchemes(r);
        QCOMPARE(rows.size(), std::size_t{6}); // 3 pairs x 2 budgets
        const stats::ComparisonRow* headline = nullptr;
        for (const auto& row : rows)
            if (row.budget == 4 && r.schemes[static_cast<std::size_t>(row.schemeA)].name == "KQV"
                && r.schemes[static_cast<std::size_t>(row.schemeB)].name == "QKQV")
                headline = &row;
        QVERIFY(headline);
        QVERIFY(headline->paired);
        QCOMPARE(headline->test, std::string("wilcoxon"));
        QCOMPARE(headline->queries, std::size_t{128});
        // KQV does far less damage: tiny p, positive r (A's KL ranks below B's), ratio < 1.
        QVERIFY2(headline->p.logP < std::log(1e-6), qPrintable(QString::number(headline->p.logP)));
        QVERIFY(headline->mannWhitneyP.logP < std::log(1e-6));
        QVERIFY(headline->rankBiserial > 0.5);
        QVERIFY(headline->medianKlRatio < 1.0);
        QVERIFY(headline->ratioLow <= headline->medianKlRatio && headline->medianKlRatio <= headline->ratioHigh);
        QVERIFY(headline->ratioHigh < 1.0);
        // The sign is the documented one: r = 1 - 2 U_A / (n_A n_B), recomputed here from the samples.
        std::vector<double> klA, klB;
        for (const auto& t : r.trials) {
            if (t.key.budget != 4)
                continue;
            auto& target = r.schemes[static_cast<std::size_t>(t.key.scheme)].name == "KQV" ? klA : klB;
            if (r.schemes[static_cast<std::size_t>(t.key.scheme)].name != "KV")
                target.insert(target.end(), t.kl.begin(), t.kl.end());
        }
        const auto mw = stats::mannWhitneyU(klA, klB);
        KVLENS_COMPARE_ABS(headline->rankBiserial, 1.0 - 2.0 * mw.u1 / (128.0 * 128.0), 1e-12);
        // 8 trial points per scheme are separated in 6D too.
        QVERIFY(headline->energyP < 0.05);
        // Holm never lowers a p-value and keeps the order of the raw ones.
        for (const auto& row : rows)
            QVERIFY(row.pHolm.logP >= row.p.logP - 1e-12);
    }

    void chosenPairsOnly()
    {
        const ResultSet r = run(R"({"d": 32, "tokens": 64, "queries": 8, "budgets": [3], "seeds": {"count": 2},
                                   "schemes": ["KV", "KQV", "QKQV"], "comparisons": {"pairs": [["QKQV", "KV"]],
                                   "bootstrap": 100, "permutations": 19}})");
        const auto rows = stats::compareSchemes(r);
        QCOMPARE(rows.size(), std::size_t{1});
        QCOMPARE(r.schemes[static_cast<std::size_t>(rows[0].schemeA)].name, std::string("QKQV"));
        // With a single row Holm changes nothing.
        KVLENS_COMPARE_ABS(rows[0].pHolm.logP, rows[0].p.logP, 1e-12);
        const std::string csv = stats::comparisonsCsv(r, rows);
        QVERIFY(csv.find("QKQV,KV") != std::string::npos);
        QCOMPARE(std::count(csv.begin(), csv.end(), '\n'), 2L);
    }

    void pairsAreValidated()
    {
        auto spec = specFromJson(R"({"schemes": ["KV", "KQV"], "comparisons": {"pairs": [["KV", "QKQV"]]}})");
        QVERIFY(!spec.ok());
        QCOMPARE(spec.error().field, std::string("comparisons.pairs[0][1]"));
        spec = specFromJson(R"({"schemes": ["KV", "KQV"], "comparisons": {"pairs": [["KV"]]}})");
        QVERIFY(!spec.ok());
        QCOMPARE(spec.error().field, std::string("comparisons.pairs[0]"));
        spec = specFromJson(R"({"comparisons": {"bootstrap": -1}})");
        QVERIFY(!spec.ok());
        QCOMPARE(spec.error().field, std::string("comparisons.bootstrap"));
    }
};

QTEST_APPLESS_MAIN(TestComparison)
#include "tst_comparison.moc"
