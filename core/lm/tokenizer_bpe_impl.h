// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level BPE's insides, shared by its encoder (tokenizer_bpe.cpp), its tokenizer.json reader (tokenizer_bpe_json.cpp) and the GGUF vocabulary (tokenizer_vocab.cpp); not for other callers.
#pragma once

#include "core/lm/tokenizer_bpe.h"
#include "core/lm/tokenizer_regex.h"

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvlens::lm::bpe {

/// GPT-2's pre-tokenizer regex, as Hugging Face's ByteLevel(use_regex) applies it (Radford et al.
/// 2019, the released encoder.py).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct PreStep {
    enum class Kind { Split, Digits, ByteLevel };
    Kind kind = Kind::Split;
    std::shared_ptr<const SplitRegex> regex; // Split, and ByteLevel with use_regex
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool individualDigits = false;
    bool addPrefixSpace = false;
};

struct AddedToken {
    std::string content;
    std::string matchContent; // what is looked for: content, NFC-normalized when `normalized` and the normalizer is NFC
    std::int32_t id = 0;
    bool special = false;
    bool singleWord = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = true;
};

/// A byte trie over added tokens' match contents: leftmost-longest matching, as the Aho-Corasick
/// automaton Hugging Face builds (MatchKind::LeftmostLongest) finds them.
class AddedTrie {
public:
    AddedTrie() : m_nodes(1) {}
    bool empty() const { return m_nodes.size() == 1; }
    void add(std::string_view text, std::int32_t token);
    /// The longest token starting at text[pos]: its index and length, or {-1, 0}. `open` (when
    /// given) is set when the walk reached the end of `text` inside the trie: more text could give
    /// a longer token.
    std::pair<std::int32_t, std::size_t> longestAt(std::string_view text, std::size_t pos, bool* open = nullptr) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, std::int32_t>> children; // sorted by byte
        std::int32_t token = -1;
    };
    std::vector<Node> m_nodes;
    std::array<bool, 256> m_first{};
};

/// A piece of text, or an added token already recognised.
struct Segment {
    std::string_view text;
    std::int32_t token = -1;
};

struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

inline std::uint64_t pairKey(std::int32_t a, std::int32_t b)
{
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

struct MergeValue {
    std::int32_t rank = 0;
    std::int32_t id = 0;
};

/// Where an added-token split left off on a text more may follow: segments before `openStart` are
/// final; [openStart, stableEnd) is text no token can start in whatever follows; from stableEnd on
/// nothing is decided. `unsafe` lists the spans of matches skipped (special tokens taken as text,
/// single-word misses): the scan jumped over them, so it must not restart inside one.
struct OpenSplit {
    std::size_t openStart = 0;
    std::size_t stableEnd = 0;
    std::vector<std::pair<std::size_t, std::size_t>> unsafe;
};

/// Whether restarting the pre-tokenizer at a position of the text under way is allowed by what
/// lies outside it (added tokens' lstrip and single_word, NFC boundaries): position in the
/// normalized open piece.
using RestartAllowed = std::function<bool(std::size_t)>;

} // namespace kvlens::lm::bpe

namespace kvlens::lm {

struct BpeTokenizer::Impl {
    using PreStep = bpe::PreStep;
    using Segment = bpe::Segment;

    std::string label;
    TokenizerOptions options;
    bool nfc = false;
    std::vector<PreStep> steps;
    bool ignoreMerges = false;
    std::array<std::int32_t, 256> byteIds{};
    std::unordered_map<std::uint64_t, bpe::MergeValue> merges;
    std::unordered_map<std::string, std::int32_t, bpe::TransparentHash, std::equal_to<>> bytesToId; // raw bytes -> id
    std::vector<bpe::AddedToken> added;
    std::unordered_map<std::string, std::int32_t, bpe::TransparentHash, std::equal_to<>> addedByContent;
    bpe::AddedTrie rawTrie;        // added tokens with normalized: false
    bpe::AddedTrie normalizedTrie; // added tokens with normalized: true
    bool anyLstrip = false;
    bool anySingleWord = false;
    /// Each token's bytes, sorted by id: sized by the tokens the file holds, never by an id.
    std::vector<std::pair<std::int32_t, std::string>> idBytes;
    std::int32_t vocabSize = 0;
    std::optional<std::int32_t> bos;

