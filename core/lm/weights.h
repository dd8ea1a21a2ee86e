// SPDX-License-Identifier: GPL-3.0-or-later
// A Hugging Face model's safetensors weights (one file or index-listed shards), checked by name,
// shape, dtype and finiteness and against a memory limit before anything is loaded, held as float32.
#pragma once

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/io/tensor_file.h"
#include "core/lm/hf_config.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::lm {

using RowVectorXf = Eigen::Matrix<float, 1, Eigen::Dynamic>;

/// One decoder layer. Linear weights are [out x in] row-major (y = x W^T, Hugging Face's nn.Linear
/// layout; GPT-2's Conv1D [in x out] tensors are transposed on load). Projections are fused so one
/// product computes them: qkv rows are the query heads, then the key heads, then the value heads.
struct LayerWeights {
    RowVectorXf attnNorm;      ///< [hidden]: input_layernorm / ln_1 weight
    RowVectorXf attnNormBias;  ///< [hidden]: ln_1 bias (GPT-2); empty for RMSNorm
    RowMatrixXf qkv;           ///< [(heads + 2 kvHeads) headDim x hidden]
    RowVectorXf qkvBias;       ///< [(heads + 2 kvHeads) headDim], or empty
    RowMatrixXf out;           ///< [hidden x heads headDim]: o_proj / c_proj
    RowVectorXf outBias;       ///< [hidden], or empty
    RowVectorXf mlpNorm;       ///< [hidden]: post_attention_layernorm / ln_2 weight
    RowVectorXf mlpNormBias;   ///< [hidden]: ln_2 bias (GPT-2); empty for RMSNorm
    RowMatrixXf up;            ///< Llama family: [2 intermediate x hidden], gate rows then up rows; GPT-2 c_fc [intermediate x hidden]
    RowVectorXf upBias;        ///< GPT-2 c_fc bias [intermediate]; empty for the Llama family
    RowMatrixXf down;          ///< [hidden x intermediate]: down_proj / mlp.c_proj
    RowVectorXf downBias;      ///< GPT-2 mlp.c_proj bias [hidden]; empty for the Llama family
};

/// Every weight of a model, float32.
struct ModelWeights {
    RowMatrixXf embed;          ///< [vocab x hidden]: embed_tokens / wte
    RowMatrixXf positions;      ///< [maxPositions x hidden]: GPT-2 wpe; empty for RoPE models
    std::vector<LayerWeights> layers;
    RowVectorXf finalNorm;      ///< [hidden]: model.norm / ln_f weight
    RowVectorXf finalNormBias;  ///< [hidden]: ln_f bias (GPT-2); empty for RMSNorm
    RowMatrixXf lmHead;         ///< [vocab x hidden]; empty when tied (the head is `embed`)

    /// The output head: lmHead, or embed when the embeddings are tied.
    const RowMatrixXf& head() const { return lmHead.size() ? lmHead : embed; }
};

/// Refuses weights whose shapes do not fit `config` (a programmer's or a hand-built model's
/// error, reported like a file's): each matrix and vector against the shapes above.
Status checkWeightShapes(const ModelConfig& config, const ModelWeights& weights);

/// model.safetensors.index.json: which shard file holds each tensor.
struct WeightIndex {
    std::map<std::string, std::string> weightMap; ///< tensor name -> shard file name
    std::vector<std::string> shards;              ///< the distinct shard names, sorted
};

/// Caps for index files: the text and the counts.
inline constexpr std::uint64_t kMaxIndexBytes = 64ull << 20;
inline constexpr std::size_t kMaxIndexTensors = 1'000'000;

/// Parses model.safetensors.index.json text (pure; `label` starts every error). Needs an object
/// with a non-empty `weight_map` object of tensor name -> shard file name (`metadata` optional,
/// an object). A shard name must be a plain file name ending in ".safetensors": no '/', no '\\',
/// not "." or "..", no control bytes, valid UTF-8, at most 255 bytes. At most kMaxIndexTensors
/// entries. Duplicate keys are refused by the JSON reader.
Result<WeightIndex> parseWeightIndex(std::string_view json, const std::string& label);

/// How much a load may use and what it must leave room for.
struct LoadOptions {
    std::uint64_t memoryLimitMiB = 8192; ///< refuse when the estimate exceeds this
    int contextTokens = 512;             ///< chunk length the activations are sized for
    int forwardsInFlight = 2;            ///< concurrent forwards (base and quantized in lockstep: 2)
    int threads = 0;                     ///< worker threads of a forward (0: hardware_concurrency)
};

/// A memory estimate in bytes, from headers and the config only.
struct MemoryEstimate {
    std::uint64_t weightBytes = 0;     ///< float32 copies of every tensor used
    std::uint64_t activationBytes = 0; ///< forwardsInFlight forwards of contextTokens tokens
    std::uint64_t transientBytes = 0;  ///< the largest tensor's payload and float copy while it loads
    std::uint64_t total() const { return weightBytes + activationBytes + transientBytes; }
};

/// Query rows per attention task of a forward: bounds each worker's score buffers to
/// kAttentionBlock x tokens.
inline constexpr int kAttentionBlock = 64;

/// Bytes one forward of `tokens` tokens holds at its peak with `threads` workers (no capture):
/// hidden states, fused q|k|v, per-head K/V (exact and cache), attention output, MLP activations,
/// logits [tokens x vocab], and each worker's score blocks.
std::uint64_t forwardBytes(const ModelConfig& config, int tokens, int threads);

/// A tensor the architecture needs: its checkpoint name and stored shape.
struct ExpectedTensor {
    std::string name;
    std::vector<std::int64_t> shape;
};

/// The tensors `config` needs, named as the checkpoint names them (GPT-2 with `gpt2Prefix`, "" or
/// "transformer."), with their stored shapes (GPT-2 Conv1D weights [in x out]).
std::vector<ExpectedTensor> expectedTensors(const ModelConfig& config, std::string_view gpt2Prefix = "");

/// Loads the weights of the Hugging Face folder `dir` for `config`: `model.safetensors` if present,
/// else the shards `model.safetensors.index.json` lists. Before any payload is read: every shard is
/// a plain file name inside `dir`, a regular file, and does not resolve (through links) outside it;
/// no tensor is held by two shards; the index's tensors are in the shards it names; every expected
/// tensor is present with its shape (error: tensor, expected shape, got shape) and dtype F32, F16 or
/// BF16; the MemoryEstimate fits options.memoryLimitMiB (the error states both). Extra tensors are
/// ignored. While loading, a NaN or Inf is refused naming the tensor and its first flat index.
Result<ModelWeights> loadWeights(const std::string& dir, const ModelConfig& config, const LoadOptions& options = {});

/// The estimate loadWeights checks, for the same folder (headers only).
Result<MemoryEstimate> estimateMemory(const std::string& dir, const ModelConfig& config, const LoadOptions& options = {});

} // namespace kvlens::lm
