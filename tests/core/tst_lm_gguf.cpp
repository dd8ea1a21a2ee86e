// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF model files in the model runner: the test model folders converted here as llama.cpp's converter
// converts them (names, GGUF's q/k row order, GPT-2's transposed Conv1D) give the folders' logits; every
// ggml block type against a float model of the test's own dequantization of the same bytes; rope_freqs
// against Llama 3.1's scaling in config.json; a sliding window; hostile files; the evaluator end to end.
#include "common/approx.h"
#include "common/gguf_writer.h"
#include "core/eval/evaluator.h"
#include "core/io/ggml_types.h"
#include "core/lm/architecture.h"
#include "core/lm/checkpoint.h"
#include "core/lm/gguf_model.h"
#include "core/lm/gguf_vocab.h"
#include "core/lm/transformer.h"
#include "core/io/tensor_file.h"
#include "core/quant/scheme.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <numbers>
#include <random>

using namespace kvlens;
using namespace kvlens::lm;
using kvlens::test::GgufWriter;
using ggml::GgmlType;

namespace {

const std::string kModels = std::string(KVLENS_TEST_DATA_DIR) + "/models";

/// GGUF metadata value type ids (gguf.h): uint32, float32, string.
constexpr std::uint32_t kU32 = 4;

/// The ids of a 1-D little-endian int64 .npy file (version 1).
std::vector<std::int32_t> readTokens(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot open %s", path.c_str());
    const QByteArray bytes = f.readAll();
    const int headerLength = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    if (!bytes.mid(10, headerLength).contains("'<i8'"))
        qFatal("%s: expected int64 ids", path.c_str());
    std::vector<std::int32_t> ids;
    for (qsizetype i = 10 + headerLength; i + 8 <= bytes.size(); i += 8) {
        std::int64_t v = 0;
        std::memcpy(&v, bytes.constData() + i, 8);
        ids.push_back(static_cast<std::int32_t>(v));
    }
    return ids;
}

RowMatrixXf logitsOf(const std::string& path, const std::vector<std::int32_t>& tokens)
{
    LoadOptions options;
    options.threads = 2;
    auto m = Transformer::load(path, options);
    if (!m)
        qFatal("%s", m.error().text().c_str());
    auto r = m->forward(tokens);
    if (!r)
        qFatal("%s", r.error().text().c_str());
    return std::move(r->logits);
}

/// max |a - b| / max |b|: the relative error of a logit matrix.
double relativeError(const RowMatrixXf& a, const RowMatrixXf& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols())
        return INFINITY;
    return static_cast<double>((a - b).cwiseAbs().maxCoeff()) / std::max(1e-30, static_cast<double>(b.cwiseAbs().maxCoeff()));
}

/// A checkpoint tensor's values as floats (F32, F16, BF16 as stored).
std::vector<float> floatsOf(const CheckpointTensor& t)
{
    std::int64_t n = 1;
    for (const std::int64_t d : t.shape)
        n *= d;
    std::vector<float> out(static_cast<std::size_t>(n));
    ggml::dequantizeRow(*t.type, t.data, out.data(), n);
    return out;
}

/// llama.cpp's converter's q/k row order, written out here: within each head of `d` rows, row
/// 2i + j of the file is row j d/2 + i of Hugging Face's rotate-half layout (convert_hf_to_gguf.py,
/// LlamaModel.permute: reshape(heads, 2, d/2, ...).swapaxes(1, 2)).
std::vector<float> permuteRows(const std::vector<float>& v, int heads, std::size_t cols)
{
    const std::size_t rows = v.size() / cols, d = rows / static_cast<std::size_t>(heads);
    std::vector<float> out(v.size());
    for (std::size_t h = 0; h < static_cast<std::size_t>(heads); ++h)
        for (std::size_t i = 0; i < d / 2; ++i)
            for (std::size_t j = 0; j < 2; ++j)
                std::memcpy(&out[(h * d + 2 * i + j) * cols], &v[(h * d + j * (d / 2) + i) * cols], cols * sizeof(float));
    return out;
}

std::vector<float> transpose(const std::vector<float>& v, std::size_t rows, std::size_t cols)
{
    std::vector<float> out(v.size());
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
            out[c * rows + r] = v[r * cols + c];
    return out;
}

