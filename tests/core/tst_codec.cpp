// SPDX-License-Identifier: GPL-3.0-or-later
// The one codec path: every scheme applied causally to a growing cache never reads a later token;
// llama.cpp's cache types through the engine are ggml's reference quantizers bit for bit; parts
// describe and validate their options; an inline composition runs.
#include "core/experiment/runner.h"
#include "core/spec/allocation.h"
#include "core/spec/spec_json.h"
#include "core/quant/codec_parts.h"
#include "core/io/ggml_types.h"
#include "core/quant/path.h"
#include "core/quant/scheme.h"
#include "core/regimes/regime.h"
#include "common/approx.h"

#include <QTest>

#include <bit>
#include <cstring>
#include <fstream>

using namespace kvlens;

namespace {

RowMatrixXf gaussianRows(int n, int d, std::uint64_t seed)
{
    Rng rng(EngineKind::Pcg64, seed);
    RowMatrixXf x(n, d);
    rng.fillNormal(x.data(), static_cast<std::size_t>(x.size()));
    return x;
}

/// Every scheme the causal test covers: the named ones and a per-path llama.cpp pair.
std::vector<SchemeConfig> allSchemes()
{
    std::vector<SchemeConfig> all = namedSchemes();
    all.push_back(*findScheme("K=q8_0,V=q4_0"));
    return all;
}

std::vector<char> readAll(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        qFatal("cannot open %s", path.c_str());
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

std::uint32_t u32At(const std::vector<char>& data, std::size_t offset)
{
    std::uint32_t v = 0;
    for (int k = 3; k >= 0; --k)
        v = (v << 8) | static_cast<std::uint8_t>(data[offset + static_cast<std::size_t>(k)]);
    return v;
}

/// tests/data/ggml_blocks: the input rows, and what ggml's dequantize_row_<type> gives for the bytes
/// its quantize_row_<type>_ref wrote (format in that folder's README).
std::pair<RowMatrixXf, RowMatrixXf> ggmlVectors(const std::string& type)
{
    const std::string dir = std::string(KVLENS_TEST_DATA_DIR) + "/ggml_blocks/";
    const std::vector<char> in = readAll(dir + "inputs.bin"), t = readAll(dir + type + ".bin");
    if (in.size() < 16 || std::memcmp(in.data(), "KVGBIN01", 8) != 0 || t.size() < 20)
        qFatal("bad ggml vector files");
    const std::uint32_t rows = u32At(in, 8), cols = u32At(in, 12), rowBytes = u32At(t, 16);
    RowMatrixXf x(rows, cols), y(rows, cols);
    for (std::size_t i = 0; i < std::size_t(rows) * cols; ++i) {
        x.data()[i] = std::bit_cast<float>(u32At(in, 16 + 4 * i));
        y.data()[i] = std::bit_cast<float>(u32At(t, 20 + std::size_t(rows) * rowBytes + 4 * i));
    }
    return {x, y};
}

} // namespace

class TestCodec : public QObject {
    Q_OBJECT

private slots:
    void causalApplicationNeverReadsAhead_data()
    {
        QTest::addColumn<QString>("scheme");
        for (const SchemeConfig& s : allSchemes())
            QTest::newRow(s.name.c_str()) << QString::fromStdString(s.name);
    }
    void causalApplicationNeverReadsAhead()
    {
        // A cache written token by token: token t + 1 changed, every token at or before t that is
        // outside the group t + 1 falls in decodes (and scores) exactly as before, on both paths;
        // the trailing incomplete group and the residual window are exact. Calibration data are a
        // separate draw. Unit of replication: the perturbed position (several per scheme).
        QFETCH(QString, scheme);
        const SchemeConfig s = *findScheme(scheme.toStdString());
        const int d = 64, n = 300;
        const RowMatrixXf x = gaussianRows(n, d, 1), q = gaussianRows(8, d, 2), calibration = gaussianRows(256, d, 3);
        const RowMatrixXf calibrationQueries = gaussianRows(32, d, 4) * (1.0f / 8.0f);
        for (const bool keys : {true, false}) {
            PlanInputs inputs;
            inputs.calibration = &calibration;
            inputs.calibrationQueries = &calibrationQueries;
            const PathPlan plan = planPath(keys ? s.key : s.value, 3, d, keys ? PathSite::Keys : PathSite::Values, inputs,
                                           EngineKind::Pcg64, 5);
            const int group = plan.causalGroup();
            for (const int residual : {0, 7}) {
                const CausalOptions options{residual};
                const TokenContext base{x, x, &calibrationQueries, plan.scoreScale};
                const PathResult before = encodePathCausal(plan, x, keys ? &q : nullptr, options, &base);
                for (const int t : {0, 31, 63, 100, 127, 200, n - 2}) {
                    RowMatrixXf changed = x;
                    changed.row(t + 1) = changed.row(t + 1) * 3.0f + RowMatrixXf::Constant(1, d, 0.5f);
                    const TokenContext context{changed, changed, &calibrationQueries, plan.scoreScale};
                    const PathResult after = encodePathCausal(plan, changed, keys ? &q : nullptr, options, &context);
                    const int open = (t + 1) / group * group; // first token of the group t + 1 belongs to
                    for (int r = 0; r < open; ++r)
                        QVERIFY2(before.reconstruction.row(r) == after.reconstruction.row(r),
                                 qPrintable(QStringLiteral("%1 %2: token %3 changed when token %4 did (group %5)")
                                                .arg(scheme, keys ? "K" : "V").arg(r).arg(t + 1).arg(group)));
                    if (keys)
                        QVERIFY(before.scores.leftCols(open) == after.scores.leftCols(open));
                }
                // What no complete group covers, and the residual window, are the exact rows.
                const int quantized = std::max(0, std::min(n / group * group, n - residual));
                QVERIFY(before.reconstruction.bottomRows(n - quantized) == x.bottomRows(n - quantized));
                if (quantized > 0 && !plan.config.has("none"))
                    QVERIFY(before.reconstruction.topRows(quantized) != x.topRows(quantized));
            }
        }
    }

