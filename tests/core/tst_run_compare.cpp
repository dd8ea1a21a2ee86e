// SPDX-License-Identifier: GPL-3.0-or-later
// Comparing two runs: the spec diff, pairing by seed, the tests against independent computations, refusals.
#include "core/analysis/run_compare.h"
#include "core/analysis/run_overlay.h"
#include "core/io/atomic_file.h"
#include "core/spec/spec_json.h"
#include "common/approx.h"
#include "common/trials.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>

using namespace kvlens;
using test::makeSpec;

namespace {

/// Tiny runs: 2 schemes x 2 budgets x 8 seeds (8 seeds: an exact seed-level test can reach 2/2^8).
constexpr const char* kBase = R"({"name": "base", "regime": {"name": "gaussian"}, "d": 16, "tokens": 64, "queries": 8,
    "schemes": ["KV", "QKQV"], "budgets": [2, 3], "seeds": {"first": 1, "count": 8},
    "comparisons": {"bootstrap": 100, "permutations": 19}})";

RunDirectory runOf(const char* json, const std::string& dir)
{
    RunDirectory r;
    r.dir = dir;
    r.results = test::runSpec(makeSpec(json));
    r.manifest = manifestFor(r.results, r.results.spec, ShardId{0, 1});
    return r;
}

std::string withField(const std::string& json, const std::string& from, const std::string& to)
{
    std::string s = json;
    const auto at = s.find(from);
    if (at == std::string::npos)
        qFatal("test spec lacks %s", from.c_str());
    return s.replace(at, from.size(), to);
}

const RunCompareRow* findRow(const RunComparison& c, const std::string& scheme, int budget, const std::string& metric)
{
    for (const RunCompareRow& r : c.rows)
        if (r.scheme == scheme && r.budget == budget && r.metric == metric)
            return &r;
    return nullptr;
}

/// Mean over seeds of a cell's per-seed mean KL, computed here from the trials.
double meanKl(const ResultSet& r, const std::string& scheme, int budget)
{
    double sum = 0.0;
    int n = 0;
    for (const TrialResult& t : r.trials) {
        if (r.schemes[static_cast<std::size_t>(t.key.scheme)].name != scheme || t.key.budget != budget)
            continue;
        double s = 0.0;
        for (float v : t.kl)
            s += v;
        sum += s / static_cast<double>(t.kl.size());
        ++n;
    }
    return sum / n;
}

void writeRun(const RunDirectory& run, const QString& dir, bool withManifest = true)
{
    const std::string d = dir.toStdString() + "/";
    QVERIFY(makeDirectories(d));
    QVERIFY(writeFileAtomic(d + "spec.json", specToJson(run.results.spec) + "\n"));
    QVERIFY(writeFileAtomic(d + "trials.bin", encodeTrials(run.manifest.specHash, run.results.trials, run.manifest.trials)));
    if (withManifest)
        QVERIFY(writeFileAtomic(d + "manifest.json", manifestToJson(run.manifest)));
}

} // namespace

class TestRunCompare : public QObject {
    Q_OBJECT

private slots:
    void specDiffListsExactlyTheChangedFields_data()
    {
        QTest::addColumn<QString>("from");
        QTest::addColumn<QString>("to");
        QTest::addColumn<QStringList>("paths");
        QTest::newRow("none") << "\"name\": \"base\"" << "\"name\": \"base\"" << QStringList{};
        QTest::newRow("budgets") << "\"budgets\": [2, 3]" << "\"budgets\": [2, 3, 4]" << QStringList{"budgets"};
        QTest::newRow("regime parameter") << "{\"name\": \"gaussian\"}" << "{\"name\": \"heavy_tail\", \"nu\": 3}"
                                          << QStringList{"regime.mode", "regime.name", "regime.nu", "regime.standardize"};
        QTest::newRow("a default written out") << "\"d\": 16" << "\"d\": 16, \"score_scale\": 1" << QStringList{};
        QTest::newRow("scheme") << "[\"KV\", \"QKQV\"]" << "[\"KV\", \"KQV\"]" << QStringList{"schemes"};
    }
    void specDiffListsExactlyTheChangedFields()
    {
        QFETCH(QString, from);
        QFETCH(QString, to);
        QFETCH(QStringList, paths);
        const ExperimentSpec a = makeSpec(kBase);
        const ExperimentSpec b = makeSpec(withField(kBase, from.toStdString(), to.toStdString()).c_str());
        QStringList got;
        for (const SpecDifference& d : diffSpecs(a, b))
            got << QString::fromStdString(d.path);
        QCOMPARE(got, paths);
        if (paths == QStringList{"budgets"}) {
            const auto d = diffSpecs(a, b).front();
            QCOMPARE(QString::fromStdString(d.a), QStringLiteral("[2,3]"));
            QCOMPARE(QString::fromStdString(d.b), QStringLiteral("[2,3,4]"));
        }
    }

