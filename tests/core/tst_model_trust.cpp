// SPDX-License-Identifier: GPL-3.0-or-later
// The model features against hostile inputs (issue 26): one regression per finding, each named
// after it; every one failed (hung, allocated gigabytes, dropped a layer, ran twice, read other data)
// before the fix.
#include "common/approx.h"
#include "common/dump_file.h"
#include "common/trials.h"
#include "core/analysis/comparison.h"
#include "core/analysis/model_lens.h"
#include "core/common/parallel.h"
#include "core/experiment/reuse.h"
#include "core/experiment/runner.h"
#include "core/experiment/shard.h"
#include "core/experiment/trial_cache.h"
#include "core/io/tensor_file_cache.h"
#include "core/spec/allocation.h"
#include "core/spec/spec_json.h"
#include "core/regimes/imported.h"
#include "core/regimes/model_dump.h"
#include "core/stats/bootstrap.h"
#include "core/stats/energy.h"
#include "core/stats/kolmogorov_smirnov.h"
#include "core/stats/mann_whitney.h"
#include "core/stats/ranks.h"
#include "core/stats/spearman.h"
#include "core/stats/wilcoxon.h"

#include <QTemporaryDir>
#include <QTest>

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <new>

using namespace kvlens;

using kvlens::test::writeDump;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string data(const char* name)
{
    return std::string(qEnvironmentVariable("KVLENS_TEST_DATA").toStdString()) + "/" + name;
}

/// A result set by hand: `schemes` schemes, `seeds` seeds, `queries` KL values per trial from `kl`.
ResultSet handMade(int schemes, int seeds, int queries, const std::function<float(int, int, int)>& kl)
{
    ResultSet r;
    r.spec = defaultSpec();
    r.spec.schemes.resize(static_cast<std::size_t>(schemes), r.spec.schemes.front());
    for (int s = 0; s < schemes; ++s)
        r.spec.schemes[static_cast<std::size_t>(s)].name = "S" + std::to_string(s);
    r.spec.budgets = {3};
    r.spec.seedCount = seeds;
    r.spec.comparisons.bootstrap = 200;
    r.spec.comparisons.permutations = 99;
    r.schemes = r.spec.schemes;
    for (int s = 0; s < schemes; ++s)
        for (int k = 0; k < seeds; ++k) {
            TrialResult t;
            t.key = TrialKey{0, s, 3, k, r.spec.seed(k)};
            for (int q = 0; q < queries; ++q)
                t.kl.push_back(kl(s, k, q));
            t.sixD.snrK = 10.0 + s + 0.01 * k;
            t.sixD.phiK = 0.1 + 0.001 * k;
            r.trials.push_back(t);
        }
    r.totalTrials = static_cast<long long>(r.trials.size());
    return r;
}

long peakRssKb()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

} // namespace

class TestModelTrust : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    std::string path(const char* name) const { return m_dir.filePath(QLatin1String(name)).toStdString(); }

