// SPDX-License-Identifier: GPL-3.0-or-later
// A checkpoint's tensors assembled into the forward's matrices in their stored types: every check
// made from the headers before a payload byte is read, then one pass proving every value finite.
#include "core/lm/weights.h"

#include "core/common/hash.h"
#include "core/io/tensor_file.h"
#include "core/lm/architecture.h"
#include "core/lm/products.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>

#include <unistd.h>

namespace kvlens::lm {

namespace {

using io::shapeText;

std::uint64_t mib(std::uint64_t bytes)
{
    return (bytes + (1ull << 20) - 1) >> 20;
}

/// A tensor the architecture needs from a checkpoint.
struct Need {
    TensorRole role;
    int layer = -1;                   ///< -1: the model's
    std::string name;                 ///< as the checkpoint names it
    std::vector<std::int64_t> shape;  ///< as stored, outermost first
    bool matrix = false;
    bool transposed = false;          ///< stored [in x out] (Hugging Face's Conv1D)
};

/// Whether an optional tensor of the table is there for `c`.
bool present(const TensorName& t, const ModelConfig& c)
{
    if (!t.optional)
        return true;
    switch (t.role) {
    case TensorRole::Head: return !c.tiedEmbeddings;
    case TensorRole::Positions: return c.arch().positions == PositionKind::Learned;
    case TensorRole::QBias:
    case TensorRole::KBias:
    case TensorRole::VBias:
    case TensorRole::QkvBias: return c.qkvBias;
    case TensorRole::OutBias: return c.outBias;
    default: return true;
    }
}

/// The logical shape of a role: [rows, cols] of y = x W^T for matrices, [n] for vectors.
std::vector<std::int64_t> logicalShape(TensorRole role, const ModelConfig& c)
{
    const std::int64_t d = c.hidden, q = std::int64_t(c.heads) * c.headDim, kv = std::int64_t(c.kvHeads) * c.headDim,
                       inter = c.intermediate;
    switch (role) {
    case TensorRole::Embed:
    case TensorRole::Head: return {c.vocab, d};
    case TensorRole::Positions: return {c.maxPositions, d};
    case TensorRole::Q: return {q, d};
    case TensorRole::K:
    case TensorRole::V: return {kv, d};
    case TensorRole::Qkv: return {c.qkvRows(), d};
    case TensorRole::Out: return {d, q};
    case TensorRole::Gate:
    case TensorRole::Up: return {inter, d};
    case TensorRole::Down: return {d, inter};
    case TensorRole::QBias: return {q};
    case TensorRole::KBias:
    case TensorRole::VBias: return {kv};
    case TensorRole::QkvBias: return {c.qkvRows()};
    case TensorRole::UpBias: return {inter};
    default: return {d}; // norms, their biases, the output projections' biases
    }
}

/// The tensors `c` needs, named and shaped as `format` stores them, model-level first, then layer by
/// layer in the table's order (q before k before v, gate before up: the order they stack in).
std::vector<Need> needsFor(const ModelConfig& c, CheckpointFormat format, std::string_view prefix)
{
    const ArchitectureInfo& arch = c.arch();
    std::vector<Need> needs;
    auto add = [&](const TensorName& t, int layer) {
        const std::string_view name = format == CheckpointFormat::Gguf ? t.gguf : t.hf;
        if (name.empty() || !present(t, c))
            return;
        Need n;
        n.role = t.role;
        n.layer = layer;
        n.name = (format == CheckpointFormat::HfFolder ? std::string(prefix) : std::string()) + expandName(name, layer);
        n.shape = logicalShape(t.role, c);
        n.matrix = n.shape.size() == 2;
        n.transposed = n.matrix && arch.conv1d && format == CheckpointFormat::HfFolder && t.perLayer;
        if (n.transposed)
            std::swap(n.shape[0], n.shape[1]);
        needs.push_back(std::move(n));
    };
    for (const TensorName& t : arch.tensors)
        if (!t.perLayer)
            add(t, -1);
    for (int layer = 0; layer < c.layers; ++layer)
        for (const TensorName& t : arch.tensors)
            if (t.perLayer)
                add(t, layer);
    return needs;
}

/// `name` matches `pattern` where "{i}" stands for a decimal layer index.
bool matchesPattern(std::string_view name, std::string_view pattern)
{
    const auto at = pattern.find("{i}");
    if (at == std::string_view::npos)
        return name == pattern;
    const std::string_view head = pattern.substr(0, at), tail = pattern.substr(at + 3);
    if (name.size() <= head.size() + tail.size() || !name.starts_with(head) || !name.ends_with(tail))
        return false;
    const std::string_view digits = name.substr(head.size(), name.size() - head.size() - tail.size());
    return std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

/// Presence, type and shape of every need; the checkpoint's other tensors are the architecture's known
/// extras (noted) or refused, the first named.
Result<LoadNotes> checkAgainstHeaders(const ModelConfig& config, const Checkpoint& cp, const std::vector<Need>& needs,
                                      std::string_view prefix)
{
    std::set<std::string> used;
    for (const Need& need : needs) {
        const auto it = cp.tensors.find(need.name);
        if (it == cp.tensors.end())
            return Error{cp.describe, "tensor " + io::quoteName(need.name) + " is missing (expected shape "
                                          + shapeText(need.shape) + " for " + config.summary() + ")"};
        const CheckpointTensor& t = it->second;
        const bool plainFloat = t.type && (*t.type == ggml::GgmlType::F32 || *t.type == ggml::GgmlType::F16
                                           || *t.type == ggml::GgmlType::BF16);
        const bool usable = plainFloat || (t.type && need.matrix && !need.transposed && ggml::ggmlTraits(*t.type).dequantizable);
        if (!usable)
            return Error{t.path, "tensor " + io::quoteName(t.name) + " has dtype " + t.storedType
                                     + ", not supported for " + (need.matrix && !need.transposed ? "this weight" : "weights")
                                     + (need.matrix && !need.transposed && cp.format == CheckpointFormat::Gguf
                                            ? " (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)"
                                            : " (F32, F16, BF16)")};
        if (t.shape != need.shape)
            return Error{t.path, "tensor " + io::quoteName(t.name) + ": expected shape " + shapeText(need.shape) + ", got "
                                     + shapeText(t.shape)};
        used.insert(need.name);
    }
    LoadNotes notes;
    std::vector<std::string> extras;
    for (const auto& [name, t] : cp.tensors) {
        if (used.count(name))
            continue;
        const std::string_view bare = std::string_view(name).substr(name.starts_with(prefix) ? prefix.size() : 0);
        const auto& patterns = config.arch().extras;
        if (std::any_of(patterns.begin(), patterns.end(), [&](std::string_view p) { return matchesPattern(bare, p); })) {
            extras.push_back(name);
            continue;
        }
        return Error{cp.describe, "tensor " + io::quoteName(name) + " is not used by " + config.summary()
                                      + ": the checkpoint and its config disagree (a layer count, a tied head or a "
                                        "bias the config does not declare), so this would evaluate another model"};
    }
    if (!extras.empty())
        notes.ignoredExtras = std::to_string(extras.size()) + " tensor" + (extras.size() == 1 ? "" : "s")
                              + " the forward does not read (" + extras.front()
                              + (extras.size() > 1 ? ", ..." : "") + ")";
    return notes;
}

const CheckpointTensor& tensorOf(const Checkpoint& cp, const Need& need)
{
    return cp.tensors.at(need.name);
}

/// The float32 rows a worker converts at once from a [rows x cols] matrix: its whole share of the
/// rows when that fits kWholeRangeBytes, else a panel (products.cpp's plan).
std::uint64_t convertedBytes(std::int64_t rows, std::int64_t cols, int threads)
{
    const std::int64_t share = ((rows + threads - 1) / threads + 15) / 16 * 16;
    const auto whole = static_cast<std::uint64_t>(std::min(share, rows)) * static_cast<std::uint64_t>(cols) * sizeof(float);
    if (whole <= kWholeRangeBytes)
        return whole;
    return static_cast<std::uint64_t>(std::min(panelRows(cols), rows)) * static_cast<std::uint64_t>(cols) * sizeof(float);
}

MemoryEstimate estimateFor(const ModelConfig& config, const Checkpoint& cp, const std::vector<Need>& needs,
                           const LoadOptions& options)
{
    MemoryEstimate e;
    const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::uint64_t converted = 0;
    for (const Need& need : needs) {
        const CheckpointTensor& t = tensorOf(cp, need);
        if (need.matrix) {
            e.mappedBytes += t.bytes;
            const std::int64_t rows = need.transposed ? need.shape[1] : need.shape[0];
            const std::int64_t cols = need.transposed ? need.shape[0] : need.shape[1];
            converted = std::max(converted, convertedBytes(rows, cols, threads));
        } else {
            e.residentBytes += static_cast<std::uint64_t>(need.shape[0]) * sizeof(float);
        }
    }
    e.transientBytes = static_cast<std::uint64_t>(threads) * converted;
    e.activationBytes = static_cast<std::uint64_t>(std::max(1, options.forwardsInFlight))
                        * forwardBytes(config, std::max(1, options.contextTokens), threads);
    e.otherBytes = options.otherBytes;
    return e;
}

Status checkLimit(const Checkpoint& cp, const MemoryEstimate& e, const LoadOptions& options)
{
    const std::uint64_t limit = options.memoryLimitMiB > (std::uint64_t(1) << 43) ? ~std::uint64_t(0)
                                                                                  : options.memoryLimitMiB << 20;
    if (e.total() <= limit)
        return Ok{};
    return Error{cp.describe, "the model needs about " + describeEstimate(e, options) + ", more than the limit of "
                                  + std::to_string(options.memoryLimitMiB) + " MiB"};
}

/// A vector tensor widened to float32 into `out` at `offset`.
void widen(const CheckpointTensor& t, RowVectorXf& out, Eigen::Index offset)
{
    ggml::dequantizeRow(*t.type, t.data, out.data() + offset, t.shape[0]);
}

StoredRows storedRows(const CheckpointTensor& t, const Need& need)
{
    StoredRows rows;
    rows.type = *t.type;
    rows.rows = need.transposed ? need.shape[1] : need.shape[0];
    rows.cols = need.transposed ? need.shape[0] : need.shape[1];
    rows.data = t.data;
    rows.rowBytes = static_cast<std::size_t>(t.bytes / static_cast<std::uint64_t>(need.shape[0]));
    rows.transposed = need.transposed;
    return rows;
}

/// GGUF's q/k row order: llama.cpp's converter sends Hugging Face row h d + j d/2 + i (rotate-half
/// pairs i, i + d/2) to h d + 2 i + j (adjacent pairs); logical row r reads stored row order[r].
std::vector<std::int32_t> ggufRopeOrder(int heads, int headDim)
{
    std::vector<std::int32_t> order(static_cast<std::size_t>(heads) * static_cast<std::size_t>(headDim));
    const int half = headDim / 2;
    for (int h = 0; h < heads; ++h)
        for (int j = 0; j < 2; ++j)
            for (int i = 0; i < half; ++i)
                order[static_cast<std::size_t>(h * headDim + j * half + i)] = h * headDim + 2 * i + j;
    return order;
}

/// Where each role goes in the forward's tensors.
struct Destination {
    WeightMatrix* matrix = nullptr;
    RowVectorXf* vector = nullptr;
    Eigen::Index offset = 0; ///< into a concatenated bias
};

Destination destination(ModelTensors& m, const Need& need, const ModelConfig& c)
{
    const Eigen::Index q = Eigen::Index(c.heads) * c.headDim, kv = Eigen::Index(c.kvHeads) * c.headDim;
    if (need.layer < 0) {
        switch (need.role) {
        case TensorRole::Embed: return {&m.embed};
        case TensorRole::Positions: return {&m.positions};
        case TensorRole::Head: return {&m.lmHead};
        case TensorRole::FinalNorm: return {nullptr, &m.finalNorm};
        default: return {nullptr, &m.finalNormBias};
        }
    }
    LayerTensors& l = m.layers[static_cast<std::size_t>(need.layer)];
    switch (need.role) {
    case TensorRole::AttnNorm: return {nullptr, &l.attnNorm};
    case TensorRole::AttnNormBias: return {nullptr, &l.attnNormBias};
    case TensorRole::Q:
    case TensorRole::K:
    case TensorRole::V:
    case TensorRole::Qkv: return {&l.qkv};
    case TensorRole::QBias:
    case TensorRole::QkvBias: return {nullptr, &l.qkvBias, 0};
    case TensorRole::KBias: return {nullptr, &l.qkvBias, q};
    case TensorRole::VBias: return {nullptr, &l.qkvBias, q + kv};
    case TensorRole::Out: return {&l.out};
    case TensorRole::OutBias: return {nullptr, &l.outBias};
    case TensorRole::MlpNorm: return {nullptr, &l.mlpNorm};
    case TensorRole::MlpNormBias: return {nullptr, &l.mlpNormBias};
    case TensorRole::Gate:
    case TensorRole::Up: return {&l.up};
    case TensorRole::UpBias: return {nullptr, &l.upBias};
    case TensorRole::Down: return {&l.down};
    default: return {nullptr, &l.downBias};
    }
}

/// Sizes the concatenated vectors (qkv biases) before their parts are widened into them.
void sizeVectors(ModelTensors& m, const ModelConfig& c)
{
    m.layers.assign(static_cast<std::size_t>(c.layers), LayerTensors{});
    for (LayerTensors& l : m.layers)
        if (c.qkvBias)
            l.qkvBias.resize(c.qkvRows());
}

ModelTensors assemble(const ModelConfig& c, const Checkpoint& cp, const std::vector<Need>& needs)
{
    ModelTensors m;
    sizeVectors(m, c);
    const bool permute = cp.format == CheckpointFormat::Gguf && c.arch().ggufPermutesQK;
    for (const Need& need : needs) {
        const CheckpointTensor& t = tensorOf(cp, need);
        const Destination to = destination(m, need, c);
        if (to.matrix) {
            StoredRows rows = storedRows(t, need);
            if (permute && (need.role == TensorRole::Q || need.role == TensorRole::K))
                rows.rowOrder = ggufRopeOrder(need.role == TensorRole::Q ? c.heads : c.kvHeads, c.headDim);
            to.matrix->append(std::move(rows), t.file);
            continue;
        }
        if (to.vector->size() < to.offset + need.shape[0])
            to.vector->conservativeResize(to.offset + need.shape[0]);
        widen(t, *to.vector, to.offset);
    }
    return m;
}

/// Whether every value of a stored row is finite: the exponent bits of f32, f16 and bf16 values
/// directly, the dequantized values of a block type (its scales can be Inf or NaN).
bool rowIsFinite(ggml::GgmlType type, const std::uint8_t* src, std::int64_t n, std::vector<float>& scratch)
{
    auto allBelow = [&](auto word, std::uint32_t exponent) {
        using Word = decltype(word);
        for (std::int64_t i = 0; i < n; ++i) {
            Word w;
            std::memcpy(&w, src + static_cast<std::size_t>(i) * sizeof(Word), sizeof(Word));
            if ((w & exponent) == exponent)
                return false;
        }
        return true;
    };
    switch (type) {
    case ggml::GgmlType::F32: return allBelow(std::uint32_t{}, 0x7f800000u);
    case ggml::GgmlType::F16: return allBelow(std::uint16_t{}, 0x7c00u);
    case ggml::GgmlType::BF16: return allBelow(std::uint16_t{}, 0x7f80u);
    default:
        scratch.resize(static_cast<std::size_t>(n));
        ggml::dequantizeRow(type, src, scratch.data(), n);
        return std::all_of(scratch.begin(), scratch.end(), [](float x) { return std::isfinite(x); });
    }
}

/// The first non-finite value of a stored tensor, as (flat index, is NaN).
std::optional<std::pair<std::int64_t, bool>> firstNonFinite(const CheckpointTensor& t)
{
    const std::int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1;
    const std::int64_t cols = t.shape.back();
    const std::size_t rowBytes = static_cast<std::size_t>(t.bytes / static_cast<std::uint64_t>(rows));
    std::vector<float> row(static_cast<std::size_t>(cols)), scratch;
    for (std::int64_t r = 0; r < rows; ++r) {
        if (!rowIsFinite(*t.type, t.data + static_cast<std::size_t>(r) * rowBytes, cols, scratch)) {
            ggml::dequantizeRow(*t.type, t.data + static_cast<std::size_t>(r) * rowBytes, row.data(), cols);
            for (std::int64_t i = 0; i < cols; ++i)
                if (!std::isfinite(row[static_cast<std::size_t>(i)]))
                    return std::pair{r * cols + i, std::isnan(row[static_cast<std::size_t>(i)])};
        }
    }
    return std::nullopt;
}

/// Every needed tensor checked finite, on `threads` threads; the first failure in checkpoint order.
Status checkFinite(const Checkpoint& cp, const std::vector<Need>& needs, int threads)
{
    std::vector<std::string> problems(needs.size());
    std::atomic<std::size_t> next{0};
    auto work = [&] {
        for (std::size_t i = next++; i < needs.size(); i = next++) {
            const CheckpointTensor& t = tensorOf(cp, needs[i]);
            if (const auto bad = firstNonFinite(t))
                problems[i] = "tensor " + io::quoteName(t.name) + " holds " + (bad->second ? "NaN" : "Inf")
                              + " at flat index " + std::to_string(bad->first) + " (shape " + shapeText(t.shape) + ")";
        }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i)
        pool.emplace_back(work);
    work();
    for (std::thread& th : pool)
        th.join();
    for (std::size_t i = 0; i < needs.size(); ++i)
        if (!problems[i].empty())
            return Error{tensorOf(cp, needs[i]).path, problems[i]};
    return Ok{};
}

/// "" or "transformer.": which naming a GPT-2 checkpoint uses.
Result<std::string> gpt2Prefix(const Checkpoint& cp)
{
    const bool bare = cp.tensors.count("wte.weight") > 0;
    const bool prefixed = cp.tensors.count("transformer.wte.weight") > 0;
    if (bare && prefixed)
        return Error{cp.describe, "both 'wte.weight' and 'transformer.wte.weight' are present: which naming is meant "
                                  "is ambiguous"};
    return std::string(prefixed ? "transformer." : "");
}

struct Prepared {
    std::vector<Need> needs;
    LoadNotes notes;
    MemoryEstimate estimate;
};

Result<Prepared> prepare(const Checkpoint& cp, const ModelConfig& config, const LoadOptions& options)
{
    std::string prefix;
    if (cp.format == CheckpointFormat::HfFolder && config.arch().conv1d) {
        auto p = gpt2Prefix(cp);
        if (!p)
            return p.error();
        prefix = *p;
    }
    Prepared out;
    out.needs = needsFor(config, cp.format, prefix);
    auto notes = checkAgainstHeaders(config, cp, out.needs, prefix);
    if (!notes)
        return notes.error();
    out.notes = std::move(*notes);
    out.estimate = estimateFor(config, cp, out.needs, options);
    if (auto s = checkLimit(cp, out.estimate, options); !s)
        return s.error();
    return out;
}

} // namespace

std::uint64_t defaultMemoryLimitMiB()
{
    const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    const std::uint64_t physical = pages > 0 && pageSize > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(pageSize)
                                                               : (8ull << 30);
    const std::uint64_t keep = std::max<std::uint64_t>(physical / 100 * 15, 1ull << 30);
    return physical > keep ? (physical - keep) >> 20 : 1;
}


std::uint64_t ModelTensors::storedBytes() const
{
    std::uint64_t bytes = embed.storedBytes() + positions.storedBytes() + lmHead.storedBytes();
    for (const LayerTensors& l : layers)
        bytes += l.qkv.storedBytes() + l.out.storedBytes() + l.up.storedBytes() + l.down.storedBytes();
    return bytes;
}

std::string ModelTensors::storedTypes() const
{
    std::map<std::string, std::uint64_t> bytes;
    auto add = [&](const WeightMatrix& m) {
        if (!m.empty())
            bytes[m.typeName()] += m.storedBytes();
    };
    add(embed);
    add(positions);
    add(lmHead);
    for (const LayerTensors& l : layers)
        for (const WeightMatrix* m : {&l.qkv, &l.out, &l.up, &l.down})
            add(*m);
    std::vector<std::pair<std::uint64_t, std::string>> order;
    for (const auto& [name, n] : bytes)
        order.emplace_back(n, name);
    std::sort(order.rbegin(), order.rend());
    std::string out;
    for (const auto& [n, name] : order)
        out += (out.empty() ? "" : ", ") + name;
    return out;
}

std::uint64_t hashTensors(const ModelTensors& m)
{
    std::uint64_t h = kFnvOffsetBasis;
    auto vector = [&](const RowVectorXf& v) {
        const std::uint64_t n = static_cast<std::uint64_t>(v.size());
        h = fnv1a64Words(reinterpret_cast<const std::uint8_t*>(&n), sizeof n, h);
        h = fnv1a64Words(reinterpret_cast<const std::uint8_t*>(v.data()), n * sizeof(float), h);
    };
    h = m.embed.hash(m.positions.hash(h));
    for (const LayerTensors& l : m.layers) {
        for (const RowVectorXf* v : {&l.attnNorm, &l.attnNormBias, &l.qkvBias, &l.outBias, &l.mlpNorm, &l.mlpNormBias,
                                     &l.upBias, &l.downBias})
            vector(*v);
        h = l.down.hash(l.up.hash(l.out.hash(l.qkv.hash(h))));
    }
    vector(m.finalNorm);
    vector(m.finalNormBias);
    return m.lmHead.hash(h);
}

ModelTensors tensorsFromDense(const ModelWeights& w)
{
    ModelTensors m;
    m.embed = WeightMatrix::fromFloat(w.embed);
    if (w.positions.size())
        m.positions = WeightMatrix::fromFloat(w.positions);
    for (const LayerWeights& l : w.layers)
        m.layers.push_back(LayerTensors{l.attnNorm, l.attnNormBias, WeightMatrix::fromFloat(l.qkv), l.qkvBias,
                                        WeightMatrix::fromFloat(l.out), l.outBias, l.mlpNorm, l.mlpNormBias,
                                        WeightMatrix::fromFloat(l.up), l.upBias, WeightMatrix::fromFloat(l.down),
                                        l.downBias});
    m.finalNorm = w.finalNorm;
    m.finalNormBias = w.finalNormBias;
    if (w.lmHead.size())
        m.lmHead = WeightMatrix::fromFloat(w.lmHead);
    return m;
}

ModelWeights denseFromTensors(const ModelTensors& m)
{
    ModelWeights w;
    w.embed = m.embed.toDense();
    w.positions = m.positions.toDense();
    for (const LayerTensors& l : m.layers)
        w.layers.push_back(LayerWeights{l.attnNorm, l.attnNormBias, l.qkv.toDense(), l.qkvBias, l.out.toDense(),
                                        l.outBias, l.mlpNorm, l.mlpNormBias, l.up.toDense(), l.upBias,
                                        l.down.toDense(), l.downBias});
    w.finalNorm = m.finalNorm;
    w.finalNormBias = m.finalNormBias;
    w.lmHead = m.lmHead.toDense();
    return w;
}

std::uint64_t forwardBytes(const ModelConfig& c, int tokens, int threads)
{
    const auto t = static_cast<std::uint64_t>(tokens);
    const std::uint64_t d = c.hidden, hd = c.headDim, attn = std::uint64_t(c.heads) * hd,
                        kv = std::uint64_t(c.kvHeads) * hd, inter = c.intermediate;
    const std::uint64_t upRows = c.arch().mlp == MlpKind::GeluTanh ? inter : 2 * inter;
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
    for (Need& n : needsFor(config, CheckpointFormat::HfFolder, gpt2Prefix))
        out.push_back({std::move(n.name), std::move(n.shape)});
    return out;
}

std::string describeEstimate(const MemoryEstimate& e, const LoadOptions& options)
{
    std::string s = std::to_string(mib(e.total())) + " MiB (weights " + std::to_string(mib(e.mappedBytes))
                    + " MiB mapped as stored and " + std::to_string(mib(e.residentBytes)) + " MiB of norms, activations "
                    + std::to_string(mib(e.activationBytes)) + " MiB for " + std::to_string(options.forwardsInFlight)
                    + " forwards of " + std::to_string(options.contextTokens) + " tokens, weight panels "
                    + std::to_string(mib(e.transientBytes)) + " MiB";
    if (e.otherBytes > 0)
        s += ", " + (options.otherWhat.empty() ? std::string("other") : options.otherWhat) + " "
             + std::to_string(mib(e.otherBytes)) + " MiB";
    return s + ")";
}

namespace {

/// The shapes of a model's weights, dense (ModelWeights) or stored (ModelTensors): both spell them
/// rows() x cols() and size().
template <class Weights>
Status checkShapes(const ModelConfig& config, const Weights& w)
{
    const auto fail = [&](const std::string& what, Eigen::Index rows, Eigen::Index cols, Eigen::Index er,
                          Eigen::Index ec) -> Status {
        return Error{config.source, what + ": expected shape [" + std::to_string(er) + ", " + std::to_string(ec) + "], got ["
                                        + std::to_string(rows) + ", " + std::to_string(cols) + "]"};
    };
    const auto mat = [&](const std::string& what, const auto& m, Eigen::Index r, Eigen::Index c) {
        return m.rows() == r && m.cols() == c ? Status(Ok{}) : fail(what, m.rows(), m.cols(), r, c);
    };
    const auto vec = [&](const std::string& what, const RowVectorXf& v, Eigen::Index n) {
        return v.size() == n ? Status(Ok{}) : fail(what, 1, v.size(), 1, n);
    };
    const Eigen::Index d = config.hidden, attn = Eigen::Index(config.heads) * config.headDim,
                       inter = config.intermediate;
    const bool layerNorm = config.arch().norm == NormKind::Layer, learned = config.arch().positions == PositionKind::Learned,
               swiGlu = config.arch().mlp == MlpKind::SwiGlu;
    std::vector<Status> checks;
    checks.push_back(mat("embed", w.embed, config.vocab, d));
    checks.push_back(mat("positions", w.positions, learned ? config.maxPositions : 0, learned ? d : 0));
    for (const Status& s : checks)
        if (!s)
            return s;
    if (w.layers.size() != static_cast<std::size_t>(config.layers))
        return Error{config.source, "weights hold " + std::to_string(w.layers.size()) + " layers, the config "
                                        + std::to_string(config.layers)};
    for (std::size_t i = 0; i < w.layers.size(); ++i) {
        const auto& l = w.layers[i];
        const std::string p = "layers[" + std::to_string(i) + "].";
        checks.push_back(vec(p + "attnNorm", l.attnNorm, d));
        checks.push_back(vec(p + "attnNormBias", l.attnNormBias, layerNorm ? d : 0));
        checks.push_back(mat(p + "qkv", l.qkv, config.qkvRows(), d));
        checks.push_back(vec(p + "qkvBias", l.qkvBias, config.qkvBias ? config.qkvRows() : 0));
        checks.push_back(mat(p + "out", l.out, d, attn));
        checks.push_back(vec(p + "outBias", l.outBias, config.outBias ? d : 0));
        checks.push_back(vec(p + "mlpNorm", l.mlpNorm, d));
        checks.push_back(vec(p + "mlpNormBias", l.mlpNormBias, layerNorm ? d : 0));
        checks.push_back(mat(p + "up", l.up, swiGlu ? 2 * inter : inter, d));
        checks.push_back(vec(p + "upBias", l.upBias, swiGlu ? 0 : inter));
        checks.push_back(mat(p + "down", l.down, d, inter));
        checks.push_back(vec(p + "downBias", l.downBias, swiGlu ? 0 : d));
    }
    checks.push_back(vec("finalNorm", w.finalNorm, d));
    checks.push_back(vec("finalNormBias", w.finalNormBias, layerNorm ? d : 0));
    checks.push_back(mat("lmHead", w.lmHead, config.tiedEmbeddings ? 0 : config.vocab, config.tiedEmbeddings ? 0 : d));
    for (const Status& s : checks)
        if (!s)
            return s;
    return Ok{};
}

} // namespace

Status checkWeightShapes(const ModelConfig& config, const ModelWeights& weights)
{
    return checkShapes(config, weights);
}

Status checkTensorShapes(const ModelConfig& config, const ModelTensors& tensors)
{
    return checkShapes(config, tensors);
}

Result<LoadedTensors> loadFromCheckpoint(const Checkpoint& cp, const ModelConfig& config, const LoadOptions& options)
{
    auto prepared = prepare(cp, config, options);
    if (!prepared)
        return prepared.error();
    LoadedTensors loaded;
    try {
        loaded.tensors = assemble(config, cp, prepared->needs);
    } catch (const std::bad_alloc&) {
        return Error{cp.describe, "out of memory while assembling the weights"};
    }
    const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (auto s = checkFinite(cp, prepared->needs, threads); !s)
        return s.error();
    loaded.estimate = prepared->estimate;
    loaded.notes = std::move(prepared->notes);
    return loaded;
}

Result<LoadedTensors> loadTensors(const std::string& dir, const ModelConfig& config, const LoadOptions& options)
{
    auto cp = openHfCheckpoint(dir);
    if (!cp)
        return cp.error();
    return loadFromCheckpoint(*cp, config, options);
}

Result<MemoryEstimate> estimateMemory(const std::string& dir, const ModelConfig& config, const LoadOptions& options)
{
    auto cp = openHfCheckpoint(dir);
    if (!cp)
        return cp.error();
    auto prepared = prepare(*cp, config, options);
    if (!prepared)
        return prepared.error();
    return prepared->estimate;
}

Result<ModelWeights> loadWeights(const std::string& dir, const ModelConfig& config, const LoadOptions& options)
{
    auto loaded = loadTensors(dir, config, options);
    if (!loaded)
        return loaded.error();
    return denseFromTensors(loaded->tensors);
}

} // namespace kvlens::lm
