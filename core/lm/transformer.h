// SPDX-License-Identifier: GPL-3.0-or-later
// The decoder-only transformer forward pass: one causal chunk of tokens to logits as matrix
// products, with a hook through which a quantized KV cache replaces what attention reads.
#pragma once

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/io/ggml_types.h"
#include "core/lm/gguf_model.h"
#include "core/lm/hf_config.h"
#include "core/lm/weights.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvlens::lm {

/// How many keys query t reads from a quantized cache: keys [0, cachedKeys(t, G, R)) come from the
/// cache, the rest are exact: a key is read from the cache once its codec group of G tokens is
/// complete (j < G floor((t + 1) / G): a deployed cache encodes a group when its last token arrives)
/// and, with a residual window R > 0, once it is older than the window (j <= t - R).
inline std::int64_t cachedKeys(std::int64_t t, std::int64_t group, std::int64_t residual)
{
    std::int64_t end = group > 1 ? group * ((t + 1) / group) : t + 1;
    if (residual > 0 && t - residual + 1 < end)
        end = t - residual + 1;
    return end > 0 ? end : 0;
}

/// What a quantized KV cache does to the keys (after RoPE) and values one layer writes.
class KvCacheHook {
public:
    virtual ~KvCacheHook() = default;
    /// False: this layer's cache stays exact (per-layer attribution quantizes one layer at a time).
    virtual bool quantizes(int layer) const = 0;
    /// K, V: [T x head_dim] of KV head `kvHead` of `layer` for positions 0..T-1 of the chunk. Writes the
    /// decoded cache contents khat, vhat (same shapes; they arrive sized so). Row t may depend only on
    /// rows <= t (the codec is causal). Called concurrently for different (layer, kvHead): must be
    /// thread-safe.
    virtual void apply(int layer, int kvHead, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat,
                       RowMatrixXf& vhat) const = 0;
    /// Tokens the codec of `layer`'s keys (or values) encodes together: a deployed cache encodes a
    /// group when its last token arrives, so query t reads the hook's rows only for keys of groups
    /// complete at t (j < G floor((t + 1) / G)) and the exact rows of its own open group. 1: every
    /// token is encoded when written (the query reads the hook's row of its own token).
    virtual int causalGroup(int layer, bool keys) const
    {
        (void)layer;
        (void)keys;
        return 1;
    }
    /// The type a query is converted to before its product with the cached keys of (`layer`, `kvHead`), as llama.cpp
    /// does for its cache types (the key type's vec_dot_type: q8_0 for q8_0, q4_0, q5_0 and iq4_nl
    /// keys, q8_1 for q4_1 and q5_1, f16 for f16; ggml::convertQueryRow); nullopt: the float32 query.
    virtual std::optional<ggml::GgmlType> queryConversion(int layer, int kvHead) const
    {
        (void)layer;
        (void)kvHead;
        return std::nullopt;
    }
};

/// Which positions of the chunk to keep Q, K, V of (every layer from the start layer on, or the
/// layers listed).
struct CaptureRequest {
    int start = 0; ///< first position
    int count = 0; ///< positions kept; 0: no capture
    /// The layers kept (each in [startLayer, layers), increasing); empty: every layer from startLayer.
    /// A capture of a few layers of a large model holds only theirs.
    std::vector<int> layers = {};
};

/// One layer's captured vectors, token-major per head, C order.
struct LayerCapture {
    std::vector<float> q; ///< [heads x count x headDim], after RoPE
    std::vector<float> k; ///< [kvHeads x count x headDim], after RoPE, exact (before the cache hook)
    std::vector<float> v; ///< [kvHeads x count x headDim], exact
};

/// One query's attention, for the drill-down view.
struct ProbeRequest {
    int layer = 0;
    int head = 0;     ///< query head
    int position = 0; ///< query position t in the chunk
};

/// The probed query's scores q.k_j / sqrt(headDim) and softmax probabilities over keys j = 0..t.
/// "exact" reads the exact K; "cache" reads what the query attends to in this pass (the hook's
/// keys, or the exact ones inside the residual window; equal to exact when the layer's cache is
/// exact). Both use this pass's query.
struct AttentionProbe {
    ProbeRequest request;
    int kvHead = 0;
    std::vector<float> exactScores;  ///< [t + 1]
    std::vector<float> cacheScores;  ///< [t + 1]
    std::vector<double> exactProbs;  ///< [t + 1], softmax in double
    std::vector<double> cacheProbs;  ///< [t + 1]
};

