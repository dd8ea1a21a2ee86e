// SPDX-License-Identifier: GPL-3.0-or-later
// The runner: determinism, cancellation, the memory guard, QJL's score-variance laws and paper A's orderings.
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/analysis/summary.h"
#include "common/approx.h"
#include "common/trials.h"
#include "core/experiment/shard.h"
#include "core/experiment/trial_cache.h"
#include "core/quant/codec_parts.h"

#include <QTest>

#include <atomic>
#include <cmath>
#include <numbers>

using namespace kvlens;

namespace {

using test::makeSpec;

ResultSet run(const ExperimentSpec& spec, int threads = 2, Progress* progress = nullptr)
{
    return test::runSpec(spec, threads, progress);
}

/// The CPU backend, counting the paths it encodes (two per computed trial).
class CountingBackend final : public ComputeBackend {
public:
    std::string name() const override { return m_cpu.name(); }
    int concurrency() const override { return m_cpu.concurrency(); }
    PathResult encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x,
                          const RowMatrixXf* queries) override
    {
        ++paths;
        return m_cpu.encodePath(plan, x, queries);
    }
    void scores(const Eigen::Ref<const RowMatrixXf>& q, const Eigen::Ref<const RowMatrixXf>& k, float scale,
                RowMatrixXf& out) override
    {
        ++draws; // the exact scores: once per (point, seed) draw
        m_cpu.scores(q, k, scale, out);
    }
    void attend(const RowMatrixXf& s, const Eigen::Ref<const RowMatrixXf>& v, RowMatrixXf& p, std::vector<double>& l,
                RowMatrixXf& o) override
    {
        m_cpu.attend(s, v, p, l, o);
    }
    QueryMetrics queryMetrics(const AttentionPair& a, std::span<const float> e, int topK) override
    {
        return m_cpu.queryMetrics(a, e, topK);
    }
    std::atomic<long long> paths{0}, draws{0};

private:
    CpuBackend m_cpu{2};
};

/// Runs with a cache on a counting backend: (result, trials computed, draws made).
struct CachedRun {
    ResultSet result;
    long long computed = 0, draws = 0;
};
CachedRun runCached(const ExperimentSpec& spec, TrialCache& cache)
{
    CountingBackend backend;
    auto result = runExperiment(spec, backend, nullptr, {}, &cache);
    if (!result)
        qFatal("run failed: %s", result.error().text().c_str());
    return {std::move(result).value(), backend.paths.load() / 2, backend.draws.load()};
}

/// Every trial of `a` equals the same trial of `b` (timings aside), else the first difference.
QString sameTrials(const ResultSet& a, const ResultSet& b)
{
    if (a.trials.size() != b.trials.size())
        return QStringLiteral("%1 trials vs %2").arg(a.trials.size()).arg(b.trials.size());
    for (std::size_t i = 0; i < a.trials.size(); ++i)
        if (const QString d = test::trialDifference(a.trials[i], b.trials[i], false); !d.isEmpty())
            return QStringLiteral("trial %1: %2").arg(i).arg(d);
    return {};
}

const SummaryRow& row(const std::vector<SummaryRow>& rows, const ResultSet& r, const char* scheme, int budget)
{
    for (const auto& s : rows)
        if (r.schemes[static_cast<std::size_t>(s.scheme)].name == scheme && s.budget == budget)
            return s;
    qFatal("no summary row for %s at %d", scheme, budget);
}

/// Cancels from inside the report of the `after`-th trial.
class CancelAfter : public Progress {
public:
    explicit CancelAfter(long long after) : m_after(after) {}
    void report(long long done, long long) override
    {
        if (done >= m_after)
            m_cancel = true;
    }
    bool cancelled() const override { return m_cancel; }

private:
    long long m_after;
    bool m_cancel = false;
};

} // namespace