private slots:
    void init() { clearImportCache(); }
    // ---- Finding 1: a NaN spun the statistics forever; non-finite values are now defined -----------
    void finding1_ksWalksPastNaN();
    void finding1_ranksOrderNaNAsWorst();
    void finding1_wilcoxonTreatsNaNAsInfinity();
    void finding1_bootstrapAndSpearmanAreDefined();
    void finding1_comparisonsCountNonFiniteKl();
    void finding1_importRefusesValuesBeyondFp16();
    void finding1_analysesStopOnCancel();
    // ---- Finding 2: one tensor name set the layer count ----------------------------------------
    void finding2_layerIndicesAreCheckedWhileScanning_data();
    void finding2_layerIndicesAreCheckedWhileScanning();
    // ---- Finding 3: the dump's header was parsed again for every layer and head ----------------
    void finding3_aThousandLayerDumpIsParsedOnce();
    // ---- Finding 4: the advisor dropped a layer silently ---------------------------------------
    void finding4_aLayerWithoutFiniteCurvesIsNamed();
    void finding4_theObjectiveChoosesTheCurvesStatistic();
    // ---- Finding 5: duplicate layers / heads ran twice -----------------------------------------
    void finding5_duplicateCellsAreRefused_data();
    void finding5_duplicateCellsAreRefused();
    // ---- Finding 6: comparisons were outside the memory estimate -------------------------------
    void finding6_theEnergyTestIsBoundedAndCounted();
    void finding6_manySchemesNeedExplicitPairs();
    void finding6_workerExceptionsReachTheCaller();
    // ---- Finding 7: errors were attributed to the wrong field ----------------------------------
    void finding7_specWideErrorsAreNamedFirst();
    void finding7_expandedSchemesNameTheUsersEntry();
    // ---- Finding 8: --reuse read all of trials.bin before its magic ----------------------------
    void finding8_aHugeTrialsFileIsRefusedUnread();
    // ---- Finding 9: the advice's rerun measured other data -------------------------------------
    void finding9_aChangedDumpIsNotReadAsTheRuns();
    // ---- Finding 10: allocation files from another model, lenient spec_hash --------------------
    void finding10_specHashIsStrict_data();
    void finding10_specHashIsStrict();
    void finding10_anotherModelsAllocationIsRefused_data();
    void finding10_anotherModelsAllocationIsRefused();
};

void TestModelTrust::finding1_ksWalksPastNaN()
{
    // Total order: -inf < finite < +inf < NaN, NaNs tied. a = [0.1, 0.3, NaN], b = [0.2, NaN]:
    // after 0.1: |1*2 - 0*3| = 2; after 0.2: |2 - 3| = 1; after 0.3: |4 - 3| = 1; after NaN: 0.
    // D = 2 / (3 * 2). The old walk never advanced past the NaN.
    const std::vector<double> a{0.3, kNan, 0.1}, b{kNan, 0.2};
    const auto ks = stats::ksTwoSample(a, b);
    KVLENS_COMPARE_ABS(ks.d, 1.0 / 3.0, 1e-15);
    QCOMPARE(ks.nonFinite, std::size_t{2});
    QVERIFY(std::isfinite(ks.p.logP));
}

void TestModelTrust::finding1_ranksOrderNaNAsWorst()
{
    // NaN ranks above +inf, every NaN tied: ranks of {NaN, 1, inf, NaN} are {3.5, 1, 2, 3.5}.
    const auto r = stats::averageRanks(std::vector<double>{kNan, 1.0, kInf, kNan});
    QCOMPARE(r.ranks, (std::vector<double>{3.5, 1.0, 2.0, 3.5}));
    QCOMPARE(r.tieSum, 6.0); // one tie group of 2: 2^3 - 2
    // Mann-Whitney over it is defined: x = {NaN, 1} against y = {inf, NaN}; U1 = R1 - 3 = 4.5 - 3.
    const auto mw = stats::mannWhitneyU(std::vector<double>{kNan, 1.0}, std::vector<double>{kInf, kNan});
    QCOMPARE(mw.u1, 1.5);
}

void TestModelTrust::finding1_wilcoxonTreatsNaNAsInfinity()
{
    // d = (NaN -> inf) - 1 = +inf, 1 - inf = -inf, 2 - 1 = 1, inf - inf (both NaN) = tie (dropped).
    // |d| ranks: 1 -> 1, inf, inf -> 2.5 each: W+ = 2.5 + 1 = 3.5, W- = 2.5.
    const auto w = stats::wilcoxonSignedRank(std::vector<double>{kNan, 1.0, 2.0, kNan},
                                             std::vector<double>{1.0, kNan, 1.0, kNan});
    QCOMPARE(w.nUsed, std::size_t{3});
    QCOMPARE(w.zerosDropped, std::size_t{1});
    QCOMPARE(w.nonFinite, std::size_t{3});
    QCOMPARE(w.wPlus, 3.5);
    QCOMPARE(w.wMinus, 2.5);
}