    void tokenwiseCodecsAreTheSameWholeOrCausal()
    {
        // A codec whose group is one token encodes a token from itself alone: applied causally it
        // gives the whole-matrix codes bit for bit (so the attention experiments' default setting
        // and the model runner's agree for it).
        const int d = 64, n = 100;
        const RowMatrixXf x = gaussianRows(n, d, 7), q = gaussianRows(4, d, 8);
        for (const char* name : {"KV", "KQV", "QKQV", "TQ-QKV", "q4_0", "FP16"}) {
            const SchemeConfig s = *findScheme(name);
            for (const bool keys : {true, false}) {
                const PathPlan plan = planPath(keys ? s.key : s.value, 3, d, keys ? PathSite::Keys : PathSite::Values,
                                               nullptr, EngineKind::Pcg64, 9);
                QCOMPARE(plan.causalGroup(), 1);
                const PathResult whole = encodePathCpu(plan, x, keys ? &q : nullptr);
                const PathResult causal = encodePathCausal(plan, x, keys ? &q : nullptr, CausalOptions{});
                QVERIFY2(whole.reconstruction == causal.reconstruction, name);
                if (keys)
                    QVERIFY2(whole.scores == causal.scores, name);
            }
        }
        // KIVI's keys are grouped per channel over 32 tokens: a group of 32.
        const SchemeConfig kivi = *findScheme("KIVI");
        QCOMPARE(planPath(kivi.key, 3, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 9).causalGroup(), 32);
        QCOMPARE(planPath(kivi.value, 3, d, PathSite::Values, nullptr, EngineKind::Pcg64, 9).causalGroup(), 1);
    }

    void ggmlTypesThroughTheEngineAreGgmlsReference_data()
    {
        QTest::addColumn<QString>("type");
        for (const auto& t : ggml::kTypes)
            QTest::newRow(std::string(t.name).c_str()) << QString::fromUtf8(t.name.data(), static_cast<int>(t.name.size()));
    }
    void ggmlTypesThroughTheEngineAreGgmlsReference()
    {
        // The scheme named after the type, K and V paths, on ggml's own test rows: the decoded rows
        // are ggml's dequantize_row(quantize_row_ref(x)) bit for bit (ties at .5, an all-zero block,
        // -0 and subnormal blocks included: tests/data/ggml_blocks/README.md), and the bits are the
        // type's (8.5, 4.5, 5.0, 5.5, 6.0, 4.5).
        QFETCH(QString, type);
        const auto [x, expected] = ggmlVectors(type.toStdString());
        const SchemeConfig s = *findScheme(type.toStdString());
        const int d = static_cast<int>(x.cols());
        for (const bool keys : {true, false}) {
            const PathPlan plan = planPath(keys ? s.key : s.value, 2, d, keys ? PathSite::Keys : PathSite::Values,
                                           nullptr, EngineKind::Pcg64, 1);
            const PathResult r = encodePathCpu(plan, x, nullptr);
            for (Eigen::Index i = 0; i < x.size(); ++i)
                QVERIFY2(std::bit_cast<std::uint32_t>(r.reconstruction.data()[i]) == std::bit_cast<std::uint32_t>(expected.data()[i]),
                         qPrintable(QStringLiteral("%1: value %2 is %3, ggml gives %4")
                                        .arg(type).arg(i).arg(r.reconstruction.data()[i]).arg(expected.data()[i])));
            const double bits = ggml::traits(*ggml::parseGgmlType(type.toStdString())).bitsPerCoordinate;
            QCOMPARE(pathBitsPerCoordinate(plan, 100), bits);
            // The budget does not change a fixed-width type.
            QCOMPARE(pathBitsPerCoordinate(planPath(s.key, 8, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 1), 100), bits);
        }
    }