    /// Scratch of one encode call.
    struct Scratch {
        RegexScratch regex;
        std::deque<std::string> storage; // owns normalized and prefixed text that views point into
        std::vector<RegexMatch> matches;
        struct Sym {
            std::int32_t id;
            std::int32_t prev;
            std::int32_t next;
        };
        struct Candidate {
            std::int32_t rank;
            std::int32_t pos;
            std::int32_t left;
            std::int32_t right;
            std::int32_t merged;
        };
        std::vector<Sym> syms;
        std::vector<Candidate> heap;
        std::unordered_map<std::string_view, std::pair<std::uint32_t, std::uint32_t>> cache;
        std::vector<std::int32_t> cacheIds;
        std::function<bool()> cancelled;
        std::size_t words = 0; // since the last poll
    };

    /// Added-token split of a whole text (`open` null), or of a text more may follow.
    void splitAdded(std::string_view text, const bpe::AddedTrie& trie, std::vector<Segment>& out,
                    bpe::OpenSplit* open = nullptr) const;
    Status segments(std::string_view text, Scratch& scratch, std::vector<Segment>& out) const;
    /// Pre-tokenizes a whole piece with steps[first...].
    Status preTokenize(std::string_view piece, std::size_t first, Scratch& scratch,
                       std::vector<std::string_view>& words) const;
    /// Pre-tokenizes `piece` (steps[k...]) when more text may follow it: appends the words no
    /// continuation can change and sets `consumed` to where they end (0: none), a place where the
    /// pre-tokenizer restarted gives the rest of the words; `allowed(base + p)` must accept it.
    Status preTokenizeOpen(std::size_t k, std::string_view piece, std::size_t base, const bpe::RestartAllowed& allowed,
                           Scratch& scratch, std::vector<std::string_view>& words, std::size_t& consumed) const;
    void mergeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const;
    Status encodeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const;
    /// The ids of a whole stretch of text between raw added tokens: NFC, normalized added tokens, words.
    Status encodeRawSegment(std::string_view text, Scratch& scratch, std::vector<std::int32_t>& out) const;
    /// The ids of a whole, valid UTF-8 text.
    Status encodeText(std::string_view text, Scratch& scratch, std::vector<std::int32_t>& out) const;
    /// The ids of the start of `text` (valid UTF-8) that no later text can change; `taken` says how
    /// many bytes they cover.
    Status encodeOpen(std::string_view text, Scratch& scratch, std::vector<std::int32_t>& out, std::size_t& taken) const;
    Status encodeOpenItem(std::string_view text, std::size_t itemBegin, std::size_t itemEnd,
                          const std::vector<std::pair<std::size_t, std::size_t>>& unsafe, Scratch& scratch,
                          std::vector<std::int32_t>& out, std::size_t& taken) const;
};

namespace bpe {

/// What a byte-level BPE tokenizer is built from, whichever file described it; names say which
/// key each part came from, for messages.
struct Build {
    std::string label;
    TokenizerOptions options;
    std::int32_t idLimit = kMaxVocabSize; ///< ids must stay below this (the embedding's rows)
    std::vector<std::pair<std::string, std::int32_t>> vocab; ///< byte-level spelling -> id
    std::string vocabKey = "model.vocab";
    std::vector<std::pair<std::string, std::string>> merges; ///< in rank order
    std::string mergesKey = "model.merges";
    std::vector<AddedToken> added;
    std::string addedKey = "added_tokens";
    std::vector<PreStep> steps;
    bool nfc = false;
    bool ignoreMerges = false;
    std::optional<std::int32_t> bos;
    std::string bosKey = "post_processor";
};

/// Checks `build` (ids below idLimit, no id twice, the 256 byte symbols, every merge's parts and
/// result in the vocabulary, added tokens unique) and indexes it. Errors: `label: key: why`.
Result<std::unique_ptr<BpeTokenizer>> buildTokenizer(Build build);

/// The byte-level pre-tokenizer step (optional prefix space, optional GPT-2 regex) `what` names.
Result<PreStep> byteLevelStep(bool addPrefixSpace, bool useRegex, const std::string& what);
/// A Split step (Isolated) on `pattern`.
Result<PreStep> splitStep(std::string_view pattern, const std::string& what);

} // namespace bpe

} // namespace kvlens::lm