/// The metadata llama.cpp's converter writes for `c` (sizes, epsilon, rope base).
void writeMetadata(GgufWriter& w, const ModelConfig& c)
{
    const std::string a(c.arch().ggufName);
    w.string("general.architecture", a);
    w.u32(a + ".block_count", static_cast<std::uint32_t>(c.layers));
    w.u32(a + ".context_length", static_cast<std::uint32_t>(c.maxPositions));
    w.u32(a + ".embedding_length", static_cast<std::uint32_t>(c.hidden));
    w.u32(a + ".feed_forward_length", static_cast<std::uint32_t>(c.intermediate));
    w.u32(a + ".attention.head_count", static_cast<std::uint32_t>(c.heads));
    w.u32(a + ".attention.head_count_kv", static_cast<std::uint32_t>(c.kvHeads));
    if (c.headDim != c.hidden / c.heads) {
        w.u32(a + ".attention.key_length", static_cast<std::uint32_t>(c.headDim));
        w.u32(a + ".attention.value_length", static_cast<std::uint32_t>(c.headDim));
    }
    if (c.architecture == Architecture::Gpt2) {
        w.f32(a + ".attention.layer_norm_epsilon", static_cast<float>(c.normEps));
        return;
    }
    w.f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.normEps));
    w.f32(a + ".rope.freq_base", static_cast<float>(c.ropeTheta));
    w.u32(a + ".rope.dimension_count", static_cast<std::uint32_t>(c.headDim));
}

/// Which type a converted matrix is written in.
enum class Matrices { F32, F16, AsStored };

/// The folder `dir` as llama.cpp's converter writes it: every tensor the architecture names, under
/// its GGUF name, matrices in `matrices`, vectors F32; q/k rows (and biases) of the llama family
/// permuted; GPT-2's Conv1D matrices transposed to [out x in].
GgufWriter convertFolder(const std::string& dir, Matrices matrices)
{
    auto config = loadHfConfig(dir);
    auto cp = openHfCheckpoint(dir);
    if (!config || !cp)
        qFatal("%s", (config ? cp.error() : config.error()).text().c_str());
    const ModelConfig& c = *config;
    GgufWriter w;
    writeMetadata(w, c);
    for (const TensorName& n : c.arch().tensors) {
        if (n.gguf.empty() || (n.role == TensorRole::Head && c.tiedEmbeddings))
            continue;
        for (int layer = 0; layer < (n.perLayer ? c.layers : 1); ++layer) {
            const std::string hf = expandName(n.hf, layer);
            auto found = cp->tensors.find(hf);
            if (found == cp->tensors.end())
                found = cp->tensors.find("transformer." + hf);
            if (found == cp->tensors.end()) {
                if (!n.optional)
                    qFatal("%s: no %s", dir.c_str(), hf.c_str());
                continue;
            }
            const CheckpointTensor& t = found->second;
            std::vector<float> v = floatsOf(t);
            std::vector<std::int64_t> shape = t.shape;
            const bool conv1d = c.arch().conv1d && shape.size() == 2 && n.role != TensorRole::Embed
                                && n.role != TensorRole::Positions && n.role != TensorRole::Head;
            if (conv1d) {
                v = transpose(v, static_cast<std::size_t>(shape[0]), static_cast<std::size_t>(shape[1]));
                std::swap(shape[0], shape[1]);
            }
            const std::size_t cols = shape.size() == 2 ? static_cast<std::size_t>(shape[1]) : 1;
            if (c.arch().ggufPermutesQK && (n.role == TensorRole::Q || n.role == TensorRole::QBias))
                v = permuteRows(v, c.heads, cols);
            if (c.arch().ggufPermutesQK && (n.role == TensorRole::K || n.role == TensorRole::KBias))
                v = permuteRows(v, c.kvHeads, cols);
            GgmlType type = GgmlType::F32;
            if (shape.size() == 2)
                type = matrices == Matrices::F16 ? GgmlType::F16 : matrices == Matrices::AsStored ? *t.type : GgmlType::F32;
            std::vector<std::uint64_t> dims(shape.rbegin(), shape.rend());
            w.tensor(expandName(n.gguf, layer), dims, type, v);
        }
    }
    return w;
}

// ----------------------------------------------------------------------------- a synthetic model

