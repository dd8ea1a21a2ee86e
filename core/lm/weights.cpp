// SPDX-License-Identifier: GPL-3.0-or-later
// Loading a Hugging Face folder's safetensors weights into float32 matrices, every check made from
// the headers before a payload byte is read.
#include "core/lm/weights.h"

#include "core/io/file_read.h"
#include "core/io/tensor_file.h"
#include "core/io/json_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <new>
#include <optional>
#include <set>
#include <thread>

namespace kvlens::lm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using io::shapeText;

std::uint64_t mib(std::uint64_t bytes)
{
    return (bytes + (1ull << 20) - 1) >> 20;
}

/// Where one checkpoint tensor goes: rows [rowOffset, rowOffset + out) of a matrix (transposed
/// from [in x out] for Conv1D), or elements [offset, offset + n) of a vector.
struct Slot {
    ExpectedTensor tensor;
    RowMatrixXf* matrix = nullptr;
    RowVectorXf* vector = nullptr;
    Eigen::Index offset = 0;
    bool transpose = false;
};

/// The tensors of `config`, each with its destination in `w` (null: names and shapes only).
std::vector<Slot> slotsFor(const ModelConfig& c, std::string_view gpt2Prefix, ModelWeights* w)
{
    std::vector<Slot> slots;
    const std::int64_t d = c.hidden, hd = c.headDim, q = std::int64_t(c.heads) * hd, kv = std::int64_t(c.kvHeads) * hd,
                       inter = c.intermediate, vocab = c.vocab;
    auto matrix = [&](std::string name, std::vector<std::int64_t> shape, RowMatrixXf* m, Eigen::Index rowOffset = 0,
                      bool transpose = false) {
        slots.push_back({{std::move(name), std::move(shape)}, w ? m : nullptr, nullptr, rowOffset, transpose});
    };
    auto vector = [&](std::string name, std::int64_t n, RowVectorXf* v, Eigen::Index offset = 0) {
        slots.push_back({{std::move(name), {n}}, nullptr, w ? v : nullptr, offset, false});
    };
    ModelWeights dummy;
    ModelWeights& m = w ? *w : dummy;
    if (!w)
        m.layers.resize(static_cast<std::size_t>(c.layers));

    if (c.isGpt2()) {
        const std::string p(gpt2Prefix);
        matrix(p + "wte.weight", {vocab, d}, &m.embed);
        matrix(p + "wpe.weight", {c.maxPositions, d}, &m.positions);
        for (int i = 0; i < c.layers; ++i) {
            LayerWeights& l = m.layers[static_cast<std::size_t>(i)];
            const std::string h = p + "h." + std::to_string(i) + ".";
            vector(h + "ln_1.weight", d, &l.attnNorm);
            vector(h + "ln_1.bias", d, &l.attnNormBias);
            matrix(h + "attn.c_attn.weight", {d, 3 * d}, &l.qkv, 0, true);
            vector(h + "attn.c_attn.bias", 3 * d, &l.qkvBias);
            matrix(h + "attn.c_proj.weight", {d, d}, &l.out, 0, true);
            vector(h + "attn.c_proj.bias", d, &l.outBias);
            vector(h + "ln_2.weight", d, &l.mlpNorm);
            vector(h + "ln_2.bias", d, &l.mlpNormBias);
            matrix(h + "mlp.c_fc.weight", {d, inter}, &l.up, 0, true);
            vector(h + "mlp.c_fc.bias", inter, &l.upBias);
            matrix(h + "mlp.c_proj.weight", {inter, d}, &l.down, 0, true);
            vector(h + "mlp.c_proj.bias", d, &l.downBias);
        }
        vector(p + "ln_f.weight", d, &m.finalNorm);
        vector(p + "ln_f.bias", d, &m.finalNormBias);
    } else {
        matrix("model.embed_tokens.weight", {vocab, d}, &m.embed);
        for (int i = 0; i < c.layers; ++i) {
            LayerWeights& l = m.layers[static_cast<std::size_t>(i)];
            const std::string h = "model.layers." + std::to_string(i) + ".";
            vector(h + "input_layernorm.weight", d, &l.attnNorm);
            matrix(h + "self_attn.q_proj.weight", {q, d}, &l.qkv, 0);
            matrix(h + "self_attn.k_proj.weight", {kv, d}, &l.qkv, q);
            matrix(h + "self_attn.v_proj.weight", {kv, d}, &l.qkv, q + kv);
            if (c.qkvBias) {
                vector(h + "self_attn.q_proj.bias", q, &l.qkvBias, 0);
                vector(h + "self_attn.k_proj.bias", kv, &l.qkvBias, q);
                vector(h + "self_attn.v_proj.bias", kv, &l.qkvBias, q + kv);
            }
            matrix(h + "self_attn.o_proj.weight", {d, q}, &l.out);
            if (c.outBias)
                vector(h + "self_attn.o_proj.bias", d, &l.outBias);
            vector(h + "post_attention_layernorm.weight", d, &l.mlpNorm);
            matrix(h + "mlp.gate_proj.weight", {inter, d}, &l.up, 0);
            matrix(h + "mlp.up_proj.weight", {inter, d}, &l.up, inter);
            matrix(h + "mlp.down_proj.weight", {d, inter}, &l.down);
        }
        vector("model.norm.weight", d, &m.finalNorm);
    }
    if (!c.tiedEmbeddings)
        matrix("lm_head.weight", {vocab, d}, &m.lmHead);
    return slots;
}

