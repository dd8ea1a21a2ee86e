// SPDX-License-Identifier: GPL-3.0-or-later
// The capture: one forward of the evaluator's engine keeping Q, K, V of the chosen layers, and the
// model dump file written from them (the layout scripts/capture_kv.py writes and inspectModelDump reads).
#include "core/eval/capture.h"

#include "core/eval/model_input.h"

#include "core/common/format.h"
#include "core/common/fp16.h"
#include "core/eval/evaluator.h"
#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/lm/gguf_model.h"
#include "core/lm/hf_config.h"
#include "core/lm/token_ids.h"
#include "core/lm/tokenizer.h"
#include "core/lm/weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

namespace kvlens::eval {

namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t mib(std::uint64_t bytes)
{
    return (bytes + (1u << 20) - 1) >> 20;
}

std::string layerList(const std::vector<int>& layers)
{
    std::string s;
    for (std::size_t i = 0; i < layers.size(); ++i)
        s += (i ? "," : "") + std::to_string(layers[i]);
    return s;
}

/// Mean of -log softmax(logits[t])[tokens[t + 1]] over t = 0..T-2, in double.
double meanNextTokenLoss(const RowMatrixXf& logits, std::span<const std::int32_t> tokens)
{
    const Eigen::Index n = static_cast<Eigen::Index>(tokens.size()) - 1;
    if (n < 1)
        return std::numeric_limits<double>::quiet_NaN();
    double sum = 0.0;
    for (Eigen::Index t = 0; t < n; ++t) {
        const auto row = logits.row(t);
        const double mx = row.maxCoeff();
        double z = 0.0;
        for (Eigen::Index v = 0; v < row.size(); ++v)
            z += std::exp(double(row(v)) - mx);
        sum += mx + std::log(z) - double(row(tokens[static_cast<std::size_t>(t + 1)]));
    }
    return sum / static_cast<double>(n);
}

} // namespace

const std::vector<std::string>& dumpLayoutKeys()
{
    static const std::vector<std::string> keys = {"kvlens_dump", "layers", "q_heads", "kv_heads", "head_dim", "tokens"};
    return keys;
}

const std::vector<std::string>& dumpProvenanceKeys()
{
    static const std::vector<std::string> keys = {"model",     "rope",        "positions", "source",
                                                  "model_layers", "span_loss", "captured_by", "model_dir"};
    return keys;
}

std::uint64_t captureBytes(const lm::ModelConfig& config, int ctx, int keptLayers, bool f32)
{
    const std::uint64_t values = static_cast<std::uint64_t>(std::max(0, keptLayers))
                                 * static_cast<std::uint64_t>(config.heads + 2 * config.kvHeads)
                                 * static_cast<std::uint64_t>(std::max(0, ctx)) * static_cast<std::uint64_t>(config.headDim);
    return values * (4 + (f32 ? 4 : 2)) + (64u << 10); // the header: far less than 64 KiB
}

