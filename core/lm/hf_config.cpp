// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face config.json parsing for the transformer engine: sizes in range, unsupported settings refused.
#include "core/lm/hf_config.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

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

/// Reads keys of one JSON object; every failure names the key.
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

    /// An integer in [lo, hi]; absent or null gives `fallback`, or is refused when there is none.
    int integer(std::string_view key, std::int64_t lo, std::int64_t hi, std::optional<int> fallback = std::nullopt) const
    {
        const json* value = find(key);
        if (!value) {
            if (fallback)
                return *fallback;
            throw ConfigError{keyText(key) + " is missing: it must be " + rangeText(lo, hi)};
        }
        return integerValue(*value, keyText(key), lo, hi);
    }

    static int integerValue(const json& value, const std::string& what, std::int64_t lo, std::int64_t hi)
    {
        std::int64_t v = 0;
        if (value.is_number_unsigned()) {
            const auto u = value.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(hi))
                throw ConfigError{what + " = " + value.dump() + ": it must be " + rangeText(lo, hi)};
            v = static_cast<std::int64_t>(u);
        } else if (value.is_number_integer()) {
            v = value.get<std::int64_t>();
        } else {
            throw ConfigError{what + " is " + io::describeJson(value) + ": it must be " + rangeText(lo, hi)};
        }
        if (v < lo || v > hi)
            throw ConfigError{what + " = " + std::to_string(v) + ": it must be " + rangeText(lo, hi)};
        return static_cast<int>(v);
    }

    /// A finite number in (lo, hi]; absent or null gives `fallback`.
    double number(std::string_view key, double lo, double hi, double fallback) const
    {
        const json* value = find(key);
        if (!value)
            return fallback;
        return numberValue(*value, keyText(key), lo, hi);
    }

    static double numberValue(const json& value, const std::string& what, double lo, double hi)
    {
        std::ostringstream range;
        range << "a number in (" << lo << ", " << hi << "]";
        if (!value.is_number())
            throw ConfigError{what + " is " + io::describeJson(value) + ": it must be " + range.str()};
        const double v = value.get<double>();
        if (!(v > lo && v <= hi))
            throw ConfigError{what + " = " + value.dump() + ": it must be " + range.str()};
        return v;
    }

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
    if (type == "linear") {
        r.kind = RopeScaling::Kind::Linear;
        r.factor = Keys::numberValue(inner.find("factor") ? *inner.find("factor") : json(), "'rope_scaling.factor'", 0.0, 1e6);
        return r;
    }
    if (type == "llama3") {
        r.kind = RopeScaling::Kind::Llama3;
        auto number = [&](const char* key, double lo, double hi) {
            const json* v = inner.find(key);
            return Keys::numberValue(v ? *v : json(), std::string("'rope_scaling.") + key + "'", lo, hi);
        };
        r.factor = number("factor", 0.0, 1e6);
        r.lowFreqFactor = number("low_freq_factor", 0.0, 1e6);
        r.highFreqFactor = number("high_freq_factor", 0.0, 1e6);
        if (!(r.highFreqFactor > r.lowFreqFactor))
            throw ConfigError{"'rope_scaling.high_freq_factor' must exceed 'rope_scaling.low_freq_factor' (llama3 ramps "
                              "between them)"};
        r.originalMaxPositions = inner.integer("original_max_position_embeddings", 1, kMaxPositions);
        return r;
    }
    throw ConfigError{"'rope_scaling' of type " + io::quoteName(type)
                      + " is not implemented (null, 'default', 'linear' or 'llama3')"};
}

void parseRope(const Keys& keys, ModelConfig& config)
{
    if (const json* scaling = keys.find("rope_scaling"))
        config.ropeScaling = parseRopeScaling(*scaling);
    checkPartialRotary(keys.find("partial_rotary_factor"), "'partial_rotary_factor'");
    std::optional<double> theta;
    if (keys.has("rope_theta"))
        theta = keys.number("rope_theta", 1.0, kMaxRopeTheta, 0.0);
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
            const double t = Keys::numberValue(*value, "'rope_parameters.rope_theta'", 1.0, kMaxRopeTheta);
            if (theta && *theta != t)
                throw ConfigError{"'rope_theta' and 'rope_parameters.rope_theta' differ (" + json(*theta).dump() + " and "
                                  + value->dump() + ")"};
            theta = t;
        }
    }
    config.ropeTheta = theta.value_or(10000.0);
}

/// A norm epsilon the forward can use: in (0, 1] and still positive and normal as float32, the
/// precision the norms are computed in (1e-50 would be 0 there, and an all-zero row 0/0).
double normEpsilon(const Keys& keys, std::string_view key, double fallback)
{
    const double eps = keys.number(key, 0.0, 1.0, fallback);
    if (static_cast<float>(eps) < std::numeric_limits<float>::min())
        throw ConfigError{keyText(key) + " = " + json(eps).dump() + " is 0 or subnormal in float32, the precision the "
                          "norms are computed in: it must be a number in [1.2e-38, 1]"};
    return eps;
}