void TestModelTrust::finding1_bootstrapAndSpearmanAreDefined()
{
    // The median of {1, 2, NaN} under the total order is 2 (NaN is the largest); every resample's
    // median is one of the three values, so the interval's ends are order statistics of them.
    const std::vector<double> x{kNan, 1.0, 2.0};
    const auto ci = stats::bootstrapLocation(x, stats::Location::Median, 0.95, 500, 7);
    QCOMPARE(ci.estimate, 2.0);
    QVERIFY(ci.lower == 1.0 || ci.lower == 2.0);
    QVERIFY(std::isnan(ci.upper) || ci.upper == 2.0);
    // A constant proxy has no rank correlation: undefined, not 0.
    QVERIFY(std::isnan(stats::spearman(std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 3})));
}

void TestModelTrust::finding1_comparisonsCountNonFiniteKl()
{
    // Scheme 0 has a NaN KL in every seed's query 0: the table completes, ranks it worst and says
    // how many there were.
    const ResultSet r = handMade(2, 4, 16, [](int s, int k, int q) {
        return s == 0 && q == 0 ? std::numeric_limits<float>::quiet_NaN() : 0.01f * (1 + s) * (1 + q + k);
    });
    const auto rows = stats::compareSchemes(r);
    QCOMPARE(rows.size(), std::size_t{1});
    QCOMPARE(rows[0].nonFiniteA, std::size_t{4});
    QCOMPARE(rows[0].nonFiniteB, std::size_t{0});
    const std::string csv = stats::comparisonsCsv(r, rows);
    QVERIFY(csv.find("nonfinite_a") != std::string::npos);
}

void TestModelTrust::finding1_importRefusesValuesBeyondFp16()
{
    // tests/data/dump_fp16_overflow.safetensors: layer 1's keys hold one entry of 1e18 (finite in
    // float32, its squared norm too): the codecs' fp16 norms would store Inf. Refused at import,
    // naming the tensor and the count.
    const DataShape shape{4, 8, 8, 0};
    auto params = modelRegime().normalize(RegimeParams{{"file", data("dump_fp16_overflow.safetensors")},
                                                       {"layer", 1.0}, {"head", 0.0}},
                                          shape);
    QVERIFY(params.ok());
    auto got = modelRegime().generate(*params, shape, EngineKind::Pcg64, 1);
    QVERIFY(!got.ok());
    QCOMPARE(got.error().field, std::string("regime.k"));
    QVERIFY2(got.error().message.find("'layers.1.k' has 1 row whose norm exceeds fp16") != std::string::npos,
             got.error().message.c_str());
    // Keys scaled by 1e6 (every row beyond 65504: each has an entry of at least 1/8): refused the
    // same way, with the count.
    writeDump(path("scaled.safetensors"), 1, 8, 1e6, 0);
    auto scaled = modelRegime().normalize(RegimeParams{{"file", path("scaled.safetensors")}}, shape);
    QVERIFY(scaled.ok());
    auto refused = modelRegime().generate(*scaled, shape, EngineKind::Pcg64, 1);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().message.find("has 8 rows whose norm exceeds fp16") != std::string::npos,
             refused.error().message.c_str());
}

void TestModelTrust::finding1_analysesStopOnCancel()
{
    // A stop request reaches the bootstrap and the energy test inside the comparisons.
    const ResultSet r = handMade(2, 8, 64, [](int s, int k, int q) { return 0.01f * (1 + s) * (1 + q + k); });
    int polls = 0;
    const CancelToken cancel([&] { return ++polls > 3; });
    QVERIFY_THROWS_EXCEPTION(Cancelled, stats::compareSchemes(r, cancel));
}

