// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face config.json parsing: the fields each architecture yields, defaults, and every
// refusal naming the file and the key.
#include "common/approx.h"
#include "core/lm/hf_config.h"

#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

using namespace kvlens;
using namespace kvlens::lm;
using nlohmann::json;

namespace {

const std::string kLabel = "models/x/config.json";

json llamaConfig()
{
    return json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 64},
                {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                {"intermediate_size", 96}, {"vocab_size", 300}, {"max_position_embeddings", 128},
                {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"hidden_act", "silu"}, {"rope_scaling", nullptr}};
}

json gpt2Config()
{
    return json{{"architectures", {"GPT2LMHeadModel"}}, {"n_embd", 768}, {"n_layer", 12}, {"n_head", 12},
                {"n_inner", nullptr}, {"n_positions", 1024}, {"vocab_size", 50257}, {"layer_norm_epsilon", 1e-5},
                {"activation_function", "gelu_new"}};
}

ModelConfig parseOk(const json& j)
{
    auto c = parseHfConfig(j.dump(), kLabel);
    if (!c)
        qFatal("unexpected refusal: %s", c.error().text().c_str());
    return *c;
}

} // namespace

class TestHfConfig : public QObject {
    Q_OBJECT

private slots:
    void llamaFields()
    {
        const ModelConfig c = parseOk(llamaConfig());
        QCOMPARE(c.architecture, Architecture::Llama);
        QCOMPARE(c.source, kLabel);
        QCOMPARE(c.hidden, 64);
        QCOMPARE(c.layers, 2);
        QCOMPARE(c.heads, 4);
        QCOMPARE(c.kvHeads, 2);
        QCOMPARE(c.headDim, 16); // hidden / heads when head_dim is absent
        QCOMPARE(c.intermediate, 96);
        QCOMPARE(c.vocab, 300);
        QCOMPARE(c.maxPositions, 128);
        QCOMPARE(c.normEps, 1e-5);
        QCOMPARE(c.ropeTheta, 10000.0);
        QVERIFY(!c.tiedEmbeddings);
        QVERIFY(!c.qkvBias && !c.outBias);
        QCOMPARE(c.qkvRows(), (4 + 2 * 2) * 16);
    }

    void llamaDefaults()
    {
        json j = llamaConfig();
        j.erase("rms_norm_eps");
        j.erase("rope_theta");
        j.erase("hidden_act");
        j["num_key_value_heads"] = nullptr; // null: as many KV heads as query heads
        j["head_dim"] = nullptr;
        const ModelConfig c = parseOk(j);
        QCOMPARE(c.kvHeads, 4);
        QCOMPARE(c.headDim, 16);
        QCOMPARE(c.normEps, 1e-6);       // LlamaConfig's default
        QCOMPARE(c.ropeTheta, 10000.0);  // LlamaConfig's default
    }

