// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF model files: llama.cpp's metadata keys read into a ModelConfig, the tensors into a Checkpoint,
// and the front door that tells a model folder from a GGUF file.
#include "core/lm/gguf_model.h"

#include "core/io/file_read.h"
#include "core/io/mapped_file.h"
#include "core/io/tensor_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace kvlens::lm {

namespace fs = std::filesystem;

namespace {

/// Thrown inside configFromGguf only, caught there and returned as an Error.
struct GgufRefusal {
    std::string message;
};

std::string ggufKeyText(std::string_view key)
{
    return "key " + io::quoteName(key);
}

std::string tensorText(std::string_view name)
{
    return "tensor " + io::quoteName(name);
}

/// `value`, or the refusal its Error carries (the GGUF accessors name the key).
template <class T>
T take(Result<T> value)
{
    if (!value)
        throw GgufRefusal{value.error().message};
    return std::move(*value);
}

/// Reads the metadata of one architecture: "{arch}." keys, integers that fit an int, per-layer arrays.
class Metadata {
public:
    Metadata(const io::GgufFile& gguf, std::string_view arch) : m_gguf(gguf), m_prefix(std::string(arch) + ".") {}

    const io::GgufFile& file() const { return m_gguf; }
    std::string key(std::string_view suffix) const { return m_prefix + std::string(suffix); }
    bool has(std::string_view suffix) const { return m_gguf.find(key(suffix)) != nullptr; }

    /// An integer of 32 bits; absent gives `fallback`, or is refused when there is none.
    int integer(std::string_view suffix, std::optional<int> fallback = std::nullopt) const
    {
        const std::string k = key(suffix);
        const io::GgufValue* v = m_gguf.find(k);
        if (!v) {
            if (fallback)
                return *fallback;
            throw GgufRefusal{ggufKeyText(k) + " is missing"};
        }
        if (v->isArray())
            throw GgufRefusal{ggufKeyText(k) + " is " + v->typeText() + ": it must be an integer"};
        return fit(k, scalar(k));
    }

    /// An integer given once or per layer (llama.cpp's get_key_or_arr): an array must hold `layers`
    /// values that agree (a model whose layers differ is not implemented).
    int perLayer(std::string_view suffix, int layers, std::optional<int> fallback = std::nullopt) const
    {
        const std::string k = key(suffix);
        const io::GgufValue* v = m_gguf.find(k);
        if (!v || !v->isArray())
            return integer(suffix, fallback);
        if (v->count != static_cast<std::uint64_t>(layers))
            throw GgufRefusal{ggufKeyText(k) + " is " + v->typeText() + ": a per-layer array needs one value per block ("
                          + std::to_string(layers) + ")"};
        const std::vector<std::int32_t> values = take(m_gguf.getArray<std::int32_t>(k));
        for (std::size_t i = 1; i < values.size(); ++i)
            if (values[i] != values[0])
                throw GgufRefusal{ggufKeyText(k) + " differs between layers (" + std::to_string(values[0]) + " in layer 0, "
                              + std::to_string(values[i]) + " in layer " + std::to_string(i)
                              + "): layers of different shapes are not implemented"};
        return values.empty() ? 0 : values[0];
    }

    std::optional<float> number(std::string_view suffix) const { return take(m_gguf.getOptional<float>(key(suffix))); }
    float number(std::string_view suffix, float fallback) const { return number(suffix).value_or(fallback); }
    std::optional<std::string> text(std::string_view suffix) const
    {
        return take(m_gguf.getOptional<std::string>(key(suffix)));
    }

private:
    /// Any non-negative integer as u64; a negative one as i32.
    std::int64_t scalar(const std::string& k) const
    {
        if (auto u = m_gguf.get<std::uint64_t>(k))
            return *u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                       ? std::numeric_limits<std::int64_t>::max()
                       : static_cast<std::int64_t>(*u);
        return take(m_gguf.get<std::int32_t>(k));
    }

    static int fit(const std::string& k, std::int64_t v)
    {
        if (!std::in_range<int>(v))
            throw GgufRefusal{ggufKeyText(k) + " = " + std::to_string(v) + " is out of range: it must be an integer of 32 bits"};
        return static_cast<int>(v);
    }

