// SPDX-License-Identifier: GPL-3.0-or-later
// The rows of core/lm's architecture table: tensor names per format, norm, MLP, positions, biases.
#include "core/lm/architecture.h"

#include <array>

namespace kvlens::lm {

namespace {

using R = TensorRole;

/// Llama, Mistral and Qwen2 share their tensors; Qwen2's biases are always there, the others'
/// only with attention_bias.
constexpr std::array<TensorName, 17> kLlamaTensors{{
    {R::Embed, "model.embed_tokens.weight", "token_embd.weight", false, false},
    {R::FinalNorm, "model.norm.weight", "output_norm.weight", false, false},
    {R::Head, "lm_head.weight", "output.weight", false, true},
    {R::AttnNorm, "model.layers.{i}.input_layernorm.weight", "blk.{i}.attn_norm.weight", true, false},
    {R::Q, "model.layers.{i}.self_attn.q_proj.weight", "blk.{i}.attn_q.weight", true, false},
    {R::K, "model.layers.{i}.self_attn.k_proj.weight", "blk.{i}.attn_k.weight", true, false},
    {R::V, "model.layers.{i}.self_attn.v_proj.weight", "blk.{i}.attn_v.weight", true, false},
    {R::QBias, "model.layers.{i}.self_attn.q_proj.bias", "blk.{i}.attn_q.bias", true, true},
    {R::KBias, "model.layers.{i}.self_attn.k_proj.bias", "blk.{i}.attn_k.bias", true, true},
    {R::VBias, "model.layers.{i}.self_attn.v_proj.bias", "blk.{i}.attn_v.bias", true, true},
    {R::Out, "model.layers.{i}.self_attn.o_proj.weight", "blk.{i}.attn_output.weight", true, false},
    {R::OutBias, "model.layers.{i}.self_attn.o_proj.bias", "blk.{i}.attn_output.bias", true, true},
    {R::MlpNorm, "model.layers.{i}.post_attention_layernorm.weight", "blk.{i}.ffn_norm.weight", true, false},
    {R::Gate, "model.layers.{i}.mlp.gate_proj.weight", "blk.{i}.ffn_gate.weight", true, false},
    {R::Up, "model.layers.{i}.mlp.up_proj.weight", "blk.{i}.ffn_up.weight", true, false},
    {R::Down, "model.layers.{i}.mlp.down_proj.weight", "blk.{i}.ffn_down.weight", true, false},
    {R::Positions, "", "", false, true}, // none: RoPE
}};

/// GPT-2: Conv1D weights stored [in x out] by Hugging Face (names may carry "transformer.", which
/// the loader strips), [out x in] in GGUF.
constexpr std::array<TensorName, 17> kGpt2Tensors{{
    {R::Embed, "wte.weight", "token_embd.weight", false, false},
    {R::Positions, "wpe.weight", "position_embd.weight", false, false},
    {R::FinalNorm, "ln_f.weight", "output_norm.weight", false, false},
    {R::FinalNormBias, "ln_f.bias", "output_norm.bias", false, false},
    {R::Head, "lm_head.weight", "output.weight", false, true},
    {R::AttnNorm, "h.{i}.ln_1.weight", "blk.{i}.attn_norm.weight", true, false},
    {R::AttnNormBias, "h.{i}.ln_1.bias", "blk.{i}.attn_norm.bias", true, false},
    {R::Qkv, "h.{i}.attn.c_attn.weight", "blk.{i}.attn_qkv.weight", true, false},
    {R::QkvBias, "h.{i}.attn.c_attn.bias", "blk.{i}.attn_qkv.bias", true, false},
    {R::Out, "h.{i}.attn.c_proj.weight", "blk.{i}.attn_output.weight", true, false},
    {R::OutBias, "h.{i}.attn.c_proj.bias", "blk.{i}.attn_output.bias", true, false},
    {R::MlpNorm, "h.{i}.ln_2.weight", "blk.{i}.ffn_norm.weight", true, false},
    {R::MlpNormBias, "h.{i}.ln_2.bias", "blk.{i}.ffn_norm.bias", true, false},
    {R::Up, "h.{i}.mlp.c_fc.weight", "blk.{i}.ffn_up.weight", true, false},
    {R::UpBias, "h.{i}.mlp.c_fc.bias", "blk.{i}.ffn_up.bias", true, false},
    {R::Down, "h.{i}.mlp.c_proj.weight", "blk.{i}.ffn_down.weight", true, false},
    {R::DownBias, "h.{i}.mlp.c_proj.bias", "blk.{i}.ffn_down.bias", true, false},
}};

/// Rotary caches older Llama checkpoints save, and llama.cpp's precomputed rope factors (read only
/// through the config's rope scaling, which they restate).
constexpr std::array<std::string_view, 2> kLlamaExtras{"model.layers.{i}.self_attn.rotary_emb.inv_freq", "rope_freqs.weight"};
/// The causal-mask buffers of GPT-2 checkpoints (constants, not weights).
constexpr std::array<std::string_view, 2> kGpt2Extras{"h.{i}.attn.bias", "h.{i}.attn.masked_bias"};

constexpr std::array<ArchitectureInfo, 4> kArchitectures{{
    {Architecture::Llama, "LlamaForCausalLM", "llama", "llama", NormKind::Rms, MlpKind::SwiGlu, PositionKind::Rope,
     false, false, false, true, kLlamaTensors, kLlamaExtras},
    {Architecture::Mistral, "MistralForCausalLM", "mistral", "llama", NormKind::Rms, MlpKind::SwiGlu,
     PositionKind::Rope, false, false, false, true, kLlamaTensors, kLlamaExtras},
    {Architecture::Qwen2, "Qwen2ForCausalLM", "qwen2", "qwen2", NormKind::Rms, MlpKind::SwiGlu, PositionKind::Rope,
     false, true, false, false, kLlamaTensors, kLlamaExtras},
    {Architecture::Gpt2, "GPT2LMHeadModel", "gpt2", "gpt2", NormKind::Layer, MlpKind::GeluTanh,
     PositionKind::Learned, true, true, true, false, kGpt2Tensors, kGpt2Extras},
}};

} // namespace

const ArchitectureInfo& architectureInfo(Architecture architecture)
{
    return kArchitectures[static_cast<std::size_t>(architecture)];
}

std::span<const ArchitectureInfo> architectures()
{
    return kArchitectures;
}

std::string_view architectureName(Architecture architecture)
{
    return architectureInfo(architecture).hfClass;
}

std::string_view knownClasses()
{
    return "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel";
}

std::string expandName(std::string_view name, int layer)
{
    std::string out(name);
    if (const auto at = out.find("{i}"); at != std::string::npos)
        out.replace(at, 3, std::to_string(layer));
    return out;
}

} // namespace kvlens::lm
