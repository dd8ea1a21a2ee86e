// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens capture: the evaluator's own forward writes a model dump (Q, K, V of every layer and head
// over one chunk of a text), so the Model map and the advisor read any model `kvlens eval` loads.
#pragma once

#include "core/common/result.h"
#include "core/lm/transformer.h"

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace kvlens::eval {

/// What to capture. The chunk is tokens [offset, offset + ctx) of the text's (or the id file's)
/// tokens, run as one causal forward at positions 0..ctx-1, its first token replaced by BOS when the
/// tokenizer adds one (as `kvlens eval` runs each chunk).
struct CaptureSpec {
    std::string modelDir;           ///< a Hugging Face model folder
    std::string textFile;           ///< UTF-8 text, tokenized by the model's tokenizer ...
    std::string tokensFile;         ///< ... or token ids (.npy int32/int64): exactly one of the two
    int ctx = 512;                  ///< tokens in the chunk (at most the model's context)
    long long offset = 0;           ///< the chunk's first token in the token stream
    std::vector<int> layers;        ///< model layers kept, increasing (dump layer i = layers[i]); empty: all
    bool parseSpecialTokens = true; ///< byte-level BPE: match special tokens in the text
    bool f32 = false;               ///< F32 tensors instead of F16
    int threads = 0;                ///< worker threads of the forward (0: all)
    double memoryLimitMb = 0.0;     ///< 0: lm::defaultMemoryLimitMiB()
    std::map<std::string, std::string> metadata; ///< added to the dump's __metadata__ (layout keys refused)
};

/// Limits of a capture's fields.
struct CaptureLimits {
    static constexpr int kMinCtx = 1;
    static constexpr int kMaxCtx = 1 << 17;
    static constexpr int kMaxMetadataEntries = 64;
    static constexpr std::size_t kMaxMetadataBytes = 4096; ///< per key or value
};

/// The captured vectors of the kept layers and what the dump says about them.
struct CaptureResult {
    int modelLayers = 0, qHeads = 0, kvHeads = 0, headDim = 0, tokens = 0;
    std::vector<int> layers;                ///< the model layer of each dump layer
    std::vector<lm::LayerCapture> captured; ///< [dump layer]: q [qHeads x tokens x headDim], k and v [kvHeads x ...]
    std::map<std::string, std::string> metadata;
    double spanLoss = 0.0;   ///< mean next-token loss over the chunk, nats per token (positions 0..ctx-2)
    double forwardMs = 0.0;
};

/// Keys a dump's __metadata__ always holds (the layout), which CaptureSpec::metadata may not set.
const std::vector<std::string>& dumpLayoutKeys();
/// Keys the capture writes itself (the dump's provenance: model, rope, source, span_loss, ...), which
/// CaptureSpec::metadata may not set either: a user's --meta must never overwrite them.
const std::vector<std::string>& dumpProvenanceKeys();

/// Bytes a capture holds besides the model and its forward: the float copy of the kept layers' Q, K
/// and V, and the dump file assembled in memory (2 or 4 bytes a value, and its header).
std::uint64_t captureBytes(const lm::ModelConfig& config, int ctx, int keptLayers, bool f32);

/// Checks the spec's own fields (ranges, exactly one of text and tokens, the layer list, the
/// metadata), naming the field; the model-dependent checks come in runCapture.
Status checkCaptureSpec(const CaptureSpec& spec);

/// Runs `chunk` through `model` (positions 0..size-1) and keeps Q, K (after RoPE, as the cache holds
/// them) and V of `layers` (empty: every layer). `source` describes the chunk for the metadata.
/// `cancelled` is polled between layers (Error::cancellation()).
Result<CaptureResult> captureChunk(const lm::Transformer& model, std::span<const std::int32_t> chunk,
                                   const std::vector<int>& layers, const std::string& source,
                                   const std::function<bool()>& cancelled = {});

/// Loads the model (its memory need from the headers, plus captureBytes, checked against
/// spec.memoryLimitMb before anything is loaded), reads or tokenizes the input, and captures the chunk.
/// Refused naming the field: the model's and tokenizer's own refusals, ctx beyond the model's context
/// ('ctx'), a layer the model does not have ('layers'), a chunk past the end of the tokens
/// ('offset'), the memory estimate over the limit ('memory_limit_mb'), cancellation (Error::cancellation()).
Result<CaptureResult> runCapture(const CaptureSpec& spec, const std::function<bool()>& cancelled = {});

/// The dump file: safetensors with layers.{L}.k, .v, .q ([1, heads, tokens, head_dim], C order, F16
/// or F32; written k, v, q per layer, as scripts/capture_kv.py writes them), the header padded to 8
/// bytes, and __metadata__: kvlens_dump "1", layers, q_heads, kv_heads, head_dim, tokens, and the
/// result's metadata. Refused: a value beyond F16's range in an F16 dump (naming the tensor, the
/// index and the value; F32 holds it).
Result<std::string> dumpFileBytes(const CaptureResult& capture, bool f32);

} // namespace kvlens::eval
