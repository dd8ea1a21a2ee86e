// SPDX-License-Identifier: GPL-3.0-or-later
// The byte trie, the bounds-checked double-array lookup of precompiled_charsmap, and SentencePiece's whitespace rules as a state machine over blocks.
#include "core/lm/tokenizer_normalizer.h"

#include "core/lm/tokenizer_unicode.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <tuple>

namespace kvlens::lm {

namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD"; // U+FFFD

/// The library's prefix searches keep this many results (normalizer.h kMaxTrieResultsSize, and
/// PrefixMatcher's kResultSize).
constexpr std::size_t kCharsmapResults = 32;
constexpr std::size_t kUserDefinedResults = 64;

// darts-clone's DoubleArrayUnit fields (darts.h).
bool unitHasLeaf(std::uint32_t unit)
{
    return ((unit >> 8) & 1) == 1;
}
std::uint32_t unitValue(std::uint32_t unit)
{
    return unit & ((1u << 31) - 1);
}
std::uint32_t unitLabel(std::uint32_t unit)
{
    return unit & ((1u << 31) | 0xFF);
}
std::uint64_t unitOffset(std::uint32_t unit)
{
    return static_cast<std::uint64_t>(unit >> 10) << ((unit & (1u << 9)) >> 6);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// PieceTrie

void PieceTrie::build(std::vector<std::pair<std::string_view, std::int32_t>> keys)
{
    std::sort(keys.begin(), keys.end());
    m_values.assign(1, -1);
    m_edgeBegin.assign(1, 0);
    m_edges.clear();
    // Breadth first, so each node's edges are appended in one run: (node, keys [lo, hi), depth).
    std::deque<std::tuple<std::size_t, std::size_t, std::size_t>> queue{{0, keys.size(), 0}};
    while (!queue.empty()) {
        auto [lo, hi, depth] = queue.front();
        queue.pop_front();
        const std::size_t node = m_edgeBegin.size() - 1;
        if (lo < hi && keys[lo].first.size() == depth)
            m_values[node] = keys[lo++].second; // the key ending here sorts first
        while (lo < hi) {
            const auto b = static_cast<unsigned char>(keys[lo].first[depth]);
            std::size_t end = lo;
            while (end < hi && static_cast<unsigned char>(keys[end].first[depth]) == b)
                ++end;
            m_edges.emplace_back(b, static_cast<std::int32_t>(m_values.size()));
            m_values.push_back(-1);
            queue.emplace_back(lo, end, depth + 1);
            lo = end;
        }
        m_edgeBegin.push_back(static_cast<std::uint32_t>(m_edges.size()));
    }
}

std::int32_t PieceTrie::step(std::int32_t node, unsigned char b) const
{
    const auto first = m_edges.begin() + m_edgeBegin[static_cast<std::size_t>(node)];
    const auto last = m_edges.begin() + m_edgeBegin[static_cast<std::size_t>(node) + 1];
    const auto it = std::lower_bound(first, last, b, [](const auto& edge, unsigned char key) { return edge.first < key; });
    return it != last && it->first == b ? it->second : -1;
}

PieceTrie::Prefix PieceTrie::longestPrefix(std::string_view text, std::size_t maxResults) const
{
    Prefix best;
    std::size_t results = 0;
    std::int32_t node = 0;
    for (std::size_t i = 0;; ++i) {
        if (i == text.size()) {
            best.open = true;
            break;
        }
        node = step(node, static_cast<unsigned char>(text[i]));
        if (node < 0)
            break;
        if (value(node) >= 0) {
            best.length = i + 1;
            best.value = value(node);
            if (++results == maxResults)
                break; // the library keeps no more: longer keys cannot change the answer
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------------------
// CharsMap

Result<CharsMap> CharsMap::parse(std::string_view blob, const std::string& label)
{
    CharsMap map;
    map.m_label = label;
    if (blob.empty())
        return map;
    const std::string where = "normalizer_spec.precompiled_charsmap";
    if (blob.size() <= 4)
        return Error{label, where + ": " + std::to_string(blob.size()) + " bytes, too short for its 4-byte header"};
    std::uint32_t trieBytes = 0;
    for (int i = 0; i < 4; ++i)
        trieBytes |= static_cast<std::uint32_t>(static_cast<unsigned char>(blob[static_cast<std::size_t>(i)])) << (8 * i);
    if (trieBytes == 0 || trieBytes % 4 != 0 || trieBytes > blob.size() - 4)
        return Error{label, where + ": its double array of " + std::to_string(trieBytes) + " bytes is not a whole "
                                + "number (at least 1) of 4-byte units within the " + std::to_string(blob.size() - 4)
                                + " bytes after the header"};
    map.m_strings.assign(blob.substr(4 + trieBytes));
    if (!map.m_strings.empty() && map.m_strings.back() != '\0')
        return Error{label, where + ": its replacement strings do not end with NUL"};
    map.m_units.resize(trieBytes / 4);
    for (std::size_t u = 0; u < map.m_units.size(); ++u) {
        std::uint32_t unit = 0;
        for (std::size_t i = 0; i < 4; ++i)
            unit |= static_cast<std::uint32_t>(static_cast<unsigned char>(blob[4 + 4 * u + i])) << (8 * i);
        map.m_units[u] = unit;
    }
    return map;
}

Status CharsMap::replacementAt(std::uint32_t value, std::string_view& replacement) const
{
    if (value >= m_strings.size())
        return Error{m_label, "normalizer_spec.precompiled_charsmap: a rule's replacement offset " + std::to_string(value)
                                  + " lies outside its " + std::to_string(m_strings.size()) + " bytes of strings"};
    const char* begin = m_strings.data() + value;
    const auto length = static_cast<std::size_t>(
        static_cast<const char*>(std::memchr(begin, '\0', m_strings.size() - value)) - begin); // parse() checked the final NUL
    replacement = std::string_view(begin, length);
    if (const auto bad = firstInvalidUtf8(replacement))
        return Error{m_label, "normalizer_spec.precompiled_charsmap: the replacement at offset " + std::to_string(value)
                                  + " is not valid UTF-8"};
    return Ok{};
}

Status CharsMap::lookup(std::string_view text, Rule& rule) const
{
    rule = Rule{};
    if (m_units.empty())
        return Ok{};
    // commonPrefixSearch(text, results, 32, text.size()) of darts.h, with each index checked. Every
    // rule the walk passes is checked, not only the longest: a streamed text asks for its prefixes
    // before the rest arrives, and must fail exactly where the whole text does.
    const std::uint64_t size = m_units.size();
    std::uint64_t node = unitOffset(m_units[0]);
    std::size_t results = 0;
    std::size_t i = 0;
    for (; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        node ^= b;
        if (node >= size || unitLabel(m_units[node]) != b)
            break;
        const std::uint32_t unit = m_units[node];
        node ^= unitOffset(unit);
        if (unitHasLeaf(unit)) {
            if (node >= size)
                return Error{m_label, "normalizer_spec.precompiled_charsmap: a leaf index (" + std::to_string(node)
                                          + ") lies outside its " + std::to_string(size) + " units"};
            if (auto ok = replacementAt(unitValue(m_units[node]), rule.replacement); !ok)
                return ok;
            rule.length = i + 1;
            if (++results == kCharsmapResults)
                break;
        }
    }
    rule.open = i == text.size() && results < kCharsmapResults;
    return Ok{};
}

// ---------------------------------------------------------------------------------------------
// SpmNormalizer

std::string_view SpmNormalizer::space() const
{
    return m_rules.escapeWhitespaces ? kSpaceSymbol : std::string_view(" ");
}

void SpmNormalizer::reset()
{
    m_started = false;
    m_prevSpace = false;
}

Status SpmNormalizer::prefix(std::string_view raw, bool last, std::string_view& piece, std::size_t& taken) const
{
    taken = 0;
    if (m_rules.userDefined != nullptr && !m_rules.userDefined->empty()) {
        const auto match = m_rules.userDefined->longestPrefix(raw, kUserDefinedResults);
        if (match.open && !last)
            return Ok{};
        if (match.length > 0) {
            piece = raw.substr(0, match.length);
            taken = match.length;
            return Ok{};
        }
    }
    if (m_rules.charsmap != nullptr && !m_rules.charsmap->empty()) {
        CharsMap::Rule rule;
        if (Status s = m_rules.charsmap->lookup(raw, rule); !s)
            return s;
        if (rule.open && !last)
            return Ok{};
        if (rule.length > 0) {
            piece = rule.replacement;
            taken = rule.length;
            return Ok{};
        }
    }
    const std::size_t length = utf8LeadLength(static_cast<unsigned char>(raw[0]));
    if (raw.size() < length && !last)
        return Ok{};
    if (length <= raw.size() && !firstInvalidUtf8(raw.substr(0, length))) {
        piece = raw.substr(0, length);
        taken = length;
    } else {
        piece = m_rules.replaceInvalidUtf8 ? kReplacementChar : raw.substr(0, 1);
        taken = 1;
    }
    return Ok{};
}

Result<std::size_t> SpmNormalizer::feed(std::string_view raw, bool last, std::string& out)
{
    std::size_t consumed = 0;
    while (consumed < raw.size()) {
        std::string_view piece;
        std::size_t taken = 0;
        if (Status s = prefix(raw.substr(consumed), last, piece, taken); !s)
            return s.error();
        if (taken == 0)
            break; // a rule or a character may continue past the end: wait for more
        consumed += taken;
        if (!m_started) {
            // Heading spaces are dropped when removing extra white space; the dummy prefix
            // comes with the first piece that is not one.
            if (m_rules.removeExtraWhitespaces && piece == " ")
                continue;
            m_started = true;
            if (!m_rules.treatWhitespaceAsSuffix && m_rules.addDummyPrefix)
                out += space();
            m_prevSpace = m_rules.removeExtraWhitespaces;
        }
        while (m_prevSpace && !piece.empty() && piece.front() == ' ')
            piece.remove_prefix(1);
        if (!piece.empty()) {
            for (const char c : piece) {
                if (c == ' ' && m_rules.escapeWhitespaces)
                    out += kSpaceSymbol;
                else
                    out += c;
            }
            m_prevSpace = piece.back() == ' ';
        }
        if (!m_rules.removeExtraWhitespaces)
            m_prevSpace = false;
    }
    return consumed;
}

void SpmNormalizer::finish(std::string& pending) const
{
    if (!m_started)
        return;
    const std::string_view ws = space();
    if (m_rules.removeExtraWhitespaces)
        while (pending.size() >= ws.size() && std::string_view(pending).substr(pending.size() - ws.size()) == ws)
            pending.resize(pending.size() - ws.size());
    if (m_rules.treatWhitespaceAsSuffix && m_rules.addDummyPrefix)
        pending += ws;
}

} // namespace kvlens::lm