    void ggmlTypesOnImportedTensors()
    {
        // Keys and values of the shipped example tensor file (imported regime, head 1, d = 64):
        // the engine's q8_0 / q4_0 / q4_1 rows are the ggml block quantizers' rows (verified against
        // ggml's reference in tst_ggml_blocks), 32 values a block along head_dim.
        const Regime* regime = findRegime("imported");
        const DataShape shape{64, 128, 16, 0};
        RegimeParams params{{"file", std::string(KVLENS_EXAMPLES_DIR) + "/kv_example.safetensors"}, {"head", 1.0}};
        auto normalized = regime->normalize(params, shape, true);
        QVERIFY2(normalized.ok(), normalized.ok() ? "" : normalized.error().text().c_str());
        auto data = regime->generate(*normalized, shape, EngineKind::Pcg64, 1);
        QVERIFY2(data.ok(), data.ok() ? "" : data.error().text().c_str());
        for (const char* type : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}) {
            const auto t = *ggml::parseGgmlType(type);
            const SchemeConfig s = *findScheme(std::string("K=") + type + ",V=" + type);
            for (const bool keys : {true, false}) {
                const RowMatrixXf& x = keys ? data->keys : data->values;
                const PathPlan plan = planPath(keys ? s.key : s.value, 3, 64, keys ? PathSite::Keys : PathSite::Values,
                                               nullptr, EngineKind::Pcg64, 1);
                const PathResult r = encodePathCpu(plan, x, keys ? &data->queries : nullptr);
                std::vector<std::uint8_t> bytes(*ggml::rowBytes(t, 64));
                std::vector<float> row(64), back(64);
                for (Eigen::Index i = 0; i < x.rows(); ++i) {
                    for (int c = 0; c < 64; ++c)
                        row[static_cast<std::size_t>(c)] = x(i, c);
                    QVERIFY(ggml::quantizeRow(t, row, bytes));
                    QVERIFY(ggml::dequantizeRow(t, bytes, back));
                    for (int c = 0; c < 64; ++c)
                        QCOMPARE(r.reconstruction(i, c), back[static_cast<std::size_t>(c)]);
                }
            }
        }
    }

