// SPDX-License-Identifier: GPL-3.0-or-later
// A GGUF file's tokenizer.ggml.* keys read into a TokenizerVocab (the tokenizer described by arrays,
// as the tokenizer helper's core/lm/tokenizer_vocab.h defines it; restated here until that lands).
#pragma once

#include "core/common/result.h"
#include "core/io/gguf.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::lm {

// TODO(merge): when core/lm/tokenizer_vocab.h is in main, include it instead of this restatement.
/// What GGUF's tokenizer.ggml.* keys hold (llama.cpp's llama-vocab.cpp reads the same); checked by
/// tokenizerFromVocab (tokenizer_vocab.h), not here.
struct TokenizerVocab {
    std::string label;                 ///< the file, for messages
    std::string model;                 ///< tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece-style)
    std::string pre;                   ///< tokenizer.ggml.pre (empty: default)
    std::vector<std::string> tokens;   ///< tokenizer.ggml.tokens
    std::vector<float> scores;         ///< tokenizer.ggml.scores (may be empty)
    std::vector<std::int32_t> types;   ///< tokenizer.ggml.token_type (may be empty)
    std::vector<std::string> merges;   ///< tokenizer.ggml.merges ("a b")
    std::optional<std::int32_t> bos, eos, unk, pad;
    std::optional<bool> addBos, addEos, addSpacePrefix;
};

/// The tokenizer.ggml.* keys of `gguf`: model (required), pre, tokens (required, non-empty), scores,
/// token_type, merges, bos/eos/unknown/padding_token_id, add_bos_token, add_eos_token,
/// add_space_prefix. Refused in one line naming the file and key: a missing required key, a value
/// of the wrong type (the GGUF accessors' check), a special token id outside [0, tokens).
Result<TokenizerVocab> vocabFromGguf(const io::GgufFile& gguf);

} // namespace kvlens::lm