    void identicalRunsAreIdenticalNotTested()
    {
        const RunDirectory a = runOf(kBase, "a");
        const auto c = compareRuns(a, a);
        QVERIFY2(c, c ? "" : c.error().text().c_str());
        QCOMPARE(c->sharedConfigurations, 4);
        QCOMPARE(static_cast<int>(c->rows.size()), 4 * static_cast<int>(runMetrics().size()));
        for (const RunCompareRow& r : c->rows) {
            QVERIFY(r.paired);
            QCOMPARE(r.units, 8);
            QVERIFY(r.status == RunRowStatus::Identical);
            QCOMPARE(r.difference, 0.0);
            QVERIFY(r.test.empty());
            QCOMPARE(r.p.p, 1.0); // not tested: the PValue's neutral value, and the CSV leaves it blank
        }
        QVERIFY(c->pairingNote.empty());
        QVERIFY(c->specDiff.empty());
    }

    void pairedTestOfDifferentSchemeDefinitions()
    {
        // One name, two definitions: B's key path spends one bit less. Same data, same seeds: paired.
        const char* a = R"({"regime": {"name": "gaussian"}, "d": 16, "tokens": 64, "queries": 8, "budgets": [3],
            "seeds": {"first": 1, "count": 8}, "schemes": [{"name": "S",
            "k": {"transforms": ["wht"], "quantizer": {"kind": "lloyd", "law": "beta"}, "bits": "n"},
            "v": {"transforms": ["wht"], "quantizer": {"kind": "lloyd", "law": "beta"}, "bits": "n"}}]})";
        const std::string b = withField(a, "\"bits\": \"n\"}", "\"bits\": \"n-1\"}");
        const RunDirectory ra = runOf(a, "a"), rb = runOf(b.c_str(), "b");
        const auto c = compareRuns(ra, rb);
        QVERIFY2(c, c ? "" : c.error().text().c_str());
        const RunCompareRow* r = findRow(*c, "S", 3, "kl_mean");
        QVERIFY(r);
        QVERIFY(r->paired);
        QVERIFY(r->status == RunRowStatus::Tested);
        QCOMPARE(QString::fromStdString(r->test), QStringLiteral("wilcoxon-seeds"));
        QCOMPARE(r->units, 8);
        QVERIFY(QString::fromStdString(r->note).contains("definition differs"));
        // Fewer key bits: more KL on every seed, so the exact two-sided p is its floor 2/2^8.
        KVLENS_COMPARE_REL(r->p.p, 2.0 / 256.0, 1e-12);
        KVLENS_COMPARE_REL(r->pMin, 2.0 / 256.0, 1e-12);
        // The difference against the trials, and its t interval by hand (t_{0.975, 7} = 2.3646242515927849,
        // scipy.stats.t.ppf(0.975, 7)).
        const double expected = meanKl(rb.results, "S", 3) - meanKl(ra.results, "S", 3);
        KVLENS_COMPARE_REL(r->difference, expected, 1e-12);
        QVERIFY(r->difference > 0.0);
        std::vector<double> d;
        for (int k = 0; k < 8; ++k) {
            auto seedMean = [&](const ResultSet& rs) {
                const TrialResult& t = rs.trials[static_cast<std::size_t>(k)];
                double s = 0.0;
                for (float v : t.kl)
                    s += v;
                return s / static_cast<double>(t.kl.size());
            };
            d.push_back(seedMean(rb.results) - seedMean(ra.results));
        }
        double m = 0.0, ss = 0.0;
        for (double x : d)
            m += x / 8.0;
        for (double x : d)
            ss += (x - m) * (x - m);
        const double half = 2.3646242515927849 * std::sqrt(ss / 7.0 / 8.0);
        KVLENS_COMPARE_REL(r->diffLow, m - half, 1e-9);
        KVLENS_COMPARE_REL(r->diffHigh, m + half, 1e-9);
        QVERIFY(r->hasLogRatio && r->logLow > 0.0);
    }

    void differentDataIsUnpairedOrRefused()
    {
        const std::string b = withField(kBase, "\"d\": 16", "\"d\": 16, \"score_scale\": 4");
        const RunDirectory ra = runOf(kBase, "a"), rb = runOf(b.c_str(), "b");
        const auto c = compareRuns(ra, rb);
        QVERIFY2(c, c ? "" : c.error().text().c_str());
        QVERIFY(QString::fromStdString(c->pairingNote).contains("score_scale"));
        const RunCompareRow* r = findRow(*c, "QKQV", 2, "kl_mean");
        QVERIFY(r);
        QVERIFY(!r->paired);
        QCOMPARE(QString::fromStdString(r->test), QStringLiteral("mann-whitney-seeds"));
        QCOMPARE(r->units, 16);
        QVERIFY(QString::fromStdString(r->note).startsWith("unpaired: the runs drew different data"));
        // Scores 4 times larger: every seed of B above every seed of A, the exact floor 2 / C(16, 8).
        KVLENS_COMPARE_REL(r->p.p, 2.0 / 12870.0, 1e-9);
        KVLENS_COMPARE_REL(r->difference, meanKl(rb.results, "QKQV", 2) - meanKl(ra.results, "QKQV", 2), 1e-12);

        RunCompareOptions strict;
        strict.requirePaired = true;
        const auto refused = compareRuns(ra, rb, strict);
        QVERIFY(!refused);
        QCOMPARE(QString::fromStdString(refused.error().field), QStringLiteral("--paired"));
        QVERIFY2(QString::fromStdString(refused.error().message).contains("different data (score_scale differ)"),
                 refused.error().message.c_str());
    }

    void configurationsInOneRunAreListed()
    {
        const std::string b = withField(kBase, "\"budgets\": [2, 3]", "\"budgets\": [2, 3, 4]");
        const auto c = compareRuns(runOf(kBase, "a"), runOf(b.c_str(), "b"));
        QVERIFY(c);
        QCOMPARE(c->sharedConfigurations, 4);
        QCOMPARE(c->onlyA, 0);
        QCOMPARE(c->onlyB, 2);
        int only = 0;
        for (const RunCompareRow& r : c->rows)
            if (r.status == RunRowStatus::OnlyInB) {
                QCOMPARE(r.budget, 4);
                QCOMPARE(QString::fromStdString(r.note), QStringLiteral("only in B"));
                ++only;
            }
        QCOMPARE(only, 2);
        QVERIFY(QString::fromStdString(runComparisonCsv(*c)).contains(",4,,only_in_b,only in B,"));
        QCOMPARE(QString::fromStdString(specDiffCsv(*c)), QStringLiteral("field,a,b\nbudgets,\"[2,3]\",\"[2,3,4]\"\n"));
    }

    void gridPointsMatchByTheirSweptValues()
    {
        // nu = 3 in both (same draw: paired), 1.5 in A only, 2 in B only.
        const char* a = R"({"regime": {"name": "heavy_tail", "mode": "marginal"}, "sweep": {"regime.nu": [3, 1.5]},
            "d": 16, "tokens": 32, "queries": 4, "schemes": ["KV"], "budgets": [2], "seeds": {"first": 1, "count": 3}})";
        const std::string b = withField(a, "[3, 1.5]", "[2, 3]");
        const auto c = compareRuns(runOf(a, "a"), runOf(b.c_str(), "b"));
        QVERIFY2(c, c ? "" : c.error().text().c_str());
        QCOMPARE(c->sharedConfigurations, 1);
        QCOMPARE(c->onlyA, 1);
        QCOMPARE(c->onlyB, 1);
        QStringList seen;
        for (const RunCompareRow& r : c->rows)
            if (r.metric.empty() || r.metric == "kl_mean")
                seen << QString::fromStdString(r.pointLabel + ": " + std::string(runRowStatusName(r.status)));
        QCOMPARE(seen, (QStringList{"nu = 3: identical", "nu = 1.5: only_in_a", "nu = 2: only_in_b"}));
        QCOMPARE(QString::fromStdString(diffSpecs(runOf(a, "a").results.spec, runOf(b.c_str(), "b").results.spec).front().path),
                 QStringLiteral("sweep[\"regime.nu\"]"));
        QCOMPARE(QString::fromStdString(diffSpecs(runOf(a, "a").results.spec, runOf(b.c_str(), "b").results.spec).front().b),
                 QStringLiteral("[2,3]"));
    }

    void anotherDataHashIsAnotherDraw()
    {
        // Imported tensors are told apart by the hash of their bytes (the manifest's data_hash).
        const RunDirectory a = runOf(kBase, "a");
        RunDirectory b = a;
        b.manifest.dataHash = 0x1234;
        const auto c = compareRuns(a, b);
        QVERIFY(c);
        QVERIFY2(QString::fromStdString(c->pairingNote).contains("data_hash differ"), c->pairingNote.c_str());
        QVERIFY(!c->rows.front().paired);
        QCOMPARE(QString::fromStdString(specDiffCsv(*c)),
                 QStringLiteral("field,a,b\nrun.data_hash,\"\"\"0000000000000000\"\"\",\"\"\"0000000000001234\"\"\"\n"));
    }

    void seedsPairOnThoseBothRunsHold()
    {
        // Seeds 1..8 against 5..12: the same draws for 5..8, paired on those four, the rest named.
        const std::string b = withField(kBase, "\"first\": 1", "\"first\": 5");
        const RunDirectory ra = runOf(kBase, "a"), rb = runOf(b.c_str(), "b");
        const auto c = compareRuns(ra, rb);
        QVERIFY(c);
        const RunCompareRow* r = findRow(*c, "KV", 2, "kl_mean");
        QVERIFY(r && r->paired);
        QCOMPARE(r->units, 4);
        QVERIFY(r->status == RunRowStatus::Identical); // seeds 5..8 are the same trials in both runs
        QCOMPARE(QString::fromStdString(r->note),
                 QStringLiteral("every shared seed's value is the same in A and B; paired on the 4 shared seeds; 4 of "
                                "A's and 4 of B's left out"));
        // Disjoint seeds: independent draws of one law, so the unpaired test.
        const std::string far = withField(kBase, "\"first\": 1", "\"first\": 101");
        const auto d = compareRuns(ra, runOf(far.c_str(), "far"));
        QVERIFY(d);
        QVERIFY(!findRow(*d, "KV", 2, "kl_mean")->paired);
        QCOMPARE(QString::fromStdString(d->pairingNote), QStringLiteral("the runs share no seed"));
    }

    void runsSharingNothingAreRefused()
    {
        const std::string b = withField(kBase, "[\"KV\", \"QKQV\"]", "[\"KQV\"]");
        const auto c = compareRuns(runOf(kBase, "a"), runOf(b.c_str(), "b"));
        QVERIFY(!c);
        QVERIFY2(QString::fromStdString(c.error().message).startsWith("the runs share no configuration"),
                 c.error().message.c_str());
    }

    void overlayKeepsEveryRunsTrialsUnderItsName();
    void overlayRefusesRunsOfAnotherGrid();
    void readsOnlyFinishedWholeRuns()
    {
        QTemporaryDir tmp;
        const RunDirectory run = runOf(kBase, "a");
        writeRun(run, tmp.filePath("whole"));
        const auto back = readRunDirectory(tmp.filePath("whole").toStdString());
        QVERIFY2(back, back ? "" : back.error().text().c_str());
        QCOMPARE(back->results.trials.size(), run.results.trials.size());
        const auto c = compareRuns(run, *back);
        QVERIFY(c);
        for (const RunCompareRow& r : c->rows)
            QVERIFY(r.status == RunRowStatus::Identical); // lossless: bit for bit

        writeRun(run, tmp.filePath("unfinished"), false);
        auto e = readRunDirectory(tmp.filePath("unfinished").toStdString());
        QVERIFY(!e);
        QVERIFY2(QString::fromStdString(e.error().message).contains("not a finished run"), e.error().message.c_str());

        writeRun(run, tmp.filePath("partial"));
        {
            std::ofstream f(tmp.filePath("partial/manifest.json").toStdString(), std::ios::trunc);
            f << "{\"format\": \"kvlens-shard\", \"format_version\": 1, \"spec_ha";
        }
        e = readRunDirectory(tmp.filePath("partial").toStdString());
        QVERIFY(!e);
        QVERIFY2(QString::fromStdString(e.error().message).contains("not a finished run"), e.error().message.c_str());

        RunDirectory shard = run;
        shard.manifest.shard = ShardId{0, 2};
        writeRun(shard, tmp.filePath("shard"));
        e = readRunDirectory(tmp.filePath("shard").toStdString());
        QVERIFY(!e);
        QVERIFY2(QString::fromStdString(e.error().message).contains("kvlens merge"), e.error().message.c_str());

        // A trials.bin claiming more trials than the manifest is refused from its header.
        RunDirectory fewer = run;
        fewer.manifest.trials.pop_back();
        // (The whole run is written, then the manifest replaced: encodeTrials takes one id per trial.)
        writeRun(run, tmp.filePath("mismatch"));
        QVERIFY(writeFileAtomic(tmp.filePath("mismatch/manifest.json").toStdString(), manifestToJson(fewer.manifest)));
        e = readRunDirectory(tmp.filePath("mismatch").toStdString());
        QVERIFY(!e);
    }
};