/// Uniform values in [-a, a) from a fixed mt19937 stream (portable: no distribution object).
std::vector<float> uniform(std::mt19937& rng, std::size_t n, float a, float offset = 0.0f)
{
    std::vector<float> v(n);
    for (float& x : v)
        x = offset + a * static_cast<float>(static_cast<double>(rng()) / 4294967296.0 * 2.0 - 1.0);
    return v;
}

/// A one-layer llama file whose rows fit every block type (256 columns): hidden 256, 4 heads of
/// 64, 2 KV heads, feed-forward 256, vocabulary 64, untied head. `typeOf` picks each matrix's type.
GgufWriter syntheticLlama(const std::function<GgmlType(const std::string&)>& typeOf, std::uint32_t seed = 7)
{
    std::mt19937 rng(seed);
    GgufWriter w;
    w.string("general.architecture", "llama");
    w.u32("llama.block_count", 1).u32("llama.context_length", 64).u32("llama.embedding_length", 256);
    w.u32("llama.feed_forward_length", 256).u32("llama.attention.head_count", 4);
    w.u32("llama.attention.head_count_kv", 2).f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    w.f32("llama.rope.freq_base", 10000.0f).u32("llama.rope.dimension_count", 64);
    auto matrix = [&](const std::string& name, std::uint64_t rows, std::uint64_t cols, float a) {
        w.tensor(name, {cols, rows}, typeOf(name), uniform(rng, rows * cols, a));
    };
    matrix("token_embd.weight", 64, 256, 1.0f);
    w.tensor("output_norm.weight", {256}, GgmlType::F32, uniform(rng, 256, 0.2f, 1.0f));
    matrix("output.weight", 64, 256, 0.1f);
    w.tensor("blk.0.attn_norm.weight", {256}, GgmlType::F32, uniform(rng, 256, 0.2f, 1.0f));
    matrix("blk.0.attn_q.weight", 256, 256, 0.1f);
    matrix("blk.0.attn_k.weight", 128, 256, 0.1f);
    matrix("blk.0.attn_v.weight", 128, 256, 0.1f);
    matrix("blk.0.attn_output.weight", 256, 256, 0.1f);
    w.tensor("blk.0.ffn_norm.weight", {256}, GgmlType::F32, uniform(rng, 256, 0.2f, 1.0f));
    matrix("blk.0.ffn_gate.weight", 256, 256, 0.1f);
    matrix("blk.0.ffn_up.weight", 256, 256, 0.1f);
    matrix("blk.0.ffn_down.weight", 256, 256, 0.1f);
    return w;
}

/// `w` with every tensor replaced by F32 values dequantized from its stored bytes by ggml::dequantizeRow
/// (whose every type tst_gguf checks against an independent per-element formula).
GgufWriter dequantized(const GgufWriter& w)
{
    GgufWriter out = w;
    for (GgufWriter::Tensor& t : out.tensors) {
        const auto type = static_cast<GgmlType>(t.type);
        const std::int64_t cols = static_cast<std::int64_t>(t.dims[0]);
        const std::int64_t rows = t.dims.size() == 2 ? static_cast<std::int64_t>(t.dims[1]) : 1;
        const std::uint64_t rowBytes = *ggml::rowBytes(type, cols);
        std::vector<float> v(static_cast<std::size_t>(rows * cols));
        for (std::int64_t r = 0; r < rows; ++r)
            ggml::dequantizeRow(type, t.data.data() + r * rowBytes, v.data() + r * cols, cols);
        GgufWriter::Bytes bytes(v.size() * sizeof(float));
        std::memcpy(bytes.data(), v.data(), bytes.size());
        t.type = static_cast<std::uint32_t>(GgmlType::F32);
        t.data = std::move(bytes);
    }
    return out;
}

