// SPDX-License-Identifier: GPL-3.0-or-later
// SentencePiece tokenizer.model files (Llama 2, TinyLlama, Mistral) through Debian's libsentencepiece.
#pragma once

#include "core/common/result.h"
#include "core/lm/tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kvlens::lm {

/// tokenizer.model is read whole below this size (Llama 2's is 500 KB, Gemma's 4 MB).
inline constexpr std::uint64_t kMaxSentencePieceModelBytes = 64ull << 20;

/// A SentencePiece model (Kudo & Richardson 2018) run by libsentencepiece's own processor: its
/// normalizer, dummy prefix, unigram or BPE segmentation and byte fallback are the library's.
/// Control symbols (<s>, </s>) in the text are tokenized as plain text. tokenBytes gives a piece's
/// text with U+2581 '▁' as a space, a byte piece <0xNN> as that byte, and a control or unknown
/// piece as its own text ("<s>", "<unk>").
class SentencePieceTokenizer final : public Tokenizer {
public:
    ~SentencePieceTokenizer() override;

    Result<std::vector<std::int32_t>> encode(std::string_view text) const override;
    std::string tokenBytes(std::int32_t id) const override;
    std::int32_t vocabSize() const override;
    std::optional<std::int32_t> bos() const override;
    std::string kind() const override { return "sentencepiece"; }

    /// The model's own bos_id (-1 in the file gives nullopt), whether or not it is added.
    std::optional<std::int32_t> modelBos() const;
    /// Replaces the BOS (tokenizer_config.json's add_bos_token).
    void setBos(std::optional<std::int32_t> id);
    /// The id of a piece given by its text as the model spells it ("▁the", "<s>"), or nullopt.
    std::optional<std::int32_t> pieceId(std::string_view piece) const;

    struct Impl;

private:
    explicit SentencePieceTokenizer(std::unique_ptr<Impl> impl);
    friend Result<std::unique_ptr<SentencePieceTokenizer>> parseSentencePieceModel(std::string_view bytes,
                                                                                   const std::string& label);
    std::unique_ptr<Impl> m_impl;
};

/// A serialized SentencePiece ModelProto (the bytes of tokenizer.model). BOS is the model's bos_id
/// (Llama's tokenizers add it by default). Refused, naming `label`: more than
/// kMaxSentencePieceModelBytes, a protobuf the library cannot load (its status message), more than
/// kMaxVocabSize pieces.
Result<std::unique_ptr<SentencePieceTokenizer>> parseSentencePieceModel(std::string_view bytes,
                                                                        const std::string& label);

/// Reads `path` (io::readRegularFile, at most kMaxSentencePieceModelBytes) and parses it.
Result<std::unique_ptr<SentencePieceTokenizer>> loadSentencePieceModel(const std::string& path);

} // namespace kvlens::lm