void TestModelTrust::finding2_layerIndicesAreCheckedWhileScanning_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("expected");
    QTest::newRow("20000000") << "dump_layer_index_huge.safetensors"
                              << "tensor 'layers.20000000.k' names a layer above 65535";
    QTest::newRow("INT_MAX") << "dump_layer_index_int_max.safetensors"
                             << "tensor 'layers.2147483647.k' names a layer above 65535";
    QTest::newRow("20 digits") << "dump_layer_index_20_digits.safetensors"
                               << "tensor 'layers.18446744073709551616.k' names a layer above 65535";
    QTest::newRow("gap") << "dump_layer_gap.safetensors" << "layer 1 has no tensor, but layer 2 has";
}

void TestModelTrust::finding2_layerIndicesAreCheckedWhileScanning()
{
    QFETCH(QString, file);
    QFETCH(QString, expected);
    const long before = peakRssKb();
    auto dump = inspectModelDump(data(file.toLatin1().constData()));
    QVERIFY(!dump.ok());
    QCOMPARE(dump.error().field, std::string("regime.file"));
    QVERIFY2(dump.error().message.find(expected.toStdString()) != std::string::npos, dump.error().message.c_str());
    QVERIFY(dump.error().message.find("stoi") == std::string::npos);
    // Nothing was allocated from the name: the old check built 3 (N + 1) names (4.9 GB for 2e7).
    QVERIFY2(peakRssKb() - before < 64 * 1024, qPrintable(QString::number(peakRssKb() - before)));
}

void TestModelTrust::finding3_aThousandLayerDumpIsParsedOnce()
{
    // tests/data/dump_1000_layers.safetensors: 1000 layers, 3000 tensors in a 250 KB header.
    // Every layer as a grid point: normalization, the estimate and the runner's input pass all
    // read the header through one cache entry.
    io::clearTensorFileCache();
    const long long before = io::tensorHeaderParses();
    auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + data("dump_1000_layers.safetensors")
                             + R"(", "layers": "all", "heads": "all", "causal": "off"}, "d": 4, "tokens": 1,
                             "queries": 1, "schemes": ["KV"], "budgets": [2], "seeds": {"count": 1},
                             "metrics": {"top_k": 1}})");
    QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
    QCOMPARE(spec->pointCount(), 1000);
    const MemoryEstimate e = estimateMemory(*spec, 2);
    QVERIFY(e.totalBytes() > 0.0);
    QCOMPARE(io::tensorHeaderParses() - before, 1LL);
}

void TestModelTrust::finding4_aLayerWithoutFiniteCurvesIsNamed()
{
    writeDump(path("two.safetensors"), 2, 16);
    auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + path("two.safetensors")
                             + R"(", "layers": "all", "heads": [0]}, "d": 4, "tokens": 16, "queries": 4,
                             "schemes": ["K-only", "V-only"], "budgets": [2, 3], "seeds": {"count": 2},
                             "metrics": {"top_k": 2}})");
    QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
    ResultSet r = test::runSpec(*spec);
    auto fine = layerCurves(r);
    QVERIFY(fine.ok());
    QCOMPARE(fine->size(), std::size_t{2});
    // Poison layer 1's K-only output errors: no advice, and the reason names layer 1.
    const auto cells = modelCells(r);
    for (TrialResult& t : r.trials)
        if (cells[static_cast<std::size_t>(t.key.point)].layer == 1 && r.schemes[static_cast<std::size_t>(t.key.scheme)].name == "K-only")
            t.relMseT.front() = std::numeric_limits<float>::quiet_NaN();
    auto refused = layerCurves(r);
    QVERIFY(!refused.ok());
    QCOMPARE(refused.error().field, std::string("advisor"));
    QVERIFY2(refused.error().message.find("layer 1: K-only's output relative error at n = 2 is not finite")
                 != std::string::npos,
             refused.error().message.c_str());
    // A measured loss sums every layer of the run, so every check is over the same layers.
    const AllocationCheck check = measuredLoss(r, "all", 0.0);
    QCOMPARE(check.layers, 2);
    QVERIFY(std::isinf(check.measured));
    QCOMPARE(check.nonFinite, 4LL); // one query in each of layer 1's K-only trials (2 budgets x 2 seeds)
}