class TestExperiment : public QObject {
    Q_OBJECT
private slots:
    void deterministicWhateverTheThreads()
    {
        const auto spec = makeSpec(R"({"d": 64, "tokens": 256, "queries": 16, "budgets": [2, 4],
                                      "seeds": {"count": 3}, "schemes": ["KV", "QKQV", "KIVI"]})");
        const ResultSet a = run(spec, 2), b = run(spec, 1);
        QCOMPARE(a.trials.size(), std::size_t{18});
        QCOMPARE(b.trials.size(), a.trials.size());
        for (std::size_t i = 0; i < a.trials.size(); ++i) {
            QCOMPARE(a.trials[i].key.scheme, b.trials[i].key.scheme);
            QCOMPARE(a.trials[i].key.seed, b.trials[i].key.seed);
            QVERIFY(a.trials[i].kl == b.trials[i].kl);
            QVERIFY(a.trials[i].phiT == b.trials[i].phiT);
            QCOMPARE(a.trials[i].sixD.snrK, b.trials[i].sixD.snrK);
        }
        // Walk order: budget, then scheme, then seed.
        QCOMPARE(a.trials[0].key.budget, 2);
        QCOMPARE(a.trials[1].key.seedIndex, 1);
        QCOMPARE(a.trials[3].key.scheme, 1);
        QVERIFY(!a.cancelled);
        QCOMPARE(a.totalTrials, 18LL);
    }

    void differentSeedsDiffer()
    {
        const auto spec = makeSpec(R"({"d": 32, "tokens": 64, "queries": 8, "budgets": [3], "seeds": {"count": 2},
                                      "schemes": ["KV"]})");
        const ResultSet r = run(spec);
        QVERIFY(r.trials[0].kl != r.trials[1].kl);
    }

    void cancellationStopsWithinOneTrial_data()
    {
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("maxTrials");
        QTest::newRow("one thread") << 1 << 1;
        // The other thread may finish the trial it already started.
        QTest::newRow("two threads") << 2 << 2;
    }
    void cancellationStopsWithinOneTrial()
    {
        QFETCH(int, threads);
        QFETCH(int, maxTrials);
        const auto spec = makeSpec(R"({"d": 64, "tokens": 256, "queries": 16, "seeds": {"count": 8}})");
        CancelAfter cancel(1);
        const ResultSet r = run(spec, threads, &cancel);
        QVERIFY(r.cancelled);
        QVERIFY2(static_cast<int>(r.trials.size()) <= maxTrials, qPrintable(QString::number(r.trials.size())));
        QVERIFY(!r.trials.empty());
    }

    void memoryGuardRefusesBeforeAllocating()
    {
        ExperimentSpec spec = makeSpec(R"({"d": 1024, "tokens": 65536, "queries": 1024, "memory_limit_mb": 100})");
        CpuBackend backend(2);
        const auto result = runExperiment(spec, backend);
        QVERIFY(!result.ok());
        QCOMPARE(QString::fromStdString(result.error().field), QStringLiteral("memory_limit_mb"));
        QVERIFY2(QString::fromStdString(result.error().message).contains(QStringLiteral("MB")),
                 result.error().message.c_str());
        // The estimate is dominated by N x d buffers: doubling N about doubles it.
        spec.tokens = 4096;
        const double small = estimateMemory(spec, 1).perGroupBytes;
        spec.tokens = 8192;
        KVLENS_COMPARE_REL(estimateMemory(spec, 1).perGroupBytes / small, 2.0, 0.15);
    }

    void qjlScoreVarianceLaws()
    {
        // Paper A: "(n-1)-bit scalar + 1-bit QJL" has about 2 pi times the score-error variance of
        // "n-bit scalar" (issue #3: within 25% at n = 3, 4), and QJL's variance is about pi/2 times
        // that of ignoring the residual (within 15%).
        const auto spec = makeSpec(R"({"d": 128, "tokens": 512, "queries": 32, "budgets": [3, 4],
                                      "seeds": {"count": 4}, "schemes": ["KQV", "QKQV"]})");
        const ResultSet r = run(spec);
        const auto rows = summarize(r);
        for (int n : {3, 4}) {
            const auto& scalar = row(rows, r, "KQV", n);
            const auto& qjl = row(rows, r, "QKQV", n);
            const double ratio = qjl.scoreErrorVar / scalar.scoreErrorVar;
            KVLENS_COMPARE_REL(ratio, 2.0 * std::numbers::pi, 0.25);
            KVLENS_COMPARE_REL(qjl.scoreErrorVar / qjl.scoreErrorVarBase, std::numbers::pi / 2.0, 0.15);
            // And each measured variance matches the theory panel's prediction.
            KVLENS_COMPARE_REL(scalar.scoreErrorVar, scalar.scoreErrorVarPredicted, 0.10);
            KVLENS_COMPARE_REL(qjl.scoreErrorVar, qjl.scoreErrorVarPredicted, 0.10);
            // QJL is unbiased: the mean score error is small against its spread.
            for (const auto& t : r.trials)
                QVERIFY(std::abs(t.scoreErrorMean) < 0.05 * std::sqrt(t.scoreErrorVar));
        }
    }

    void paperAOrderings()
    {
        // Gaussian, n = 4: KQV's mean KL is below QKQV's.
        const auto gaussian = makeSpec(R"({"d": 128, "tokens": 512, "queries": 32, "budgets": [4],
                                          "seeds": {"count": 4}, "schemes": ["KQV", "QKQV"]})");
        const ResultSet g = run(gaussian);
        const auto gRows = summarize(g);
        QVERIFY(row(gRows, g, "KQV", 4).klMean < row(gRows, g, "QKQV", 4).klMean);
        // Heavy tails, nu = 1.5: unrotated KV fails, the WHT protects KQV.
        const auto heavy = makeSpec(R"({"regime": {"name": "heavy_tail", "nu": 1.5}, "d": 128, "tokens": 512,
                                       "queries": 32, "budgets": [4], "seeds": {"count": 4}, "schemes": ["KV", "KQV"]})");
        const ResultSet h = run(heavy);
        const auto hRows = summarize(h);
        QVERIFY2(row(hRows, h, "KV", 4).klMean > row(hRows, h, "KQV", 4).klMean,
                 qPrintable(QStringLiteral("KV %1 vs KQV %2").arg(row(hRows, h, "KV", 4).klMean)
                                .arg(row(hRows, h, "KQV", 4).klMean)));
        QVERIFY(row(hRows, h, "KV", 4).sixD.phiK > row(hRows, h, "KQV", 4).sixD.phiK);
    }

    void sweepRunsEveryPoint()
    {
        // d is swept: under the WHT, d = 96 is padded to 128 stored coordinates, which the bit
        // accounting shows; the trials of each point use that point's sizes.
        const auto spec = makeSpec(R"({"d": 64, "tokens": 128, "queries": 8, "budgets": [4], "seeds": {"count": 2},
                                      "schemes": ["TQ-KV"], "sweep": {"d": [64, 96]}})");
        const ResultSet r = run(spec);
        QCOMPARE(r.trials.size(), std::size_t{4});
        for (const TrialResult& t : r.trials) {
            const double expected = t.key.point == 0 ? (4.0 * 64 + 16) / 64 : (4.0 * 128 + 16) / 96;
            KVLENS_COMPARE_ABS(t.bits.key, expected, 1e-12);
        }
        // Seeds do not depend on the grid point (common random numbers across the sweep).
        QCOMPARE(r.trials[0].key.seed, r.trials[2].key.seed);
        QCOMPARE(summarize(r).size(), std::size_t{2});
    }

    void cachedTrialsEqualRecomputedOnesAndOnlyNewOnesRun()
    {
        // Seeds 3 -> 4, a third scheme, a third budget, then back: each edit computes only the
        // trials not seen before, and every trial equals a from-scratch run's bit for bit.
        const char* base = R"({"regime": {"name": "heavy_tail", "mode": "marginal"}, "d": 16, "tokens": 48,
            "queries": 6, "schemes": ["KQV", "SQ-KV"], "budgets": [2, 3], "seeds": {"first": 11, "count": 3}})";
        TrialCache cache(64.0);
        const ExperimentSpec first = makeSpec(base);
        const CachedRun cold = runCached(first, cache);
        QCOMPARE(cold.computed, 12LL);
        QCOMPARE(cold.result.reusedTrials, 0LL);
        QCOMPARE(static_cast<long long>(cache.size()), 12LL);
        QVERIFY2(sameTrials(cold.result, run(first)).isEmpty(), qPrintable(sameTrials(cold.result, run(first))));

        ExperimentSpec moreSeeds = first;
        moreSeeds.seedCount = 4;
        const CachedRun seeded = runCached(moreSeeds, cache);
        QCOMPARE(seeded.computed, 4LL);      // seed 14 only: 2 schemes x 2 budgets
        QCOMPARE(seeded.draws, 1LL);          // one draw: the new seed's
        QCOMPARE(seeded.result.reusedTrials, 12LL);
        QString diff = sameTrials(seeded.result, run(moreSeeds));
        QVERIFY2(diff.isEmpty(), qPrintable(diff));

        // A scheme added in front moves every index; the cached ones land where they now belong.
        ExperimentSpec moreSchemes = moreSeeds;
        moreSchemes.schemes.insert(moreSchemes.schemes.begin(), *findScheme("QKQV"));
        const CachedRun schemed = runCached(*normalizeSpec(moreSchemes), cache);
        QCOMPARE(schemed.computed, 8LL); // QKQV x 2 budgets x 4 seeds
        diff = sameTrials(schemed.result, run(*normalizeSpec(moreSchemes)));
        QVERIFY2(diff.isEmpty(), qPrintable(diff));

        ExperimentSpec moreBudgets = moreSchemes;
        moreBudgets.budgets = {2, 3, 4};
        const CachedRun budgeted = runCached(*normalizeSpec(moreBudgets), cache);
        QCOMPARE(budgeted.computed, 12LL); // budget 4 x 3 schemes x 4 seeds
        diff = sameTrials(budgeted.result, run(*normalizeSpec(moreBudgets)));
        QVERIFY2(diff.isEmpty(), qPrintable(diff));

        const CachedRun back = runCached(first, cache); // an earlier setting: nothing to compute
        QCOMPARE(back.computed, 0LL);
        QCOMPARE(back.draws, 0LL);
        QCOMPARE(back.result.reusedTrials, 12LL);
        diff = sameTrials(back.result, cold.result);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));

        // Another score scale is another experiment: nothing reused.
        ExperimentSpec scaled = first;
        scaled.scoreScale = 2.0;
        QCOMPARE(runCached(scaled, cache).computed, 12LL);
    }

    void cacheKeysFollowWhatDefinesTheNumbers()
    {
        // The key comes from the data model: every field of the spec, changed alone, changes the key
        // exactly when forEachSpecField says it defines the numbers, and the spec hash exactly when
        // it is not Neutral (so a field spec.json does not write cannot be left out of the hash
        // unnoticed). A field added to ExperimentSpec (its size changes) must be listed there with
        // its role, or this test fails.
        // 424: the advisor's options (issue 31) joined as an ArrangesTrials field.
        static_assert(sizeof(ExperimentSpec) == 424, "ExperimentSpec changed: list the field in forEachSpecField");
        const ExperimentSpec spec = makeSpec(R"({"d": 16, "tokens": 32, "queries": 4, "schemes": ["KV", "KQV"]})");
        const SchemeConfig& kqv = spec.schemes[1];
        const auto key = [&](const ExperimentSpec& s, const SchemeConfig& scheme, int budget = 3, std::uint64_t seed = 5,
                             std::uint64_t data = 0, const char* backend = "cpu") {
            return trialCacheKey(s, data, scheme, budget, seed, backend);
        };
        const std::uint64_t k0 = key(spec, kqv);
        const std::uint64_t h0 = specHash(spec);
        struct Change {
            void operator()(std::string& v) const { v += "x"; }
            void operator()(int& v) const { v += 1; }
            void operator()(double& v) const { v += 0.5; }
            void operator()(std::uint64_t& v) const { v += 1; }
            void operator()(EngineKind& v) const { v = v == EngineKind::Pcg64 ? EngineKind::Mt19937_64 : EngineKind::Pcg64; }
            void operator()(BackendKind& v) const { v = v == BackendKind::Cpu ? BackendKind::OpenCl : BackendKind::Cpu; }
            void operator()(RegimeParams& v) const
            {
                if (v.empty()) {
                    v["scale"] = 2.0;
                    return;
                }
                auto& first = v.begin()->second;
                if (auto* d = std::get_if<double>(&first))
                    *d += 1.0;
                else
                    std::get<std::string>(first) += "x";
            }
            void operator()(std::vector<SchemeConfig>& v) const { v.push_back(*findScheme("KIVI")); } // uncalibrated
            void operator()(std::vector<int>& v) const { v.push_back(7); }
            void operator()(ComparisonOptions& v) const { v.bootstrap += 1; }
            void operator()(std::vector<SweepAxis>& v) const { v.push_back(SweepAxis{SweepParameter::D, {}, {8, 16}}); }
            void operator()(ExperimentSpec::SchemeOrigins& v) const { v.fields.push_back("schemes[9]"); }
            void operator()(AdvisorOptions& v) const { v.bits.push_back(2.5); }
        };
        int fields = 0;
        ExperimentSpec probe = spec;
        forEachSpecField(probe, [&](const char* name, auto role, auto&) {
            const int index = fields++;
            ExperimentSpec edited = spec;
            int at = 0;
            forEachSpecField(edited, [&](const char*, auto, auto& field) {
                if (at++ == index)
                    Change{}(field);
            });
            QVERIFY2(!(edited == spec) || std::string(name) == "scheme_origins", name); // the change took
            const bool defines = std::is_same_v<decltype(role), DefinesNumbers>;
            QVERIFY2((key(edited, kqv) != k0) == defines, qPrintable(QStringLiteral("%1 %2 the key")
                                                                          .arg(name, defines ? "must change" : "must not change")));
            const bool neutral = std::is_same_v<decltype(role), Neutral>;
            QVERIFY2((specHash(edited) != h0) == !neutral,
                     qPrintable(QStringLiteral("%1 %2 the spec hash").arg(name, neutral ? "must not change" : "must change")));
        });
        QCOMPARE(fields, 23);
        // The trial's own coordinates change it; the scheme's name does not (its composition does).
        QVERIFY(key(spec, kqv, 4) != k0);
        QVERIFY(key(spec, kqv, 3, 6) != k0);
        QVERIFY(key(spec, kqv, 3, 5, 1) != k0);
        QVERIFY(key(spec, kqv, 3, 5, 0, "opencl: pocl") != k0);
        QVERIFY(key(spec, spec.schemes[0]) != k0);
        SchemeConfig renamed = kqv;
        renamed.name = "TQ-KQV";
        renamed.builtin = false;
        renamed.description = "another description";
        QCOMPARE(key(spec, renamed), k0);
        // A calibrated scheme in the run draws calibration rows for every trial.
        ExperimentSpec calibrated = spec;
        calibrated.schemes.push_back(*findScheme("SQ-KV"));
        QVERIFY(key(calibrated, kqv) != k0);
    }

    void cacheKeysFollowEveryCodecOption()
    {
        // Every option of every registered part, changed alone, changes the key; so do each field of
        // a path (transforms, quantizer, residuals, token policy, bits). A field added to PathConfig
        // or CodecPart (their sizes change) must be hashed in trial_cache.cpp, or this test fails.
        static_assert(sizeof(PathConfig) == 216 && sizeof(CodecPart) == 80, "PathConfig changed: hash the field");
        const ExperimentSpec spec = makeSpec(R"({"d": 64, "tokens": 32, "queries": 4, "schemes": ["KV"]})");
        const auto key = [&](const PathConfig& path) {
            return trialCacheKey(spec, 0, SchemeConfig{"s", "", path, path, false}, 3, 5, "cpu");
        };
        int options = 0;
        for (const PartKind& kind : partKinds()) {
            CodecPart part(kind.name);
            QVERIFY(normalizePart(part, kind.role, "p"));
            auto place = [&](const CodecPart& p) {
                PathConfig path = findScheme("KV")->key;
                switch (kind.role) {
                case PartRole::Transform: path.transforms = {p}; break;
                case PartRole::Quantizer: path.quantizer = p; break;
                case PartRole::Residual: path.residuals = {p}; break;
                case PartRole::TokenPolicy: path.tokenPolicy = p; break;
                }
                return path;
            };
            const std::uint64_t base = key(place(part));
            for (const OptionDesc& o : kind.options) {
                CodecPart changed = part;
                OptionValue& v = changed.options.at(o.name);
                if (o.type == OptionDesc::Type::Choice)
                    v = std::get<std::string>(v) == o.choices.front() ? o.choices.back() : o.choices.front();
                else
                    v = std::get<double>(v) == o.lo ? o.hi : o.lo;
                QVERIFY2(!(changed == part), qPrintable(QString::fromStdString(kind.name + "." + o.name)));
                QVERIFY2(key(place(changed)) != base, qPrintable(QString::fromStdString(kind.name + "." + o.name)));
                ++options;
            }
        }
        QVERIFY(options >= 21); // 21 when written: uniform 4, lloyd 2, spectral 4, kvquant 2, ggml 1, qjl 4, headq 3, a2 1
        PathConfig path = findScheme("TQ-QKV")->key;
        const std::uint64_t base = key(path);
        PathConfig edited = path;
        edited.transforms.push_back(CodecPart("channel_norm"));
        QVERIFY(key(edited) != base);
        edited = path;
        edited.quantizer.kind = "kvquant";
        QVERIFY(key(edited) != base);
        edited = path;
        edited.residuals.clear();
        QVERIFY(key(edited) != base);
        edited = path;
        edited.tokenPolicy = CodecPart("a2", {{"group", 32.0}});
        QVERIFY(key(edited) != base);
        edited = path;
        edited.bits = BitsRule{false, edited.bits.value};
        QVERIFY(key(edited) != base);
        edited = path;
        edited.bits.value -= 1;
        QVERIFY(key(edited) != base);
    }

    void cacheEvictsTheLeastRecentlyUsedWithinItsLimit()
    {
        const ResultSet r = run(makeSpec(R"({"d": 16, "tokens": 64, "queries": 8, "schemes": ["KV"],
                                              "budgets": [2], "seeds": {"count": 6}})"));
        const double each = trialBytes(r.trials[0]) + 64.0;
        TrialCache cache(3.5 * each / 1e6); // room for three
        for (std::uint64_t i = 0; i < 3; ++i)
            cache.insert(i, r.trials[i], "");
        QCOMPARE(static_cast<int>(cache.size()), 3);
        QVERIFY(cache.find(0)); // 0 is now the most recent; 1 the least
        cache.insert(3, r.trials[3], "");
        QCOMPARE(static_cast<int>(cache.size()), 3);
        QVERIFY(!cache.find(1));
        QVERIFY(cache.find(0) && cache.find(2) && cache.find(3));
        QVERIFY(cache.bytes() <= cache.limitMb() * 1e6);
        cache.setLimitMb(1.5 * each / 1e6);
        QCOMPARE(static_cast<int>(cache.size()), 1);
        QVERIFY(cache.find(3)); // the last found survives
        QVERIFY(test::trialDifference(cache.find(3)->trial, r.trials[3], true).isEmpty());
    }

    void resultsCarryAccountingAndSamples()
    {
        const auto spec = makeSpec(R"({"d": 128, "tokens": 300, "queries": 10, "budgets": [4], "seeds": {"count": 1},
                                      "schemes": ["KQV"], "metrics": {"sample_cap": 50, "top_k": 3}})");
        const ResultSet r = run(spec);
        const TrialResult& t = r.trials.at(0);
        KVLENS_COMPARE_ABS(t.bits.key, 4.125, 1e-12);
        KVLENS_COMPARE_ABS(t.bits.value, 4.25, 1e-12);
        QCOMPARE(t.samplesK.snrDb.size(), std::size_t{50});
        QCOMPARE(t.samplesT.phi.size(), std::size_t{10});
        QCOMPARE(t.kl.size(), std::size_t{10});
        QCOMPARE(r.backend, std::string("cpu"));
        // A 4-bit WHT key path keeps about 6 dB per bit minus the Lloyd-Max gap: SNR_K near 20.3 dB.
        KVLENS_COMPARE_ABS(t.sixD.snrK, -10.0 * std::log10(0.009315), 0.5);
    }
};

QTEST_APPLESS_MAIN(TestExperiment)
#include "tst_experiment.moc"