    const io::GgufFile& m_gguf;
    std::string m_prefix;
};

/// The architecture's row for general.architecture.
const ArchitectureInfo& architectureOf(const io::GgufFile& gguf)
{
    const std::string name = take(gguf.getString("general.architecture"));
    for (const ArchitectureInfo& a : architectures())
        if (a.ggufName == name)
            return a; // the first row: Llama for "llama" (Mistral files say "llama" too)
    throw GgufRefusal{ggufKeyText("general.architecture") + " = " + io::quoteName(name)
                  + " is not supported (llama: Llama 1-3, Mistral, TinyLlama, SmolLM; qwen2; gpt2)"};
}

ConfigKeys ggufKeys(const Metadata& m)
{
    ConfigKeys k;
    k.layers = ggufKeyText(m.key("block_count"));
    k.hidden = ggufKeyText(m.key("embedding_length"));
    k.heads = ggufKeyText(m.key("attention.head_count"));
    k.kvHeads = ggufKeyText(m.key("attention.head_count_kv"));
    k.intermediate = ggufKeyText(m.key("feed_forward_length"));
    k.vocab = "the rows of " + tensorText("token_embd.weight");
    k.maxPositions = ggufKeyText(m.key("context_length"));
    k.ropeTheta = ggufKeyText(m.key("rope.freq_base"));
    k.slidingWindow = ggufKeyText(m.key("attention.sliding_window"));
    k.headDim = ggufKeyText(m.key("attention.key_length"));
    k.ropeFactor = ggufKeyText(m.key("rope.scaling.factor"));
    k.ropeFactors = tensorText("rope_freqs.weight");
    return k;
}

/// The sizes every architecture has; the head dimension is left 0 (derived) without key_length.
void readSizes(const Metadata& m, ModelConfig& c, ConfigKeys& names)
{
    c.layers = m.integer("block_count");
    c.hidden = m.integer("embedding_length");
    const int layers = std::clamp(c.layers, 0, kMaxLayers); // validateModelConfig refuses a count beyond it
    c.intermediate = m.perLayer("feed_forward_length", layers);
    c.heads = m.perLayer("attention.head_count", layers);
    c.kvHeads = m.perLayer("attention.head_count_kv", layers, c.heads);
    c.headDim = m.integer("attention.key_length", 0);
    if (m.has("attention.key_length") && c.headDim == 0)
        throw GgufRefusal{names.headDim + " = 0: it must be a positive integer"};
    c.maxPositions = m.integer("context_length");
    c.contextKey = m.key("context_length");
    if (m.integer("expert_count", 0) > 0)
        throw GgufRefusal{ggufKeyText(m.key("expert_count")) + " = " + std::to_string(m.integer("expert_count"))
                      + ": mixture-of-experts models are not implemented"};
    const bool layerNorm = c.arch().norm == NormKind::Layer;
    const char* eps = layerNorm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
    names.normEps = ggufKeyText(m.key(eps));
    const std::optional<float> e = m.number(eps);
    if (!e)
        throw GgufRefusal{names.normEps + " is missing"};
    c.normEps = static_cast<double>(*e);
    if (c.architecture == Architecture::Gpt2 && c.kvHeads != c.heads)
        throw GgufRefusal{names.kvHeads + " = " + std::to_string(c.kvHeads) + ": GPT-2 has as many KV heads as heads ("
                      + std::to_string(c.heads) + ")"};
}

/// Vocabulary, tied head and biases, from the tensors and the tokenizer's list.
void readTensorFacts(const Metadata& m, ModelConfig& c)
{
    const io::GgufFile& g = m.file();
    const io::GgufTensor* embed = g.findTensor("token_embd.weight");
    if (!embed)
        throw GgufRefusal{tensorText("token_embd.weight") + " is missing: the vocabulary is its rows"};
    if (embed->dims.size() != 2)
        throw GgufRefusal{tensorText("token_embd.weight") + " has " + std::to_string(embed->dims.size())
                      + " dimensions: the embedding is a [vocab x hidden] matrix"};
    const std::uint64_t rows = embed->dims[1];
    if (rows > static_cast<std::uint64_t>(kMaxVocab))
        throw GgufRefusal{tensorText("token_embd.weight") + " has " + std::to_string(rows)
                      + " rows: the vocabulary must be an integer in [1, " + std::to_string(kMaxVocab) + "]"};
    c.vocab = static_cast<int>(rows);
    if (const io::GgufValue* tokens = g.find("tokenizer.ggml.tokens"); tokens && tokens->isArray() && tokens->count > rows)
        throw GgufRefusal{ggufKeyText("tokenizer.ggml.tokens") + " lists " + std::to_string(tokens->count) + " tokens, more than the "
                      + std::to_string(rows) + " rows of " + tensorText("token_embd.weight")
                      + " (an embedding may be larger than the vocabulary, not smaller)"};
    if (m.has("vocab_size") && static_cast<std::uint64_t>(m.integer("vocab_size")) != rows)
        throw GgufRefusal{ggufKeyText(m.key("vocab_size")) + " = " + std::to_string(m.integer("vocab_size")) + ", but "
                      + tensorText("token_embd.weight") + " has " + std::to_string(rows) + " rows"};
    c.tiedEmbeddings = g.findTensor("output.weight") == nullptr;
    switch (c.architecture) {
    case Architecture::Gpt2: c.qkvBias = c.outBias = true; break;
    case Architecture::Qwen2: c.qkvBias = true, c.outBias = false; break;
    default:
        c.qkvBias = g.findTensor("blk.0.attn_q.bias") != nullptr;
        c.outBias = g.findTensor("blk.0.attn_output.bias") != nullptr;
    }
}

/// The values of the rope_freqs tensor, read from the file's bytes.
std::vector<float> ropeFactors(const io::GgufTensor& t, std::span<const std::uint8_t> fileBytes)
{
    const std::string name = tensorText(t.name);
    if (t.dims.size() != 1)
        throw GgufRefusal{name + " has " + std::to_string(t.dims.size()) + " dimensions: it holds one factor per frequency"};
    if (t.type != ggml::GgmlType::F32 && t.type != ggml::GgmlType::F16 && t.type != ggml::GgmlType::BF16)
        throw GgufRefusal{name + " has type " + std::string(ggml::ggmlName(t.type)) + ": rope factors must be F32, F16 or BF16"};
    if (t.dims[0] > static_cast<std::uint64_t>(kMaxHeadDim / 2))
        throw GgufRefusal{name + " holds " + std::to_string(t.dims[0]) + " factors: at most "
                      + std::to_string(kMaxHeadDim / 2) + " (one per frequency of a head of at most "
                      + std::to_string(kMaxHeadDim) + ")"};
    if (t.offset > fileBytes.size() || t.bytes > fileBytes.size() - t.offset)
        throw GgufRefusal{name + " lies past the end of the file (" + std::to_string(fileBytes.size()) + " bytes)"};
    std::vector<float> factors(static_cast<std::size_t>(t.dims[0]));
    ggml::dequantizeRow(t.type, fileBytes.data() + t.offset, factors.data(), static_cast<std::int64_t>(factors.size()));
    return factors;
}

void readRope(const Metadata& m, ModelConfig& c, std::span<const std::uint8_t> fileBytes)
{
    c.ropeTheta = static_cast<double>(m.number("rope.freq_base", 10000.0f));
    // llama.cpp reads a missing type as "linear" and a missing or zero factor as 1 (no scaling).
    const std::string type = m.text("rope.scaling.type").value_or("linear");
    if (type != "none" && type != "linear")
        throw GgufRefusal{ggufKeyText(m.key("rope.scaling.type")) + " = " + io::quoteName(type)
                      + " is not implemented (none, linear, or a rope_freqs tensor)"};
    std::optional<float> factor = m.number("rope.scaling.factor");
    if (!factor)
        factor = m.number("rope.scale_linear");
    if (type == "linear" && factor && *factor != 0.0f) {
        c.ropeScaling.kind = RopeScaling::Kind::Linear;
        c.ropeScaling.factor = static_cast<double>(*factor);
    }
    if (const std::optional<float> attn = m.number("rope.scaling.attn_factor"); attn && *attn != 1.0f)
        throw GgufRefusal{ggufKeyText(m.key("rope.scaling.attn_factor")) + " = " + std::to_string(*attn)
                      + ": scaled rotary magnitudes are not implemented (only 1)"};
    if (const io::GgufTensor* freqs = m.file().findTensor("rope_freqs.weight")) {
        if (c.ropeScaling.kind != RopeScaling::Kind::None)
            throw GgufRefusal{tensorText("rope_freqs.weight") + " and linear scaling (" + ggufKeyText(m.key("rope.scaling.factor"))
                          + ") together are not implemented"};
        c.ropeScaling.kind = RopeScaling::Kind::Factors;
        c.ropeScaling.factors = ropeFactors(*freqs, fileBytes);
    }
}

void readSlidingWindow(const Metadata& m, ModelConfig& c)
{
    if (!m.has("attention.sliding_window"))
        return;
    if (c.architecture != Architecture::Llama)
        throw GgufRefusal{ggufKeyText(m.key("attention.sliding_window")) + " is given: a sliding window is implemented for "
                      "llama (Mistral) files only"};
    c.slidingWindow = m.integer("attention.sliding_window");
    if (c.slidingWindow > 0)
        c.architecture = Architecture::Mistral;
}

/// After validation: one head dimension for keys, values and the rotation.
void checkHeadDimensions(const Metadata& m, const ModelConfig& c)
{
    const int derived = c.hidden / c.heads; // llama.cpp's default for both key and value lengths
    const int value = m.integer("attention.value_length", derived);
    if (value != c.headDim)
        throw GgufRefusal{ggufKeyText(m.key("attention.value_length")) + (m.has("attention.value_length") ? " = " : " (absent: ")
                      + std::to_string(value) + (m.has("attention.value_length") ? "" : ")") + " differs from the key length "
                      + std::to_string(c.headDim) + ": values and keys of different widths are not implemented"};
    if (c.arch().positions != PositionKind::Rope)
        return;
    const int rotated = m.integer("rope.dimension_count", c.headDim);
    if (rotated != c.headDim)
        throw GgufRefusal{ggufKeyText(m.key("rope.dimension_count")) + " = " + std::to_string(rotated) + ", but the head dimension is "
                      + std::to_string(c.headDim) + ": partial rotary embeddings are not implemented"};
}

/// "it is empty", "it is a safetensors file ...": what a file that is not GGUF looks like.
std::string describeNotGguf(const std::string& bytes)
{
    if (bytes.empty())
        return "it is empty";
    if (bytes.starts_with("\x93NUMPY"))
        return "it is a .npy array";
    if (bytes.starts_with("PK\x03\x04"))
        return "it is a zip archive (an .npz?)";
    const auto first = bytes.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && bytes[first] == '{')
        return "it is JSON text (a config.json? give the folder that holds it)";
    if (bytes.size() > 8 && bytes[8] == '{')
        return "it is a safetensors file (give the Hugging Face folder that holds it and its config.json)";
    std::string hex;
    for (std::size_t i = 0; i < std::min<std::size_t>(bytes.size(), 4); ++i) {
        char b[8];
        std::snprintf(b, sizeof b, "%s0x%02x", i ? " " : "", static_cast<unsigned char>(bytes[i]));
        hex += b;
    }
    return "its first bytes are " + hex + " (a GGUF file starts with 'GGUF')";
}

} // namespace