void TestModelTrust::finding4_theObjectiveChoosesTheCurvesStatistic()
{
    // The spec's advisor objective (issue 31): each curve point is the median (or p99, or mean) of
    // the layer's per-query K-only / V-only losses, recomputed here from the trials by hand.
    writeDump(path("two.safetensors"), 2, 16);
    auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + path("two.safetensors")
                             + R"(", "layers": "all", "heads": [0]}, "d": 4, "tokens": 16, "queries": 5,
                             "schemes": ["K-only", "V-only"], "budgets": [2, 3], "seeds": {"count": 2},
                             "metrics": {"top_k": 2}, "advisor": {"bits": [2.5, 3], "objective": "median"}})");
    QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
    const ResultSet r = test::runSpec(*spec);
    const auto cells = modelCells(r);
    // The value of `loss` at quantile p (type 7) over (layer, scheme, budget)'s queries and seeds.
    auto byHand = [&](int layer, const char* scheme, int budget, AdvisorLoss loss, double p) {
        std::vector<double> v;
        for (const TrialResult& t : r.trials)
            if (cells[static_cast<std::size_t>(t.key.point)].layer == layer && t.key.budget == budget
                && r.schemes[static_cast<std::size_t>(t.key.scheme)].name == scheme)
                for (float x : loss == AdvisorLoss::Kl ? t.kl : t.relMseT)
                    v.push_back(x);
        std::sort(v.begin(), v.end());
        const double h = (static_cast<double>(v.size()) - 1.0) * p;
        const auto lo = static_cast<std::size_t>(h);
        return v[lo] + (h - static_cast<double>(lo)) * (v[std::min(lo + 1, v.size() - 1)] - v[lo]);
    };
    for (const auto& [statistic, p] : {std::pair{AdvisorStatistic::Median, 0.5}, std::pair{AdvisorStatistic::P99, 0.99}})
        for (const AdvisorLoss loss : {AdvisorLoss::RelMseT, AdvisorLoss::Kl}) {
            AdvisorOptions objective;
            objective.objective = statistic;
            objective.loss = loss;
            const auto curves = layerCurves(r, objective);
            QVERIFY(curves.ok());
            QCOMPARE(curves->size(), std::size_t{2});
            for (const LayerCurves& c : *curves)
                for (std::size_t i = 0; i < c.kBits.size(); ++i) {
                    const double k = byHand(c.layer, "K-only", c.kBits[i], loss, p);
                    const double v = byHand(c.layer, "V-only", c.vBits[i], loss, p);
                    QVERIFY2(std::abs(c.kLoss[i] - k) <= 1e-12 * std::max(1.0, std::abs(k)),
                             qPrintable(QStringLiteral("layer %1 n %2: %3 vs %4").arg(c.layer).arg(c.kBits[i]).arg(c.kLoss[i]).arg(k)));
                    QVERIFY(std::abs(c.vLoss[i] - v) <= 1e-12 * std::max(1.0, std::abs(v)));
                    if (loss == AdvisorLoss::Kl)
                        QCOMPARE(c.vLoss[i], 0.0); // KL cannot see V
                }
        }
    // The default objective is the mean output error, as before the field existed.
    const auto mean = layerCurves(r);
    const auto explicitMean = layerCurves(r, AdvisorOptions{{3.0}, AdvisorStatistic::Mean, AdvisorLoss::RelMseT});
    QVERIFY(mean.ok() && explicitMean.ok());
    QCOMPARE(mean->front().kLoss, explicitMean->front().kLoss);
    QVERIFY(mean->front().kLoss != layerCurves(r, r.spec.advisor)->front().kLoss); // the median differs here
}