    void llamaCacheTypesPerPath()
    {
        // -ctk q8_0 -ctv q4_0: separate types on the two paths, in a spec, by name and in an allocation file.
        const auto s = findScheme("K=q8_0,V=q4_0");
        QVERIFY(s.has_value());
        QCOMPARE(s->key.quantizer.text("type"), std::string("q8_0"));
        QCOMPARE(s->value.quantizer.text("type"), std::string("q4_0"));
        QCOMPARE(findScheme("k=q8_0,v=q4_0")->name, std::string("K=q8_0,V=q4_0"));
        QCOMPARE(findScheme("K=f16,V=q4_1")->key.quantizer.kind, std::string("fp16"));
        QCOMPARE(findScheme("K=f32,V=q4_1")->key.quantizer.kind, std::string("none"));
        QVERIFY(!findScheme("K=q3_k,V=q4_0").has_value());
        QVERIFY(!findScheme("K=q8_0").has_value());
        auto spec = specFromJson(R"({"d": 64, "tokens": 64, "queries": 8, "budgets": [3], "seeds": {"count": 2},
                                    "schemes": ["K=q8_0,V=q4_0", "q8_0", "q4_0"]})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        CpuBackend cpu(2);
        auto run = runExperiment(*spec, cpu);
        QVERIFY2(run.ok(), run.ok() ? "" : run.error().text().c_str());
        double relK[3] = {0, 0, 0}, relV[3] = {0, 0, 0};
        for (const TrialResult& t : run->trials) {
            if (t.key.scheme == 0) {
                QCOMPARE(t.bits.key, 8.5);
                QCOMPARE(t.bits.value, 4.5);
            }
            relK[t.key.scheme] += t.relMseK;
            relV[t.key.scheme] += t.relMseV;
        }
        // K as q8_0's, V as q4_0's: the same draws, the same codes.
        QCOMPARE(relK[0], relK[1]);
        QCOMPARE(relV[0], relV[2]);
        QVERIFY(relV[0] > 10 * relK[0]);
        // An allocation file's k_type / v_type.
        auto file = allocationFromJson(R"({"format": "kvlens-allocation", "layers": [
            {"layer": 0, "k_type": "q8_0", "v_type": "q4_0"}, {"layer": 1, "k_bits": 3, "v_type": "q4_1"}]})");
        QVERIFY2(file.ok(), file.ok() ? "" : file.error().text().c_str());
        const auto schemes = allocationSchemes(*file);
        QCOMPARE(schemes.size(), std::size_t{2});
        QCOMPARE(schemes[0].key, s->key);
        QCOMPARE(schemes[0].value, s->value);
        QCOMPARE(schemes[1].name, std::string("K3/V=q4_1"));
        auto bad = allocationFromJson(R"({"format": "kvlens-allocation", "layers": [{"layer": 0, "k_type": "q3_k",
            "v_bits": 2}]})");
        QVERIFY(!bad.ok());
        QCOMPARE(bad.error().field, std::string("layers[0].k_type"));
        bad = allocationFromJson(R"({"format": "kvlens-allocation", "layers": [{"layer": 0, "k_type": "q8_0", "k_bits": 3,
            "v_bits": 2}]})");
        QVERIFY(!bad.ok());
        QCOMPARE(bad.error().field, std::string("layers[0].k_bits"));
    }

    void everyPartDescribesItsOptions()
    {
        // The window and the spec reference are built from these descriptions: each part and each
        // option has a sentence, defaults are in range, and a part's defaults normalize cleanly.
        for (const PartKind& kind : partKinds()) {
            QVERIFY2(!kind.description.empty(), kind.name.c_str());
            QVERIFY2(bool(kind.planTransform) + bool(kind.planQuantizer) + bool(kind.planResidual)
                             + bool(kind.planTokenPolicy) == 1,
                     kind.name.c_str());
            for (const OptionDesc& o : kind.options)
                QVERIFY2(!o.description.empty(), (kind.name + "." + o.name).c_str());
            CodecPart part(kind.name);
            QVERIFY2(normalizePart(part, kind.role, "p").ok(), kind.name.c_str());
            QCOMPARE(part.options.size(), kind.options.size());
        }
        QVERIFY(findPart("uniform", PartRole::Quantizer) != findPart("uniform", PartRole::TokenPolicy));
    }

    void anInlineCompositionRuns()
    {
        // A scheme composed in the spec: channel-normalized keys on a 4-bit Gaussian codebook with a
        // 32-row orthogonal QJL sketch, values as llama.cpp's q5_1 after a Hadamard rotation.
        auto spec = specFromJson(R"({"d": 64, "tokens": 128, "queries": 8, "budgets": [3], "seeds": {"count": 2},
            "schemes": [{"name": "mine",
                         "k": {"transforms": ["channel_norm"], "quantizer": {"kind": "lloyd", "law": "gauss"}, "bits": "n+1",
                               "residuals": [{"kind": "qjl", "m": 32, "sketch": "orthogonal"}]},
                         "v": {"transforms": ["wht"], "quantizer": {"kind": "ggml", "type": "q5_1"}}}]})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        QVERIFY(needsCalibration(spec->schemes[0])); // channel_norm calibrates
        CpuBackend cpu(2);
        auto run = runExperiment(*spec, cpu);
        QVERIFY2(run.ok(), run.ok() ? "" : run.error().text().c_str());
        for (const TrialResult& t : run->trials) {
            // 4 bits x 64 + 16 norm + 32 sketch + 16 residual norm per token, + 2 x 16 x 64 statistics.
            KVLENS_COMPARE_ABS(t.bits.key, (4.0 * 64 + 16 + 32 + 16) / 64 + 32.0 * 64 / (128.0 * 64), 1e-12);
            QCOMPARE(t.bits.value, 6.0);
            QVERIFY(t.relMseK > 0.0 && t.relMseK < 0.05);
        }
    }
};

QTEST_GUILESS_MAIN(TestCodec)
#include "tst_codec.moc"