void parseSlidingWindow(const Keys& keys, ModelConfig& config)
{
    // Mistral applies sliding_window on every layer whenever it is set. Qwen2 applies it only with
    // use_sliding_window, and then only from layer max_window_layers on: that per-layer form is refused.
    if (config.architecture == Architecture::Qwen2 && keys.boolean("use_sliding_window", false))
        throw ConfigError{"'use_sliding_window' is true: Qwen2's sliding window on the layers from "
                          "'max_window_layers' on is not implemented (released Qwen2 and Qwen2.5 configs set it false)"};
    if (config.architecture == Architecture::Mistral && keys.has("sliding_window"))
        config.slidingWindow = keys.integer("sliding_window", 1, std::numeric_limits<int>::max());
}

void parseLlamaFamily(const Keys& keys, ModelConfig& config)
{
    config.hidden = keys.integer("hidden_size", 1, kMaxHidden);
    config.layers = keys.integer("num_hidden_layers", 1, kMaxLayers);
    config.heads = keys.integer("num_attention_heads", 1, kMaxHeads);
    config.kvHeads = keys.integer("num_key_value_heads", 1, config.heads, config.heads);
    if (config.heads % config.kvHeads != 0)
        throw ConfigError{"'num_key_value_heads' = " + std::to_string(config.kvHeads)
                          + " does not divide 'num_attention_heads' = " + std::to_string(config.heads)};
    if (keys.has("head_dim")) {
        config.headDim = keys.integer("head_dim", 2, kMaxHeadDim);
    } else {
        if (config.hidden % config.heads != 0)
            throw ConfigError{"'num_attention_heads' = " + std::to_string(config.heads) + " does not divide 'hidden_size' = "
                              + std::to_string(config.hidden) + " (and no 'head_dim' is given)"};
        config.headDim = config.hidden / config.heads;
        if (config.headDim > kMaxHeadDim)
            throw ConfigError{"'hidden_size' / 'num_attention_heads' = " + std::to_string(config.headDim)
                              + ": the head dimension must be " + rangeText(2, kMaxHeadDim)};
    }
    if (config.headDim % 2 != 0)
        throw ConfigError{"head dimension " + std::to_string(config.headDim)
                          + " is odd: rotate-half RoPE pairs dimension i with i + head_dim/2, so it must be even"};
    config.intermediate = keys.integer("intermediate_size", 1, kMaxIntermediate);
    config.vocab = keys.integer("vocab_size", 1, kMaxVocab);
    config.maxPositions = keys.integer("max_position_embeddings", 1, kMaxPositions);
    config.normEps = normEpsilon(keys, "rms_norm_eps", 1e-6);
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
    parseRope(keys, config);
    parseSlidingWindow(keys, config);
}

void parseGpt2(const Keys& keys, ModelConfig& config)
{
    config.hidden = keys.integer("n_embd", 1, kMaxHidden);
    config.layers = keys.integer("n_layer", 1, kMaxLayers);
    config.heads = keys.integer("n_head", 1, kMaxHeads);
    if (config.hidden % config.heads != 0)
        throw ConfigError{"'n_head' = " + std::to_string(config.heads) + " does not divide 'n_embd' = "
                          + std::to_string(config.hidden)};
    config.kvHeads = config.heads;
    config.headDim = config.hidden / config.heads;
    if (config.headDim > kMaxHeadDim)
        throw ConfigError{"'n_embd' / 'n_head' = " + std::to_string(config.headDim) + ": the head dimension must be "
                          + rangeText(1, kMaxHeadDim)};
    const std::int64_t fourD = 4ll * config.hidden;
    if (keys.has("n_inner"))
        config.intermediate = keys.integer("n_inner", 1, kMaxIntermediate);
    else if (fourD > kMaxIntermediate)
        throw ConfigError{"'n_inner' is null, so 4 x 'n_embd' = " + std::to_string(fourD) + ", beyond "
                          + std::to_string(kMaxIntermediate)};
    else
        config.intermediate = static_cast<int>(fourD);
    config.vocab = keys.integer("vocab_size", 1, kMaxVocab);
    config.maxPositions = keys.integer("n_positions", 1, kMaxPositions);
    config.normEps = normEpsilon(keys, "layer_norm_epsilon", 1e-5);
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

} // namespace

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
    try {
        const Keys keys(root);
        config.architecture = architectureOf(keys);
        if (config.architecture == Architecture::Gpt2)
            parseGpt2(keys, config);
        else
            parseLlamaFamily(keys, config);
    } catch (const ConfigError& e) {
        return Error{label, e.message};
    } catch (const json::exception& e) {
        return Error{label, std::string("unexpected JSON value: ") + e.what()};
    }
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
