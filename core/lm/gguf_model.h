// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF model files (llama.cpp's) for the model runner: the config a header's metadata describes, the
// checkpoint its tensors make, and the one front door that opens a Hugging Face folder or a GGUF file.
#pragma once

#include "core/common/result.h"
#include "core/io/gguf.h"
#include "core/io/mapped_file.h"
#include "core/lm/checkpoint.h"
#include "core/lm/hf_config.h"
#include "core/lm/weights.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace kvlens::lm {

/// The ModelConfig a GGUF header describes, as llama.cpp's loader reads it (src/llama-model.cpp,
/// load_hparams), then validateModelConfig (the ranges config.json has). `label` starts every error.
///  - general.architecture: "llama" (Llama 1-3, Mistral, TinyLlama, SmolLM; Mistral when
///    llama.attention.sliding_window is set), "qwen2", "gpt2"; others refused naming the value.
///  - {arch}.block_count, embedding_length, feed_forward_length, attention.head_count,
///    context_length (required; contextKey "{arch}.context_length"), attention.head_count_kv
///    (default head_count; GPT-2: must equal it); the head counts and feed_forward_length may be
///    per-layer arrays whose values agree; attention.key_length (default embedding_length /
///    head_count) and attention.value_length (the same default) must give one head dimension, and
///    rope.dimension_count (default: that dimension) must equal it (partial rotary is refused);
///    expert_count > 0 (mixture of experts) refused.
///  - the epsilon: attention.layer_norm_rms_epsilon (Llama, Qwen2) or attention.layer_norm_epsilon
///    (GPT-2), required, checked as config.json's (a normal float32 in (0, 1]).
///  - RoPE models: rope.freq_base (default 10000); rope.scaling.type absent, "none" or "linear"
///    (with rope.scaling.factor, or the older rope.scale_linear; absent or 0: no scaling, as
///    llama.cpp reads it), "yarn" and the rest refused naming the key; rope.scaling.attn_factor other
///    than 1 refused; a `rope_freqs.weight` tensor (F32, F16 or BF16, one value per frequency, read
///    from `fileBytes`) gives RopeScaling::Kind::Factors (inv_freq_i / factors[i], llama.cpp's form
///    of Llama 3.1's scaling), refused together with linear scaling.
///  - attention.sliding_window (llama only; Qwen2's per-layer window is refused as in config.json).
///  - vocab: the rows of `token_embd.weight` (a 2-D tensor, required); tokenizer.ggml.tokens, when
///    present, may list fewer tokens (a padded embedding) but not more; {arch}.vocab_size, when
///    present, must equal the rows.
///  - tied embeddings when `output.weight` is absent; q/k/v biases when `blk.0.attn_q.bias` exists
///    (Qwen2 and GPT-2 always), the output projection's when `blk.0.attn_output.bias` does (GPT-2
///    always).
/// `fileBytes` is the whole file (a map; the fuzz target's input): only the rope_freqs tensor's bytes
/// are read from it, inside the header's bounds. Pure: no file access.
Result<ModelConfig> configFromGguf(const io::GgufFile& gguf, const std::string& label,
                                   std::span<const std::uint8_t> fileBytes);
/// The same for a header read from the file `gguf.path` (readGgufHeader): that file is mapped (no
/// read-ahead) only when a rope_freqs tensor must be read.
Result<ModelConfig> configFromGguf(const io::GgufFile& gguf, const std::string& label);

/// The tensors `gguf` describes inside `fileBytes` (the whole file): one CheckpointTensor per tensor
/// (shape = dims reversed, outermost first; its ggml type; data = fileBytes + its offset; its bytes),
/// `file` keeping the bytes alive (null: the caller does). A tensor outside `fileBytes` is left out.
Checkpoint checkpointFromGguf(const io::GgufFile& gguf, std::span<const std::uint8_t> fileBytes,
                              std::shared_ptr<const io::MappedFile> file = nullptr);

/// The tensors of the GGUF file at `path`, whose header is `gguf`: the file is mapped once
/// (io::MappedFile) and every tensor is a CheckpointTensor (shape = dims reversed, outermost first;
/// its ggml type; data = the map + its offset; its bytes). Refused: a file whose size is not the one
/// its header was read from (it changed in between), and whatever MappedFile::open refuses.
Result<Checkpoint> openGgufCheckpoint(const std::string& path, const io::GgufFile& gguf);

/// A model as the command line names it: a Hugging Face folder or a GGUF file, with its config.
struct ModelSource {
    std::string path;
    CheckpointFormat format = CheckpointFormat::HfFolder;
    ModelConfig config;
    std::shared_ptr<const io::GgufFile> gguf; ///< the header, for a GGUF file; null for a folder
};

/// The front door every loader goes through: a directory is a Hugging Face folder (its
/// config.json, loadHfConfig); a regular file must be GGUF (its header read with readGgufHeader,
/// its config from configFromGguf). Refused in one line naming the path: a path that does not
/// exist, a file that is not GGUF (saying what it looks like: empty, safetensors, JSON, .npy, zip,
/// or its first bytes), and whatever the readers refuse.
Result<ModelSource> openModelSource(const std::string& path);

/// The checkpoint of `source`: openHfCheckpoint for a folder, openGgufCheckpoint for a GGUF file.
Result<Checkpoint> openCheckpoint(const ModelSource& source);

/// The memory estimate loading `source` is checked against (headers only; weights.h).
Result<MemoryEstimate> estimateMemory(const ModelSource& source, const LoadOptions& options = {});

} // namespace kvlens::lm
