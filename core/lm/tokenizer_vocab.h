// SPDX-License-Identifier: GPL-3.0-or-later
// A tokenizer described by arrays, as GGUF's tokenizer.ggml.* keys hold it (no tokenizer.json needed), and the factory that builds it with the encoders of tokenizer_bpe.h and tokenizer_sentencepiece.h.
#pragma once

#include "core/common/result.h"
#include "core/lm/tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::lm {

/// What GGUF's tokenizer.ggml.* keys hold (llama.cpp's llama-vocab.cpp reads the same), in any
/// order of trust: every array is checked by tokenizerFromVocab.
struct TokenizerVocab {
    std::string label;                 ///< the file, for messages
    std::string model;                 ///< tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece-style)
    std::string pre;                   ///< tokenizer.ggml.pre ("default", "llama-bpe", "qwen2", "gpt-2", "smollm", ...; empty: default)
    std::vector<std::string> tokens;   ///< tokenizer.ggml.tokens
    std::vector<float> scores;         ///< tokenizer.ggml.scores (llama; may be empty for gpt2)
    std::vector<std::int32_t> types;   ///< tokenizer.ggml.token_type (0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)
    std::vector<std::string> merges;   ///< tokenizer.ggml.merges ("a b", gpt2)
    std::optional<std::int32_t> bos, eos, unk, pad;
    std::optional<bool> addBos, addEos, addSpacePrefix;
};

/// tokenizer.ggml.tokens may hold at most this many bytes per token (GPT-2's longest is 128).
inline constexpr std::size_t kMaxVocabTokenBytes = 1024;

/// The pre-tokenizers `pre` may name for "gpt2", as llama.cpp's llama-vocab.cpp maps them (its
/// regex lists; Llama 3's and Qwen2's in Hugging Face's original spelling, (?i:'s|...), where
/// llama.cpp spells the case classes out: they differ only for case-folding lookalikes such as
/// 'ſ). One name per line in messages.
std::vector<std::string> knownPreTokenizers();

/// The tokenizer `vocab` describes, for a model whose embedding has `embeddingRows` rows:
///  - "llama": SentencePiece-style BPE by score with byte fallback (<0xNN> tokens of type 6),
///    llama.cpp's llm_tokenizer_spm semantics (SentencePieceSpec::llamaCpp): no normalizer, spaces
///    as U+2581, a space prefix unless add_space_prefix is false (also after each user-defined
///    token, as llama.cpp adds one to every text fragment), user-defined tokens (type 4) matched in
///    the text, control tokens (3) never; unknown characters without byte tokens give the unk token.
///    BOS: bos (llama.cpp's default 1), added unless add_bos_token is false.
///  - "gpt2": byte-level BPE over tokens (types 1, 0, 5 and 6 the vocabulary; 3 and 2 special added
///    tokens, matched when options.parseSpecialTokens; 4 added tokens always matched) and merges by
///    rank, pre-tokenized as `pre` names (knownPreTokenizers); no NFC (llama.cpp applies none);
///    ignore_merges for the Llama 3 names. BOS: bos, added when add_bos_token says so (default: the
///    Llama 3 names do, others not).
/// Refused in one line naming the key (`tokenizer.ggml.tokens[7]: ...`): an unknown model or pre
/// (with the known list), no tokens, more tokens than embeddingRows (checked before anything is
/// sized), a token that is not UTF-8 or longer than kMaxVocabTokenBytes, scores or types whose
/// length is not the tokens' (or 0), a score that is not finite, a type outside 0..6, a merge that
/// is not two tokens of the vocabulary, a special id outside the tokens, and what the SentencePiece
/// or byte-level BPE builders refuse (a piece twice, missing byte tokens, ...).
Result<std::unique_ptr<Tokenizer>> tokenizerFromVocab(const TokenizerVocab& vocab, std::int32_t embeddingRows,
                                                      const TokenizerOptions& options = {});

} // namespace kvlens::lm