/// Sizes every matrix and vector of `w` for `c` (contents undefined).
void allocate(const ModelConfig& c, ModelWeights& w)
{
    const Eigen::Index d = c.hidden, attn = Eigen::Index(c.heads) * c.headDim, inter = c.intermediate;
    w.embed.resize(c.vocab, d);
    if (c.isGpt2())
        w.positions.resize(c.maxPositions, d);
    w.layers.assign(static_cast<std::size_t>(c.layers), LayerWeights{});
    for (LayerWeights& l : w.layers) {
        l.attnNorm.resize(d);
        l.qkv.resize(c.qkvRows(), d);
        if (c.qkvBias)
            l.qkvBias.resize(c.qkvRows());
        l.out.resize(d, attn);
        if (c.outBias)
            l.outBias.resize(d);
        l.mlpNorm.resize(d);
        l.up.resize(c.isGpt2() ? inter : 2 * inter, d);
        l.down.resize(d, inter);
        if (c.isGpt2()) {
            l.attnNormBias.resize(d);
            l.mlpNormBias.resize(d);
            l.upBias.resize(inter);
            l.downBias.resize(d);
        }
    }
    w.finalNorm.resize(d);
    if (c.isGpt2())
        w.finalNormBias.resize(d);
    if (!c.tiedEmbeddings)
        w.lmHead.resize(c.vocab, d);
}

/// A tensor found in a shard header.
struct Located {
    std::string path;
    io::TensorInfo info;
};

/// Every tensor of the folder's safetensors file(s), by name, after the folder-level checks.
struct Catalogue {
    std::map<std::string, Located> tensors;
    std::string describe; ///< "DIR/model.safetensors" or "DIR/model.safetensors.index.json"
};

/// `name` inside `dir`: a regular file (after following links) that resolves inside `dir`.
Result<std::string> shardPath(const std::string& dir, const std::string& name, const std::string& label)
{
    std::error_code ec;
    const fs::path folder = fs::canonical(dir, ec);
    if (ec)
        return Error{dir, "cannot resolve the model folder: " + ec.message()};
    const fs::path path = fs::path(dir) / name;
    const fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status))
        return Error{label, "shard " + io::quoteName(name) + " does not exist in " + dir};
    if (!fs::is_regular_file(status))
        return Error{label, "shard " + io::quoteName(name) + " is not a regular file"};
    const fs::path resolved = fs::canonical(path, ec);
    if (ec)
        return Error{label, "shard " + io::quoteName(name) + " cannot be resolved: " + ec.message()};
    if (resolved.parent_path() != folder)
        return Error{label, "shard " + io::quoteName(name) + " resolves to " + io::quoteName(resolved.string())
                                + ", outside the model folder"};
    return path.string();
}

