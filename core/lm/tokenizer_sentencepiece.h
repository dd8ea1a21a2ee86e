// SPDX-License-Identifier: GPL-3.0-or-later
// SentencePiece tokenizers (tokenizer.model of Llama 2, TinyLlama, Mistral, Gemma; GGUF "llama" vocabularies) encoded by KVLens's own code.
#pragma once

#include "core/common/result.h"
#include "core/lm/tokenizer.h"
#include "core/lm/tokenizer_sentencepiece_model.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kvlens::lm {

/// A SentencePiece model (Kudo & Richardson 2018) encoded as libsentencepiece 0.1.97 encodes it
/// (the tests compare the two on every fixture and on random texts), without the library:
///  1. normalization (normalizer.cc): user-defined pieces copied through, else the longest rule of
///     precompiled_charsmap, else one UTF-8 character (U+FFFD for a byte that starts none); heading
///     spaces dropped, runs of spaces collapsed and trailing ones removed (remove_extra_whitespaces),
///     spaces as U+2581 (escape_whitespaces), a dummy U+2581 in front (add_dummy_prefix; at the end
///     with treat_whitespace_as_suffix);
///  2. segmentation: unigram: the Viterbi path over piece scores (unigram_model.cc's optimized
///     encoder, its float and double arithmetic kept, user-defined pieces scored length x max - 0.1,
///     unknown characters min - 10); BPE: from characters (user-defined pieces frozen), repeatedly
///     merge the adjacent pair whose merged piece scores highest, the leftmost among equals, then
///     split unused pieces back (bpe_model.cc);
///  3. ids: an unknown piece becomes its bytes' <0xNN> pieces with byte_fallback, else one unk id
///     for each run of unknown pieces. Control symbols (<s>, </s>) in the text are plain text.
/// With SentencePieceSpec::llamaCpp, llama.cpp's llm_tokenizer_spm instead: no character map, no
/// whitespace collapsing, user-defined pieces cut out of the raw text (leftmost, longest), each
/// fragment with its own dummy prefix, unused pieces kept, invalid UTF-8 as bytes.
/// Streaming: a text is normalized block by block and segmented up to the last place no piece
/// spans (before a U+2581 that follows another character, when no piece has U+2581 after another
/// character; after one, for suffix-whitespace vocabularies; else wherever no piece of the
/// vocabulary crosses, checked with the trie), carrying the Viterbi score across, so the ids
/// equal the whole text's bit for bit.
/// tokenBytes gives a piece's text with U+2581 as a space, a byte piece <0xNN> as that byte, and a
/// control or unknown piece as its own text ("<s>", "<unk>").
class SentencePieceTokenizer final : public Tokenizer {
public:
    ~SentencePieceTokenizer() override;

    std::unique_ptr<EncodeSession> startEncode(const EncodeControl& control) const override;
    std::string tokenBytes(std::int32_t id) const override;
    std::int32_t vocabSize() const override;
    std::optional<std::int32_t> bos() const override;
    std::string kind() const override { return "sentencepiece"; }

    /// The model's own BOS (its bos_piece, when that is a control piece), whether or not it is added.
    std::optional<std::int32_t> modelBos() const;
    /// Replaces the BOS (tokenizer_config.json's add_bos_token, GGUF's add_bos_token).
    void setBos(std::optional<std::int32_t> id);
    /// The id of a piece given by its text as the model spells it ("▁the", "<s>"), or nullopt.
    std::optional<std::int32_t> pieceId(std::string_view piece) const;

    struct Impl;

private:
    explicit SentencePieceTokenizer(std::unique_ptr<Impl> impl);
    friend Result<std::unique_ptr<SentencePieceTokenizer>> makeSentencePieceTokenizer(SentencePieceSpec spec);
    std::unique_ptr<Impl> m_impl;
};

/// The tokenizer of a checked spec (checkSentencePieceSpec; the character map is parsed here and
/// refused when broken). BOS: the bos piece when it is a control piece (Llama's tokenizers add it).
Result<std::unique_ptr<SentencePieceTokenizer>> makeSentencePieceTokenizer(SentencePieceSpec spec);

/// The bytes of tokenizer.model (parseSentencePieceModelProto, at most `maxPieces` pieces: the
/// model's embedding rows) to a tokenizer.
Result<std::unique_ptr<SentencePieceTokenizer>> parseSentencePieceModel(std::string_view bytes, const std::string& label,
                                                                        std::int32_t maxPieces = kMaxVocabSize);

/// Reads `path` (io::readRegularFile, at most kMaxSentencePieceModelBytes) and parses it.
Result<std::unique_ptr<SentencePieceTokenizer>> loadSentencePieceModel(const std::string& path,
                                                                       std::int32_t maxPieces = kMaxVocabSize);

} // namespace kvlens::lm
