// SPDX-License-Identifier: GPL-3.0-or-later
// A Hugging Face config.json read into the few numbers the transformer engine runs on, refusing
// every setting it does not implement instead of ignoring it.
#pragma once

#include "core/common/result.h"
#include "core/lm/architecture.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::lm {

/// Limits on config sizes: anything larger is refused as absurd before a byte of weights is read.
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxHidden = 65536;
inline constexpr int kMaxHeads = 1024;
inline constexpr int kMaxHeadDim = 1024;          ///< and even for RoPE models (rotate-half pairs i, i + d/2)
inline constexpr int kMaxIntermediate = 1 << 20;
inline constexpr int kMaxVocab = 1 << 21;
inline constexpr int kMaxPositions = 1 << 24;
inline constexpr double kMaxRopeTheta = 1e12;
/// config.json is read whole; real ones are a few KiB (id2label maps can make them larger).
inline constexpr std::uint64_t kMaxConfigBytes = 4ull << 20;

/// Rotary position frequencies: inv_freq_i = theta^(-2i/headDim), then scaled.
struct RopeScaling {
    enum class Kind {
        None,    ///< as is
        Linear,  ///< inv_freq / factor (positions interpolated: Hugging Face "linear", GGUF rope.scaling.type linear)
        Llama3,  ///< Llama 3.1's: low frequencies / factor, high ones kept, a smooth ramp between
        Factors, ///< inv_freq_i / factors[i] (GGUF's rope_freqs tensor, llama.cpp's form of Llama 3.1's scaling)
    };
    Kind kind = Kind::None;
    double factor = 1.0;
    double lowFreqFactor = 1.0, highFreqFactor = 4.0; ///< Llama3
    int originalMaxPositions = 8192;                  ///< Llama3: original_max_position_embeddings
    std::vector<float> factors;                       ///< Factors: one per frequency (headDim / 2)
    /// inv_freq_i for i < headDim / 2, in double, scaled as `kind` says (Hugging Face's
    /// _compute_default/linear/llama3_parameters).
    std::vector<double> inverseFrequencies(double theta, int headDim) const;
    /// "none", "linear x8", "llama3 x8 (1, 4, 8192)", "factors".
    std::string describe() const;
};

/// What the engine needs from config.json. Sizes are validated: every field is in its range,
/// heads divide hidden (when head_dim is derived), kv heads divide heads.
struct ModelConfig {
    std::string source;                ///< where it came from (the label given to the parser)
    Architecture architecture = Architecture::Llama;
    int layers = 0;                    ///< num_hidden_layers / n_layer
    int hidden = 0;                    ///< hidden_size / n_embd
    int heads = 0;                     ///< num_attention_heads / n_head
    int kvHeads = 0;                   ///< num_key_value_heads (null or absent: heads); GPT-2: heads
    int headDim = 0;                   ///< head_dim (null or absent: hidden / heads)
    int intermediate = 0;              ///< intermediate_size / n_inner (null: 4 n_embd)
    int vocab = 0;                     ///< vocab_size
    int maxPositions = 0;              ///< max_position_embeddings / n_positions
    double normEps = 0.0;              ///< rms_norm_eps (default 1e-6) / layer_norm_epsilon (default 1e-5)
    double ropeTheta = 0.0;            ///< rope_theta or rope_parameters.rope_theta (default 10000); 0 for GPT-2
    bool tiedEmbeddings = false;       ///< tie_word_embeddings (Llama family default false; GPT-2 default true)
    bool qkvBias = false;              ///< q/k/v projections have biases (attention_bias; always for Qwen2, GPT-2)
    bool outBias = false;              ///< o_proj / c_proj has a bias (attention_bias; GPT-2)
    RopeScaling ropeScaling;           ///< rope_scaling (null: none)
    /// Mistral sliding_window / Qwen2 with use_sliding_window; 0: none. Query t attends to keys
    /// t - slidingWindow < j <= t (Hugging Face's mask).
    int slidingWindow = 0;
    /// The key that bounds a chunk's positions, for messages: "max_position_embeddings", GPT-2's
    /// "n_positions", a GGUF file's "llama.context_length".
    std::string contextKey = "max_position_embeddings";

    /// The architecture's row of the table (norm, MLP, positions, tensor names).
    const ArchitectureInfo& arch() const { return architectureInfo(architecture); }
    /// Rows of the fused q|k|v projection: (heads + 2 kvHeads) x headDim.
    int qkvRows() const { return (heads + 2 * kvHeads) * headDim; }
    /// Longest chunk the engine computes: the model's context (maxPositions: n_positions for learned
    /// positions, max_position_embeddings or a GGUF file's context_length for RoPE models).
    int maxChunkTokens() const { return maxPositions; }
    /// Parameters outside the embedding and positions tables (the head counts when untied):
    /// projections, MLP, norms, biases, and the output head when untied excluded.
    std::int64_t nonEmbeddingParameters() const;
    /// FLOPs per token of a teacher-forced chunk of `tokens` tokens: 2 x non-embedding parameters
    /// + 2 hidden vocab (full-vocabulary logits) + attention 4 (tokens/2) heads headDim layers
    /// (causal, QK^T and PV; shared/MODEL-RUNNER-NOTES.md, "Floors").
    double flopsPerToken(int tokens) const;
    /// One line: "LlamaForCausalLM: 4 layers, hidden 256, 8 heads x 32 (2 KV heads), MLP 688, vocab 256".
    std::string summary() const;
};

/// Parses config.json text. `label` (the file path) starts every error. Pure: no file access.
/// Accepted: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel, chosen by
/// `architectures[0]`, or by `model_type` (llama, mistral, qwen2, gpt2) when `architectures` is
/// absent. Refused, naming the key: sizes missing, zero, negative, non-integer or beyond the
/// limits above (the message gives the allowed range); heads not dividing hidden (head_dim absent),
/// kv heads not dividing heads; odd head_dim (RoPE); `rope_scaling` of any type but "default";
/// `rope_parameters.rope_type` other than "default"; `partial_rotary_factor` != 1 (top level or in
/// rope_parameters); two different rope_theta values; `hidden_act` other than silu/swish (Llama
/// family); `mlp_bias` true; GPT-2 `activation_function` other than gelu_new/gelu_pytorch_tanh,
/// `scale_attn_weights` false, `scale_attn_by_inverse_layer_idx` true; unknown architectures.
/// A sliding window (Mistral `sliding_window`, Qwen2 `use_sliding_window` with `sliding_window`) is
/// recorded, not refused: it binds only for chunks longer than the window, which
/// Transformer::forward refuses naming `sliding_window`.
Result<ModelConfig> parseHfConfig(std::string_view jsonText, const std::string& label);

/// Reads `dir`/config.json (a regular file of at most kMaxConfigBytes) and parses it.
Result<ModelConfig> loadHfConfig(const std::string& dir);

} // namespace kvlens::lm
