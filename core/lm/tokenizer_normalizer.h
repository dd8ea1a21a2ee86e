// SPDX-License-Identifier: GPL-3.0-or-later
// SentencePiece's normalizer written in core: a byte trie, the precompiled character map (a darts-clone double array read with every index checked), and the whitespace rules, fed text a block at a time.
#pragma once

#include "core/common/result.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvlens::lm {

/// SentencePiece's escaped space, U+2581 (LOWER ONE EIGHTH BLOCK).
inline constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";

/// The byte length a UTF-8 lead byte announces, as SentencePiece's OneCharLen (and llama.cpp's
/// unicode_len_utf8) read it: a stray continuation byte counts 1, 0xF8..0xFF count 4.
inline std::size_t utf8LeadLength(unsigned char lead)
{
    static constexpr unsigned char kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLengths[lead >> 4];
}

/// A byte trie over a fixed set of keys (pieces): sorted edge lists in two flat arrays, so a
/// 256 000-piece vocabulary takes a few megabytes. Built once, then immutable.
class PieceTrie {
public:
    /// Keys (non-empty, distinct) with their values (>= 0).
    void build(std::vector<std::pair<std::string_view, std::int32_t>> keys);
    bool empty() const { return m_values.size() <= 1; }
    /// The child of `node` (0 is the root) along byte `b`, or -1.
    std::int32_t step(std::int32_t node, unsigned char b) const;
    /// The value stored at `node`, or -1.
    std::int32_t value(std::int32_t node) const { return m_values[static_cast<std::size_t>(node)]; }

    /// Prefix search as the library's PrefixMatcher runs it: among the first `maxResults` keys
    /// that are prefixes of `text` (shortest first), the longest. `length` is 0 when none;
    /// `open` when the walk was still inside the trie at the end of `text`, so a longer key
    /// could match once more text arrives.
    struct Prefix {
        std::size_t length = 0;
        std::int32_t value = -1;
        bool open = false;
    };
    Prefix longestPrefix(std::string_view text, std::size_t maxResults) const;

private:
    std::vector<std::int32_t> m_values{-1};
    std::vector<std::uint32_t> m_edgeBegin{0, 0}; // node i's edges: [m_edgeBegin[i], m_edgeBegin[i + 1])
    std::vector<std::pair<unsigned char, std::int32_t>> m_edges;
};

/// SentencePiece's precompiled_charsmap: a 4-byte little-endian size, that many bytes of
/// darts-clone double-array units, then the replacement strings, each ended by NUL.
class CharsMap {
public:
    /// An empty `blob` is the identity. Refused, naming `label`: a blob of 4 bytes or fewer, a trie
    /// size that is not a whole number of 4-byte units or does not fit in the blob, no unit, and
    /// replacement strings that do not end with NUL.
    static Result<CharsMap> parse(std::string_view blob, const std::string& label);

    bool empty() const { return m_units.empty(); }

    /// The rule for the longest prefix of `text` that has one, taken as the library does (the
    /// longest among the first 32 prefix matches). `length` 0: no rule. `open`: the trie walk
    /// reached the end of `text` (more text could give a longer rule). Every unit index is checked
    /// against the array; a replacement's offset must lie in the strings and the string must be
    /// UTF-8: else an error naming the offset.
    struct Rule {
        std::size_t length = 0;
        std::string_view replacement;
        bool open = false;
    };
    Status lookup(std::string_view text, Rule& rule) const;

private:
    /// The NUL-terminated replacement at `value` of the strings, checked (inside them, UTF-8).
    Status replacementAt(std::uint32_t value, std::string_view& replacement) const;
    std::vector<std::uint32_t> m_units;
    std::string m_strings;
    std::string m_label;
};

/// The rules of NormalizerSpec (and llama.cpp's for its "llama" vocabularies), per text.
struct NormalizerRules {
    const CharsMap* charsmap = nullptr;      ///< nullptr or empty: no character rules
    const PieceTrie* userDefined = nullptr;  ///< pieces copied through untouched (the library's prefix matcher)
    bool addDummyPrefix = true;
    bool removeExtraWhitespaces = true;
    bool escapeWhitespaces = true;
    bool treatWhitespaceAsSuffix = false;
    bool replaceInvalidUtf8 = true; ///< the library's U+FFFD for a byte that starts no UTF-8 character
};

/// SentencePiece's Normalizer::Normalize, incremental: feed the raw text in pieces and get the
/// normalized text (spaces as U+2581 when escaping) as far as no later byte can change it. The
/// trailing-whitespace strip and a suffix dummy are applied by finish() on the part not yet taken.
class SpmNormalizer {
public:
    explicit SpmNormalizer(const NormalizerRules& rules) : m_rules(rules) {}

    /// Normalizes a prefix of `raw` (the text's next bytes; `last`: nothing follows) onto `out`.
    /// Returns how many bytes of `raw` it took: the rest must be given again with what follows.
    Result<std::size_t> feed(std::string_view raw, bool last, std::string& out);
    /// At the end of the text: removes trailing whitespace symbols from `pending` (the normalized
    /// text not yet segmented; what was segmented before never ends inside the trailing run) and
    /// adds the suffix dummy, unless the text was empty or only heading spaces.
    void finish(std::string& pending) const;
    /// A new text starts (llama.cpp: each fragment between user-defined tokens).
    void reset();
    /// The whitespace symbol: U+2581 when escaping, else ' '.
    std::string_view space() const;

private:
    /// One step of NormalizePrefix: the piece of normalized text for a prefix of `raw` and the raw
    /// bytes it takes; 0 taken means more text is needed.
    Status prefix(std::string_view raw, bool last, std::string_view& piece, std::size_t& taken) const;

    const NormalizerRules& m_rules;
    bool m_started = false;     ///< a non-space prefix was seen (the dummy prefix is in)
    bool m_prevSpace = false;   ///< the last piece appended ended with ' '
    std::string m_replacement;  ///< scratch for U+FFFD
};

} // namespace kvlens::lm
