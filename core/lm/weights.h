// SPDX-License-Identifier: GPL-3.0-or-later
// A model's weights: a Hugging Face folder's safetensors (one file or index-listed shards) or a GGUF
// file, memory-mapped and kept in their stored types, checked by name, shape, dtype and finiteness and
// against a memory limit before anything is read.
#pragma once

#include "core/common/result.h"
#include "core/common/types.h"
#include "core/io/tensor_file.h"
#include "core/lm/checkpoint.h"
#include "core/lm/hf_config.h"
#include "core/lm/weight_matrix.h"

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

/// Every weight of a model, float32: the form a hand-built model (tests, benchmarks) is written in,
/// and what denseWeights() gives back for a small model.
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

/// One decoder layer as the forward reads it: matrices in their stored type (WeightMatrix, the same
/// layout as LayerWeights: fused q|k|v rows, gate|up rows), the small vectors widened to float32.
struct LayerTensors {
    RowVectorXf attnNorm, attnNormBias;
    WeightMatrix qkv;
    RowVectorXf qkvBias;
    WeightMatrix out;
    RowVectorXf outBias;
    RowVectorXf mlpNorm, mlpNormBias;
    WeightMatrix up;
    RowVectorXf upBias;
    WeightMatrix down;
    RowVectorXf downBias;
};

/// A model's weights as the forward reads them (see LayerTensors); the matrices point into memory
/// maps of the checkpoint's files (or own float copies for a hand-built model) and keep them alive.
struct ModelTensors {
    WeightMatrix embed;
    WeightMatrix positions;
    std::vector<LayerTensors> layers;
    RowVectorXf finalNorm, finalNormBias;
    WeightMatrix lmHead;            ///< empty when tied

    const WeightMatrix& head() const { return lmHead.empty() ? embed : lmHead; }
    /// Bytes of every stored matrix (what the forward touches in the maps).
    std::uint64_t storedBytes() const;
    /// The stored types of the matrices, most bytes first ("bf16", "q4_K, q6_K, f32").
    std::string storedTypes() const;
};

/// A hash of every weight's stored bytes and type, matrices and vectors in the forward's order (the
/// word-wise FNV step, core/common/hash.h): two checkpoints hash alike only if they hold the same
/// weights the same way. Reads every byte (seconds for a 7 B model).
std::uint64_t hashTensors(const ModelTensors& tensors);

/// Owning float32 tensors of a hand-built model.
ModelTensors tensorsFromDense(const ModelWeights& weights);
/// Every matrix dequantized to float32 (small models and tests: a 7 B model would need 28 GB).
ModelWeights denseFromTensors(const ModelTensors& tensors);

/// Refuses weights whose shapes do not fit `config` (a programmer's or a hand-built model's
/// error, reported like a file's): each matrix and vector against the shapes above.
Status checkWeightShapes(const ModelConfig& config, const ModelWeights& weights);
/// The same for stored tensors.
Status checkTensorShapes(const ModelConfig& config, const ModelTensors& tensors);

/// The memory limit when none is given: physical memory less what the system and the page cache need
/// (85 %, and at least 1 GiB left), so a 7 B BF16 model (13.5 GB mapped) evaluates on a 24 GB machine.
std::uint64_t defaultMemoryLimitMiB();

/// How much a load may use and what it must leave room for.
struct LoadOptions {
    std::uint64_t memoryLimitMiB = 8192; ///< refuse when the estimate exceeds this
    int contextTokens = 512;             ///< chunk length the activations are sized for
    int forwardsInFlight = 2;            ///< concurrent forwards (base and quantized in lockstep: 2)
    int threads = 0;                     ///< worker threads of a forward (0: hardware_concurrency)
    /// What the caller holds besides the model (calibration rows, codec caches, per-token statistics),
    /// counted in the estimate so the whole run is checked before anything is loaded.
    std::uint64_t otherBytes = 0;
    std::string otherWhat;               ///< what otherBytes is, for the message ("calibration and statistics")
};

/// A memory estimate in bytes, from headers and the config only.
struct MemoryEstimate {
    std::uint64_t mappedBytes = 0;     ///< the stored matrices the forward reads (file pages of the maps)
    std::uint64_t residentBytes = 0;   ///< norms and biases widened to float32, owned copies
    std::uint64_t activationBytes = 0; ///< forwardsInFlight forwards of contextTokens tokens
    std::uint64_t transientBytes = 0;  ///< each worker's float32 panel of weight rows inside the products
    std::uint64_t otherBytes = 0;      ///< LoadOptions::otherBytes
    std::uint64_t total() const { return mappedBytes + residentBytes + activationBytes + transientBytes + otherBytes; }
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

/// The tensors `config` needs, named as the Hugging Face checkpoint names them (GPT-2 with
/// `gpt2Prefix`, "" or "transformer."), with their stored shapes (GPT-2 Conv1D weights [in x out]).
std::vector<ExpectedTensor> expectedTensors(const ModelConfig& config, std::string_view gpt2Prefix = "");

/// What a load found besides the weights: tensors the architecture legitimately ships and the
/// forward does not read, on one line ("2 rotary caches (model.layers.*.self_attn.rotary_emb.inv_freq)").
struct LoadNotes {
    std::string ignoredExtras;
};

/// A model checkpoint opened for the forward: its tensors, the maps that hold them, what was noted.
struct LoadedTensors {
    ModelTensors tensors;
    MemoryEstimate estimate;
    LoadNotes notes;
};

/// Opens the weights of the Hugging Face folder `dir` for `config`, memory-mapped in their stored
/// types: `model.safetensors` if present, else the shards `model.safetensors.index.json` lists.
/// Before any payload is read: every shard is a plain file name inside `dir`, a regular file, and
/// does not resolve (through links) outside it; no tensor is held by two shards; the index's tensors
/// are in the shards it names; every expected tensor is present with its shape (error: tensor,
/// expected shape, got shape) and dtype F32, F16 or BF16; no tensor is left that the architecture
/// does not use (the first is named: a checkpoint with a layer more than the config says evaluates
/// another model), beyond its known extras (LoadNotes); the MemoryEstimate fits
/// options.memoryLimitMiB (the error states both). Then every stored value is checked finite (a
/// NaN or Inf is refused naming the tensor and its first flat index).
Result<LoadedTensors> loadTensors(const std::string& dir, const ModelConfig& config, const LoadOptions& options = {});

/// The same for an opened checkpoint of any format (loadTensors's steps after opening the files).
Result<LoadedTensors> loadFromCheckpoint(const Checkpoint& checkpoint, const ModelConfig& config,
                                         const LoadOptions& options = {});

/// loadTensors, dequantized to float32 (small models and tests).
Result<ModelWeights> loadWeights(const std::string& dir, const ModelConfig& config, const LoadOptions& options = {});

/// The estimate loadTensors checks, for the same folder (headers only).
Result<MemoryEstimate> estimateMemory(const std::string& dir, const ModelConfig& config, const LoadOptions& options = {});

/// "about 13021 MiB (weights 12852 MiB mapped as stored, ...)", the estimate in words.
std::string describeEstimate(const MemoryEstimate& estimate, const LoadOptions& options);

} // namespace kvlens::lm