Status checkCaptureSpec(const CaptureSpec& spec)
{
    if (spec.modelDir.empty())
        return Error{"model", "a model folder is needed"};
    if (spec.textFile.empty() == spec.tokensFile.empty())
        return Error{"text", "give exactly one of a text file and a token-id file (.npy)"};
    if (spec.ctx < CaptureLimits::kMinCtx || spec.ctx > CaptureLimits::kMaxCtx)
        return Error{"ctx", "must be in [" + std::to_string(CaptureLimits::kMinCtx) + ", "
                                + std::to_string(CaptureLimits::kMaxCtx) + "], got " + std::to_string(spec.ctx)};
    if (spec.offset < 0)
        return Error{"offset", "must be >= 0, got " + std::to_string(spec.offset)};
    for (std::size_t i = 0; i < spec.layers.size(); ++i)
        if (spec.layers[i] < 0 || (i > 0 && spec.layers[i] <= spec.layers[i - 1]))
            return Error{"layers", "must be increasing layer indices >= 0; entry " + std::to_string(i) + " is "
                                       + std::to_string(spec.layers[i])};
    if (spec.threads < 0 || spec.threads > 1024)
        return Error{"threads", "must be in [0, 1024], got " + std::to_string(spec.threads)};
    if (!(spec.memoryLimitMb >= 0.0) || spec.memoryLimitMb > double(1 << 30))
        return Error{"memory_limit_mb", "must be in [0, 2^30] (0: most of physical memory)"};
    if (spec.metadata.size() > static_cast<std::size_t>(CaptureLimits::kMaxMetadataEntries))
        return Error{"metadata", "at most " + std::to_string(CaptureLimits::kMaxMetadataEntries) + " entries, got "
                                     + std::to_string(spec.metadata.size())};
    for (const auto& [key, value] : spec.metadata) {
        const auto& layout = dumpLayoutKeys();
        const auto& provenance = dumpProvenanceKeys();
        if (key.empty() || std::find(layout.begin(), layout.end(), key) != layout.end())
            return Error{"metadata", "key '" + key + "' is not allowed (empty, or one of the dump's layout keys: "
                                         "kvlens_dump, layers, q_heads, kv_heads, head_dim, tokens)"};
        if (std::find(provenance.begin(), provenance.end(), key) != provenance.end())
            return Error{"metadata", "key '" + key + "' is one of the keys the capture writes itself (model, rope, "
                                         "positions, source, model_layers, span_loss, captured_by, model_dir): "
                                         "a --meta value would overwrite the dump's provenance; choose another key"};
        if (key.size() > CaptureLimits::kMaxMetadataBytes || value.size() > CaptureLimits::kMaxMetadataBytes)
            return Error{"metadata", "key and value must each be at most "
                                         + std::to_string(CaptureLimits::kMaxMetadataBytes) + " bytes"};
        if (!io::isValidUtf8(key) || !io::isValidUtf8(value))
            return Error{"metadata", "keys and values must be valid UTF-8"};
    }
    return Ok{};
}

Result<CaptureResult> captureChunk(const lm::Transformer& model, std::span<const std::int32_t> chunk,
                                   const std::vector<int>& layers, const std::string& source,
                                   const std::function<bool()>& cancelled)
{
    const lm::ModelConfig& config = model.config();
    lm::ForwardOptions options;
    options.capture.start = 0;
    options.capture.count = static_cast<int>(chunk.size());
    options.capture.layers = layers;
    options.cancelled = cancelled;
    const auto started = Clock::now();
    auto pass = model.forward(chunk, options);
    if (!pass)
        return pass.error();
    CaptureResult r;
    r.forwardMs = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    r.modelLayers = config.layers;
    r.qHeads = config.heads;
    r.kvHeads = config.kvHeads;
    r.headDim = config.headDim;
    r.tokens = static_cast<int>(chunk.size());
    if (layers.empty()) {
        for (int l = 0; l < config.layers; ++l)
            r.layers.push_back(l);
    } else {
        r.layers = layers;
    }
    for (const int l : r.layers)
        r.captured.push_back(std::move(pass->capture[static_cast<std::size_t>(l)]));
    r.spanLoss = meanNextTokenLoss(pass->logits, chunk);

    auto& m = r.metadata;
    m["model"] = config.summary();
    m["rope"] = config.arch().positions == lm::PositionKind::Learned
                    ? "none (learned absolute positions added to the embeddings)"
                    : "post" + (config.ropeScaling.kind == lm::RopeScaling::Kind::None ? std::string()
                                                                                       : ", scaling " + config.ropeScaling.describe());
    m["positions"] = "0.." + std::to_string(r.tokens - 1);
    m["source"] = source;
    m["model_layers"] = layerList(r.layers);
    if (std::isfinite(r.spanLoss)) {
        char loss[32];
        std::snprintf(loss, sizeof loss, "%.4f", r.spanLoss);
        m["span_loss"] = std::string(loss) + " nats/token (mean next-token loss over positions 0.."
                         + std::to_string(r.tokens - 2) + ", exact cache)";
    }
    m["captured_by"] = "kvlens capture (C++ forward: K and Q after RoPE as the KV cache holds them, V as written)";
    return r;
}