Result<Catalogue> catalogue(const std::string& dir)
{
    Catalogue cat;
    std::error_code ec;
    const std::string single = dir + "/model.safetensors";
    const std::string indexPath = dir + "/model.safetensors.index.json";
    if (fs::exists(fs::path(single), ec)) {
        cat.describe = single;
        auto path = shardPath(dir, "model.safetensors", single);
        if (!path)
            return path.error();
        auto info = io::inspectTensorFile(*path);
        if (!info)
            return info.error();
        for (io::TensorInfo& t : info->tensors) {
            const std::string name = t.name; // the move below would empty the key
            cat.tensors[name] = Located{*path, std::move(t)};
        }
        return cat;
    }
    if (!fs::exists(fs::path(indexPath), ec))
        return Error{dir, "no model.safetensors and no model.safetensors.index.json in the folder"};
    cat.describe = indexPath;
    auto text = io::readRegularFile(indexPath, kMaxIndexBytes);
    if (!text)
        return text.error();
    auto index = parseWeightIndex(*text, indexPath);
    if (!index)
        return index.error();
    std::map<std::string, std::string> heldBy; // tensor -> shard whose header holds it
    for (const std::string& shard : index->shards) {
        auto path = shardPath(dir, shard, indexPath);
        if (!path)
            return path.error();
        auto info = io::inspectTensorFile(*path);
        if (!info)
            return info.error();
        for (io::TensorInfo& t : info->tensors) {
            if (const auto it = heldBy.find(t.name); it != heldBy.end())
                return Error{indexPath, "tensor " + io::quoteName(t.name) + " is held by two shards, "
                                            + io::quoteName(it->second) + " and " + io::quoteName(shard)};
            const std::string name = t.name;
            heldBy[name] = shard;
            cat.tensors[name] = Located{*path, std::move(t)};
        }
    }
    for (const auto& [tensor, shard] : index->weightMap) {
        const auto it = heldBy.find(tensor);
        if (it == heldBy.end())
            return Error{indexPath, "tensor " + io::quoteName(tensor) + " is mapped to shard " + io::quoteName(shard)
                                        + ", which does not hold it (no shard does)"};
        if (it->second != shard)
            return Error{indexPath, "tensor " + io::quoteName(tensor) + " is mapped to shard " + io::quoteName(shard)
                                        + " but held by " + io::quoteName(it->second)};
    }
    return cat;
}

/// "" or "transformer.": which naming a GPT-2 checkpoint uses.
Result<std::string> gpt2Prefix(const Catalogue& cat)
{
    const bool bare = cat.tensors.count("wte.weight") > 0;
    const bool prefixed = cat.tensors.count("transformer.wte.weight") > 0;
    if (bare && prefixed)
        return Error{cat.describe, "both 'wte.weight' and 'transformer.wte.weight' are present: which naming is meant "
                                   "is ambiguous"};
    return std::string(prefixed ? "transformer." : "");
}

