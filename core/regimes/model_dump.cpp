// SPDX-License-Identifier: GPL-3.0-or-later
// The model dump: its layout checked once, and the `model` regime, which reads one (layer, head)
// cell through the imported regime with grouped-query heads mapped and causal positions set.
#include "core/regimes/model_dump.h"

#include "core/common/format.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_file_cache.h"
#include "core/regimes/imported.h"

#include <algorithm>
#include <optional>
#include <memory>
#include <mutex>
#include <set>

namespace kvlens {

namespace {

using io::shapeText;

std::string quoted(const std::string& name)
{
    return "'" + name + "'";
}

} // namespace

std::string ModelDump::tensorName(int layer, char kind) const
{
    return perLayer ? "layers." + std::to_string(layer) + "." + kind : std::string(1, kind);
}

namespace {

/// Largest layer index a dump may name: the model regime's `layer` parameter range.
constexpr int kMaxDumpLayer = (1 << 16) - 1;

/// A per-layer tensor name `layers.{L}.{k|v|q}` split into its layer and kind, without exceptions
/// or overflow: digits only, no sign, no leading zero (so "layers.07.k" cannot alias layer 7), at
/// most 6 of them. nullopt for any other name; `tooLarge` set for a well-formed name whose index
/// exceeds kMaxDumpLayer.
std::optional<std::pair<int, char>> parseLayerName(std::string_view name, bool& tooLarge)
{
    constexpr std::string_view prefix = "layers.";
    tooLarge = false;
    if (name.size() < prefix.size() + 3 || name.substr(0, prefix.size()) != prefix)
        return std::nullopt;
    const std::string_view rest = name.substr(prefix.size());
    const std::size_t dot = rest.find('.');
    if (dot == std::string_view::npos || dot == 0 || rest.size() != dot + 2)
        return std::nullopt;
    const char kind = rest[dot + 1];
    if (kind != 'k' && kind != 'v' && kind != 'q')
        return std::nullopt;
    const std::string_view digits = rest.substr(0, dot);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    if (digits.size() > 1 && digits[0] == '0')
        return std::nullopt;
    if (digits.size() > 6) {
        tooLarge = true;
        return std::nullopt;
    }
    int layer = 0;
    for (const char c : digits)
        layer = layer * 10 + (c - '0');
    if (layer > kMaxDumpLayer) {
        tooLarge = true;
        return std::nullopt;
    }
    return std::make_pair(layer, kind);
}

/// Inspected dumps per file identity (a 10^5-layer dump is checked once, not per cell).
struct DumpCache {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<const Result<ModelDump>>> entries;
};

DumpCache& dumpCache()
{
    static DumpCache cache;
    return cache;
}

Result<ModelDump> inspectUncached(const std::string& path, const std::string& field,
                                  const io::CachedTensorFile& cached)
{
    const io::TensorFileInfo& info = cached.info;
    ModelDump dump;
    dump.path = path;
    dump.metadata = info.metadata;
    // Layers are counted from the names the file holds, checked while scanning: a single tensor
    // named layers.2147483647.k must not make the dump "have" 2^31 layers.
    std::map<int, int> kinds; // layer -> bit mask of k (1), v (2), q (4) present
    for (const auto& t : info.tensors) {
        bool tooLarge = false;
        const auto parsed = parseLayerName(t.name, tooLarge);
        if (tooLarge)
            return Error{field, path + ": tensor " + io::quoteName(t.name) + " names a layer above "
                                       + std::to_string(kMaxDumpLayer) + " (a dump's layers are 0.."
                                       + std::to_string(kMaxDumpLayer) + ")"};
        if (parsed)
            kinds[parsed->first] |= parsed->second == 'k' ? 1 : parsed->second == 'v' ? 2 : 4;
    }
    struct Expected {
        std::string name;
        int layer;
        char kind;
    };
    std::vector<Expected> expected;
    if (!kinds.empty()) {
        dump.perLayer = true;
        int next = 0;
        for (const auto& [layer, mask] : kinds) {
            if (layer != next)
                return Error{field, path + ": layer " + std::to_string(next) + " has no tensor, but layer "
                                           + std::to_string(layer) + " has: a dump's layers are 0..N-1 without gaps"};
            ++next;
        }
        dump.layers = next;
        for (int l = 0; l < dump.layers; ++l)
            for (char kind : {'k', 'v', 'q'})
                expected.push_back({dump.tensorName(l, kind), l, kind});
    } else if (cached.find("k") && cached.find("v") && cached.find("q")) {
        dump.perLayer = false;
        for (char kind : {'k', 'v', 'q'})
            expected.push_back({std::string(1, kind), -1, kind});
    } else {
        return Error{field, path + ": not a model dump: it needs tensors layers.{L}.k, layers.{L}.v, layers.{L}.q "
                                   "([batch, heads, tokens, head_dim]) or rank-5 k, v, q ([layers, batch, heads, "
                                   "tokens, head_dim]); it has: " + io::tensorNameList(info.tensors)};
    }
    const std::size_t rank = dump.perLayer ? 4 : 5;
    // The first K and the first Q set the shape every other tensor of its kind must have.
    const io::TensorInfo* firstKv = nullptr;
    const io::TensorInfo* firstQ = nullptr;
    for (const Expected& e : expected) {
        const io::TensorInfo* found = cached.find(e.name);
        if (!found)
            return Error{field, path + ": tensor " + quoted(e.name) + " is missing (a dump holds k, v and q for every "
                                       "layer 0.." + std::to_string(dump.layers - 1) + ")"};
        const io::TensorInfo& t = *found;
        if (t.shape.size() != rank)
            return Error{field, path + ": tensor " + quoted(t.name) + " has shape " + shapeText(t.shape) + "; expected "
                                       + (dump.perLayer ? "[batch, heads, tokens, head_dim]"
                                                        : "[layers, batch, heads, tokens, head_dim]")};
        const io::TensorInfo*& first = e.kind == 'q' ? firstQ : firstKv;
        if (!first) {
            first = &t;
            continue;
        }
        const auto& a = t.shape;
        const auto& b = first->shape;
        const std::size_t heads = rank - 3, tokens = rank - 2, dim = rank - 1;
        const char* what = a[heads] != b[heads] ? "heads" : a[dim] != b[dim] ? "head_dim" : nullptr;
        if (!what && e.kind != 'q' && a[tokens] != b[tokens])
            what = "tokens";
        if (!what && !dump.perLayer && a[0] != b[0])
            what = "layers";
        if (what) {
            const std::size_t axis = std::string_view(what) == "heads" ? heads
                                     : std::string_view(what) == "head_dim" ? dim
                                     : std::string_view(what) == "tokens" ? tokens : 0;
            return Error{field, path + ": tensor " + quoted(t.name) + " has " + std::to_string(a[axis]) + " " + what
                                       + " (shape " + shapeText(a) + ") but " + quoted(first->name) + " has "
                                       + std::to_string(b[axis]) + " (shape " + shapeText(b) + ")"};
        }
    }
    const auto& k = firstKv->shape;
    const auto& q = firstQ->shape;
    dump.kvHeads = static_cast<int>(k[rank - 3]);
    dump.qHeads = static_cast<int>(q[rank - 3]);
    dump.tokens = static_cast<int>(k[rank - 2]);
    dump.queryTokens = static_cast<int>(q[rank - 2]);
    dump.headDim = static_cast<int>(k[rank - 1]);
    if (!dump.perLayer)
        dump.layers = static_cast<int>(k[0]);
    if (q[rank - 1] != k[rank - 1])
        return Error{field, path + ": tensor " + quoted(firstQ->name) + " has head_dim " + std::to_string(q[rank - 1])
                                   + " but " + quoted(firstKv->name) + " has " + std::to_string(k[rank - 1])};
    if (dump.kvHeads < 1 || dump.qHeads % dump.kvHeads != 0)
        return Error{field, path + ": tensor " + quoted(firstQ->name) + " has " + std::to_string(dump.qHeads)
                                   + " heads, not a multiple of the " + std::to_string(dump.kvHeads) + " K/V heads of "
                                   + quoted(firstKv->name) + " (grouped-query attention needs Q heads = groups x K/V heads)"};
    return dump;
}

} // namespace

Result<ModelDump> inspectModelDump(const std::string& path, const std::string& field)
{
    auto cached = io::inspectTensorFileCached(path);
    if (!cached)
        return Error{field, cached.error().text()};
    DumpCache& c = dumpCache();
    const std::string& key = (*cached)->identity;
    if (!key.empty()) {
        const std::lock_guard lock(c.mutex);
        if (const auto it = c.entries.find(key + '\n' + field); it != c.entries.end())
            return *it->second;
    }
    auto result = std::make_shared<const Result<ModelDump>>(inspectUncached(path, field, **cached));
    if (!key.empty()) {
        const std::lock_guard lock(c.mutex);
        if (c.entries.size() >= 8)
            c.entries.clear();
        c.entries.emplace(key + '\n' + field, result);
    }
    return *result;
}

namespace {

/// The imported regime's parameters for one cell of the dump.
RegimeParams importedParams(const RegimeParams& params, const ModelDump& dump)
{
    const int layer = static_cast<int>(paramNumber(params, "layer"));
    const int head = static_cast<int>(paramNumber(params, "head"));
    return RegimeParams{{"file", dump.path},
                        {"k", dump.tensorName(layer, 'k')},
                        {"v", dump.tensorName(layer, 'v')},
                        {"q", dump.tensorName(layer, 'q')},
                        {"head", static_cast<double>(dump.kvHead(head))},
                        {"q_head", static_cast<double>(head)},
                        {"batch", 0.0},
                        {"layer", dump.perLayer ? 0.0 : static_cast<double>(layer)},
                        {"token_start", paramNumber(params, "token_start")},
                        {"query_start", paramNumber(params, "query_start")},
                        {"max_mb", paramNumber(params, "max_mb")}};
}

class ModelRegime final : public Regime {
public:
    std::string_view name() const override { return "model"; }
    std::string_view description() const override
    {
        return "One (layer, head) cell of a model dump (layers.{L}.k/v/q, post-RoPE K and Q): the head's keys and "
               "values from token_start, its queries from query_start, grouped-query heads mapped, causal attention "
               "by position. A spec's \"layers\" and \"heads\" make every cell a grid point.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        using K = ParamDesc::Kind;
        static const std::vector<ParamDesc> descs = {
            {"file", "dump", "The model dump (.safetensors, .npz) written by scripts/capture_kv.py.", K::Text, 0, 0, 0,
             false, {}, ""},
            {"layer", "layer", "The layer of the cell (0 = the first).", K::Integer, 0, 0, 1 << 16, false, {}, {}},
            {"head", "query head", "The query head of the cell; its K/V head is head / (Q heads / K/V heads).",
             K::Integer, 0, 0, 1 << 16, false, {}, {}},
            {"token_start", "first token", "Position of the first key/value token scored; the run takes N tokens.",
             K::Integer, 0, 0, 1 << 30, false, {}, {}},
            {"query_start", "first query", "Position of the first query; the run takes Q queries from here.",
             K::Integer, 0, 0, 1 << 30, false, {}, {}},
            {"causal", "causal", "on: the query at position t attends keys at positions <= t (as the model did); "
                                 "off: every key.",
             K::Choice, 0, 0, 0, false, {"on", "off"}, "on"},
            {"max_mb", "memory budget (MiB)", "Largest float32 copy of one tensor's selected slice that may be read.",
             K::Real, 2048, 0.01, 1 << 20, true, {}, {}},
        };
        return descs;
    }

    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        auto mapped = resolve(params, shape);
        if (!mapped)
            return mapped.error();
        auto data = importedRegime().generate(mapped->second, shape, engine, seed);
        if (!data)
            return data;
        const int tokenStart = static_cast<int>(paramNumber(params, "token_start"));
        const int queryStart = static_cast<int>(paramNumber(params, "query_start"));
        const ModelDump& dump = mapped->first;
        const int layer = static_cast<int>(paramNumber(params, "layer"));
        const int head = static_cast<int>(paramNumber(params, "head"));
        data->note = "model dump: layer " + std::to_string(layer) + ", query head " + std::to_string(head) + " (K/V head "
                     + std::to_string(dump.kvHead(head)) + " of " + std::to_string(dump.kvHeads) + "), keys at positions "
                     + std::to_string(tokenStart) + ".." + std::to_string(tokenStart + shape.tokens - 1)
                     + ", queries at " + std::to_string(queryStart) + ".." + std::to_string(queryStart + shape.queries - 1);
        if (paramText(params, "causal") == "on") {
            data->keyPositions.resize(static_cast<std::size_t>(shape.tokens));
            data->queryPositions.resize(static_cast<std::size_t>(shape.queries));
            for (int j = 0; j < shape.tokens; ++j)
                data->keyPositions[static_cast<std::size_t>(j)] = tokenStart + j;
            for (int i = 0; i < shape.queries; ++i)
                data->queryPositions[static_cast<std::size_t>(i)] = queryStart + i;
            data->note += "; causal: the query at position t attends keys at positions <= t";
        } else {
            data->note += "; every query attends every key (causal off)";
        }
        return data;
    }

