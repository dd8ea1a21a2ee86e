// SPDX-License-Identifier: GPL-3.0-or-later
// A GGUF file's tokenizer.ggml.* keys read into a TokenizerVocab (core/lm/tokenizer_vocab.h: the
// tokenizer described by arrays, built by tokenizerFromVocab).
#pragma once

#include "core/common/result.h"
#include "core/io/gguf.h"
#include "core/lm/tokenizer_vocab.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::lm {

/// The tokenizer.ggml.* keys of `gguf`: model (required), pre, tokens (required, non-empty), scores,
/// token_type, merges, bos/eos/unknown/padding_token_id, add_bos_token, add_eos_token,
/// add_space_prefix. Refused in one line naming the file and key: a missing required key, a value
/// of the wrong type (the GGUF accessors' check), a special token id outside [0, tokens).
Result<TokenizerVocab> vocabFromGguf(const io::GgufFile& gguf);

} // namespace kvlens::lm
