// SPDX-License-Identifier: GPL-3.0-or-later
// The model families core/lm runs, as data: one row per family naming its tensors (as Hugging Face
// and GGUF name them), its norm, MLP, position encoding, biases and tied head, as llama.cpp's
// per-architecture tables do. The forward pass and the loaders read the row; adding a family is a
// row and a test, never a new branch in three files.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvlens::lm {

/// The architectures core/lm implements, by their Hugging Face class names.
enum class Architecture {
    Llama,   ///< LlamaForCausalLM (model_type "llama"; Llama 1-3, TinyLlama, SmolLM)
    Mistral, ///< MistralForCausalLM ("mistral"): Llama's computation with a sliding window
    Qwen2,   ///< Qwen2ForCausalLM ("qwen2"; Qwen2, Qwen2.5): Llama's computation with q/k/v biases
    Gpt2,    ///< GPT2LMHeadModel ("gpt2"): LayerNorm, learned positions, fused Conv1D c_attn, gelu_new
};

enum class NormKind { Rms, Layer };         ///< x / rms(x) w, or (x - mean) / sd w + b
enum class MlpKind { SwiGlu, GeluTanh };    ///< down(silu(gate x) up x), or c_proj(gelu_tanh(c_fc x))
enum class PositionKind { Rope, Learned };  ///< rotary on q and k, or a position table added to the embeddings

/// What a tensor is in the model, whatever a checkpoint calls it.
enum class TensorRole {
    Embed, Positions, FinalNorm, FinalNormBias, Head,              // the model's
    AttnNorm, AttnNormBias, Q, K, V, Qkv, QBias, KBias, VBias, QkvBias, // a layer's attention
    Out, OutBias, MlpNorm, MlpNormBias, Gate, Up, UpBias, Down, DownBias,
};

/// One tensor of a family: its role and its names. `{i}` in a name stands for the layer index.
/// A name that is empty in a format: the format has no such tensor for this family.
struct TensorName {
    TensorRole role;
    std::string_view hf;    ///< Hugging Face safetensors name ("model.layers.{i}.self_attn.q_proj.weight")
    std::string_view gguf;  ///< llama.cpp's GGUF name ("blk.{i}.attn_q.weight")
    bool perLayer;          ///< one per decoder layer
    bool optional;          ///< present only when the config says so (biases, the untied head)
};

/// A family's row.
struct ArchitectureInfo {
    Architecture id;
    std::string_view hfClass;      ///< "LlamaForCausalLM"
    std::string_view modelType;    ///< config.json's model_type: "llama"
    std::string_view ggufName;     ///< general.architecture in a GGUF file ("llama" also for Mistral)
    NormKind norm;
    MlpKind mlp;
    PositionKind positions;
    bool conv1d;                   ///< Hugging Face stores [in x out] matrices (GPT-2's Conv1D): transposed on read
    bool qkvBiasAlways;            ///< q/k/v projections always carry biases (Qwen2); else attention_bias says
    bool tiedByDefault;            ///< tie_word_embeddings when config.json does not say
    bool ggufPermutesQK;           ///< llama.cpp's converter reorders q/k rows from rotate-half pairs to adjacent pairs
    std::span<const TensorName> tensors;
    /// Checkpoint tensors the family legitimately ships that the forward does not read (rotary
    /// caches, attention-mask buffers), as name patterns with {i}: accepted and listed, never an error.
    std::span<const std::string_view> extras;
};

/// The row of `architecture`.
const ArchitectureInfo& architectureInfo(Architecture architecture);
/// Every row, in enum order.
std::span<const ArchitectureInfo> architectures();
/// "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel".
std::string_view architectureName(Architecture architecture);
/// The known Hugging Face classes ("LlamaForCausalLM, ..."), for messages.
std::string_view knownClasses();

/// `name` with "{i}" replaced by `layer`.
std::string expandName(std::string_view name, int layer);

} // namespace kvlens::lm
