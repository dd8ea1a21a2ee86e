// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level BPE read from a Hugging Face tokenizer.json (GPT-2, Qwen2, Llama 3, SmolLM), written in core.
#pragma once

#include "core/common/result.h"
#include "core/lm/tokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::lm {

class BpeTokenizer;
namespace bpe {
struct Build;
Result<std::unique_ptr<BpeTokenizer>> buildTokenizer(Build build);
} // namespace bpe

/// tokenizer.json is read whole below this size (Llama 3's is 9 MB, Qwen2's 7 MB).
inline constexpr std::uint64_t kMaxTokenizerJsonBytes = 64ull << 20;
/// At most this many JSON values (counted as the commas, colons, '[' and '{' outside strings)
/// before the text is parsed, so a 64 MiB file of tiny arrays cannot take gigabytes in the parser.
/// Llama 3's tokenizer.json has about 1.1 million.
inline constexpr std::uint64_t kMaxTokenizerJsonValues = 8ull << 20;
/// At most this many added tokens, each at most kMaxAddedTokenBytes long.
inline constexpr std::size_t kMaxAddedTokens = 1 << 16;
inline constexpr std::size_t kMaxAddedTokenBytes = 256;

/// A byte-level BPE tokenizer, as Hugging Face tokenizers runs a tokenizer.json whose model is BPE
/// over GPT-2's byte-to-character alphabet. Encoding, in order:
///  1. the text must be valid UTF-8 (else refused with the byte offset);
///  2. added tokens with `normalized: false` are cut out of the raw text: leftmost match first,
///     longest at a position, `single_word` (no \w character on either side), `lstrip`/`rstrip`
///     (absorb White_Space on that side); special ones only when TokenizerOptions says so;
///  3. each remaining piece is normalized (NFC where the normalizer says so) and the added tokens
///     with `normalized: true` (their normalized content) are cut out the same way;
///  4. each remaining piece is pre-tokenized (the pre_tokenizer's Split/Digits steps, then
///     ByteLevel: optional prefix space on every piece, optional GPT-2 regex split);
///  5. each pre-token is mapped to byte symbols and merged by rank (lowest rank first, the leftmost
///     on ties; Sennrich et al. 2016 as GPT-2 applies it), or emitted whole when `ignore_merges`
///     and the pre-token is itself in the vocabulary (Llama 3).
/// Cost: merging a pre-token of m bytes takes O(m log m) (a heap of candidate pairs), so the whole
/// text is O(n log n) with no cap on a pre-token's length; pre-tokens up to 256 bytes are cached
/// for the duration of one encode call.
/// Streaming (startEncode): each block is encoded up to the last place where restarting gives
/// the same ids as going on, proven rather than guessed: no added token can start before it and
/// end after it (a trie walk that stops inside the text, not at its end), NFC composes nothing
/// across it (ICU's boundary test), and the pre-tokenizer's regular expressions land on it: the
/// search runs with PCRE2_PARTIAL_HARD, so a match is taken only when no later text could change it
/// (a match that reaches the end of the text, or a lookahead past it, waits), and the restart is
/// exact because the patterns in use look behind nothing and never match the empty string
/// (SplitRegex::streamable; a pattern that does is not cut, its text waits). What is not yet
/// decided, at most the pre-token under way and what follows it, is kept for the next block.
class BpeTokenizer final : public Tokenizer {
public:
    ~BpeTokenizer() override;

    std::unique_ptr<EncodeSession> startEncode(const EncodeControl& control) const override;
    std::string tokenBytes(std::int32_t id) const override;
    std::int32_t vocabSize() const override;
    std::optional<std::int32_t> bos() const override;
    std::string kind() const override { return "bpe"; }

    /// The pre-tokens of `text` (steps 1-4 above, added tokens left out), as UTF-8 of the
    /// normalized text, before the byte-level mapping.
    Result<std::vector<std::string>> preTokenize(std::string_view text) const;
    /// The id of a token given as its content: an added token's text, or a vocabulary entry's raw
    /// bytes (not its byte-level spelling); nullopt when no token is that.
    std::optional<std::int32_t> tokenId(std::string_view content) const;
    /// Replaces the BOS the post_processor gave (tokenizer_config.json's add_bos_token).
    void setBos(std::optional<std::int32_t> id);
    /// Where the tokenizer was read from (the label given to the parser).
    const std::string& label() const;