/// Checks presence, dtype and shape of every slot; returns the estimate.
Result<MemoryEstimate> checkAgainstHeaders(const ModelConfig& config, const Catalogue& cat,
                                           const std::vector<Slot>& slots, const LoadOptions& options)
{
    MemoryEstimate estimate;
    for (const Slot& slot : slots) {
        const auto it = cat.tensors.find(slot.tensor.name);
        if (it == cat.tensors.end())
            return Error{cat.describe, "tensor " + io::quoteName(slot.tensor.name) + " is missing (expected shape "
                                           + shapeText(slot.tensor.shape) + " for " + config.summary() + ")"};
        const io::TensorInfo& info = it->second.info;
        if (info.dtype != io::DType::F32 && info.dtype != io::DType::F16 && info.dtype != io::DType::BF16)
            return Error{it->second.path, "tensor " + io::quoteName(info.name) + " has dtype "
                                              + std::string(io::dtypeName(info.dtype))
                                              + ", not supported for weights (F32, F16, BF16)"};
        if (info.shape != slot.tensor.shape)
            return Error{it->second.path, "tensor " + io::quoteName(info.name) + ": expected shape "
                                              + shapeText(slot.tensor.shape) + ", got " + shapeText(info.shape)};
        const auto floats = static_cast<std::uint64_t>(info.elementCount()) * sizeof(float);
        estimate.weightBytes += floats;
        estimate.transientBytes = std::max(estimate.transientBytes, floats + info.dataBytes);
    }
    const int threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    estimate.activationBytes = static_cast<std::uint64_t>(std::max(1, options.forwardsInFlight))
                               * forwardBytes(config, std::max(1, options.contextTokens), threads);
    const std::uint64_t limit = options.memoryLimitMiB << 20;
    if (estimate.total() > limit)
        return Error{cat.describe, "the model needs about " + std::to_string(mib(estimate.total())) + " MiB (weights "
                                       + std::to_string(mib(estimate.weightBytes)) + " MiB as float32, activations "
                                       + std::to_string(mib(estimate.activationBytes)) + " MiB for "
                                       + std::to_string(options.forwardsInFlight) + " forwards of "
                                       + std::to_string(options.contextTokens) + " tokens, loading "
                                       + std::to_string(mib(estimate.transientBytes)) + " MiB), more than the limit of "
                                       + std::to_string(options.memoryLimitMiB) + " MiB"};
    return estimate;
}

Status place(const Slot& slot, const io::Tensor& tensor, const std::string& path)
{
    const float* data = tensor.data.data();
    const std::size_t n = tensor.data.size();
    for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(data[i]))
            return Error{path, "tensor " + io::quoteName(tensor.name) + " holds " + (std::isnan(data[i]) ? "NaN" : "Inf")
                                   + " at flat index " + std::to_string(i) + " (shape " + shapeText(tensor.shape) + ")"};
    if (slot.vector) {
        slot.vector->segment(slot.offset, static_cast<Eigen::Index>(n)) =
            Eigen::Map<const RowVectorXf>(data, static_cast<Eigen::Index>(n));
        return Ok{};
    }
    const auto rows = static_cast<Eigen::Index>(tensor.shape[0]), cols = static_cast<Eigen::Index>(tensor.shape[1]);
    const Eigen::Map<const RowMatrixXf> stored(data, rows, cols);
    if (slot.transpose)
        slot.matrix->middleRows(slot.offset, cols) = stored.transpose();
    else
        slot.matrix->middleRows(slot.offset, rows) = stored;
    return Ok{};
}

struct Prepared {
    Catalogue cat;
    std::string prefix;
    MemoryEstimate estimate;
};

Result<Prepared> prepare(const std::string& dir, const ModelConfig& config, const LoadOptions& options)
{
    auto cat = catalogue(dir);
    if (!cat)
        return cat.error();
    std::string prefix;
    if (config.isGpt2()) {
        auto p = gpt2Prefix(*cat);
        if (!p)
            return p.error();
        prefix = *p;
    }
    auto estimate = checkAgainstHeaders(config, *cat, slotsFor(config, prefix, nullptr), options);
    if (!estimate)
        return estimate.error();
    return Prepared{std::move(*cat), std::move(prefix), *estimate};
}

bool isPlainShardName(const std::string& name)
{
    if (name.empty() || name.size() > 255 || name == "." || name == "..")
        return false;
    for (const char c : name)
        if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            return false;
    return io::isValidUtf8(name);
}

} // namespace

