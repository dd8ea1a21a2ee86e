// SPDX-License-Identifier: GPL-3.0-or-later
// What a SentencePiece tokenizer is made of (pieces, scores, types, the normalizer's rules), and tokenizer.model's protobuf read into it field by field.
#pragma once

#include "core/common/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::lm {

/// tokenizer.model is read whole below this size (Llama 2's is 500 KB, Gemma's 4 MB).
inline constexpr std::uint64_t kMaxSentencePieceModelBytes = 64ull << 20;
/// A piece is at most this long (the trainer's default max_sentencepiece_length is 16 characters;
/// the longest pieces in use, Gemma's runs of 31 spaces, take 93 bytes).
inline constexpr std::size_t kMaxPieceBytes = 1024;
/// The precompiled character map is at most this large (nmt_nfkc's, the largest in use, is 233 KiB).
inline constexpr std::size_t kMaxCharsmapBytes = 16ull << 20;

/// sentencepiece_model.proto's SentencePiece.Type; GGUF's tokenizer.ggml.token_type uses the same
/// numbers.
enum class PieceType : std::int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

/// Everything a SentencePiece-style encoder needs, whoever read it: tokenizer.model
/// (parseSentencePieceModelProto) or a GGUF vocabulary (tokenizer_vocab.h). Ids are indexes.
struct SentencePieceSpec {
    std::string label; ///< the file, for messages
    enum class Algorithm { Unigram, Bpe } algorithm = Algorithm::Unigram;
    std::vector<std::string> pieces;
    std::vector<float> scores;   ///< one per piece
    std::vector<PieceType> types; ///< one per piece
    bool byteFallback = false;   ///< unknown characters become their UTF-8 bytes' <0xNN> pieces
    bool treatWhitespaceAsSuffix = false;
    std::string unkPiece = "<unk>"; ///< trainer_spec's names: the library finds BOS, EOS and UNK by them
    std::string bosPiece = "<s>";
    std::string eosPiece = "</s>";
    // NormalizerSpec
    std::string charsmap; ///< precompiled_charsmap: empty for the identity
    bool addDummyPrefix = true;
    bool removeExtraWhitespaces = true;
    bool escapeWhitespaces = true;
    /// llama.cpp's llm_tokenizer_spm (GGUF "llama" vocabularies) instead of the library's rules:
    /// user-defined pieces cut the raw text into fragments first, each fragment gets its own dummy
    /// prefix, and invalid UTF-8 reaches the segmentation as bytes instead of U+FFFD.
    bool llamaCpp = false;
};

/// A serialized ModelProto (sentencepiece_model.proto) read with its own protobuf wire-format
/// reader (varints of at most 10 bytes, lengths checked against what is left, unknown fields
/// skipped, groups refused). Read: pieces (piece, score, type), trainer_spec (model_type,
/// byte_fallback, treat_whitespace_as_suffix, unk/bos/eos_piece), normalizer_spec
/// (precompiled_charsmap, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces); the
/// rest (self-test data, the denormalizer, training options) is skipped. Refused, naming `label`
/// and the field (`pieces[i].score`, `trainer_spec.model_type`, ...): a truncated or malformed
/// message, more than `maxPieces` pieces (counted as they are read, before anything is sized by
/// them), a piece that is empty, longer than kMaxPieceBytes, not UTF-8 or holding a NUL byte, a
/// score that is not finite, a type or model_type outside the enum (WORD and CHAR models too),
/// what the library refuses (a piece defined twice, no or two UNKNOWN pieces, byte pieces that are
/// not <0x00>..<0xFF> or without byte_fallback, byte_fallback without all 256), a unigram model
/// without a normal piece, and a precompiled_charsmap longer than kMaxCharsmapBytes (its structure
/// is checked by the normalizer).
Result<SentencePieceSpec> parseSentencePieceModelProto(std::string_view bytes, const std::string& label,
                                                       std::int32_t maxPieces);

/// "<0x0A>" -> 10, as the library spells byte pieces (two upper-case hex digits); -1 otherwise.
int bytePieceValue(std::string_view piece);

/// Refuses what SentencePiece's own loader refuses about a spec's pieces (the list above from "a
/// piece defined twice"), and the lengths of `scores`/`types` differing from `pieces`. `where`
/// names the array in messages ("pieces", "tokenizer.ggml.tokens").
Status checkSentencePieceSpec(const SentencePieceSpec& spec, const std::string& where);

} // namespace kvlens::lm