Result<CaptureResult> runCapture(const CaptureSpec& spec, const std::function<bool()>& cancelled)
{
    if (auto ok = checkCaptureSpec(spec); !ok)
        return ok.error();
    auto modelSource = lm::openModelSource(spec.modelDir); // a Hugging Face folder or a GGUF file
    if (!modelSource)
        return modelSource.error();
    const lm::ModelConfig* config = &modelSource->config;
    if (spec.ctx > config->maxChunkTokens())
        return Error{"ctx", "must be at most " + std::to_string(config->maxChunkTokens()) + " (the model's context: '"
                                + config->contextKey + "' of " + config->source + "), got " + std::to_string(spec.ctx)};
    for (const int l : spec.layers)
        if (l >= config->layers)
            return Error{"layers", "layer " + std::to_string(l) + " must be in [0, " + std::to_string(config->layers - 1)
                                       + "]: the model has " + std::to_string(config->layers) + " layers"};
    const int kept = spec.layers.empty() ? config->layers : static_cast<int>(spec.layers.size());

    // Memory: the model (weights, one forward) from its headers, and the capture, before loading.
    lm::LoadOptions load;
    const std::uint64_t limitMiB = memoryLimitMiB(spec.memoryLimitMb);
    load.memoryLimitMiB = std::numeric_limits<std::uint64_t>::max() >> 21;
    load.contextTokens = spec.ctx;
    load.forwardsInFlight = 1;
    load.threads = spec.threads;
    auto estimate = lm::estimateMemory(*modelSource, load);
    if (!estimate)
        return estimate.error();
    const std::uint64_t captureNeed = captureBytes(*config, spec.ctx, kept, spec.f32);
    const std::uint64_t limit = limitMiB << 20;
    if (estimate->total() + captureNeed > limit)
        return Error{"memory_limit_mb", "the capture needs about " + std::to_string(mib(estimate->total() + captureNeed))
                                            + " MiB (the model " + std::to_string(mib(estimate->total()))
                                            + " MiB with one forward of " + std::to_string(spec.ctx) + " tokens, Q, K, V of "
                                            + std::to_string(kept) + " layers and the dump "
                                            + std::to_string(mib(captureNeed)) + " MiB), more than the limit of "
                                            + std::to_string(limitMiB)
                                            + " MiB; give a smaller ctx, fewer layers or a larger limit"};
    load.memoryLimitMiB = limitMiB;
    auto model = lm::Transformer::load(*modelSource, load);
    if (!model)
        return model.error();

    // Tokenized only as far as the chunk reaches (offset + ctx tokens), cancellable while it reads.
    auto read = readModelInput(spec.modelDir, spec.textFile, spec.tokensFile, spec.parseSpecialTokens,
                               model->config().vocab, static_cast<std::size_t>(spec.offset + spec.ctx), cancelled);
    if (!read)
        return read.error();
    std::vector<std::int32_t> tokens = std::move(read->tokens);
    std::unique_ptr<lm::Tokenizer> tokenizer = std::move(read->tokenizer);
    const std::string input = spec.tokensFile.empty() ? spec.textFile : spec.tokensFile;
    if (!spec.tokensFile.empty())
        if (auto ok = lm::checkTokenIds(tokens, model->config().vocab, spec.tokensFile); !ok)
            return ok.error();
    const auto available = static_cast<long long>(tokens.size());
    if (spec.offset + spec.ctx > available)
        return Error{"offset", input + " gives " + std::to_string(available) + " tokens: a chunk of "
                                   + std::to_string(spec.ctx) + " (ctx) from token " + std::to_string(spec.offset)
                                   + " needs " + std::to_string(spec.offset + spec.ctx)
                                   + "; give a smaller offset or ctx, or a longer text"};
    std::vector<std::int32_t> chunk(tokens.begin() + spec.offset, tokens.begin() + spec.offset + spec.ctx);
    const std::optional<std::int32_t> bos = tokenizer->bos();
    if (bos) // as kvlens eval runs each chunk (llama.cpp's perplexity)
        chunk.front() = *bos;
    const std::string source = input + ", tokens " + std::to_string(spec.offset) + ".."
                               + std::to_string(spec.offset + spec.ctx - 1) + " (" + tokenizer->kind() + " tokenizer"
                               + (bos ? ", the first replaced by BOS " + std::to_string(*bos) : std::string()) + ")";
    auto result = captureChunk(*model, chunk, spec.layers, source, cancelled);
    if (!result)
        return result;
    result->metadata["model_dir"] = spec.modelDir;
    for (const auto& [key, value] : spec.metadata)
        result->metadata[key] = value;
    return result;
}

