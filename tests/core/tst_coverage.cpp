// SPDX-License-Identifier: GPL-3.0-or-later
// What a partial result holds: coverage of the grid, the seeds every scheme shares, and the exported spec's "partial" block.
#include "core/analysis/coverage.h"
#include "core/io/json_text.h"
#include "core/spec/spec_json.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <array>
#include <set>

using namespace kvlens;

namespace {

/// KV, KQV, QKQV at n = 2, 3, seeds 5, 6, 7 (first seed 5); the trials given as (scheme, budget, seed index).
ResultSet withTrials(const std::vector<std::array<int, 3>>& cells)
{
    ResultSet r;
    r.spec = defaultSpec();
    r.spec.budgets = {2, 3};
    r.spec.seedCount = 3;
    r.spec.firstSeed = 5;
    auto normalized = normalizeSpec(r.spec);
    if (!normalized)
        qFatal("%s", normalized.error().text().c_str());
    r.spec = *normalized;
    r.schemes = r.spec.schemes;
    r.totalTrials = r.spec.trialCount();
    r.cancelled = true;
    for (const auto& [scheme, budget, seed] : cells) {
        TrialResult t;
        t.key.scheme = scheme;
        t.key.budget = budget;
        t.key.seedIndex = seed;
        t.key.seed = r.spec.seed(seed);
        t.kl = {static_cast<float>(scheme + budget + seed)};
        r.trials.push_back(t);
    }
    return r;
}

/// n = 2: KV holds seeds 0, 1, 2; KQV 0, 1; QKQV 0, 2 (shared: 0). n = 3: every scheme 0, 1.
std::vector<std::array<int, 3>> unevenSlots()
{
    return {{0, 2, 0}, {0, 2, 1}, {0, 2, 2}, {1, 2, 0}, {1, 2, 1}, {2, 2, 0}, {2, 2, 2},
            {0, 3, 0}, {0, 3, 1}, {1, 3, 0}, {1, 3, 1}, {2, 3, 0}, {2, 3, 1}};
}

} // namespace

class TestCoverage : public QObject {
    Q_OBJECT
private slots:
    void coverageCountsAndBalance()
    {
        const ResultSet r = withTrials(unevenSlots());
        const RunCoverage c = runCoverage(r);
        QCOMPARE(c.total, 18LL);
        QCOMPARE(c.held, 13LL);
        QVERIFY(c.partial());
        QVERIFY(!c.balanced);
        QCOMPARE(c.cells.size(), std::size_t{6});
        QCOMPARE(c.cells[1].scheme, 1); // walk order: (point, budget, scheme)
        QCOMPARE(c.cells[1].budget, 2);
        QCOMPARE(c.cells[1].seedIndices, (std::vector<int>{0, 1}));
        QCOMPARE(c.cells[2].seedIndices, (std::vector<int>{0, 2}));
        QCOMPARE(partialRunNote(c), std::string("partial run: 13 of 18 trials; the schemes hold different seeds"));
    }

    void sharedSeedsAreWhatEverySchemeHolds()
    {
        const ResultSet r = withTrials(unevenSlots());
        const ResultSet shared = sharedSeedTrials(r);
        // n = 2: seed 0 of each scheme (3 trials); n = 3: seeds 0 and 1 of each (6 trials).
        QCOMPARE(shared.trials.size(), std::size_t{9});
        std::set<std::array<int, 3>> kept;
        for (const TrialResult& t : shared.trials)
            kept.insert({t.key.scheme, t.key.budget, t.key.seedIndex});
        const std::set<std::array<int, 3>> expected{{0, 2, 0}, {1, 2, 0}, {2, 2, 0}, {0, 3, 0}, {0, 3, 1},
                                                    {1, 3, 0}, {1, 3, 1}, {2, 3, 0}, {2, 3, 1}};
        QCOMPARE(kept, expected);
        // The order is kept (walk order in, walk order out) and the trials are the same trials.
        for (std::size_t i = 1; i < shared.trials.size(); ++i)
            QVERIFY(shared.trials[i - 1].key.budget <= shared.trials[i].key.budget);
        for (const TrialResult& t : shared.trials)
            QCOMPARE(t.kl.front(), static_cast<float>(t.key.scheme + t.key.budget + t.key.seedIndex));
        const RunCoverage c = runCoverage(shared);
        QVERIFY(c.balanced);
        QVERIFY(c.partial());
        QCOMPARE(c.held, 9LL);
        QCOMPARE(c.total, 18LL); // still says what the whole run was
        QVERIFY(shared.cancelled);
        QCOMPARE(partialRunNote(c), std::string("partial run: 9 of 18 trials; each scheme on the same seeds"));
    }

    void aCompleteRunIsBalancedAndNotPartial()
    {
        std::vector<std::array<int, 3>> all;
        for (int b : {2, 3})
            for (int s = 0; s < 3; ++s)
                for (int seed = 0; seed < 3; ++seed)
                    all.push_back({s, b, seed});
        ResultSet r = withTrials(all);
        r.cancelled = false;
        const RunCoverage c = runCoverage(r);
        QVERIFY(!c.partial() && c.balanced);
        QCOMPARE(c.held, 18LL);
        QCOMPARE(partialRunNote(c), std::string());
        QCOMPARE(sharedSeedTrials(r).trials.size(), std::size_t{18});
        // Its exported spec is the spec, nothing added.
        QCOMPARE(exportedSpecJson(r), specToJson(r.spec) + "\n");
    }

    void thePartialBlockListsTheSeedsAndTheReaderIgnoresIt()
    {
        const ResultSet shared = sharedSeedTrials(withTrials(unevenSlots()));
        const std::string text = exportedSpecJson(shared);
        auto parsed = io::parseJsonText(text);
        QVERIFY(parsed.ok());
        const nlohmann::json& partial = (*parsed)["partial"];
        QVERIFY(partial.is_object());
        QCOMPARE(partial["trials"].get<long long>(), 9LL);
        QCOMPARE(partial["of"].get<long long>(), 18LL);
        QCOMPARE(partial["balanced"].get<bool>(), true);
        QVERIFY(partial["note"].get<std::string>().find("partial run: 9 of 18 trials") != std::string::npos);
        const nlohmann::json& held = partial["held"];
        QCOMPARE(held.size(), std::size_t{6}); // every cell, empty or not
        // Seeds as the spec numbers them: first seed 5, so index 0 is seed 5.
        QCOMPARE(held[0]["scheme"].get<std::string>(), std::string("KV"));
        QCOMPARE(held[0]["budget"].get<int>(), 2);
        QCOMPARE(held[0]["seeds"].get<std::vector<long long>>(), (std::vector<long long>{5}));
        QCOMPARE(held[4]["scheme"].get<std::string>(), std::string("KQV"));
        QCOMPARE(held[4]["budget"].get<int>(), 3);
        QCOMPARE(held[4]["seeds"].get<std::vector<long long>>(), (std::vector<long long>{5, 6}));
        // The reader accepts the block and gives back the run's spec.
        const auto back = specFromJson(text);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().text().c_str());
        QVERIFY(*back == shared.spec);
        // Only an object is a note; anything else names the field.
        const auto wrong = specFromJson(R"({"partial": 3})");
        QVERIFY(!wrong.ok());
        QCOMPARE(wrong.error().field, std::string("partial"));
    }
};

QTEST_APPLESS_MAIN(TestCoverage)
#include "tst_coverage.moc"