/// What the cache did to the attention of queries start..T-1 (the scored positions of a chunk), for
/// the model-level proxy study. `queryMoments`, when set, is per [layer][kvHead] the second moment
/// E[q q^T] ([headDim x headDim]) of the calibration queries reading that KV head (after RoPE).
struct DamageRequest {
    int start = 0;
    const std::vector<std::vector<Eigen::MatrixXf>>* queryMoments = nullptr;
};

/// Per (layer, head, query position) measures of the cache's damage, every one 0 on a layer whose
/// cache is exact. Oracle measures use the evaluated query (this pass's q_t); p = softmax(s) with
/// s_j = q_t.k_j / sqrt(d) over the exact keys, p^ the weights the pass used (cache scores s^), v^_j
/// what the query read for value j (exact inside the residual window or an open codec group).
/// Cache-side measures use no query of the evaluated text: only the keys and values written up to t
/// and, for calibScoreErr, the calibration queries.
struct AttentionDamage {
    int start = 0, count = 0, layers = 0, heads = 0, kvHeads = 0;
    /// Oracle, index (layer * heads + head) * count + (t - start).
    std::vector<float> kl;      ///< KL(p || p^) in nats
    std::vector<float> fisher;  ///< Var_p(s^ - s)
    std::vector<float> a2;      ///< sum_j p_j^2 ||v_j - v^_j||^2 / ||o||^2, o = sum_j p_j v_j
    std::vector<float> outErr;  ///< ||o - o^||^2 / ||o||^2, o^ the pass's output
    /// Cache side, index (layer * kvHeads + kvHead) * count + (t - start).
    std::vector<float> relK;    ///< sum_{j<=t} ||k_j - k^_j||^2 / sum_{j<=t} ||k_j||^2 (k^_j as query t reads it)
    std::vector<float> relV;    ///< the same for values
    /// mean_{j<=t} (k_j - k^_j)^T M (k_j - k^_j) / d, M the calibration queries' second moment: the
    /// mean squared score error a calibration query would see on the context's keys. NaN without
    /// queryMoments.
    std::vector<float> calibScoreErr;
};

/// The damage record of a pass of `tokens` tokens, sized for `request` (positions request.start ..
/// tokens - 1, every layer and head) and zero, calibScoreErr NaN where no query moments are given:
/// what the CPU pass and a device pass fill in.
AttentionDamage emptyDamage(const ModelConfig& config, const DamageRequest& request, int tokens);

struct ForwardOptions {
    const KvCacheHook* cache = nullptr; ///< null: exact cache
    /// R > 0: query t sees EXACT K/V for keys t-R+1..t and the hook's for older keys (KIVI / Hugging
    /// Face decode-faithful setting): two score matrices and a per-(query, key) mask. R = 0: every
    /// query, its own token included, reads the hook's K/V (what llama.cpp does with -ctk/-ctv).
    /// Either way, keys of a group the hook's codec has not completed at t stay exact
    /// (KvCacheHook::causalGroup).
    int residual = 0;
    /// Logits are computed for rows logitsStart..T-1 only (scoring the second half of a chunk skips
    /// half of the output head's product).
    int logitsStart = 0;
    /// Resumption: start at this layer from `startHidden`, the state entering it ([T x hidden], as
    /// `layerInputs` captured it from a reference pass of the same tokens). 0: from the embeddings.
    int startLayer = 0;
    const RowMatrixXf* startHidden = nullptr;
    /// When set: resized to `layers` and entry l set to the state entering layer l for l >= startLayer
    /// (entries below startLayer left as they were).
    std::vector<RowMatrixXf>* layerInputs = nullptr;
    CaptureRequest capture;
    std::optional<ProbeRequest> probe;
    std::optional<DamageRequest> damage;
    /// Polled between layers: true stops the pass with Error::cancellation().
    std::function<bool()> cancelled;
};

struct ForwardResult {
    RowMatrixXf logits;                 ///< [(T - logitsStart) x vocab]
    std::vector<LayerCapture> capture;  ///< [layers] when requested (entries below startLayer or not listed empty)
    std::optional<AttentionProbe> probe;
    std::optional<AttentionDamage> damage; ///< when requested
};

class Transformer;

/// A forward pass computed elsewhere than on the CPU (gpu/'s OpenCL forward implements it): the same
/// ForwardResult as the CPU pass, to the tolerance its tests state. Core holds only this interface.
class ForwardDevice {
public:
    virtual ~ForwardDevice() = default;
    /// The pass of `model` over `tokens`; `options` were checked by Transformer::forward.
    virtual Result<ForwardResult> forward(const Transformer& model, std::span<const std::int32_t> tokens,
                                          const ForwardOptions& options) const = 0;
    /// What runs where, for the run's files and status line ("OpenCL: NVIDIA H200; products on the
    /// device, the codecs of ... on the CPU").
    virtual std::string label() const = 0;
};

