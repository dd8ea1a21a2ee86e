// SPDX-License-Identifier: GPL-3.0-or-later
// ExperimentSpec validation (every field names itself) and the JSON round trip.
#include "core/spec/spec_json.h"
#include "common/approx.h"

#include <QTest>

using namespace kvlens;

class TestSpec : public QObject {
    Q_OBJECT
private slots:
    void defaultSpecIsTheIssueDefault()
    {
        const auto spec = normalizeSpec(defaultSpec());
        QVERIFY(spec.ok());
        QCOMPARE(spec->regime, std::string("gaussian"));
        QCOMPARE(spec->d, 128);
        QCOMPARE(spec->tokens, 1024);
        QCOMPARE(spec->queries, 64);
        QCOMPARE(spec->seedCount, 8);
        QCOMPARE(spec->budgets, (std::vector<int>{2, 3, 4}));
        QCOMPARE(spec->schemes.size(), std::size_t{3});
        QCOMPARE(spec->trialCount(), 72LL);
        QCOMPARE(spec->calibrationRows(), 0);
    }

    void roundTripIsIdentity()
    {
        ExperimentSpec s = defaultSpec();
        s.name = "round trip, with \"quotes\"";
        s.regime = "heavy_tail";
        s.regimeParams = {{"nu", 1.5}, {"mode", std::string("vector")}};
        s.d = 96;
        s.scoreScale = 2.5;
        SchemeConfig custom;
        custom.name = "mine";
        custom.description = "uniform keys, QJL values";
        custom.key.quantizer = CodecPart("uniform", {{"axis", std::string("per_channel")}, {"group", 64.0}, {"window", 8.0}});
        custom.value.transforms = {CodecPart("wht")};
        custom.value.quantizer = CodecPart("lloyd", {{"norm", std::string("bf16")}});
        custom.value.bits = BitsRule{false, 3};
        custom.value.residuals = {CodecPart("qjl", {{"m", 48.0}, {"norm", std::string("bf16")}})};
        s.schemes.push_back(custom);
        s.schemes.push_back(*findScheme("KIVI"));
        // Every calibrated part: a SpectralQuant key path and an A^2 value path ...
        SchemeConfig spectral;
        spectral.name = "sq-custom";
        spectral.key.transforms = {CodecPart("eigen")};
        spectral.key.quantizer = CodecPart("spectral", {{"allocation", std::string("uniform")},
                                                        {"deff_rule", std::string("participation")},
                                                        {"gap_threshold", 25.0},
                                                        {"tail_bits", 2.0}});
        spectral.key.residuals = {CodecPart("qjl")};
        spectral.value = findScheme("KIVI-A2")->value;
        s.schemes.push_back(spectral);
        // ... a HeadQ key path with a control, and llama.cpp's types on a channel-normalized path.
        SchemeConfig headq = *findScheme("HeadQ-random-basis");
        headq.builtin = false;
        headq.name = "headq-custom";
        headq.key.residuals.front().options["rank"] = 6.0;
        headq.key.residuals.front().options["bits"] = 5.0;
        s.schemes.push_back(headq);
        SchemeConfig ggml = *findScheme("K=q8_0,V=q4_1");
        ggml.builtin = false;
        ggml.name = "ggml-custom";
        ggml.value.transforms = {CodecPart("channel_norm")};
        s.schemes.push_back(ggml);
        s.schemes.push_back(*findScheme("K=q4_0,V=f16"));
        s.budgets = {4, 2};
        s.firstSeed = 12345678901234ULL;
        s.seedCount = 3;
        s.engine = EngineKind::Pcg64;
        s.metrics = MetricOptions{7, 100};
        s.comparisons.pairs = {{"mine", "KIVI"}};
        s.comparisons.bootstrap = 100;
        s.memoryLimitMb = 512.5;
        const auto normalized = normalizeSpec(s);
        QVERIFY2(normalized.ok(), normalized.ok() ? "" : normalized.error().text().c_str());
        const std::string json = specToJson(*normalized);
        const auto back = specFromJson(json);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().text().c_str());
        QVERIFY(*back == *normalized);
        QCOMPARE(specToJson(*back), json);
        QVERIFY(json.find("\"KIVI\"") != std::string::npos); // built-in schemes are written by name
        QVERIFY(json.find("\"K=q4_0,V=f16\"") != std::string::npos);
    }

    void aliasesAndDefaults()
    {
        const auto spec = specFromJson(R"({"regime": "low_rank", "N": 256, "Q": 16, "d": 64})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        QCOMPARE(spec->tokens, 256);
        QCOMPARE(spec->queries, 16);
        QCOMPARE(paramNumber(spec->regimeParams, "rank"), 8.0); // the regime's default
        QCOMPARE(spec->schemes.size(), std::size_t{3});
        QVERIFY(!specFromJson(R"({"N": 256, "tokens": 256})").ok());
    }

    void versionOneFlatPathsReadAsCompositions()
    {
        // Format 1 wrote flat paths; they read as the composition the engine runs, options included.
        const auto old = specFromJson(R"({"kvlens_spec": 1, "schemes": [{"name": "x",
            "k": {"rotation": "wht", "quantizer": "lloyd_gauss", "bits": "n-1", "norm_format": "bf16", "residual": "qjl",
                  "qjl_dim": 32, "qjl_sketch": "orthogonal", "qjl_reconstruction": "mse"},
            "v": {"quantizer": "uniform", "axis": "per_token", "group_size": 16, "window": 4, "token_policy": "a2"}},
            {"name": "y", "k": {"codec": "kvquant_ds"}, "v": {"quantizer": "spectral", "tail_bits": 2}}]})");
        QVERIFY2(old.ok(), old.ok() ? "" : old.error().text().c_str());
        const auto composed = specFromJson(R"({"kvlens_spec": 2, "schemes": [{"name": "x",
            "k": {"transforms": ["wht"], "quantizer": {"kind": "lloyd", "law": "gauss", "norm": "bf16"}, "bits": "n-1",
                  "residuals": [{"kind": "qjl", "m": 32, "sketch": "orthogonal", "reconstruction": "mse", "norm": "bf16"}]},
            "v": {"quantizer": {"kind": "uniform", "axis": "per_token", "group": 16, "window": 4}, "token_policy": "a2"}},
            {"name": "y", "k": {"quantizer": "kvquant"}, "v": {"transforms": ["eigen"],
             "quantizer": {"kind": "spectral", "tail_bits": 2}}}]})");
        QVERIFY2(composed.ok(), composed.ok() ? "" : composed.error().text().c_str());
        QVERIFY(old->schemes == composed->schemes);
        QCOMPARE(old->schemes[0].key.residuals.front().integer("m"), 32);
        QCOMPARE(old->schemes[1].value.quantizer.integer("tail_bits"), 2);
        // A path of keys both forms share ("quantizer": "uniform") means the same in both.
        const auto shared = specFromJson(R"({"schemes": [{"name": "z", "k": {"quantizer": "uniform", "bits": 3}, "v": {}}]})");
        QVERIFY(shared.ok());
        QCOMPARE(shared->schemes[0].key.quantizer.integer("group"), 32);
    }

    void invalidFieldsAreNamed_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("mention");
        QTest::newRow("d too small") << R"({"d": 2})" << "d" << "[4, 16384]";
        QTest::newRow("d not integer") << R"({"d": 64.5})" << "d" << "integer";
        QTest::newRow("d as string") << R"({"d": "128"})" << "d" << "integer";
        QTest::newRow("tokens zero") << R"({"tokens": 0})" << "tokens" << "[1, 4194304]";
        QTest::newRow("queries huge") << R"({"queries": 100000000})" << "queries" << "[1, 65536]";
        QTest::newRow("calibration negative") << R"({"calibration_tokens": -1})" << "calibration_tokens" << "[0,";
        QTest::newRow("score scale zero") << R"({"score_scale": 0})" << "score_scale" << "(0, 1000]";
        QTest::newRow("budget 9") << R"({"budgets": [2, 9]})" << "budgets[1]" << "[2, 8]";
        QTest::newRow("budget twice") << R"({"budgets": [3, 3]})" << "budgets[1]" << "twice";
        QTest::newRow("no budgets") << R"({"budgets": []})" << "budgets" << "at least one";
        QTest::newRow("no schemes") << R"({"schemes": []})" << "schemes" << "at least one";
        QTest::newRow("unknown scheme") << R"({"schemes": ["KV", "KQQV"]})" << "schemes[1]" << "unknown scheme 'KQQV'";
        QTest::newRow("scheme twice") << R"({"schemes": ["KV", "KV"]})" << "schemes[1]" << "twice";
        QTest::newRow("custom bits") << R"({"schemes": [{"name": "x", "k": {"bits": "n+1"}, "v": {}}], "budgets": [8]})"
                                     << "schemes[0].k.bits" << "budget n = 8";
        QTest::newRow("custom rotation") << R"({"schemes": [{"name": "x", "k": {"rotation": "dct"}, "v": {}}]})"
                                         << "schemes[0].k.rotation" << "none, wht, eigen";
        QTest::newRow("custom half path") << R"({"schemes": [{"name": "x", "k": {}}]})" << "schemes[0]" << "both";
        QTest::newRow("custom unknown key") << R"({"schemes": [{"name": "x", "k": {"bitz": 3}, "v": {}}]})"
                                            << "schemes[0].k.bitz" << "unknown key";
        QTest::newRow("seed count") << R"({"seeds": {"first": 1, "count": 0}})" << "seeds.count" << "[1, 100000]";
        QTest::newRow("seed first negative") << R"({"seeds": {"first": -1}})" << "seeds.first" << "non-negative";
        QTest::newRow("top k") << R"({"tokens": 4, "metrics": {"top_k": 5}})" << "metrics.top_k" << "[1, 4]";
        QTest::newRow("sample cap") << R"({"metrics": {"sample_cap": -1}})" << "metrics.sample_cap" << "[0,";
        QTest::newRow("rng") << R"({"rng": "xorshift"})" << "rng" << "mt19937_64, pcg64";
        QTest::newRow("backend") << R"({"backend": "cuda"})" << "backend" << "cpu, opencl, auto";
        QTest::newRow("memory") << R"({"memory_limit_mb": -5})" << "memory_limit_mb" << ">= 0";
        QTest::newRow("regime unknown") << R"({"regime": "cauchy"})" << "regime.name" << "unknown regime 'cauchy'";
        QTest::newRow("regime param") << R"({"regime": {"name": "heavy_tail", "nu": 0.5}})" << "regime.nu" << "[1.05, 100]";
        QTest::newRow("regime param type") << R"({"regime": {"name": "low_rank", "rank": [1]}})" << "regime.rank" << "number";
        QTest::newRow("unknown key") << R"({"tokenz": 5})" << "tokenz" << "unknown key";
        QTest::newRow("version") << R"({"kvlens_spec": 3})" << "kvlens_spec" << "version 3";
        QTest::newRow("not json") << R"({"d": )" << "" << "not valid JSON";
        QTest::newRow("headq on values")
            << R"({"schemes": [{"name": "x", "k": {}, "v": {"quantizer": "uniform", "axis": "per_token", "residual": "headq"}}]})"
            << "schemes[0].v.residuals[0]" << "key path";
        QTest::newRow("headq rank") << R"({"schemes": [{"name": "x", "k": {"quantizer": "uniform", "axis": "per_channel",
            "residual": "headq", "headq_rank": 200}, "v": {}}]})" << "schemes[0].k.residuals[0].rank" << "[1, d] = [1, 128]";
        QTest::newRow("allocation name") << R"({"schemes": [{"name": "x", "k": {"quantizer": "spectral", "allocation": "greedy"},
            "v": {}}]})" << "schemes[0].k.quantizer.allocation" << "water_filling, uniform";
        QTest::newRow("a2 on keys") << R"({"schemes": [{"name": "x", "k": {"quantizer": "uniform", "axis": "per_token",
            "token_policy": "a2"}, "v": {}}]})" << "schemes[0].k.token_policy" << "value paths";
        // Composed paths: kinds, options, ranges and composition rules are named.
        QTest::newRow("part kind") << R"({"schemes": [{"name": "x", "k": {"quantizer": "lloyd_max"}, "v": {}}]})"
                                   << "schemes[0].k.quantizer" << "unknown quantizer 'lloyd_max' (known: ";
        QTest::newRow("composed kind") << R"({"schemes": [{"name": "x", "k": {"quantizer": {"kind": "gptq"}}, "v": {}}]})"
                                       << "schemes[0].k.quantizer" << "unknown quantizer 'gptq' (known: ";
        QTest::newRow("transform kind") << R"({"schemes": [{"name": "x", "k": {"transforms": ["dct"]}, "v": {}}]})"
                                        << "schemes[0].k.transforms[0]" << "unknown transform 'dct'";
        QTest::newRow("option name") << R"({"schemes": [{"name": "x", "k": {"quantizer": {"kind": "uniform", "groups": 8}},
            "v": {}}]})" << "schemes[0].k.quantizer.groups" << "options: group, axis, window, scale";
        QTest::newRow("option range") << R"({"schemes": [{"name": "x", "k": {"quantizer": {"kind": "uniform", "group": 0}},
            "v": {}}]})" << "schemes[0].k.quantizer.group" << "integer in [1, 1048576], got 0";
        QTest::newRow("option choice") << R"({"schemes": [{"name": "x", "k": {"quantizer": {"kind": "ggml", "type": "q3_k"}},
            "v": {}}]})" << "schemes[0].k.quantizer.type" << "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl";
        QTest::newRow("option type") << R"({"schemes": [{"name": "x", "k": {"residuals": [{"kind": "qjl", "m": [4]}]},
            "v": {}}]})" << "schemes[0].k.residuals[0].m" << "number or a string";
        QTest::newRow("option real") << R"({"schemes": [{"name": "x", "k": {"quantizer": {"kind": "kvquant",
            "outlier_fraction": 0.9}}, "v": {}}]})" << "schemes[0].k.quantizer.outlier_fraction" << "[0, 0.5]";
        QTest::newRow("ggml d") << R"({"d": 100, "schemes": ["q8_0"]})" << "schemes[0].k.quantizer" << "multiple of 32";
        QTest::newRow("spectral alone") << R"({"schemes": [{"name": "x", "k": {"quantizer": {"kind": "spectral"}}, "v": {}}]})"
                                        << "schemes[0].k.quantizer" << "[\"eigen\"]";
        QTest::newRow("llama type") << R"({"schemes": ["K=q8_0,V=q3_k"]})" << "schemes[0]" << "K=<type>,V=<type>";
        // A number beyond double range throws out_of_range from the parser (found by fuzz_spec).
        QTest::newRow("number out of range") << R"({"d": 1e400})" << "" << "not valid JSON";
        QTest::newRow("sweep unknown") << R"({"sweep": {"rank": [1, 2]}})" << "sweep.rank" << "cannot be swept";
        QTest::newRow("sweep choice param") << R"({"regime": "heavy_tail", "sweep": {"regime.mode": [1]}})"
                                            << "sweep.regime.mode" << "not a numeric parameter";
        QTest::newRow("sweep bad value") << R"({"regime": "heavy_tail", "sweep": {"regime.nu": [5, 0.5]}})"
                                         << "sweep.regime.nu[1]" << "regime.nu must be in [1.05, 100], got 0.5";
        QTest::newRow("sweep d not integer") << R"({"sweep": {"d": [64, 64.5]}})" << "sweep.d[1]" << "integer";
        QTest::newRow("sweep empty") << R"({"sweep": {"queries": []}})" << "sweep.queries" << "at least one";
        QTest::newRow("sweep budget") << R"({"sweep": {"budget": [2, 9]}})" << "sweep.budget[1]" << "[2, 8]";
        // The advisor (issue 31): targets within [narrowest budget, fp16], each once; known objectives only.
        QTest::newRow("advisor bits high") << R"({"advisor": {"bits": [3, 17]}})" << "advisor.bits[1]"
                                           << "17 is outside [2, 16]";
        QTest::newRow("advisor bits below budgets") << R"({"budgets": [3, 4], "advisor": {"bits": [2.5]}})"
                                                    << "advisor.bits[0]" << "2.5 is outside [3, 16]";
        QTest::newRow("advisor bits twice") << R"({"advisor": {"bits": [3, 2.5, 3]}})" << "advisor.bits[2]"
                                            << "listed twice (first as advisor.bits[0])";
        QTest::newRow("advisor bits empty") << R"({"advisor": {"bits": []}})" << "advisor.bits" << "non-empty array";
        QTest::newRow("advisor bits text") << R"({"advisor": {"bits": ["3"]}})" << "advisor.bits[0]" << "number";
        QTest::newRow("advisor objective") << R"({"advisor": {"objective": "p95"}})" << "advisor.objective"
                                           << "\"mean\", \"median\", \"p99\"";
        QTest::newRow("advisor loss") << R"({"advisor": {"loss": "mse"}})" << "advisor.loss" << "\"rel_mse_t\"";
        QTest::newRow("advisor end to end") << R"({"advisor": {"loss": "kld_end_to_end"}})" << "advisor.loss"
                                            << "kvlens eval";
        QTest::newRow("advisor unknown key") << R"({"advisor": {"bits": [3], "target": 3}})" << "advisor.target"
                                             << "unknown key (allowed: bits, objective, loss)";
        QTest::newRow("advisor not object") << R"({"advisor": [3]})" << "advisor" << "JSON object";
    }
    void invalidFieldsAreNamed()
    {
        QFETCH(QString, json);
        QFETCH(QString, field);
        QFETCH(QString, mention);
        const auto spec = specFromJson(json.toStdString());
        QVERIFY2(!spec.ok(), qPrintable(json));
        QCOMPARE(QString::fromStdString(spec.error().field), field);
        QVERIFY2(QString::fromStdString(spec.error().message).contains(mention), spec.error().message.c_str());
    }

    void advisorRoundTripsAndDefaultsToToday()
    {
        // Not named: the default (one target, 3 bits, the mean output error) and nothing written,
        // so every spec.json (and spec hash) from before the field is unchanged.
        const auto plain = specFromJson(R"({"d": 64})");
        QVERIFY(plain.ok());
        QVERIFY(plain->advisor == AdvisorOptions{});
        QCOMPARE(plain->advisor.targets(), std::vector<double>{3.0});
        QVERIFY(specToJson(*plain).find("advisor") == std::string::npos);
        // Named: read, written, read back the same.
        const auto given = specFromJson(R"({"d": 64, "advisor": {"bits": [2.5, 3, 3.5], "objective": "p99", "loss": "kl"}})");
        QVERIFY2(given.ok(), given.ok() ? "" : given.error().text().c_str());
        QCOMPARE(given->advisor.bits, (std::vector<double>{2.5, 3.0, 3.5}));
        QCOMPARE(given->advisor.objective, AdvisorStatistic::P99);
        QCOMPARE(given->advisor.loss, AdvisorLoss::Kl);
        const std::string json = specToJson(*given);
        const auto back = specFromJson(json);
        QVERIFY(back.ok());
        QVERIFY(*back == *given);
        QCOMPARE(specToJson(*back), json);
        // One number is one target; an objective alone keeps the default target.
        const auto one = specFromJson(R"({"advisor": {"bits": 3.25}})");
        QVERIFY(one.ok());
        QCOMPARE(one->advisor.targets(), std::vector<double>{3.25});
        const auto median = specFromJson(R"({"advisor": {"objective": "median"}})");
        QVERIFY(median.ok());
        QCOMPARE(median->advisor.targets(), std::vector<double>{3.0});
        QCOMPARE(median->advisor.objective, AdvisorStatistic::Median);
        const auto medianBack = specFromJson(specToJson(*median));
        QVERIFY(medianBack.ok() && *medianBack == *median);
        // The target range follows the budgets: 2 is the narrowest width of the default budgets.
        QVERIFY(specFromJson(R"({"advisor": {"bits": [2, 16]}})").ok());
        const auto low = specFromJson(R"({"advisor": {"bits": [1.99]}})");
        QVERIFY(!low.ok());
        QCOMPARE(low.error().text(), std::string("advisor.bits[0]: 1.99 is outside [2, 16] (no allocation of the widths "
                                                 "run, budgets from 2, costs less than 2 bits per coordinate; 16 is fp16)"));
    }

    void sweepGrid()
    {
        const auto spec = specFromJson(R"({"regime": "heavy_tail", "sweep": {"regime.nu": [5, 1.5], "d": [64, 96, 128],
                                          "budget": [3, 4]}, "seeds": {"count": 2}})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        // The budget axis became the budget list; the grid is d x nu (axes sorted by name, last fastest).
        QCOMPARE(spec->budgets, (std::vector<int>{3, 4}));
        QCOMPARE(spec->sweep.size(), std::size_t{2});
        QCOMPARE(spec->pointCount(), 6);
        QCOMPARE(spec->trialCount(), 6LL * 3 * 2 * 2);
        QCOMPARE(spec->pointValues(1), (std::vector<double>{64, 1.5}));
        QCOMPARE(spec->pointValues(4), (std::vector<double>{128, 5}));
        QCOMPARE(spec->pointLabel(5), std::string("d = 128, nu = 1.5"));
        const ExperimentSpec p = spec->pointSpec(3);
        QCOMPARE(p.d, 96);
        QCOMPARE(paramNumber(p.regimeParams, "nu"), 1.5);
        QVERIFY(p.sweep.empty());
        // Round trip keeps the grid.
        QVERIFY(*specFromJson(specToJson(*spec)) == *spec);
    }

    void missingFileIsNamed()
    {
        const auto spec = loadSpecFile("/nonexistent/kvlens-spec.json");
        QVERIFY(!spec.ok());
        QVERIFY(spec.error().text().find("/nonexistent/kvlens-spec.json") != std::string::npos);
    }

    void presetDefaultMatchesTheBuiltInDefault()
    {
        const auto preset = loadSpecFile(KVLENS_PRESETS_DIR "/default.json");
        QVERIFY2(preset.ok(), preset.ok() ? "" : preset.error().text().c_str());
        QVERIFY(*preset == *normalizeSpec(defaultSpec()));
    }
};

QTEST_APPLESS_MAIN(TestSpec)
#include "tst_spec.moc"