Result<std::string> dumpFileBytes(const CaptureResult& capture, bool f32)
{
    const auto layers = static_cast<int>(capture.captured.size());
    if (layers == 0)
        return Error{"layers", "no layer was captured"};
    const std::uint64_t itemBytes = f32 ? 4 : 2;
    nlohmann::ordered_json header;
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    meta["kvlens_dump"] = "1";
    meta["layers"] = std::to_string(layers);
    meta["q_heads"] = std::to_string(capture.qHeads);
    meta["kv_heads"] = std::to_string(capture.kvHeads);
    meta["head_dim"] = std::to_string(capture.headDim);
    meta["tokens"] = std::to_string(capture.tokens);
    for (const auto& [key, value] : capture.metadata) {
        const auto& layout = dumpLayoutKeys();
        if (std::find(layout.begin(), layout.end(), key) == layout.end())
            meta[key] = value;
    }
    header["__metadata__"] = meta;
    struct Part {
        const std::vector<float>* values;
        std::string name;
    };
    std::vector<Part> parts;
    std::uint64_t offset = 0;
    for (int l = 0; l < layers; ++l) {
        const lm::LayerCapture& c = capture.captured[static_cast<std::size_t>(l)];
        for (const char kind : {'k', 'v', 'q'}) {
            const std::vector<float>& values = kind == 'k' ? c.k : kind == 'v' ? c.v : c.q;
            const int heads = kind == 'q' ? capture.qHeads : capture.kvHeads;
            const std::string name = "layers." + std::to_string(l) + "." + kind;
            const std::uint64_t count = std::uint64_t(heads) * std::uint64_t(capture.tokens) * std::uint64_t(capture.headDim);
            if (values.size() != count)
                return Error{name, "holds " + std::to_string(values.size()) + " values; expected " + std::to_string(count)};
            header[name] = {{"dtype", f32 ? "F32" : "F16"},
                            {"shape", {1, heads, capture.tokens, capture.headDim}},
                            {"data_offsets", {offset, offset + count * itemBytes}}};
            offset += count * itemBytes;
            parts.push_back({&values, name});
        }
    }
    std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text.append((8 - text.size() % 8) % 8, ' '); // the data start 8-byte aligned
    std::string out;
    try {
        out.reserve(8 + text.size() + offset);
    } catch (const std::bad_alloc&) {
        return Error{"memory_limit_mb", "cannot allocate " + std::to_string(mib(8 + text.size() + offset))
                                            + " MiB for the dump"};
    }
    const std::uint64_t length = text.size();
    for (int i = 0; i < 8; ++i)
        out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
    out += text;
    for (const Part& p : parts) {
        const std::vector<float>& v = *p.values;
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (f32) {
                std::uint32_t bits = 0;
                std::memcpy(&bits, &v[i], 4);
                for (int b = 0; b < 4; ++b)
                    out.push_back(static_cast<char>((bits >> (8 * b)) & 0xff));
                continue;
            }
            if (!(std::fabs(v[i]) < kHalfMax + 16.0f)) // below 65520 rounds to 65504; NaN refused too
                return Error{p.name, "value " + formatNumber(v[i]) + " at flat index " + std::to_string(i)
                                         + " is beyond F16's range (65504); write the dump as F32"};
            const std::uint16_t h = floatToHalfBits(v[i]);
            out.push_back(static_cast<char>(h & 0xff));
            out.push_back(static_cast<char>(h >> 8));
        }
    }
    return out;
}

} // namespace kvlens::eval