void TestRunCompare::overlayKeepsEveryRunsTrialsUnderItsName()
{
    // B: other schemes (KV shared, TQ-KV new) and other seeds; the grid and the data law are A's.
    const std::string b = withField(withField(kBase, R"("schemes": ["KV", "QKQV"])", R"("schemes": ["KV", "TQ-KV"])"),
                                    R"("first": 1)", R"("first": 9)");
    const RunDirectory ra = runOf(kBase, "a"), rb = runOf(b.c_str(), "b");
    const auto o = overlayRuns({{"A", &ra.results}, {"B", &rb.results}});
    QVERIFY2(o, o ? "" : o.error().text().c_str());
    QCOMPARE(o->schemes.size(), std::size_t{4});
    const char* names[] = {"A/KV", "A/QKQV", "B/KV", "B/TQ-KV"};
    for (std::size_t i = 0; i < 4; ++i) {
        QCOMPARE(QString::fromStdString(o->schemes[i].name), QString::fromLatin1(names[i]));
        QCOMPARE(QString::fromStdString(o->spec.schemes[i].name), QString::fromLatin1(names[i]));
    }
    QCOMPARE(o->trials.size(), ra.results.trials.size() + rb.results.trials.size());
    QCOMPARE(o->totalTrials, ra.results.totalTrials + rb.results.totalTrials);
    // Every cell's numbers are its own run's, bit for bit: B's TQ-KV and A's QKQV at both budgets.
    for (int budget : {2, 3}) {
        QCOMPARE(meanKl(*o, "B/TQ-KV", budget), meanKl(rb.results, "TQ-KV", budget));
        QCOMPARE(meanKl(*o, "A/QKQV", budget), meanKl(ra.results, "QKQV", budget));
        QVERIFY(meanKl(*o, "A/KV", budget) != meanKl(*o, "B/KV", budget)); // other seeds, other draws
    }
    const TrialResult* t = o->find(0, 2, 3, 5); // B/KV, n = 3, seed slot 5
    QVERIFY(t);
    QCOMPARE(t->key.seed, std::uint64_t{9 + 5});
    QVERIFY(t->kl == rb.results.find(0, 0, 3, 5)->kl);
    // The comparisons an overlay offers: each of A's schemes against B's of the same name.
    QCOMPARE(o->spec.comparisons.pairs.size(), std::size_t{1});
    QCOMPARE(QString::fromStdString(o->spec.comparisons.pairs[0].first), QStringLiteral("A/KV"));
    QCOMPARE(QString::fromStdString(o->spec.comparisons.pairs[0].second), QStringLiteral("B/KV"));
    // The merged spec is a valid spec: it reads back as itself.
    const auto back = specFromJson(specToJson(o->spec));
    QVERIFY2(back, back ? "" : back.error().text().c_str());
    QCOMPARE(back->schemes.size(), std::size_t{4});
}