std::uint64_t forwardBytes(const ModelConfig& c, int tokens, int threads)
{
    const auto t = static_cast<std::uint64_t>(tokens);
    const std::uint64_t d = c.hidden, hd = c.headDim, attn = std::uint64_t(c.heads) * hd,
                        kv = std::uint64_t(c.kvHeads) * hd, inter = c.intermediate;
    const std::uint64_t upRows = c.isGpt2() ? inter : 2 * inter;
    std::uint64_t floats = 3 * t * d                     // residual stream, normed input, a layer's output
                           + t * std::uint64_t(c.qkvRows()) // fused q|k|v
                           + 4 * t * kv                   // K, V exact and as the cache returns them
                           + 2 * t * attn                 // per-head queries and the attention output
                           + t * (upRows + inter)         // MLP hidden and its activation
                           + t * std::uint64_t(c.vocab);  // logits
    const std::uint64_t block = std::min<std::uint64_t>(t, kAttentionBlock);
    floats += std::uint64_t(std::max(1, threads)) * (4 * block * t + 2 * block * hd);
    return floats * sizeof(float);
}

std::vector<ExpectedTensor> expectedTensors(const ModelConfig& config, std::string_view gpt2Prefix)
{
    std::vector<ExpectedTensor> out;
    for (Slot& s : slotsFor(config, gpt2Prefix, nullptr))
        out.push_back(std::move(s.tensor));
    return out;
}

Result<WeightIndex> parseWeightIndex(std::string_view text, const std::string& label)
{
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return Error{label, parsed.error().message};
    const json& root = *parsed;
    if (!root.is_object())
        return Error{label, "index is " + io::describeJson(root) + ", not a JSON object"};
    if (const auto it = root.find("metadata"); it != root.end() && !it->is_object() && !it->is_null())
        return Error{label, "'metadata' is " + io::describeJson(*it) + ": it must be an object"};
    const auto map = root.find("weight_map");
    if (map == root.end())
        return Error{label, "'weight_map' is missing: it must map each tensor name to its shard file"};
    if (!map->is_object() || map->empty())
        return Error{label, "'weight_map' is " + io::describeJson(*map) + ": it must be a non-empty object"};
    if (map->size() > kMaxIndexTensors)
        return Error{label, "'weight_map' has " + std::to_string(map->size()) + " entries, more than "
                                + std::to_string(kMaxIndexTensors)};
    WeightIndex index;
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : map->items()) {
        if (!shard.is_string())
            return Error{label, "'weight_map' entry " + io::quoteName(tensor) + " is " + io::describeJson(shard)
                                    + ": it must be a shard file name"};
        const auto& name = shard.get_ref<const std::string&>();
        if (!isPlainShardName(name))
            return Error{label, "'weight_map' entry " + io::quoteName(tensor) + " names shard " + io::quoteName(name)
                                    + ": a shard must be a plain file name inside the model folder (no '/', no "
                                      "'..', no control characters)"};
        constexpr std::string_view kExt = ".safetensors";
        if (name.size() <= kExt.size() || name.compare(name.size() - kExt.size(), kExt.size(), kExt) != 0)
            return Error{label, "'weight_map' entry " + io::quoteName(tensor) + " names shard " + io::quoteName(name)
                                    + ": shards must be .safetensors files"};
        index.weightMap[tensor] = name;
        shards.insert(name);
    }
    index.shards.assign(shards.begin(), shards.end());
    return index;
}