    bool seedIndependent() const override { return true; }
    bool hasModelCells() const override { return true; }

    double inputBytes(const RegimeParams& params, const DataShape& shape) const override
    {
        auto mapped = resolve(params, shape);
        return mapped ? importedRegime().inputBytes(mapped->second, shape) : 0.0;
    }

protected:
    Status checkRules(const RegimeParams& params, const DataShape& shape) const override
    {
        auto mapped = resolve(params, shape);
        if (!mapped)
            return mapped.error();
        return Ok{};
    }

private:
    /// The dump and the imported regime's normalized parameters for the cell, with the cell's own checks.
    static Result<std::pair<ModelDump, RegimeParams>> resolve(const RegimeParams& params, const DataShape& shape)
    {
        auto dump = inspectModelDump(paramText(params, "file"));
        if (!dump)
            return dump.error();
        const int layer = static_cast<int>(paramNumber(params, "layer"));
        const int head = static_cast<int>(paramNumber(params, "head"));
        if (layer >= dump->layers)
            return Error{"regime.layer", "must be in [0, " + std::to_string(dump->layers - 1) + "]: the dump has "
                                             + std::to_string(dump->layers) + " layers, got " + std::to_string(layer)};
        if (head >= dump->qHeads)
            return Error{"regime.head", "must be in [0, " + std::to_string(dump->qHeads - 1) + "]: the dump has "
                                            + std::to_string(dump->qHeads) + " query heads, got " + std::to_string(head)};
        if (shape.d != dump->headDim)
            return Error{"d", "must equal the dump's head_dim, " + std::to_string(dump->headDim) + "; got "
                                  + std::to_string(shape.d)};
        if (paramText(params, "causal") == "on" && paramNumber(params, "query_start") < paramNumber(params, "token_start"))
            return Error{"regime.query_start", "with causal attention every query must see a key: it must be at least "
                                                   "token_start (" + formatNumber(paramNumber(params, "token_start"))
                                                   + "), got " + formatNumber(paramNumber(params, "query_start"))};
        auto mapped = importedRegime().normalize(importedParams(params, *dump), shape);
        if (!mapped)
            return mapped.error();
        return std::make_pair(std::move(dump).value(), std::move(mapped).value());
    }
};

} // namespace

const Regime& modelRegime()
{
    static const ModelRegime regime;
    return regime;
}

} // namespace kvlens