    struct Impl;

private:
    explicit BpeTokenizer(std::unique_ptr<Impl> impl);
    friend Result<std::unique_ptr<BpeTokenizer>> bpe::buildTokenizer(bpe::Build build);
    std::unique_ptr<Impl> m_impl;
};

/// The commas, colons, '[' and '{' of JSON `text` outside strings: an upper bound on the values a
/// parser would build, computed in one pass before parsing.
std::uint64_t jsonValueCount(std::string_view text);

/// tokenizer.json text to a JSON value, with its size (kMaxTokenizerJsonBytes) and value count
/// (kMaxTokenizerJsonValues) checked first and nesting and duplicate keys refused
/// (io::parseJsonText). Errors name `label`.
Result<nlohmann::json> parseTokenizerJsonText(std::string_view json, const std::string& label);

/// True when a tokenizer.json value is meant as byte-level BPE: its pre_tokenizer is ByteLevel or a
/// Sequence holding one. The loader uses this to prefer tokenizer.model for Llama 2's tokenizer.json
/// (Metaspace and byte fallback).
bool isByteLevelTokenizerJson(const nlohmann::json& root);

/// Builds the tokenizer from a parsed tokenizer.json. Implemented, and otherwise refused naming the
/// JSON key (`label: key: why`):
///  - model: `type` "BPE"; `vocab` (token -> id, ids in [0, idLimit): the model's embedding rows,
///    checked before anything is sized; no id twice, all 256 byte symbols present); `merges` as
///    "a b" strings or [a, b] pairs (both parts and their concatenation in the vocabulary; the
///    index and the merge named when not); `ignore_merges`; `dropout` null or 0; `unk_token` any
///    (never needed: every byte has a symbol); `continuing_subword_prefix`/`end_of_word_suffix`
///    null or ""; `byte_fallback` false.
///  - normalizer: null, NFC, or a Sequence of those.
///  - pre_tokenizer: ByteLevel (`add_prefix_space`, `use_regex`), or a Sequence (nested ones
///    flattened) of Split (`pattern` {"Regex"} or {"String"}, every `behavior`, `invert`) and
///    Digits (`individual_digits`) steps ending with one ByteLevel.
///  - post_processor: null, ByteLevel, TemplateProcessing whose `single` is [$A] or
///    [special, $A] (BOS: the special token's one id), or a Sequence of those.
///  - decoder: null or ByteLevel.
///  - added_tokens: `id` (below idLimit), `content` (non-empty, unique; at most kMaxAddedTokens of
///    at most kMaxAddedTokenBytes), `special`, `single_word`, `lstrip`, `rstrip`, `normalized`.
/// `truncation` and `padding` are ignored: the runner tokenizes whole texts. Tables are sized by
/// the entries the file holds (a 3 KB file naming id 2^24 - 1 allocates nothing for it).
Result<std::unique_ptr<BpeTokenizer>> bpeFromJson(const nlohmann::json& root, const std::string& label,
                                                  const TokenizerOptions& options = {},
                                                  std::int32_t idLimit = kMaxVocabSize);

/// parseTokenizerJsonText then bpeFromJson: the pure entry point the fuzz target drives.
Result<std::unique_ptr<BpeTokenizer>> parseTokenizerJson(std::string_view json, const std::string& label,
                                                         const TokenizerOptions& options = {},
                                                         std::int32_t idLimit = kMaxVocabSize);

/// Reads `path` (io::readRegularFile, at most kMaxTokenizerJsonBytes) and parses it.
Result<std::unique_ptr<BpeTokenizer>> loadTokenizerJson(const std::string& path, const TokenizerOptions& options = {},
                                                        std::int32_t idLimit = kMaxVocabSize);

} // namespace kvlens::lm
