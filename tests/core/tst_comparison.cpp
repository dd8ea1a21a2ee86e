// SPDX-License-Identifier: GPL-3.0-or-later
// The comparison table on real runs: the headline KQV vs QKQV test, sign convention, Holm, pairs.
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/analysis/comparison.h"
#include "core/stats/mann_whitney.h"
#include "common/approx.h"

#include <QTest>

#include <sstream>

#include <cmath>
#include <functional>

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

/// A result set by hand: per scheme, seed and query a KL value from `kl`.
ResultSet handMade(const std::vector<std::string>& schemes, int seeds, int queries,
                   const std::function<float(int, int, int)>& kl, const char* regime = "gaussian")
{
    ResultSet r;
    r.spec = defaultSpec();
    r.spec.regime = regime;
    r.spec.schemes.resize(schemes.size(), r.spec.schemes.front());
    for (std::size_t s = 0; s < schemes.size(); ++s)
        r.spec.schemes[s].name = schemes[s];
    r.spec.budgets = {3};
    r.spec.seedCount = seeds;
    r.spec.comparisons.bootstrap = 400;
    r.spec.comparisons.permutations = 0;
    r.schemes = r.spec.schemes;
    for (int s = 0; s < static_cast<int>(schemes.size()); ++s)
        for (int k = 0; k < seeds; ++k) {
            TrialResult t;
            t.key = TrialKey{0, s, 3, k, r.spec.seed(k)};
            t.bits = {3.125, 3.125};
            for (int q = 0; q < queries; ++q)
                t.kl.push_back(kl(s, k, q));
            r.trials.push_back(t);
        }
    r.totalTrials = static_cast<long long>(r.trials.size());
    return r;
}

} // namespace

class TestComparison : public QObject {
    Q_OBJECT
private slots:
    void theSeedIsTheUnit()
    {
        // 3 seeds, 64 queries each, perfectly correlated within a seed (every query of a seed has its
        // seed's KL) and A below B in every seed: the query-level Wilcoxon calls this p ~ 1e-36,
        // but only 3 independent units exist, so the exact seed-level p is 2/2^3 = 0.25, never less.
        const ResultSet r = handMade({"A", "B"}, 3, 64, [](int s, int k, int) { return 0.01f * (1 + k) * (s ? 2.0f : 1.0f); });
        const auto rows = stats::compareSchemes(r);
        QCOMPARE(rows.size(), std::size_t{1});
        const auto& row = rows[0];
        QCOMPARE(row.status, stats::ComparisonStatus::Tested);
        QCOMPARE(row.unit, std::string("seed"));
        QCOMPARE(row.units, 3);
        QCOMPARE(row.test, std::string("wilcoxon-seeds"));
        QVERIFY2(row.p.p >= 0.25 - 1e-12, qPrintable(QString::number(row.p.p)));
        KVLENS_COMPARE_ABS(row.p.p, 0.25, 1e-12); // every seed agrees: the smallest p 3 units allow
        KVLENS_COMPARE_ABS(row.pMin, 0.25, 1e-15);
        QCOMPARE(row.seedsALower, 3);
        KVLENS_COMPARE_ABS(row.seedRatioMedian, 0.5, 1e-7);
        // The secondary query-level test is still reported, and far smaller: the overstatement.
        QVERIFY(row.queryP.logP < std::log(1e-20));
        const std::string csv = stats::comparisonsCsv(r, rows);
        QVERIFY(csv.find(",unit,units,design,") != std::string::npos);
        QVERIFY(csv.find(",tested,,seed,3,nested") != std::string::npos);
    }

    void oneSeedIsNoTest()
    {
        const ResultSet r = handMade({"A", "B"}, 1, 32, [](int s, int, int q) { return 0.01f * (1 + q) * (s ? 2.0f : 1.0f); });
        const auto rows = stats::compareSchemes(r);
        QCOMPARE(rows[0].status, stats::ComparisonStatus::Untestable);
        QVERIFY(rows[0].test.empty());
        QVERIFY(stats::comparisonsText(r, rows).find("untestable: 1 shared seed") != std::string::npos);
    }