/// Llama 3.1's per-frequency divisor (Hugging Face's _compute_llama3_parameters, llama.cpp's
/// converter's rope_freqs), written out here: wavelength below original/high kept, above
/// original/low divided by `factor`, a linear ramp in original/wavelength between.
std::vector<float> llama3Factors(int headDim, double theta, double factor, double low, double high, double original)
{
    std::vector<float> out;
    for (int i = 0; i < headDim / 2; ++i) {
        const double freq = 1.0 / std::pow(theta, 2.0 * i / headDim);
        const double wavelength = 2.0 * std::numbers::pi / freq;
        double divisor = 1.0;
        if (wavelength > original / low)
            divisor = factor;
        else if (wavelength >= original / high) {
            const double smooth = (original / wavelength - low) / (high - low);
            divisor = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        out.push_back(static_cast<float>(divisor));
    }
    return out;
}

void removeKey(GgufWriter& w, const std::string& key)
{
    std::erase_if(w.kvs, [&](const GgufWriter::Kv& kv) { return kv.key == key; });
}

GgufWriter::Tensor& tensorOf(GgufWriter& w, const std::string& name)
{
    for (GgufWriter::Tensor& t : w.tensors)
        if (t.name == name)
            return t;
    qFatal("no tensor %s", name.c_str());
}

} // namespace

class TestLmGguf : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;

    std::string path(const std::string& name) const { return m_tmp.filePath(QString::fromStdString(name)).toStdString(); }

    /// `folder` copied to `copy` under the temporary directory with config.json edited by `edit`.
    std::string editedFolder(const std::string& folder, const std::string& copy, const std::function<void(QJsonObject&)>& edit)
    {
        const std::string from = kModels + "/" + folder, to = path(copy);
        QDir().mkpath(QString::fromStdString(to));
        QFile::copy(QString::fromStdString(from + "/model.safetensors"), QString::fromStdString(to + "/model.safetensors"));
        QFile in(QString::fromStdString(from + "/config.json"));
        if (!in.open(QIODevice::ReadOnly))
            qFatal("cannot read %s", from.c_str());
        QJsonObject config = QJsonDocument::fromJson(in.readAll()).object();
        edit(config);
        QFile out(QString::fromStdString(to + "/config.json"));
        if (!out.open(QIODevice::WriteOnly) || out.write(QJsonDocument(config).toJson()) < 0)
            qFatal("cannot write %s", to.c_str());
        return to;
    }

    /// The load of `w` written to `name`: the error text, or "" when it loaded.
    std::string loadError(const GgufWriter& w, const std::string& name)
    {
        w.write(path(name));
        auto m = Transformer::load(path(name));
        return m ? std::string() : m.error().text();
    }