Status checkWeightShapes(const ModelConfig& config, const ModelWeights& w)
{
    const auto fail = [&](const std::string& what, Eigen::Index rows, Eigen::Index cols, Eigen::Index er,
                          Eigen::Index ec) -> Status {
        return Error{config.source, what + ": expected shape [" + std::to_string(er) + ", " + std::to_string(ec) + "], got ["
                                        + std::to_string(rows) + ", " + std::to_string(cols) + "]"};
    };
    const auto mat = [&](const std::string& what, const RowMatrixXf& m, Eigen::Index r, Eigen::Index c) {
        return m.rows() == r && m.cols() == c ? Status(Ok{}) : fail(what, m.rows(), m.cols(), r, c);
    };
    const auto vec = [&](const std::string& what, const RowVectorXf& v, Eigen::Index n) {
        return v.size() == n ? Status(Ok{}) : fail(what, 1, v.size(), 1, n);
    };
    const Eigen::Index d = config.hidden, attn = Eigen::Index(config.heads) * config.headDim,
                       inter = config.intermediate;
    const bool gpt2 = config.isGpt2();
    std::vector<Status> checks;
    checks.push_back(mat("embed", w.embed, config.vocab, d));
    checks.push_back(mat("positions", w.positions, gpt2 ? config.maxPositions : 0, gpt2 ? d : 0));
    for (const Status& s : checks)
        if (!s)
            return s;
    if (w.layers.size() != static_cast<std::size_t>(config.layers))
        return Error{config.source, "weights hold " + std::to_string(w.layers.size()) + " layers, the config "
                                        + std::to_string(config.layers)};
    for (std::size_t i = 0; i < w.layers.size(); ++i) {
        const LayerWeights& l = w.layers[i];
        const std::string p = "layers[" + std::to_string(i) + "].";
        checks.push_back(vec(p + "attnNorm", l.attnNorm, d));
        checks.push_back(vec(p + "attnNormBias", l.attnNormBias, gpt2 ? d : 0));
        checks.push_back(mat(p + "qkv", l.qkv, config.qkvRows(), d));
        checks.push_back(vec(p + "qkvBias", l.qkvBias, config.qkvBias ? config.qkvRows() : 0));
        checks.push_back(mat(p + "out", l.out, d, attn));
        checks.push_back(vec(p + "outBias", l.outBias, config.outBias ? d : 0));
        checks.push_back(vec(p + "mlpNorm", l.mlpNorm, d));
        checks.push_back(vec(p + "mlpNormBias", l.mlpNormBias, gpt2 ? d : 0));
        checks.push_back(mat(p + "up", l.up, gpt2 ? inter : 2 * inter, d));
        checks.push_back(vec(p + "upBias", l.upBias, gpt2 ? inter : 0));
        checks.push_back(mat(p + "down", l.down, d, inter));
        checks.push_back(vec(p + "downBias", l.downBias, gpt2 ? d : 0));
    }
    checks.push_back(vec("finalNorm", w.finalNorm, d));
    checks.push_back(vec("finalNormBias", w.finalNormBias, gpt2 ? d : 0));
    checks.push_back(mat("lmHead", w.lmHead, config.tiedEmbeddings ? 0 : config.vocab, config.tiedEmbeddings ? 0 : d));
    for (const Status& s : checks)
        if (!s)
            return s;
    return Ok{};
}

Result<MemoryEstimate> estimateMemory(const std::string& dir, const ModelConfig& config, const LoadOptions& options)
{
    auto prepared = prepare(dir, config, options);
    if (!prepared)
        return prepared.error();
    return prepared->estimate;
}

Result<ModelWeights> loadWeights(const std::string& dir, const ModelConfig& config, const LoadOptions& options)
{
    auto prepared = prepare(dir, config, options);
    if (!prepared)
        return prepared.error();
    ModelWeights weights;
    try {
        allocate(config, weights);
    } catch (const std::bad_alloc&) {
        return Error{prepared->cat.describe, "cannot allocate " + std::to_string(mib(prepared->estimate.weightBytes))
                                                 + " MiB for the weights"};
    }
    io::ReadLimits limits;
    limits.maxTensorBytes = options.memoryLimitMiB << 20;
    for (const Slot& slot : slotsFor(config, prepared->prefix, &weights)) {
        const Located& located = prepared->cat.tensors.at(slot.tensor.name);
        auto tensor = io::readTensor(located.path, slot.tensor.name, limits);
        if (!tensor)
            return tensor.error();
        if (tensor->shape != slot.tensor.shape) // the file changed since its header was checked
            return Error{located.path, "tensor " + io::quoteName(slot.tensor.name) + ": expected shape "
                                           + shapeText(slot.tensor.shape) + ", got " + shapeText(tensor->shape)};
        if (auto s = place(slot, *tensor, located.path); !s)
            return s.error();
    }
    return weights;
}

} // namespace kvlens::lm
