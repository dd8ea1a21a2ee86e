// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face config.json parsing for the transformer engine: sizes in range, unsupported settings refused.
#include "core/lm/hf_config.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

namespace kvlens::lm {

using nlohmann::json;

namespace {

/// Thrown inside the parser only, caught by parseHfConfig and returned as an Error.
struct ConfigError {
    std::string message;
};

std::string keyText(std::string_view key)
{
    return "'" + std::string(key) + "'";
}

std::string rangeText(std::int64_t lo, std::int64_t hi)
{
    return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

/// Reads keys of one JSON object; every failure names the key. Values are only type-checked here:
/// their ranges are validateModelConfig's.
class Keys {
public:
    explicit Keys(const json& object) : m_object(object) {}

    /// The value of `key`, or nullptr when absent or null.
    const json* find(std::string_view key) const
    {
        const auto it = m_object.find(std::string(key));
        if (it == m_object.end() || it->is_null())
            return nullptr;
        return &*it;
    }

    bool has(std::string_view key) const { return find(key) != nullptr; }

    /// An integer that fits an int; absent or null gives `fallback`, or is refused when there is none.
    int integer(std::string_view key, std::optional<int> fallback = std::nullopt) const
    {
        const json* value = find(key);
        if (!value) {
            if (fallback)
                return *fallback;
            throw ConfigError{keyText(key) + " is missing: it must be an integer"};
        }
        return integerValue(*value, keyText(key));
    }

    static int integerValue(const json& value, const std::string& what)
    {
        const auto tooLarge = [&] {
            return ConfigError{what + " = " + value.dump() + " is out of range: it must be an integer of 32 bits"};
        };
        if (value.is_number_unsigned()) {
            if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
                throw tooLarge();
            return static_cast<int>(value.get<std::uint64_t>());
        }
        if (!value.is_number_integer())
            throw ConfigError{what + " is " + io::describeJson(value) + ": it must be an integer"};
        const auto v = value.get<std::int64_t>();
        if (!std::in_range<int>(v))
            throw tooLarge();
        return static_cast<int>(v);
    }

    /// A number; absent or null gives `fallback`.
    double number(std::string_view key, double fallback) const
    {
        const json* value = find(key);
        return value ? numberValue(*value, keyText(key)) : fallback;
    }

    /// A number, required.
    static double numberValue(const json* value, const std::string& what)
    {
        if (!value)
            throw ConfigError{what + " is missing: it must be a number"};
        if (!value->is_number())
            throw ConfigError{what + " is " + io::describeJson(*value) + ": it must be a number"};
        return value->get<double>();
    }
    static double numberValue(const json& value, const std::string& what) { return numberValue(&value, what); }

    bool boolean(std::string_view key, bool fallback) const
    {
        const json* value = find(key);
        if (!value)
            return fallback;
        if (!value->is_boolean())
            throw ConfigError{keyText(key) + " is " + io::describeJson(*value) + ": it must be true or false"};
        return value->get<bool>();
    }

    std::optional<std::string> string(std::string_view key) const
    {
        const json* value = find(key);
        if (!value)
            return std::nullopt;
        if (!value->is_string())
            throw ConfigError{keyText(key) + " is " + io::describeJson(*value) + ": it must be a string"};
        return value->get<std::string>();
    }

private:
    const json& m_object;
};

Architecture architectureOf(const Keys& keys)
{
    if (const json* list = keys.find("architectures")) {
        if (!list->is_array() || list->empty() || !(*list)[0].is_string())
            throw ConfigError{"'architectures' is " + io::describeJson(*list)
                              + ": it must be an array whose first element names the model class"};
        const auto& name = (*list)[0].get_ref<const std::string&>();
        for (const ArchitectureInfo& a : architectures())
            if (name == a.hfClass)
                return a.id;
        throw ConfigError{"'architectures'[0] = " + io::quoteName(name) + " is not supported (" + std::string(knownClasses())
                          + ")"};
    }
    const auto type = keys.string("model_type");
    if (!type)
        throw ConfigError{"neither 'architectures' nor 'model_type' says which model this is"};
    for (const ArchitectureInfo& a : architectures())
        if (*type == a.modelType)
            return a.id;
    throw ConfigError{"'model_type' = " + io::quoteName(*type) + " is not supported (llama, mistral, qwen2, gpt2)"};
}

/// rope_type / type of a rope_scaling or rope_parameters object ("default" when it names none).
std::string ropeType(const json& object, const std::string& key)
{
    for (const char* name : {"rope_type", "type"}) {
        const auto it = object.find(name);
        if (it == object.end() || it->is_null())
            continue;
        if (!it->is_string())
            throw ConfigError{"'" + key + "." + name + "' is " + io::describeJson(*it) + ": it must be a string"};
        return it->get<std::string>();
    }
    return "default";
}

void checkPartialRotary(const json* value, const std::string& what)
{
    if (!value)
        return;
    if (!value->is_number() || value->get<double>() != 1.0)
        throw ConfigError{what + " is " + io::describeJson(*value)
                          + ": partial rotary embeddings are not implemented (only 1, every dimension rotated)"};
}

/// rope_scaling: null, "default", "linear" {factor} or "llama3" {factor, low_freq_factor,
/// high_freq_factor, original_max_position_embeddings}; anything else refused naming the type.
RopeScaling parseRopeScaling(const json& scaling)
{
    if (!scaling.is_object())
        throw ConfigError{"'rope_scaling' is " + io::describeJson(scaling) + ": it must be null or an object"};
    const std::string type = ropeType(scaling, "rope_scaling");
    RopeScaling r;
    if (type == "default")
        return r;
    const Keys inner(scaling);
    const auto number = [&](const char* key) {
        return Keys::numberValue(inner.find(key), std::string("'rope_scaling.") + key + "'");
    };
    if (type == "linear") {
        r.kind = RopeScaling::Kind::Linear;
        r.factor = number("factor");
        return r;
    }
    if (type == "llama3") {
        r.kind = RopeScaling::Kind::Llama3;
        r.factor = number("factor");
        r.lowFreqFactor = number("low_freq_factor");
        r.highFreqFactor = number("high_freq_factor");
        r.originalMaxPositions = inner.integer("original_max_position_embeddings");
        return r;
    }
    throw ConfigError{"'rope_scaling' of type " + io::quoteName(type)
                      + " is not implemented (null, 'default', 'linear' or 'llama3')"};
}

void parseRope(const Keys& keys, ModelConfig& config, ConfigKeys& names)
{
    if (const json* scaling = keys.find("rope_scaling"))
        config.ropeScaling = parseRopeScaling(*scaling);
    checkPartialRotary(keys.find("partial_rotary_factor"), "'partial_rotary_factor'");
    std::optional<double> theta;
    if (keys.has("rope_theta"))
        theta = keys.number("rope_theta", 0.0);
    if (const json* params = keys.find("rope_parameters")) {
        if (!params->is_object())
            throw ConfigError{"'rope_parameters' is " + io::describeJson(*params) + ": it must be null or an object"};
        const std::string type = ropeType(*params, "rope_parameters");
        if (type != "default")
            throw ConfigError{"'rope_parameters.rope_type' = " + io::quoteName(type)
                              + " is not implemented (only 'default')"};
        const Keys inner(*params);
        checkPartialRotary(inner.find("partial_rotary_factor"), "'rope_parameters.partial_rotary_factor'");
        if (const json* value = inner.find("rope_theta")) {
            const double t = Keys::numberValue(*value, "'rope_parameters.rope_theta'");
            if (theta && *theta != t)
                throw ConfigError{"'rope_theta' and 'rope_parameters.rope_theta' differ (" + json(*theta).dump() + " and "
                                  + value->dump() + ")"};
            if (!theta)
                names.ropeTheta = "'rope_parameters.rope_theta'";
            theta = t;
        }
    }
    config.ropeTheta = theta.value_or(10000.0);
}

void parseSlidingWindow(const Keys& keys, ModelConfig& config)
{
    // Mistral applies sliding_window on every layer whenever it is set. Qwen2 applies it only with
    // use_sliding_window, and then only from layer max_window_layers on: that per-layer form is refused.
    if (config.architecture == Architecture::Qwen2 && keys.boolean("use_sliding_window", false))
        throw ConfigError{"'use_sliding_window' is true: Qwen2's sliding window on the layers from "
                          "'max_window_layers' on is not implemented (released Qwen2 and Qwen2.5 configs set it false)"};
    if (config.architecture == Architecture::Mistral && keys.has("sliding_window"))
        config.slidingWindow = keys.integer("sliding_window");
}

void parseLlamaFamily(const Keys& keys, ModelConfig& config, ConfigKeys& names)
{
    config.hidden = keys.integer("hidden_size");
    config.layers = keys.integer("num_hidden_layers");
    config.heads = keys.integer("num_attention_heads");
    config.kvHeads = keys.integer("num_key_value_heads", config.heads);
    config.headDim = keys.has("head_dim") ? keys.integer("head_dim") : 0; // 0: hidden / heads
    if (keys.has("head_dim") && config.headDim == 0)
        throw ConfigError{"'head_dim' = 0: it must be a positive integer (or null, for hidden_size / num_attention_heads)"};
    config.intermediate = keys.integer("intermediate_size");
    config.vocab = keys.integer("vocab_size");
    config.maxPositions = keys.integer("max_position_embeddings");
    config.normEps = keys.number("rms_norm_eps", 1e-6);
    const std::string act = keys.string("hidden_act").value_or("silu");
    if (act != "silu" && act != "swish")
        throw ConfigError{"'hidden_act' = " + io::quoteName(act) + " is not implemented (only 'silu', the SwiGLU MLP)"};
    if (keys.boolean("mlp_bias", false))
        throw ConfigError{"'mlp_bias' is true: MLP biases are not implemented for this architecture"};
    config.tiedEmbeddings = keys.boolean("tie_word_embeddings", false);
    if (config.architecture == Architecture::Qwen2) {
        config.qkvBias = true; // Qwen2's q/k/v projections always carry biases, o_proj never
        config.outBias = false;
    } else {
        config.qkvBias = config.outBias = keys.boolean("attention_bias", false);
    }
    parseRope(keys, config, names);
    parseSlidingWindow(keys, config);
}

void parseGpt2(const Keys& keys, ModelConfig& config, ConfigKeys& names)
{
    config.hidden = keys.integer("n_embd");
    config.layers = keys.integer("n_layer");
    config.heads = keys.integer("n_head");
    config.kvHeads = config.heads;
    config.headDim = 0; // n_embd / n_head
    if (keys.has("n_inner")) {
        config.intermediate = keys.integer("n_inner");
    } else {
        // 4 n_embd; validateModelConfig refuses an n_embd beyond kMaxHidden before it reads this.
        config.intermediate = static_cast<int>(std::min<std::int64_t>(4ll * config.hidden, kMaxIntermediate + 1ll));
        names.intermediate = "4 x 'n_embd' ('n_inner' is null)";
    }
    config.vocab = keys.integer("vocab_size");
    config.maxPositions = keys.integer("n_positions");
    config.normEps = keys.number("layer_norm_epsilon", 1e-5);
    config.contextKey = "n_positions";
    const std::string act = keys.string("activation_function").value_or("gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
        throw ConfigError{"'activation_function' = " + io::quoteName(act)
                          + " is not implemented (only 'gelu_new' and 'gelu_pytorch_tanh', the tanh approximation)"};
    if (!keys.boolean("scale_attn_weights", true))
        throw ConfigError{"'scale_attn_weights' is false: unscaled attention scores are not implemented"};
    if (keys.boolean("scale_attn_by_inverse_layer_idx", false))
        throw ConfigError{"'scale_attn_by_inverse_layer_idx' is true: per-layer score scaling is not implemented"};
    config.tiedEmbeddings = keys.boolean("tie_word_embeddings", true);
    config.qkvBias = config.outBias = true;
    config.ropeTheta = 0.0;
}

// --- validation ------------------------------------------------------------------------------------

/// `value` in [lo, hi], or a refusal naming `what`.
void checkRange(std::int64_t value, const std::string& what, std::int64_t lo, std::int64_t hi)
{
    if (value < lo || value > hi)
        throw ConfigError{what + " = " + std::to_string(value) + ": it must be " + rangeText(lo, hi)};
}

/// `value` in (lo, hi], or a refusal naming `what`.
void checkNumber(double value, const std::string& what, double lo, double hi)
{
    if (value > lo && value <= hi)
        return;
    std::ostringstream range;
    range << "a number in (" << lo << ", " << hi << "]";
    throw ConfigError{what + " = " + json(value).dump() + ": it must be " + range.str()};
}

/// heads, kv heads and the head dimension (derived when 0).
void checkHeads(ModelConfig& c, const ConfigKeys& k)
{
    checkRange(c.heads, k.heads, 1, kMaxHeads);
    checkRange(c.kvHeads, k.kvHeads, 1, c.heads);
    if (c.heads % c.kvHeads != 0)
        throw ConfigError{k.kvHeads + " = " + std::to_string(c.kvHeads) + " does not divide " + k.heads + " = "
                          + std::to_string(c.heads)};
    const bool rope = c.arch().positions == PositionKind::Rope;
    const int lo = rope ? 2 : 1;
    if (c.headDim == 0) {
        if (c.hidden % c.heads != 0)
            throw ConfigError{k.heads + " = " + std::to_string(c.heads) + " does not divide " + k.hidden + " = "
                              + std::to_string(c.hidden) + (k.headDim.empty() ? "" : " (and no " + k.headDim + " is given)")};
        c.headDim = c.hidden / c.heads;
        if (c.headDim < lo || c.headDim > kMaxHeadDim)
            throw ConfigError{k.hidden + " / " + k.heads + " = " + std::to_string(c.headDim)
                              + ": the head dimension must be " + rangeText(lo, kMaxHeadDim)};
    } else {
        checkRange(c.headDim, k.headDim.empty() ? "the head dimension" : k.headDim, lo, kMaxHeadDim);
    }
    if (rope && c.headDim % 2 != 0)
        throw ConfigError{"head dimension " + std::to_string(c.headDim)
                          + " is odd: rotate-half RoPE pairs dimension i with i + head_dim/2, so it must be even"};
}

void checkRopeScaling(const ModelConfig& c, const ConfigKeys& k)
{
    const RopeScaling& r = c.ropeScaling;
    constexpr double kMaxFactor = 1e6;
    switch (r.kind) {
    case RopeScaling::Kind::None: return;
    case RopeScaling::Kind::Linear: checkNumber(r.factor, k.ropeFactor, 0.0, kMaxFactor); return;
    case RopeScaling::Kind::Llama3: // only config.json has it
        checkNumber(r.factor, k.ropeFactor, 0.0, kMaxFactor);
        checkNumber(r.lowFreqFactor, "'rope_scaling.low_freq_factor'", 0.0, kMaxFactor);
        checkNumber(r.highFreqFactor, "'rope_scaling.high_freq_factor'", 0.0, kMaxFactor);
        if (!(r.highFreqFactor > r.lowFreqFactor))
            throw ConfigError{"'rope_scaling.high_freq_factor' must exceed 'rope_scaling.low_freq_factor' (llama3 ramps "
                              "between them)"};
        checkRange(r.originalMaxPositions, "'rope_scaling.original_max_position_embeddings'", 1, kMaxPositions);
        return;
    case RopeScaling::Kind::Factors:
        if (r.factors.size() != static_cast<std::size_t>(c.headDim / 2))
            throw ConfigError{k.ropeFactors + " holds " + std::to_string(r.factors.size()) + " factors: the head dimension "
                              + std::to_string(c.headDim) + " needs one per frequency, " + std::to_string(c.headDim / 2)};
        for (std::size_t i = 0; i < r.factors.size(); ++i)
            if (!(r.factors[i] > 0.0f && r.factors[i] <= kMaxFactor))
                throw ConfigError{k.ropeFactors + " value " + std::to_string(i) + " = " + json(r.factors[i]).dump()
                                  + ": every factor must be a number in (0, 1e+06]"};
        return;
    }
}

/// A norm epsilon the forward can use: in (0, 1] and still positive and normal as float32.
void checkNormEpsilon(double eps, const std::string& what)
{
    checkNumber(eps, what, 0.0, 1.0);
    if (static_cast<float>(eps) < std::numeric_limits<float>::min())
        throw ConfigError{what + " = " + json(eps).dump() + " is 0 or subnormal in float32, the precision the "
                          "norms are computed in: it must be a number in [1.2e-38, 1]"};
}

void validate(ModelConfig& c, const ConfigKeys& k)
{
    checkRange(c.hidden, k.hidden, 1, kMaxHidden);
    checkRange(c.layers, k.layers, 1, kMaxLayers);
    checkHeads(c, k);
    checkRange(c.intermediate, k.intermediate, 1, kMaxIntermediate);
    checkRange(c.vocab, k.vocab, 1, kMaxVocab);
    checkRange(c.maxPositions, k.maxPositions, 1, kMaxPositions);
    checkNormEpsilon(c.normEps, k.normEps);
    if (c.arch().positions == PositionKind::Rope) {
        checkNumber(c.ropeTheta, k.ropeTheta, 1.0, kMaxRopeTheta);
        checkRopeScaling(c, k);
    }
    if (c.slidingWindow < 0)
        throw ConfigError{k.slidingWindow + " = " + std::to_string(c.slidingWindow) + ": it must be "
                          + rangeText(1, std::numeric_limits<int>::max()) + " (or absent: no window)"};
}

} // namespace

ConfigKeys ConfigKeys::huggingFace(Architecture architecture)
{
    if (architecture == Architecture::Gpt2)
        return ConfigKeys{"'n_layer'", "'n_embd'", "'n_head'", "the KV head count", "'n_inner'", "'vocab_size'",
                          "'n_positions'", "'layer_norm_epsilon'", "rope_theta", "sliding_window", "", "", ""};
    return ConfigKeys{"'num_hidden_layers'", "'hidden_size'", "'num_attention_heads'", "'num_key_value_heads'",
                      "'intermediate_size'", "'vocab_size'", "'max_position_embeddings'", "'rms_norm_eps'",
                      "'rope_theta'", "'sliding_window'", "'head_dim'", "'rope_scaling.factor'", "rope factors"};
}

Status validateModelConfig(ModelConfig& config, const ConfigKeys& keys)
{
    try {
        validate(config, keys);
    } catch (const ConfigError& e) {
        return Error{config.source, e.message};
    }
    return Ok{};
}

std::vector<double> RopeScaling::inverseFrequencies(double theta, int headDim) const
{
    const int half = headDim / 2;
    std::vector<double> inv(static_cast<std::size_t>(half));
    constexpr double kTwoPi = 6.283185307179586;
    const double lowWavelength = originalMaxPositions / lowFreqFactor;
    const double highWavelength = originalMaxPositions / highFreqFactor;
    for (int i = 0; i < half; ++i) {
        double f = std::pow(theta, -2.0 * i / headDim);
        switch (kind) {
        case Kind::None: break;
        case Kind::Linear: f /= factor; break;
        case Kind::Factors: f /= static_cast<double>(factors[static_cast<std::size_t>(i)]); break;
        case Kind::Llama3: {
            const double wavelength = kTwoPi / f;
            if (wavelength > lowWavelength) {
                f /= factor;
            } else if (wavelength >= highWavelength) {
                const double smooth = (originalMaxPositions / wavelength - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
                f = (1.0 - smooth) * f / factor + smooth * f;
            }
            break;
        }
        }
        inv[static_cast<std::size_t>(i)] = f;
    }
    return inv;
}

std::string RopeScaling::describe() const
{
    std::ostringstream out;
    switch (kind) {
    case Kind::None: return "none";
    case Kind::Linear: out << "linear x" << factor; break;
    case Kind::Llama3:
        out << "llama3 x" << factor << " (low " << lowFreqFactor << ", high " << highFreqFactor << ", original "
            << originalMaxPositions << ")";
        break;
    case Kind::Factors: out << "per-frequency factors (" << factors.size() << ")"; break;
    }
    return out.str();
}

std::int64_t ModelConfig::nonEmbeddingParameters() const
{
    const std::int64_t d = hidden, attn = static_cast<std::int64_t>(heads) * headDim;
    std::int64_t perLayer = d * qkvRows() + attn * d;
    if (qkvBias)
        perLayer += qkvRows();
    if (outBias)
        perLayer += d;
    if (arch().mlp == MlpKind::GeluTanh)
        perLayer += 2 * d * intermediate + intermediate + d + 4 * d; // c_fc, c_proj (+ biases), two LayerNorms
    else
        perLayer += 3 * d * intermediate + 2 * d; // gate, up, down; two RMSNorm weights
    const std::int64_t finalNorm = arch().norm == NormKind::Layer ? 2 * d : d;
    return perLayer * layers + finalNorm;
}

double ModelConfig::flopsPerToken(int tokens) const
{
    return 2.0 * static_cast<double>(nonEmbeddingParameters()) + 2.0 * hidden * static_cast<double>(vocab)
           + 4.0 * (tokens / 2.0) * heads * headDim * layers;
}

std::string ModelConfig::summary() const
{
    std::string s = std::string(architectureName(architecture)) + ": " + std::to_string(layers) + " layers, hidden "
                    + std::to_string(hidden) + ", " + std::to_string(heads) + " heads x " + std::to_string(headDim);
    if (kvHeads != heads)
        s += " (" + std::to_string(kvHeads) + " KV heads)";
    s += ", MLP " + std::to_string(intermediate) + ", vocab " + std::to_string(vocab);
    return s;
}

Result<ModelConfig> parseHfConfig(std::string_view jsonText, const std::string& label)
{
    auto parsed = io::parseJsonText(jsonText);
    if (!parsed)
        return Error{label, parsed.error().message};
    const json& root = *parsed;
    if (!root.is_object())
        return Error{label, "config is " + io::describeJson(root) + ", not a JSON object"};
    ModelConfig config;
    config.source = label;
    ConfigKeys names;
    try {
        const Keys keys(root);
        config.architecture = architectureOf(keys);
        names = ConfigKeys::huggingFace(config.architecture);
        if (config.architecture == Architecture::Gpt2)
            parseGpt2(keys, config, names);
        else
            parseLlamaFamily(keys, config, names);
    } catch (const ConfigError& e) {
        return Error{label, e.message};
    } catch (const json::exception& e) {
        return Error{label, std::string("unexpected JSON value: ") + e.what()};
    }
    if (auto ok = validateModelConfig(config, names); !ok)
        return ok.error();
    return config;
}

Result<ModelConfig> loadHfConfig(const std::string& dir)
{
    const std::string path = dir + "/config.json";
    auto text = io::readRegularFile(path, kMaxConfigBytes);
    if (!text)
        return text.error();
    return parseHfConfig(*text, path);
}

} // namespace kvlens::lm