void TestModelTrust::finding5_duplicateCellsAreRefused_data()
{
    QTest::addColumn<QString>("cells");
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("message");
    QTest::newRow("layers") << R"("layers": [0, 1, 0], "heads": [0])" << "regime.layers[2]" << "layer 0 is listed twice";
    QTest::newRow("heads") << R"("layers": [0], "heads": [1, 1])" << "regime.heads[1]" << "head 1 is listed twice";
}

void TestModelTrust::finding5_duplicateCellsAreRefused()
{
    QFETCH(QString, cells);
    QFETCH(QString, field);
    QFETCH(QString, message);
    writeDump(path("two.safetensors"), 2, 16);
    auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + path("two.safetensors") + R"(", )"
                             + cells.toStdString() + R"(}, "d": 4, "tokens": 16, "queries": 4, "schemes": ["KV"]})");
    QVERIFY(!spec.ok());
    QCOMPARE(QString::fromStdString(spec.error().field), field);
    QCOMPARE(QString::fromStdString(spec.error().message), message);
    // The same holds for any sweep axis.
    auto swept = specFromJson(R"({"sweep": {"d": [64, 128, 64]}})");
    QVERIFY(!swept.ok());
    QCOMPARE(swept.error().field, std::string("sweep.d[2]"));
}

void TestModelTrust::finding6_theEnergyTestIsBoundedAndCounted()
{
    // 2000 seeds of one cell: the energy test uses at most kMaxEnergyPoints per scheme (its
    // distance matrix was (n1 + n2)^2: 320 GB at 10^5 seeds).
    const ResultSet r = handMade(2, 2000, 2, [](int s, int k, int q) { return 0.001f * (1 + s + q) * (1 + k % 7); });
    const auto rows = stats::compareSchemes(r);
    QCOMPARE(rows.front().energyPoints, stats::kMaxEnergyPoints);
    // The estimate counts the analyses: at 10^5 seeds their working set is bounded by the values
    // and the capped distance matrix, and it is part of the total a run is refused on.
    ExperimentSpec spec = defaultSpec();
    spec.seedCount = 100000;
    const MemoryEstimate e = estimateMemory(spec, 2);
    const double values = 2.0 * 100000 * 64;
    QVERIFY(e.analysisBytes >= 56.0 * values);
    QVERIFY(e.analysisBytes < 1e10);
    QVERIFY(e.totalBytes() >= e.analysisBytes + e.resultBytes);
}

void TestModelTrust::finding6_manySchemesNeedExplicitPairs()
{
    std::string schemes;
    for (int i = 0; i < 65; ++i)
        schemes += std::string(i ? "," : "") + R"({"name": "s)" + std::to_string(i)
                   + R"(", "k": {"rotation": "wht", "quantizer": "lloyd_beta"}, "v": {"rotation": "wht", "quantizer": "lloyd_beta"}})";
    auto spec = specFromJson(R"({"schemes": [)" + schemes + "]}");
    QVERIFY(!spec.ok());
    QCOMPARE(spec.error().field, std::string("comparisons.pairs"));
    auto listed = specFromJson(R"({"schemes": [)" + schemes + R"(], "comparisons": {"pairs": [["s0", "s1"]]}})");
    QVERIFY2(listed.ok(), listed.ok() ? "" : listed.error().text().c_str());
}

void TestModelTrust::finding6_workerExceptionsReachTheCaller()
{
    // An exception in a worker thread used to call std::terminate.
    std::vector<int> done(64, 0);
    QVERIFY_THROWS_EXCEPTION(std::bad_alloc, parallelFor(done.size(), 4, [&](std::size_t i) {
                                 if (i == 17)
                                     throw std::bad_alloc();
                                 done[i] = 1;
                             }));
}