Result<ModelConfig> configFromGguf(const io::GgufFile& gguf, const std::string& label,
                                   std::span<const std::uint8_t> fileBytes)
{
    ModelConfig c;
    c.source = label;
    ConfigKeys names;
    try {
        const ArchitectureInfo& arch = architectureOf(gguf);
        c.architecture = arch.id;
        const Metadata m(gguf, arch.ggufName);
        names = ggufKeys(m);
        readSizes(m, c, names);
        readTensorFacts(m, c);
        if (arch.positions == PositionKind::Rope) {
            readRope(m, c, fileBytes);
            readSlidingWindow(m, c);
        }
        if (auto ok = validateModelConfig(c, names); !ok)
            return ok.error();
        checkHeadDimensions(m, c);
    } catch (const GgufRefusal& r) {
        return Error{label, r.message};
    }
    return c;
}

Result<ModelConfig> configFromGguf(const io::GgufFile& gguf, const std::string& label)
{
    if (!gguf.findTensor("rope_freqs.weight"))
        return configFromGguf(gguf, label, {});
    auto map = io::MappedFile::open(gguf.path, io::MapAdvice::Random);
    if (!map)
        return map.error();
    if (map->size() != gguf.fileSize)
        return Error{gguf.path, "the file changed since its header was read (" + std::to_string(map->size())
                                    + " bytes, the header was read from " + std::to_string(gguf.fileSize) + ")"};
    return configFromGguf(gguf, label, map->bytes());
}