    void identicalAndDegeneratePairsAreNotTests()
    {
        // B repeats A bit for bit (a shared key path); C's KL is 0 exactly (V-only); D differs.
        const ResultSet r = handMade({"A", "B", "C", "D"}, 4, 16, [](int s, int k, int q) {
            if (s == 2)
                return 0.0f;
            return 0.01f * (1 + q + k) * (s == 3 ? 1.7f : 1.0f);
        });
        const auto rows = stats::compareSchemes(r);
        auto find = [&](const char* a, const char* b) -> const stats::ComparisonRow& {
            for (const auto& row : rows)
                if (r.schemes[static_cast<std::size_t>(row.schemeA)].name == a && r.schemes[static_cast<std::size_t>(row.schemeB)].name == b)
                    return row;
            qFatal("no row");
        };
        QCOMPARE(find("A", "B").status, stats::ComparisonStatus::Identical);
        QCOMPARE(find("A", "C").status, stats::ComparisonStatus::Degenerate);
        QCOMPARE(find("C", "D").status, stats::ComparisonStatus::Degenerate);
        QCOMPARE(find("A", "D").status, stats::ComparisonStatus::Tested);
        // Only tested rows enter Holm's family: 3 of them (A-D, B-D and nothing else... B-C is degenerate).
        int tested = 0;
        for (const auto& row : rows) {
            if (row.status == stats::ComparisonStatus::Tested) {
                ++tested;
                QVERIFY(row.pHolm.logP >= row.p.logP - 1e-12);
            } else {
                QVERIFY(row.test.empty());
                QCOMPARE(row.pHolm.p, 1.0);
            }
        }
        QCOMPARE(tested, 2);
        // Holm over two tests multiplies the smaller p by 2.
        KVLENS_COMPARE_ABS(find("A", "D").pHolm.p, std::min(1.0, 2.0 * find("A", "D").p.p), 1e-12);
        const std::string csv = stats::comparisonsCsv(r, rows);
        QVERIFY(csv.find(",identical,KL identical on all 64 shared queries") != std::string::npos);
        // Every row, tested or not, has the header's fields (an untested row was one short; only
        // the asserting builds noticed).
        auto fields = [](const std::string& line) {
            int n = 1;
            bool quoted = false;
            for (char c : line) {
                if (c == '"')
                    quoted = !quoted;
                else if (c == ',' && !quoted)
                    ++n;
            }
            return n;
        };
        std::istringstream lines(csv);
        std::string line;
        int header = -1, rowsSeen = 0;
        while (std::getline(lines, line)) {
            if (line.empty() || line[0] == '#')
                continue;
            if (header < 0) {
                header = fields(line);
                continue;
            }
            QCOMPARE(fields(line), header);
            ++rowsSeen;
        }
        QCOMPARE(rowsSeen, static_cast<int>(rows.size()));
    }

    void partialRunsCompareSharedSeeds()
    {
        // A holds seeds 0..3, B only 0 and 2 (a cancelled run): the row uses seeds 0 and 2.
        ResultSet r = handMade({"A", "B"}, 4, 8, [](int s, int k, int q) { return 0.01f * (1 + q + k) * (s ? 2.0f : 1.0f); });
        std::erase_if(r.trials, [](const TrialResult& t) { return t.key.scheme == 1 && t.key.seedIndex % 2 == 1; });
        const auto rows = stats::compareSchemes(r);
        QCOMPARE(rows[0].units, 2);
        QCOMPARE(rows[0].queries, std::size_t{16});
        KVLENS_COMPARE_ABS(rows[0].p.p, 0.5, 1e-12); // 2 units: 2/2^2
    }

    void equalBitsAcrossBudgets()
    {
        // Exact bits at d = 128 with fp16 norms: KV spends n + 16/128 per path; KQV's V path
        // (n - 1) + 1 sketch bit + two fp16 norms, so KQV averages n + 0.1875 (never KV's n + 0.125).
        // "F3" stores 3 bits whatever n: at n = 4 it spends what KV spends at n = 3, so the table
        // adds that equal-bits row, and only that one.
        const ResultSet r = run(R"({"d": 128, "tokens": 128, "queries": 8, "budgets": [3, 4], "seeds": {"count": 2},
                                   "schemes": ["KV", "KQV", {"name": "F3", "k": {"rotation": "wht", "bits": "3"},
                                   "v": {"rotation": "wht", "bits": "3"}}], "comparisons": {"bootstrap": 50, "permutations": 0}})");
        const auto rows = stats::compareSchemes(r);
        auto name = [&](int s) { return r.schemes[static_cast<std::size_t>(s)].name; };
        auto expectedBits = [](const std::string& scheme, int n) {
            return scheme == "KV" ? n + 0.125 : scheme == "KQV" ? n + 0.1875 : 3.125;
        };
        int equalBits = 0;
        for (const auto& row : rows) {
            KVLENS_COMPARE_ABS(row.bitsA, expectedBits(name(row.schemeA), row.budget), 1e-12);
            KVLENS_COMPARE_ABS(row.bitsB, expectedBits(name(row.schemeB), row.budgetB), 1e-12);
            if (row.kind == stats::ComparisonKind::EqualBits) {
                ++equalBits;
                QCOMPARE(name(row.schemeA) + "@" + std::to_string(row.budget) + " " + name(row.schemeB) + "@"
                             + std::to_string(row.budgetB),
                         std::string("KV@3 F3@4"));
            }
        }
        QCOMPARE(equalBits, 1);
    }

    void headlineKqvAgainstQkqv()
    {
        const ResultSet r = run(R"({"d": 128, "tokens": 512, "queries": 32, "budgets": [2, 4], "seeds": {"count": 8},
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
        QCOMPARE(headline->units, 8);
        QCOMPARE(headline->queries, std::size_t{256});
        // KQV does less damage on every seed: the smallest p 8 seeds allow, 2/2^8.
        QCOMPARE(headline->seedsALower, 8);
        KVLENS_COMPARE_ABS(headline->p.p, 2.0 / 256.0, 1e-12);
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
        KVLENS_COMPARE_ABS(headline->rankBiserial, 1.0 - 2.0 * mw.u1 / (256.0 * 256.0), 1e-12);
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