/// A decoder-only transformer (Llama, Mistral, Qwen2, GPT-2) over weights in their stored types.
///
/// A chunk of T tokens at positions 0..T-1 runs in one causal pass: every projection is one matrix
/// product over all T rows, split by output columns over the worker threads (Eigen itself is
/// single-threaded here, EIGEN_DONT_PARALLELIZE); attention runs per (query head, block of
/// kAttentionBlock queries) with scores only over the keys the block can see. RoPE: Hugging Face's
/// rotate_half (dimension i paired with i + headDim/2), inv_freq_i = theta^(-2i/headDim), angles
/// t inv_freq_i computed in double and stored as float. Norms: RMSNorm x / sqrt(mean(x^2) + eps) w;
/// LayerNorm (x - mean) / sqrt(var + eps) w + b. MLP: down(silu(gate x) * up x), or GPT-2
/// c_proj(gelu_tanh(c_fc x)). Memory per forward: forwardBytes() (O(T (hidden + vocab))), allocated
/// by each call: a caller running many forwards should call retainFreedMemory() (core/common/memory.h)
/// so the buffers reuse touched pages. forward() is const and may run from several threads at once
/// (each call has its own workers, `threads` of them).
class Transformer {
public:
    /// A hand-built float32 model: validates the weights against the config (checkWeightShapes).
    /// threads <= 0: hardware_concurrency.
    static Result<Transformer> create(ModelConfig config, ModelWeights weights, int threads = 0);
    /// A model over stored tensors (checkTensorShapes).
    static Result<Transformer> create(ModelConfig config, ModelTensors tensors, int threads = 0);
    /// A Hugging Face folder or a GGUF file: openModelSource(path), then load(source, options).
    static Result<Transformer> load(const std::string& path, const LoadOptions& options = {});
    /// An opened source: its checkpoint (openCheckpoint), loadFromCheckpoint (memory-mapped, stored
    /// types, every check), create(..., options.threads).
    static Result<Transformer> load(const ModelSource& source, const LoadOptions& options = {});

    const ModelConfig& config() const { return m_config; }
    const ModelTensors& tensors() const { return *m_tensors; }
    /// Every weight dequantized to float32 (small models and tests).
    ModelWeights denseWeights() const;
    int threads() const { return m_threads; }
    /// What load() estimated and checked (zero for a created model).
    const MemoryEstimate& memoryEstimate() const { return m_estimate; }
    /// What load() noticed (tensors the forward does not read).
    const LoadNotes& loadNotes() const { return m_notes; }
    /// hashTensors of the weights, computed on the first call (it reads every weight) and kept;
    /// thread-safe. Shards and reused runs of an evaluation must agree on it.
    std::uint64_t dataHash() const;
    /// Runs every later forward on `device` (null: the CPU again). The device keeps what it uploaded.
    /// Copies of the Transformer share the device.
    void setDevice(std::shared_ptr<const ForwardDevice> device) { m_device = std::move(device); }
    const ForwardDevice* device() const { return m_device.get(); }

    /// Logits of `tokens` (ids in [0, vocab)) as one chunk at positions 0..T-1. Refused naming the
    /// field: no tokens, an id out of range ('tokens[i]'), a chunk longer than maxChunkTokens()
    /// ('n_positions' or 'sliding_window' of the config), options out of range ('residual',
    /// 'logitsStart', 'startLayer', 'startHidden', 'capture', 'probe'), a cache hook that returns
    /// the wrong shape or a non-finite value (naming layer, KV head and row), cancellation
    /// (Error::cancellation()), and memory exhaustion.
    Result<ForwardResult> forward(std::span<const std::int32_t> tokens, const ForwardOptions& options = {}) const;
    /// The same pass on the CPU whatever device is set (a device falls back to it for what it does
    /// not compute itself).
    Result<ForwardResult> forwardOnCpu(std::span<const std::int32_t> tokens, const ForwardOptions& options = {}) const;

private:
    Transformer(ModelConfig config, ModelTensors tensors, int threads);

    ModelConfig m_config;
    std::shared_ptr<const ModelTensors> m_tensors;
    int m_threads = 1;
    MemoryEstimate m_estimate;
    LoadNotes m_notes;
    struct HashOnce {
        std::once_flag once;
        std::uint64_t value = 0;
    };
    std::shared_ptr<HashOnce> m_hash = std::make_shared<HashOnce>();
    std::shared_ptr<const ForwardDevice> m_device;
};

} // namespace kvlens::lm