Checkpoint checkpointFromGguf(const io::GgufFile& gguf, std::span<const std::uint8_t> fileBytes,
                              std::shared_ptr<const io::MappedFile> file)
{
    Checkpoint cp;
    cp.format = CheckpointFormat::Gguf;
    cp.describe = gguf.path;
    for (const io::GgufTensor& t : gguf.tensors) {
        if (t.offset > fileBytes.size() || t.bytes > fileBytes.size() - t.offset)
            continue; // not this file's header (parseGgufHeader checks every range against the size)
        CheckpointTensor c;
        c.name = t.name;
        c.type = t.type;
        c.storedType = std::string(ggml::ggmlName(t.type));
        c.shape.assign(t.dims.rbegin(), t.dims.rend()); // GGUF lists dims innermost first
        c.data = fileBytes.data() + t.offset;
        c.bytes = t.bytes;
        c.path = gguf.path;
        c.file = file;
        cp.tensors.emplace(t.name, std::move(c));
    }
    return cp;
}

Result<Checkpoint> openGgufCheckpoint(const std::string& path, const io::GgufFile& gguf)
{
    auto mapped = io::MappedFile::open(path);
    if (!mapped)
        return mapped.error();
    auto file = std::make_shared<const io::MappedFile>(std::move(*mapped));
    if (file->size() != gguf.fileSize)
        return Error{path, "the file changed since its header was read (" + std::to_string(file->size())
                               + " bytes, the header was read from " + std::to_string(gguf.fileSize) + ")"};
    Checkpoint cp = checkpointFromGguf(gguf, file->bytes(), file);
    cp.describe = path;
    return cp;
}