private slots:
    void initTestCase() { QVERIFY(m_tmp.isValid()); }

    void folders_data()
    {
        QTest::addColumn<QString>("folder");
        QTest::addColumn<int>("matrices");
        for (const char* f : {"llama_gqa", "llama_tied_ropeparams", "qwen2_bias", "gpt2", "llama_bf16_sharded"}) {
            QTest::newRow((std::string(f) + " f32").c_str()) << QString(f) << int(Matrices::F32);
            QTest::newRow((std::string(f) + " as stored").c_str()) << QString(f) << int(Matrices::AsStored);
        }
        QTest::newRow("qwen2_bias f16") << QString("qwen2_bias") << int(Matrices::F16);
    }

    /// Each test folder as a GGUF holding the same values: its logits equal the folder's to 1e-5
    /// relative, and the folder's reference_logits.npy (scripts/make_test_models.py's double-precision
    /// PyTorch forward) to tst_lm_forward's 1e-4 absolute.
    void folders()
    {
        QFETCH(QString, folder);
        QFETCH(int, matrices);
        const std::string dir = kModels + "/" + folder.toStdString();
        const std::string file = path(folder.toStdString() + std::to_string(matrices) + ".gguf");
        convertFolder(dir, static_cast<Matrices>(matrices)).write(file);
        auto source = openModelSource(file);
        QVERIFY2(source, source ? "" : source.error().text().c_str());
        QVERIFY(source->format == CheckpointFormat::Gguf);
        auto hf = loadHfConfig(dir);
        QVERIFY(hf);
        QCOMPARE(int(source->config.architecture), int(hf->architecture));
        QCOMPARE(source->config.vocab, hf->vocab);
        QCOMPARE(source->config.headDim, hf->headDim);
        QCOMPARE(source->config.tiedEmbeddings, hf->tiedEmbeddings);
        QCOMPARE(source->config.qkvBias, hf->qkvBias);
        const auto tokens = readTokens(dir + "/tokens.npy");
        const RowMatrixXf folderLogits = logitsOf(dir, tokens);
        const RowMatrixXf ggufLogits = logitsOf(file, tokens);
        const double rel = relativeError(ggufLogits, folderLogits);
        auto reference = io::readTensor(dir + "/reference_logits.npy", "");
        QVERIFY(reference);
        const RowMatrixXf expected = Eigen::Map<const RowMatrixXf>(reference->data.data(), ggufLogits.rows(), ggufLogits.cols());
        const double absErr = static_cast<double>((ggufLogits - expected).cwiseAbs().maxCoeff());
        qInfo("%s: GGUF vs folder %.3g relative, vs reference %.3g absolute", qPrintable(folder), rel, absErr);
        KVLENS_VERIFY_IN_RANGE(rel, 0.0, 1e-5);
        KVLENS_VERIFY_IN_RANGE(absErr, 0.0, 1e-4);
    }

    void blockTypes_data()
    {
        QTest::addColumn<QString>("mix");
        for (const char* t : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K", "q4_K_M"})
            QTest::newRow(t) << QString(t);
    }

    /// Every block type (and a Q4_K_M-like mix: Q6_K for attn_v, ffn_down and the head, Q4_K for
    /// the rest) loads as stored: its logits equal those of an F32 file holding the test's
    /// dequantization of the same bytes, to 1e-5 relative.
    void blockTypes()
    {
        QFETCH(QString, mix);
        const std::string name = mix.toStdString();
        auto typeOf = [&](const std::string& tensor) {
            if (name != "q4_K_M") {
                for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                         GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
                    if (ggml::ggmlName(t) == name)
                        return t;
                qFatal("no type %s", name.c_str());
            }
            const bool high = tensor.find("attn_v") != std::string::npos || tensor.find("ffn_down") != std::string::npos
                              || tensor == "output.weight";
            return high ? GgmlType::Q6_K : GgmlType::Q4_K;
        };
        const GgufWriter quantized = syntheticLlama(typeOf);
        quantized.write(path(name + ".gguf"));
        dequantized(quantized).write(path(name + "_f32.gguf"));
        const std::vector<std::int32_t> tokens{1, 5, 9, 63, 0, 17, 17, 42, 8, 30, 2, 61};
        const RowMatrixXf a = logitsOf(path(name + ".gguf"), tokens), b = logitsOf(path(name + "_f32.gguf"), tokens);
        const double rel = relativeError(a, b);
        qInfo("%s: %.3g relative (logits up to %.3g)", qPrintable(mix), rel, double(b.cwiseAbs().maxCoeff()));
        QVERIFY(b.cwiseAbs().maxCoeff() > 0.1f); // not a vanishing model
        KVLENS_VERIFY_IN_RANGE(rel, 0.0, 1e-5);
    }

    /// A rope_freqs tensor (llama.cpp's form of Llama 3.1's scaling) gives the logits of the same
    /// weights with rope_scaling llama3 in config.json, whose factors it holds.
    void ropeFreqs()
    {
        const double factor = 8.0, low = 1.0, high = 4.0, original = 32.0;
        const std::string dir = editedFolder("llama_gqa", "llama3", [&](QJsonObject& c) {
            c["rope_scaling"] = QJsonObject{{"rope_type", "llama3"},
                                            {"factor", factor},
                                            {"low_freq_factor", low},
                                            {"high_freq_factor", high},
                                            {"original_max_position_embeddings", int(original)}};
        });
        GgufWriter w = convertFolder(kModels + "/llama_gqa", Matrices::F32);
        const std::vector<float> factors = llama3Factors(16, 10000.0, factor, low, high, original);
        QVERIFY(factors.front() == 1.0f && factors.back() == 8.0f); // kept, scaled and ramped frequencies
        QVERIFY(std::any_of(factors.begin(), factors.end(), [](float f) { return f > 1.0f && f < 8.0f; }));
        w.tensor("rope_freqs.weight", {8}, GgmlType::F32, factors);
        w.write(path("rope_freqs.gguf"));
        auto source = openModelSource(path("rope_freqs.gguf"));
        QVERIFY2(source, source ? "" : source.error().text().c_str());
        QCOMPARE(int(source->config.ropeScaling.kind), int(RopeScaling::Kind::Factors));
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        const RowMatrixXf scaled = logitsOf(dir, tokens), gguf = logitsOf(path("rope_freqs.gguf"), tokens);
        const double rel = relativeError(gguf, scaled);
        const double unscaled = relativeError(logitsOf(kModels + "/llama_gqa", tokens), scaled);
        qInfo("rope_freqs vs llama3 config: %.3g relative (unscaled vs scaled: %.3g)", rel, unscaled);
        KVLENS_VERIFY_IN_RANGE(rel, 0.0, 1e-5);
        QVERIFY(unscaled > 1e-3); // the scaling matters for these tokens
    }

    /// rope.scaling.type linear with rope.scaling.factor: the logits of rope_scaling linear in config.json.
    void linearRope()
    {
        const std::string dir = editedFolder("llama_gqa", "linear", [](QJsonObject& c) {
            c["rope_scaling"] = QJsonObject{{"type", "linear"}, {"factor", 4.0}};
        });
        GgufWriter w = convertFolder(kModels + "/llama_gqa", Matrices::F32);
        w.string("llama.rope.scaling.type", "linear").f32("llama.rope.scaling.factor", 4.0f);
        w.write(path("linear.gguf"));
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        const RowMatrixXf scaled = logitsOf(dir, tokens);
        KVLENS_VERIFY_IN_RANGE(relativeError(logitsOf(path("linear.gguf"), tokens), scaled), 0.0, 1e-5);
        QVERIFY(relativeError(logitsOf(kModels + "/llama_gqa", tokens), scaled) > 1e-3);
    }

    /// llama.attention.sliding_window makes a Mistral: the logits of MistralForCausalLM with the same
    /// sliding_window in config.json.
    void slidingWindow()
    {
        const std::string dir = editedFolder("llama_gqa", "mistral", [](QJsonObject& c) {
            c["architectures"] = QJsonArray{"MistralForCausalLM"};
            c["model_type"] = "mistral";
            c["sliding_window"] = 3;
        });
        GgufWriter w = convertFolder(kModels + "/llama_gqa", Matrices::F32);
        w.u32("llama.attention.sliding_window", 3);
        w.write(path("mistral.gguf"));
        auto source = openModelSource(path("mistral.gguf"));
        QVERIFY2(source, source ? "" : source.error().text().c_str());
        QCOMPARE(source->config.slidingWindow, 3);
        QCOMPARE(int(source->config.architecture), int(Architecture::Mistral));
        const auto tokens = readTokens(kModels + "/llama_gqa/tokens.npy");
        const RowMatrixXf windowed = logitsOf(dir, tokens);
        const double rel = relativeError(logitsOf(path("mistral.gguf"), tokens), windowed);
        KVLENS_VERIFY_IN_RANGE(rel, 0.0, 1e-5);
        QVERIFY(relativeError(logitsOf(kModels + "/llama_gqa", tokens), windowed) > 1e-3);
    }

    void hostile_data()
    {
        QTest::addColumn<int>("which");
        QTest::addColumn<QString>("named");
        QTest::newRow("missing key") << 0 << QString("llama.block_count");
        QTest::newRow("wrong architecture") << 1 << QString("mamba");
        QTest::newRow("heads do not divide") << 2 << QString("llama.attention.head_count");
        QTest::newRow("tensor of the wrong shape") << 3 << QString("blk.0.attn_q.weight");
        QTest::newRow("extra tensor") << 4 << QString("blk.0.attn_extra.weight");
        QTest::newRow("block type as a norm") << 5 << QString("blk.0.attn_norm.weight");
        QTest::newRow("not GGUF") << 6 << QString("not a GGUF file");
        QTest::newRow("truncated") << 7 << QString("hostile7.gguf");
        QTest::newRow("missing tensor") << 8 << QString("blk.0.ffn_up.weight");
        QTest::newRow("partial rotary") << 9 << QString("llama.rope.dimension_count");
        QTest::newRow("yarn") << 10 << QString("llama.rope.scaling.type");
        QTest::newRow("more tokens than rows") << 11 << QString("tokenizer.ggml.tokens");
    }

    /// Hostile model files are refused in one line naming the key or tensor.
    void hostile()
    {
        QFETCH(int, which);
        QFETCH(QString, named);
        GgufWriter w = syntheticLlama([](const std::string&) { return GgmlType::F32; });
        const std::string name = "hostile" + std::to_string(which) + ".gguf";
        switch (which) {
        case 0: removeKey(w, "llama.block_count"); break;
        case 1:
            removeKey(w, "general.architecture");
            w.string("general.architecture", "mamba");
            break;
        case 2:
            removeKey(w, "llama.attention.head_count");
            w.u32("llama.attention.head_count", 5);
            break;
        case 3: tensorOf(w, "blk.0.attn_q.weight").dims = {256, 128}; break;
        case 4: w.tensor("blk.0.attn_extra.weight", {256}, GgmlType::F32, std::vector<float>(256, 1.0f)); break;
        case 5: {
            GgufWriter::Tensor& t = tensorOf(w, "blk.0.attn_norm.weight");
            std::vector<float> v(256, 1.0f);
            t.type = static_cast<std::uint32_t>(GgmlType::Q8_0);
            t.data.assign(*ggml::rowBytes(GgmlType::Q8_0, 256), 0);
            QVERIFY(ggml::quantizeRow(GgmlType::Q8_0, v, t.data));
            break;
        }
        case 6: {
            std::ofstream(path(name)) << "{\"architectures\": [\"LlamaForCausalLM\"]}";
            auto m = Transformer::load(path(name));
            QVERIFY(!m);
            QVERIFY2(m.error().text().find(named.toStdString()) != std::string::npos, m.error().text().c_str());
            QVERIFY(m.error().text().find("JSON") != std::string::npos);
            return;
        }
        case 7: {
            GgufWriter::Bytes b = w.bytes();
            b.resize(b.size() - 1000);
            std::ofstream(path(name), std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
            auto m = Transformer::load(path(name));
            QVERIFY(!m);
            QVERIFY2(m.error().text().find(named.toStdString()) != std::string::npos, m.error().text().c_str());
            QVERIFY(m.error().text().find('\n') == std::string::npos);
            return;
        }
        case 8: std::erase_if(w.tensors, [](const auto& t) { return t.name == "blk.0.ffn_up.weight"; }); break;
        case 9:
            removeKey(w, "llama.rope.dimension_count");
            w.u32("llama.rope.dimension_count", 32);
            break;
        case 10: w.string("llama.rope.scaling.type", "yarn"); break;
        case 11: w.strings("tokenizer.ggml.tokens", std::vector<std::string>(65, "a")); break;
        }
        const std::string error = loadError(w, name);
        qInfo("%s", error.c_str());
        QVERIFY(!error.empty());
        QVERIFY2(error.find(named.toStdString()) != std::string::npos, error.c_str());
        QVERIFY(error.find('\n') == std::string::npos);
    }

    /// tokenizer.ggml.* into a TokenizerVocab, and refusals naming the key.
    void vocabulary()
    {
        GgufWriter w = syntheticLlama([](const std::string&) { return GgmlType::F32; });
        w.string("tokenizer.ggml.model", "gpt2").string("tokenizer.ggml.pre", "qwen2");
        w.strings("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
        w.array<std::int32_t>("tokenizer.ggml.token_type", 5, {1, 1, 1, 3});
        w.strings("tokenizer.ggml.merges", {"a b"});
        w.u32("tokenizer.ggml.bos_token_id", 3).boolean("tokenizer.ggml.add_bos_token", true);
        w.write(path("vocab.gguf"));
        auto header = io::readGgufHeader(path("vocab.gguf"));
        QVERIFY(header);
        auto v = vocabFromGguf(*header);
        QVERIFY2(v, v ? "" : v.error().text().c_str());
        QVERIFY(v->model == "gpt2" && v->pre == "qwen2" && v->label == path("vocab.gguf"));
        QVERIFY((v->tokens == std::vector<std::string>{"a", "b", "ab", "<s>"}));
        QVERIFY((v->types == std::vector<std::int32_t>{1, 1, 1, 3}));
        QVERIFY(v->merges == std::vector<std::string>{"a b"});
        QVERIFY(v->scores.empty() && !v->eos && !v->addEos);
        QVERIFY(v->bos == 3 && v->addBos == true);
        // an id past the tokens, a scores array of strings, no model
        removeKey(w, "tokenizer.ggml.bos_token_id");
        w.u32("tokenizer.ggml.bos_token_id", 4);
        w.write(path("vocab_bad.gguf"));
        v = vocabFromGguf(*io::readGgufHeader(path("vocab_bad.gguf")));
        QVERIFY(!v && v.error().text().find("tokenizer.ggml.bos_token_id") != std::string::npos);
        removeKey(w, "tokenizer.ggml.bos_token_id");
        w.strings("tokenizer.ggml.scores", {"x"});
        w.write(path("vocab_bad.gguf"));
        v = vocabFromGguf(*io::readGgufHeader(path("vocab_bad.gguf")));
        QVERIFY(!v && v.error().text().find("tokenizer.ggml.scores") != std::string::npos);
        removeKey(w, "tokenizer.ggml.model");
        w.write(path("vocab_bad.gguf"));
        v = vocabFromGguf(*io::readGgufHeader(path("vocab_bad.gguf")));
        QVERIFY(!v && v.error().text().find("tokenizer.ggml.model") != std::string::npos);
    }

    /// The evaluator end to end on the shipped model converted to an F16 GGUF (its stored type): the
    /// same tokens give the same per-token reference NLL and KLD as its folder (1e-5 relative).
    void evaluatorEndToEnd()
    {
        const std::string dir = std::string(KVLENS_MODELS_DIR) + "/tiny-llama";
        convertFolder(dir, Matrices::AsStored).write(path("tiny-llama.gguf"));
        // The held-out text's first 512 bytes as int32 ids (.npy version 1).
        std::ifstream held(dir + "/heldout.txt", std::ios::binary);
        std::vector<std::int32_t> ids;
        for (char ch; ids.size() < 512 && held.get(ch);)
            ids.push_back(static_cast<unsigned char>(ch));
        QCOMPARE(ids.size(), std::size_t(512));
        std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (512,), }";
        header.append(64 - (10 + header.size() + 1) % 64, ' ').push_back('\n');
        std::ofstream npy(path("tokens.npy"), std::ios::binary);
        npy.write("\x93NUMPY\x01\x00", 8);
        const std::uint16_t length = static_cast<std::uint16_t>(header.size());
        npy.write(reinterpret_cast<const char*>(&length), 2).write(header.data(), std::streamsize(header.size()));
        npy.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 4));
        npy.close();
        auto run = [&](const std::string& model) {
            EvalSpec s;
            s.modelDir = model;
            s.tokensFile = path("tokens.npy");
            s.ctx = 64;
            s.budgets = {2};
            s.attribution = Attribution::None;
            s.threads = 2;
            s.schemes.push_back(EvalScheme{*findScheme("KV"), {}, {}});
            auto r = eval::runEval(s);
            if (!r)
                qFatal("%s", r.error().text().c_str());
            return std::move(*r);
        };
        const eval::EvalResult folder = run(dir), gguf = run(path("tiny-llama.gguf"));
        QCOMPARE(gguf.chunksScored, folder.chunksScored);
        QVERIFY(folder.chunksScored >= 2);
        QCOMPARE(gguf.referenceNll.size(), folder.referenceNll.size());
        QCOMPARE(gguf.configurations.size(), folder.configurations.size());
        double worst = 0.0;
        for (std::size_t i = 0; i < folder.referenceNll.size(); ++i)
            worst = std::max(worst, std::abs(gguf.referenceNll[i] - folder.referenceNll[i]) / std::max(1.0, folder.referenceNll[i]));
        for (std::size_t c = 0; c < folder.configurations.size(); ++c)
            for (std::size_t i = 0; i < folder.configurations[c].tokens.size(); ++i)
                worst = std::max(worst, std::abs(gguf.configurations[c].tokens[i].kld - folder.configurations[c].tokens[i].kld)
                                            / std::max(1e-3, folder.configurations[c].tokens[i].kld));
        qInfo("tiny-llama eval: GGUF vs folder, worst relative difference %.3g over %zu tokens", worst,
              folder.referenceNll.size());
        KVLENS_VERIFY_IN_RANGE(worst, 0.0, 1e-5);
        QCOMPARE(gguf.modelSummary, folder.modelSummary);
    }
};

QTEST_GUILESS_MAIN(TestLmGguf)
#include "tst_lm_gguf.moc"
