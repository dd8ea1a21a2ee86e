// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens eval: a transformer over text with its KV cache quantized by each scheme, against the exact
// cache, measured as llama.cpp's KL-divergence tool measures it (without its logits file).
#pragma once

#include "core/common/result.h"
#include "core/eval/eval_result.h"
#include "core/lm/transformer.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::eval {

/// Progress and cancellation of an evaluation (called from the evaluating thread).
struct EvalCallbacks {
    /// done and total in work units (one unit: one token through one layer of a forward pass), and
    /// what is running ("chunk 3 of 20: KQV n = 3").
    std::function<void(double done, double total, const std::string& stage)> progress;
    /// Polled between layers of every forward: true stops the evaluation, which returns what was
    /// scored so far marked cancelled.
    std::function<bool()> cancelled;
    /// After each chunk: what has been scored so far (summaries and attribution rows over the
    /// chunks done, chunksScored counting them), for a view that fills in as the run goes.
    std::function<void(const EvalResult& sofar)> partial;
    /// Called by runEval(spec, ...) once the model is loaded, before anything runs on it: installs a
    /// forward device built outside core (lm::Transformer::setDevice; the app's OpenCL forward, as the
    /// spec's backend and device ask) or leaves the CPU. Returns a note on the choice for the run's
    /// files ("auto: ...", "" for none); an error ends the run.
    std::function<Result<std::string>(lm::Transformer& model)> prepare;
};

/// The quantized cache of one configuration: for every (layer, KV head) its K and V path plans, from
/// the run's seed mixed with the cell's index (cellSeed) and calibrated on that cell's rows of the
/// calibration text; applied causally to each chunk (encodePathCausal: groups encoded when complete,
/// from their own rows and calibration data). A mask selects which layers (and heads) and paths are
/// quantized (per-layer attribution); the rest stay exact.
class CodecCache final : public lm::KvCacheHook {
public:
    /// Calibration rows per (layer, KV head): keys, values, and the queries of the heads reading it.
    struct Calibration {
        std::vector<std::vector<RowMatrixXf>> keys, values, queries; ///< [layer][kvHead]
    };

    /// Plans every cell. `layers` (size = model layers) gives each layer's scheme. With
    /// `ggmlQueryConversion`, a layer whose keys are stored in one of llama.cpp's cache types (a
    /// ggml quantizer or fp16, nothing else on the path) has its queries converted as ggml converts
    /// them (queryConversion); otherwise queries stay float32 (the codec alone).
    static Result<std::shared_ptr<const CodecCache>> plan(const std::vector<SchemeConfig>& layers, int budget,
                                                          int kvHeads, int headDim, std::uint64_t seed,
                                                          const Calibration* calibration, bool ggmlQueryConversion = false);

    /// A view of this cache quantizing only `layer` (kvHead -1: every head) on the chosen paths.
    struct Mask {
        int layer = -1;      ///< -1: every layer
        int kvHead = -1;     ///< -1: every head
        bool keys = true, values = true;
    };
    std::shared_ptr<const lm::KvCacheHook> masked(const Mask& mask) const;

    bool quantizes(int) const override { return true; }
    /// The layer's K (or V) codec group (PathPlan::causalGroup; the largest over its KV heads).
    int causalGroup(int layer, bool keys) const override;
    void apply(int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat,
               RowMatrixXf& vhat) const override;
    std::optional<ggml::GgmlType> queryConversion(int layer, int kvHead) const override;
    /// The layers' query conversions, as ggml names them ("q8_0", or "f32" where none), one per layer
    /// when they differ, for the files.
    std::string queryConversionName() const;
    /// The same, on the paths and cells `mask` selects (the others copied exact).
    void applyMasked(const Mask& mask, int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v,
                     RowMatrixXf& khat, RowMatrixXf& vhat) const;

    /// Exact bits per coordinate, mean over the cells, at `tokens` tokens.
    double bitsK(int tokens) const;
    double bitsV(int tokens) const;

private:
    struct Cell;
    CodecCache() = default;
    std::vector<std::vector<std::shared_ptr<const Cell>>> m_cells; ///< [layer][kvHead]
    const Calibration* m_calibration = nullptr;
};

/// The exact cache's K, V and Q rows of every (layer, KV head) over the first `calibration` tokens
/// (forward passes of at most `ctx` tokens, each chunk's first token BOS when given).
Result<CodecCache::Calibration> calibrationFromText(const lm::Transformer& model, const std::vector<std::int32_t>& tokens,
                                                   int calibration, int ctx, std::optional<std::int32_t> bos,
                                                   const std::function<bool()>& cancelled = {});
/// Scheme `scheme` of the spec, per layer (an allocation's layers, or the scheme on every layer).
std::vector<SchemeConfig> configurationLayers(const EvalSpec& spec, int scheme, int layers);

/// Which fixed 1/count of an evaluation's chunks a run scores: chunks [C index / count, C (index + 1) /
/// count) of the C the text gives (0 of 1: all). Shards merge into the unsharded run exactly (kvlens merge).
struct EvalShard {
    int index = 0;
    int count = 1;
};

/// Bytes an evaluation holds besides the model's weights and forwards, from its spec and the text's
/// token count: calibration K/V/Q rows and query moments, the reference's layer inputs (with
/// attribution), and per scored token and configuration the statistics, top tokens and proxies.
std::uint64_t evalWorkingBytes(const EvalSpec& spec, const lm::ModelConfig& config, std::int64_t tokens);

/// Tokens of the text an evaluation reads at most (the tokenizer stops there): calibration and every
/// chunk the spec asks for; 0 (all) when chunks is 0 (every whole chunk of the text).
std::size_t evalTokensNeeded(const EvalSpec& spec);

/// An eval spec's memory_limit_mb as MiB: the value given, or lm::defaultMemoryLimitMiB() for 0.
std::uint64_t memoryLimitMiB(double requestedMb);

/// Runs an evaluation (the spec checked with checkEvalSpec). Tokenizes (or reads the ids; only as
/// many tokens as the chunks need), loads the model (its memory need -- the weights as stored, the
/// forwards, evalWorkingBytes -- checked against spec.memoryLimitMb before anything is loaded),
/// reserves the calibration tokens, cuts the rest into chunks of spec.ctx, and per chunk runs the
/// exact forward and every configuration's in lockstep (no logits file; one configuration's
/// logits in memory at a time), scoring positions ctx/2 .. ctx-2 of each chunk (llama.cpp's
/// convention: the first half is context). Bad input is refused in one line naming the file and
/// field (the model's, the text's, a token id and its index, a text shorter than two chunks).
/// With `reuse` (an earlier whole run of the same model, tokens, thread count and settings: everything
/// but the schemes, budgets and seeds), its configurations and attribution rows that this spec holds
/// are taken instead of computed; refused naming what differs otherwise.
Result<EvalResult> runEval(const EvalSpec& spec, const EvalCallbacks& callbacks = {}, EvalShard shard = {},
                           const EvalResult* reuse = nullptr);

/// The same on a model already loaded and tokens already read (tests, the window).
Result<EvalResult> runEval(const EvalSpec& spec, const lm::Transformer& model, const std::vector<std::int32_t>& tokens,
                           std::optional<std::int32_t> bos, const EvalCallbacks& callbacks = {},
                           const std::function<std::string(std::int32_t)>& tokenText = {}, EvalShard shard = {},
                           const EvalResult* reuse = nullptr);

} // namespace kvlens::eval