void TestRunCompare::overlayRefusesRunsOfAnotherGrid()
{
    const RunDirectory ra = runOf(kBase, "a");
    struct Case {
        const char* from;
        const char* to;
        const char* field;
    };
    const Case cases[] = {{R"("budgets": [2, 3])", R"("budgets": [2, 3, 4])", "budgets"},
                          {R"("d": 16)", R"("d": 32)", "d"},
                          {R"("count": 8)", R"("count": 4)", "seeds.count"},
                          {R"("tokens": 64)", R"("tokens": 64, "score_scale": 2)", "score_scale"}};
    for (const Case& c : cases) {
        const RunDirectory rb = runOf(withField(kBase, c.from, c.to).c_str(), "b");
        const auto o = overlayRuns({{"A", &ra.results}, {"B", &rb.results}});
        QVERIFY2(!o, c.field);
        QVERIFY2(o.error().field.rfind(c.field, 0) == 0, o.error().text().c_str());
        QVERIFY2(QString::fromStdString(o.error().message).contains("Compare"), o.error().text().c_str());
    }
    // The same spec over other bytes (an imported file replaced between the runs).
    ResultSet other = ra.results;
    other.dataHash ^= 1;
    const auto changed = overlayRuns({{"A", &ra.results}, {"B", &other}});
    QVERIFY(!changed);
    QCOMPARE(QString::fromStdString(changed.error().field), QStringLiteral("data"));
    // Two runs, distinct names.
    QVERIFY(!overlayRuns({{"A", &ra.results}}));
    const auto same = overlayRuns({{"A", &ra.results}, {"A", &ra.results}});
    QVERIFY(!same);
    QCOMPARE(QString::fromStdString(same.error().field), QStringLiteral("runs[1].name"));
}

QTEST_APPLESS_MAIN(TestRunCompare)
#include "tst_run_compare.moc"