void TestModelTrust::finding7_specWideErrorsAreNamedFirst()
{
    writeDump(path("two.safetensors"), 2, 16);
    auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + path("two.safetensors")
                             + R"(", "layers": "all", "heads": "all"}, "d": 4, "tokens": 16, "queries": 4, "schemes": []})");
    QVERIFY(!spec.ok());
    QCOMPARE(spec.error().field, std::string("schemes"));
}

void TestModelTrust::finding7_expandedSchemesNameTheUsersEntry()
{
    // allocation.json expands to K3/V2; the spec also lists a scheme of that name: the duplicate
    // is reported at the user's entry schemes[1], not at an index of the expanded list.
    std::ofstream(path("allocation.json")) << R"({"format": "kvlens-allocation", "layers": [
        {"layer": 0, "k_bits": 3, "v_bits": 2}, {"layer": 1, "k_bits": 3, "v_bits": 2}]})";
    auto spec = specFromJson(R"({"schemes": [{"name": "K3/V2", "k": {"rotation": "wht", "quantizer": "lloyd_beta"},
                             "v": {"rotation": "wht", "quantizer": "lloyd_beta"}}, {"allocation": "allocation.json"}]})",
                             m_dir.path().toStdString());
    QVERIFY(!spec.ok());
    QVERIFY2(spec.error().field.rfind("schemes[1] ('allocation.json': K3/V2)", 0) == 0, spec.error().text().c_str());
    QVERIFY2(spec.error().message.find("first as schemes[0]") != std::string::npos, spec.error().text().c_str());
}

void TestModelTrust::finding8_aHugeTrialsFileIsRefusedUnread()
{
    // An earlier run's directory whose trials.bin is replaced by a 2 GiB sparse file: refused from
    // its 28-byte header, without reading (or allocating) the 2 GiB.
    const ResultSet r = test::runSpec(test::makeSpec(R"({"d": 16, "tokens": 32, "queries": 4, "schemes": ["KV"],
                                                        "budgets": [2], "seeds": {"count": 1}, "metrics": {"top_k": 2}})"));
    const ShardManifest manifest = manifestFor(r, r.spec, ShardId{0, 1});
    QDir().mkpath(QString::fromStdString(path("run")));
    std::ofstream(path("run/spec.json")) << specToJson(r.spec);
    std::ofstream(path("run/manifest.json")) << manifestToJson(manifest);
    {
        std::ofstream bin(path("run/trials.bin"), std::ios::binary);
        bin << "NOTMAGIC";
    }
    QVERIFY(::truncate(path("run/trials.bin").c_str(), 2LL << 30) == 0);
    const long before = peakRssKb();
    TrialCache cache(16.0);
    auto reused = loadRunIntoCache(path("run"), cache);
    QVERIFY(!reused.ok());
    QVERIFY2(reused.error().message.find("wrong magic") != std::string::npos, reused.error().text().c_str());
    QVERIFY2(peakRssKb() - before < 64 * 1024, qPrintable(QString::number(peakRssKb() - before)));
    // The right magic and count but a size no trial of this spec can reach: refused unread too.
    const std::string real = encodeTrials(manifest.specHash, r.trials, manifest.trials);
    {
        std::ofstream bin(path("run/trials.bin"), std::ios::binary | std::ios::trunc);
        bin.write(real.data(), 28);
    }
    QVERIFY(::truncate(path("run/trials.bin").c_str(), 2LL << 30) == 0);
    auto big = loadRunIntoCache(path("run"), cache);
    QVERIFY(!big.ok());
    QVERIFY2(big.error().message.find("refused unread") != std::string::npos, big.error().text().c_str());
    QVERIFY(peakRssKb() - before < 64 * 1024);
}