Result<ModelSource> openModelSource(const std::string& path)
{
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status))
        return Error{path, "does not exist (a model is a Hugging Face folder or a GGUF file)"};
    ModelSource source;
    source.path = path;
    if (fs::is_directory(status)) {
        auto config = loadHfConfig(path);
        if (!config)
            return config.error();
        source.config = std::move(*config);
        return source;
    }
    auto prefix = io::readRegularFilePrefix(path, 16);
    if (!prefix)
        return prefix.error();
    if (!prefix->bytes.starts_with("GGUF") && !prefix->bytes.starts_with("FUGG")) // FUGG: big-endian, refused by the reader
        return Error{path, "is not a GGUF file: " + describeNotGguf(prefix->bytes)
                               + "; a model is a Hugging Face folder or a GGUF file"};
    auto header = io::readGgufHeader(path);
    if (!header)
        return header.error();
    auto gguf = std::make_shared<const io::GgufFile>(std::move(*header));
    auto config = configFromGguf(*gguf, path);
    if (!config)
        return config.error();
    source.format = CheckpointFormat::Gguf;
    source.config = std::move(*config);
    source.gguf = std::move(gguf);
    return source;
}

Result<Checkpoint> openCheckpoint(const ModelSource& source)
{
    if (source.format == CheckpointFormat::Gguf && source.gguf)
        return openGgufCheckpoint(source.path, *source.gguf);
    return openHfCheckpoint(source.path);
}

Result<MemoryEstimate> estimateMemory(const ModelSource& source, const LoadOptions& options)
{
    auto cp = openCheckpoint(source);
    if (!cp)
        return cp.error();
    return estimateMemory(*cp, source.config, options);
}

} // namespace kvlens::lm