    void explicitHeadDimAndRopeParameters()
    {
        json j = llamaConfig();
        j["hidden_size"] = 48; // 48 / 4 = 12, but head_dim says 16
        j["head_dim"] = 16;
        j.erase("rope_theta");
        j["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "default"}, {"partial_rotary_factor", 1.0}};
        j["tie_word_embeddings"] = true;
        const ModelConfig c = parseOk(j);
        QCOMPARE(c.headDim, 16);
        QCOMPARE(c.ropeTheta, 500000.0);
        QVERIFY(c.tiedEmbeddings);
    }

    void qwen2AndMistral()
    {
        json j = llamaConfig();
        j["architectures"] = {"Qwen2ForCausalLM"};
        j["use_sliding_window"] = false;
        j["sliding_window"] = 4096; // not in effect without use_sliding_window
        ModelConfig c = parseOk(j);
        QCOMPARE(c.architecture, Architecture::Qwen2);
        QVERIFY(c.qkvBias);
        QVERIFY(!c.outBias);
        QCOMPARE(c.slidingWindow, 0);

        QCOMPARE(c.contextKey, std::string("max_position_embeddings"));
        QCOMPARE(c.maxChunkTokens(), c.maxPositions); // the context, whatever the window

        json m = llamaConfig();
        m["architectures"] = {"MistralForCausalLM"};
        m["sliding_window"] = 4096;
        c = parseOk(m);
        QCOMPARE(c.architecture, Architecture::Mistral);
        QCOMPARE(c.slidingWindow, 4096);
        m["sliding_window"] = nullptr;
        QCOMPARE(parseOk(m).slidingWindow, 0);

        json b = llamaConfig();
        b["attention_bias"] = true; // Llama's attention_bias covers q, k, v and o
        c = parseOk(b);
        QVERIFY(c.qkvBias && c.outBias);
    }

    void modelTypeWithoutArchitectures()
    {
        json j = llamaConfig();
        j.erase("architectures");
        j["model_type"] = "qwen2";
        QCOMPARE(parseOk(j).architecture, Architecture::Qwen2);
    }

    void gpt2Fields()
    {
        const ModelConfig c = parseOk(gpt2Config());
        QCOMPARE(c.architecture, Architecture::Gpt2);
        QCOMPARE(c.intermediate, 4 * 768); // n_inner null -> 4 n_embd
        QCOMPARE(c.headDim, 64);
        QCOMPARE(c.kvHeads, 12);
        QCOMPARE(c.maxPositions, 1024);
        QCOMPARE(c.maxChunkTokens(), 1024); // learned positions: a hard limit
        QVERIFY(c.tiedEmbeddings && c.qkvBias && c.outBias);
        // GPT-2 small has 124,439,808 parameters (sum of numel over the Hugging Face checkpoint);
        // without wte (50257 x 768) and wpe (1024 x 768): 124439808 - 38597376 - 786432.
        QCOMPARE(c.nonEmbeddingParameters(), std::int64_t(85'056'000));
        // FLOPs per token at T = 512: 2 x 85056000 + 2 x 768 x 50257 + 4 x 256 x 12 x 64 x 12.
        QCOMPARE(c.flopsPerToken(512), 2.0 * 85056000 + 2.0 * 768 * 50257 + 4.0 * 256 * 12 * 64 * 12);
    }

    void ropeScaling()
    {
        // Linear (position interpolation): every frequency divided by the factor.
        json j = llamaConfig();
        j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
        ModelConfig c = parseOk(j);
        QCOMPARE(int(c.ropeScaling.kind), int(RopeScaling::Kind::Linear));
        std::vector<double> inv = c.ropeScaling.inverseFrequencies(10000.0, 16);
        QCOMPARE(inv.size(), std::size_t(8));
        QCOMPARE(inv[0], 0.25);                                  // theta^0 / 4
        KVLENS_COMPARE_REL(inv[4], std::pow(10000.0, -0.5) / 4.0, 1e-15); // 0.01 / 4
        // Llama 3.1 (theta 500000, head_dim 128, factor 8, low 1, high 4, original 8192): wavelengths
        // 2 pi / inv_freq below 8192 / 4 = 2048 keep their frequency, those above 8192 / 1 are divided
        // by 8, those between follow the ramp s = (8192 / wavelength - 1) / (4 - 1), f' = (1 - s) f / 8 + s f.
        j["rope_theta"] = 500000.0;
        j["head_dim"] = 128;
        j["hidden_size"] = 512;
        j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}};
        c = parseOk(j);
        QCOMPARE(int(c.ropeScaling.kind), int(RopeScaling::Kind::Llama3));
        inv = c.ropeScaling.inverseFrequencies(500000.0, 128);
        const double twoPi = 2.0 * std::acos(-1.0);
        int kept = 0, divided = 0, ramped = 0;
        for (int i = 0; i < 64; ++i) {
            const double f = std::pow(500000.0, -2.0 * i / 128.0), wavelength = twoPi / f;
            double expected = f;
            if (wavelength > 8192.0) {
                expected = f / 8.0;
                ++divided;
            } else if (wavelength >= 2048.0) {
                const double s = (8192.0 / wavelength - 1.0) / 3.0;
                expected = (1.0 - s) * f / 8.0 + s * f;
                ++ramped;
            } else {
                ++kept;
            }
            KVLENS_COMPARE_REL(inv[static_cast<std::size_t>(i)], expected, 1e-14);
        }
        // The three regimes all occur for these settings (i = 0..28 kept, 29..34 ramped, 35..63 divided).
        QVERIFY(kept > 20 && ramped > 3 && divided > 20);
        QCOMPARE(inv[0], 1.0);
        KVLENS_COMPARE_REL(inv[63], std::pow(500000.0, -126.0 / 128.0) / 8.0, 1e-14);
    }

    void refusals_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<QString>("key");
        const auto row = [](const char* name, const json& j, const char* key) {
            QTest::newRow(name) << QByteArray::fromStdString(j.dump()) << QString(key);
        };
        const auto with = [](const char* key, const json& value) {
            json j = llamaConfig();
            j[key] = value;
            return j;
        };
        const auto without = [](const char* key) {
            json j = llamaConfig();
            j.erase(key);
            return j;
        };
        row("hidden missing", without("hidden_size"), "'hidden_size' is missing");
        row("hidden zero", with("hidden_size", 0), "'hidden_size' = 0");
        row("hidden negative", with("hidden_size", -64), "'hidden_size' = -64");
        row("hidden non-integer", with("hidden_size", 64.5), "'hidden_size' is the number 64.5");
        row("hidden string", with("hidden_size", "64"), "'hidden_size' is the string");
        row("hidden absurd", with("hidden_size", 1 << 20), "'hidden_size' = 1048576: it must be an integer in [1, 65536]");
        row("layers absurd", with("num_hidden_layers", 100000), "'num_hidden_layers' = 100000: it must be an integer in [1, 1024]");
        row("layers huge unsigned", with("num_hidden_layers", 18446744073709551615ull), "'num_hidden_layers'");
        row("vocab absurd", with("vocab_size", 1 << 22), "'vocab_size' = 4194304: it must be an integer in [1, 2097152]");
        row("vocab missing", without("vocab_size"), "'vocab_size' is missing");
        row("intermediate missing", without("intermediate_size"), "'intermediate_size' is missing");
        row("positions missing", without("max_position_embeddings"), "'max_position_embeddings' is missing");
        row("heads do not divide", with("num_attention_heads", 6), "'num_attention_heads' = 6 does not divide 'hidden_size' = 64");
        row("kv do not divide", with("num_key_value_heads", 3), "'num_key_value_heads' = 3 does not divide");
        row("kv above heads", with("num_key_value_heads", 8), "'num_key_value_heads' = 8: it must be an integer in [1, 4]");
        row("head_dim odd", with("head_dim", 15), "head dimension 15 is odd");
        row("head_dim absurd", with("head_dim", 2048), "'head_dim' = 2048");
        row("rope_scaling yarn", with("rope_scaling", json{{"type", "yarn"}, {"factor", 4.0}}), "'rope_scaling' of type 'yarn'");
        row("rope_scaling dynamic", with("rope_scaling", json{{"rope_type", "dynamic"}, {"factor", 2.0}}), "'rope_scaling' of type 'dynamic'");
        row("rope_scaling linear no factor", with("rope_scaling", json{{"type", "linear"}}), "'rope_scaling.factor'");
        row("rope_scaling llama3 missing", with("rope_scaling", json{{"rope_type", "llama3"}, {"factor", 8.0}}),
            "'rope_scaling.low_freq_factor'");
        row("rope_scaling llama3 ramp", with("rope_scaling", json{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
                                                                    {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 8192}}),
            "'rope_scaling.high_freq_factor' must exceed");
        row("rope_scaling not object", with("rope_scaling", 2.0), "'rope_scaling' is the number 2");
        row("rope_parameters yarn", with("rope_parameters", json{{"rope_type", "yarn"}, {"rope_theta", 1e4}}), "'rope_parameters.rope_type' = 'yarn'");
        row("partial rotary", with("partial_rotary_factor", 0.5), "'partial_rotary_factor' is the number 0.5");
        row("partial rotary in params", with("rope_parameters", json{{"rope_theta", 1e4}, {"partial_rotary_factor", 0.25}}),
            "'rope_parameters.partial_rotary_factor'");
        row("two thetas", with("rope_parameters", json{{"rope_theta", 5e5}}), "'rope_theta' and 'rope_parameters.rope_theta' differ");
        row("theta zero", with("rope_theta", 0), "'rope_theta' = 0");
        row("eps negative", with("rms_norm_eps", -1e-6), "'rms_norm_eps' = -1e-06");
        // Positive as a double, 0 as the float32 the norms compute in: an all-zero row would be 0/0.
        row("eps zero in float32", with("rms_norm_eps", 1e-50), "'rms_norm_eps' = 1e-50 is 0 or subnormal in float32");
        row("eps subnormal in float32", with("rms_norm_eps", 1e-40), "'rms_norm_eps' = 1e-40 is 0 or subnormal");
        row("hidden_act gelu", with("hidden_act", "gelu"), "'hidden_act' = 'gelu' is not implemented");
        row("mlp_bias", with("mlp_bias", true), "'mlp_bias' is true");
        row("tie not boolean", with("tie_word_embeddings", 1), "'tie_word_embeddings' is the number 1");
        row("unknown architecture", with("architectures", json{"GemmaForCausalLM"}), "'architectures'[0] = 'GemmaForCausalLM' is not supported");
        row("architectures empty", with("architectures", json::array()), "'architectures' is an array of 0 elements");
        json noArch = llamaConfig();
        noArch.erase("architectures");
        noArch["model_type"] = "phi";
        row("unknown model_type", noArch, "'model_type' = 'phi' is not supported");
        noArch.erase("model_type");
        row("no architecture at all", noArch, "neither 'architectures' nor 'model_type'");
        json qwen = with("architectures", json{"Qwen2ForCausalLM"});
        qwen["use_sliding_window"] = true;
        qwen["sliding_window"] = 4096;
        row("qwen2 per-layer window", qwen, "'use_sliding_window' is true: Qwen2's sliding window on the layers from 'max_window_layers'");
        json mistral = with("architectures", json{"MistralForCausalLM"});
        mistral["sliding_window"] = -5;
        row("mistral window negative", mistral, "'sliding_window' = -5");

        const auto gpt2With = [](const char* key, const json& value) {
            json j = gpt2Config();
            j[key] = value;
            return j;
        };
        row("gpt2 relu", gpt2With("activation_function", "relu"), "'activation_function' = 'relu' is not implemented");
        row("gpt2 heads do not divide", gpt2With("n_head", 7), "'n_head' = 7 does not divide 'n_embd' = 768");
        row("gpt2 positions zero", gpt2With("n_positions", 0), "'n_positions' = 0");
        row("gpt2 unscaled", gpt2With("scale_attn_weights", false), "'scale_attn_weights' is false");
        row("gpt2 layer-scaled", gpt2With("scale_attn_by_inverse_layer_idx", true), "'scale_attn_by_inverse_layer_idx' is true");
        row("gpt2 inner absurd", gpt2With("n_inner", -1), "'n_inner' = -1");
        row("gpt2 eps zero in float32", gpt2With("layer_norm_epsilon", 1e-46), "'layer_norm_epsilon' = 1e-46 is 0 or subnormal");
        row("not an object", json::array({1, 2}), "not a JSON object");
        QTest::newRow("not JSON") << QByteArray("{\"hidden_size\": ") << QString("models/x/config.json");
        QTest::newRow("duplicate key") << QByteArray("{\"hidden_size\": 64, \"hidden_size\": 65}") << QString("hidden_size");
    }

    void refusals()
    {
        QFETCH(QByteArray, text);
        QFETCH(QString, key);
        const auto c = parseHfConfig(std::string_view(text.constData(), static_cast<std::size_t>(text.size())), kLabel);
        QVERIFY(!c);
        const QString message = QString::fromStdString(c.error().text());
        QVERIFY2(message.startsWith(QString::fromStdString(kLabel) + ": "), qPrintable(message)); // names the file
        QVERIFY2(message.contains(key), qPrintable(message));                                     // and the key
        QVERIFY2(!message.contains('\n'), qPrintable(message));
    }

    void loadFromFolder()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string folder = dir.path().toStdString();
        auto missing = loadHfConfig(folder);
        QVERIFY(!missing);
        QVERIFY(QString::fromStdString(missing.error().text()).contains(QString::fromStdString(folder + "/config.json")));
        {
            QFile f(dir.filePath("config.json"));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray::fromStdString(llamaConfig().dump()));
        }
        auto c = loadHfConfig(folder);
        QVERIFY2(c, c ? "" : c.error().text().c_str());
        QCOMPARE(c->source, folder + "/config.json");
        QCOMPARE(c->summary(), std::string("LlamaForCausalLM: 2 layers, hidden 64, 4 heads x 16 (2 KV heads), MLP 96, vocab 300"));
    }
};

QTEST_APPLESS_MAIN(TestHfConfig)
#include "tst_hf_config.moc"