void TestModelTrust::finding9_aChangedDumpIsNotReadAsTheRuns()
{
    writeDump(path("two.safetensors"), 2, 16);
    auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + path("two.safetensors")
                             + R"(", "layers": "all", "heads": [0]}, "d": 4, "tokens": 12, "queries": 4,
                             "schemes": ["K-only", "V-only", "HeadQ"], "budgets": [2], "seeds": {"count": 1},
                             "metrics": {"top_k": 2}})");
    QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
    const ResultSet r = test::runSpec(*spec);
    QCOMPARE(r.pointScoredHashes.size(), std::size_t{2});
    // Unchanged: every point verifies (with the run's calibration rows), and the scored hashes are
    // those a rerun with other schemes reads.
    auto same = verifyPointData(r);
    QVERIFY2(same.ok(), same.ok() ? "" : same.error().text().c_str());
    QCOMPARE(*same, r.pointScoredHashes);
    // Replaced (one layer's keys rescaled): refused, naming the point.
    writeDump(path("two.safetensors"), 2, 16, 2.0, 1);
    auto changed = verifyPointData(r);
    QVERIFY(!changed.ok());
    QCOMPARE(changed.error().field, std::string("regime.file"));
    QVERIFY2(changed.error().message.find("grid point 1") != std::string::npos, changed.error().text().c_str());
}

void TestModelTrust::finding10_specHashIsStrict_data()
{
    QTest::addColumn<QString>("hash");
    QTest::newRow("negative") << "-123456789abcdef";
    QTest::newRow("0x") << "0x0123456789abcd";
    QTest::newRow("space") << " 0123456789abcde";
    QTest::newRow("short") << "0123";
}

void TestModelTrust::finding10_specHashIsStrict()
{
    QFETCH(QString, hash);
    auto file = allocationFromJson(R"({"format": "kvlens-allocation", "spec_hash": ")" + hash.toStdString()
                                   + R"(", "layers": [{"layer": 0, "k_bits": 3, "v_bits": 2}]})");
    QVERIFY(!file.ok());
    QCOMPARE(file.error().field, std::string("spec_hash"));
    auto good = allocationFromJson(R"({"format": "kvlens-allocation", "spec_hash": "00000000000000fF",
                                      "layers": [{"layer": 0, "k_bits": 3, "v_bits": 2}]})");
    QVERIFY(good.ok());
    QCOMPARE(good->specHash, std::uint64_t{255});
}

void TestModelTrust::finding10_anotherModelsAllocationIsRefused_data()
{
    QTest::addColumn<QString>("layers");
    QTest::addColumn<QString>("message");
    QTest::newRow("layer 99") << R"({"layer": 0, "k_bits": 3, "v_bits": 2}, {"layer": 1, "k_bits": 3, "v_bits": 2},
                                    {"layer": 99, "k_bits": 2, "v_bits": 2})"
                              << "layers[2].layer is 99 but the dump has layers 0..1";
    QTest::newRow("missing layer") << R"({"layer": 0, "k_bits": 3, "v_bits": 2})"
                                   << "has no entry for layer 1 of the dump's 2";
}

void TestModelTrust::finding10_anotherModelsAllocationIsRefused()
{
    QFETCH(QString, layers);
    QFETCH(QString, message);
    writeDump(path("two.safetensors"), 2, 16);
    std::ofstream(path("allocation.json"), std::ios::trunc)
        << R"({"format": "kvlens-allocation", "layers": [)" << layers.toStdString() << "]}";
    auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" + path("two.safetensors")
                                 + R"(", "layers": "all", "heads": [0]}, "d": 4, "tokens": 16, "queries": 4,
                                 "schemes": ["KV", {"allocation": "allocation.json"}]})",
                             m_dir.path().toStdString());
    QVERIFY(!spec.ok());
    QCOMPARE(spec.error().field, std::string("schemes[1].allocation"));
    QVERIFY2(spec.error().message.find(message.toStdString()) != std::string::npos, spec.error().text().c_str());
}

QTEST_APPLESS_MAIN(TestModelTrust)
#include "tst_model_trust.moc"
