// SPDX-License-Identifier: GPL-3.0-or-later
// The tokenizers of the model runner: the interface, and the loader that picks one for a Hugging Face model folder.
#pragma once

#include "core/common/result.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::lm {

/// Token ids are below 2^24 everywhere in KVLens: the largest vocabularies in use have 262 144 ids,
/// and the cap keeps a hostile tokenizer file from sizing tables.
inline constexpr std::int32_t kMaxVocabSize = 1 << 24;
/// One encode call takes at most this much text (encodeStream has no such cap: it holds one block).
inline constexpr std::uint64_t kMaxEncodeBytes = 1ull << 30;
/// encodeStream reads its text in blocks of this many bytes unless EncodeControl says otherwise.
inline constexpr std::size_t kEncodeBlockBytes = 1 << 20;

/// Reads the next bytes of a text into `buffer` (at most `capacity`): how many it read, 0 at the end.
using TextReader = std::function<Result<std::size_t>(char* buffer, std::size_t capacity)>;

/// How far a streamed encoding goes.
struct EncodeControl {
    /// Stop once this many ids are known (0: the whole text). The ids returned are then exactly the
    /// first maxTokens of the whole text's encoding.
    std::size_t maxTokens = 0;
    /// Polled between blocks and while a block is tokenized (every few hundred pre-tokens or
    /// regex searches, each bounded by kRegexMatchLimit); true ends the encoding with
    /// Error::cancellation().
    std::function<bool()> cancelled;
    /// Bytes read per call of the TextReader.
    std::size_t blockBytes = kEncodeBlockBytes;
};

/// One text encoded as it arrives, block by block (Tokenizer::startEncode). Memory: the ids
/// produced, one block, and what the tokenizer cannot decide yet (the text after the last place no
/// later text can change: for byte-level BPE the pre-token under way, for SentencePiece the word
/// under way).
class EncodeSession {
public:
    virtual ~EncodeSession() = default;
    /// Takes the next `block` of the text (`last`: nothing follows; `block` may then be empty) and
    /// appends to `out` every id that no later text can change, in order.
    virtual Status feed(std::string_view block, bool last, std::vector<std::int32_t>& out) = 0;
};

/// Text to token ids, and a token id back to the bytes it stands for.
/// Implementations are immutable after loading: encode may be called from several threads at once.
class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    /// The token ids of `text` (UTF-8), without BOS or EOS: the runner places BOS itself (bos()).
    /// Invalid UTF-8 is refused (byte-level BPE, as Hugging Face's tokenizers takes only valid
    /// strings), passed to SentencePiece as it is, or tokenized byte by byte (bytes). At most
    /// kMaxEncodeBytes; one session fed the whole text as its only block.
    Result<std::vector<std::int32_t>> encode(std::string_view text) const;
    /// The token ids of the text `read` gives, read in blocks of control.blockBytes and tokenized as
    /// they arrive: the same ids as encode() of the whole text (whatever the block size), or their
    /// first control.maxTokens, reading no further than those need. Errors: the reader's, the
    /// tokenizer's (naming the tokenizer file), Error::cancellation() when control.cancelled says so.
    Result<std::vector<std::int32_t>> encodeStream(const TextReader& read, const EncodeControl& control) const;
    /// A fresh session for one text (its own state: the tokenizer stays immutable).
    virtual std::unique_ptr<EncodeSession> startEncode(const EncodeControl& control) const = 0;
    /// The raw bytes token `id` stands for, for display (may be partial UTF-8); empty for an id
    /// no token has (a gap in the vocabulary, or an id outside [0, vocabSize())).
    virtual std::string tokenBytes(std::int32_t id) const = 0;
    /// One more than the largest id it can emit.
    virtual std::int32_t vocabSize() const = 0;
    /// The id the model expects first, when it adds one (llama.cpp's perplexity overwrites each
    /// chunk's first token with it); nullopt when it adds none.
    virtual std::optional<std::int32_t> bos() const = 0;
    /// "bytes", "bpe", "sentencepiece" or "ids".
    virtual std::string kind() const = 0;
};

/// How text is tokenized, where the tokenizer files leave a choice.
struct TokenizerOptions {
    /// Byte-level BPE: match the added tokens marked `special` (<|endoftext|>, <|begin_of_text|>)
    /// in the text, as Hugging Face's encode does by default. False treats them as plain text, as
    /// split_special_tokens=True and llama.cpp's llama-perplexity (parse_special false) do. Added
    /// tokens that are not special are matched either way. SentencePiece never matches its
    /// control symbols (<s>, </s>) in text, whatever this says.
    bool parseSpecialTokens = true;
};

/// The tokenizer of a Hugging Face model folder `modelDir`:
///  - tokenizer.json when it is byte-level BPE (GPT-2, Qwen2, Llama 3, SmolLM; tokenizer_bpe.h);
///  - else tokenizer.model (SentencePiece: Llama 2, TinyLlama, Mistral; a folder holding both and
///    whose tokenizer.json is not byte-level, as Llama 2's is, takes tokenizer.model);
///  - else the byte tokenizer (id = byte value), when the folder has neither file and the
///    embedding has exactly 256 rows.
/// BOS: byte-level BPE takes it from tokenizer.json's post_processor (a TemplateProcessing whose
/// `single` begins with a special token); SentencePiece adds its bos_id (Llama's default). Then
/// tokenizer_config.json's `add_bos_token`, when it is a boolean, decides either way, with its
/// `bos_token` (a string, or an object with `content`) naming the token when the template names
/// none. Refused with an error naming the file and the key: a missing or unreadable folder,
/// neither tokenizer file for an embedding of other than 256 rows, a tokenizer whose ids reach past
/// `embeddingRows` (the id, its key and the rows named, as the id is read: before any table is
/// sized by it; fewer ids than rows is fine: Qwen2 pads its embedding), and whatever the format's
/// own reader refuses.
Result<std::unique_ptr<Tokenizer>> loadTokenizer(const std::string& modelDir, std::int32_t embeddingRows,
                                                 const TokenizerOptions& options = {});

/// The byte tokenizer: 256 ids, id = byte value (any bytes, valid UTF-8 or not), no BOS.
std::unique_ptr<Tokenizer> makeByteTokenizer();

/// For token ids given directly (readTokenIds): encode refuses (there is no tokenizer), tokenBytes
/// shows an id in [0, vocabSize) as "<id>" (the decimal id in angle brackets), no BOS.
std::unique_ptr<Tokenizer> makeIdsTokenizer(std::int32_t vocabSize);

/// What tokenizer_config.json says about BOS: only `add_bos_token` (a boolean, or absent/null) and
/// `bos_token` (a string, an object with a string `content`, or absent/null) are read.
struct TokenizerConfig {
    std::optional<bool> addBosToken;
    std::optional<std::string> bosToken;
};

/// tokenizer_config.json is read whole below this size (the largest in use, with chat templates
/// and every added token described, are under 1 MiB).
inline constexpr std::uint64_t kMaxTokenizerConfigBytes = 16ull << 20;
/// ... and holds at most this many JSON values (jsonValueCount).
inline constexpr std::uint64_t kMaxTokenizerConfigValues = 1ull << 20;

/// Parses tokenizer_config.json text (untrusted: size and value count capped, then
/// io::parseJsonText). Refuses a non-object, an
/// `add_bos_token` that is not a boolean or null, a `bos_token` of another shape, naming the key.
Result<TokenizerConfig> parseTokenizerConfig(std::string_view json, const std::string& label);

} // namespace kvlens::lm
