// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level BPE from tokenizer.json: reading and checking the file, added tokens, pre-tokenization, merges by rank.
#include "core/lm/tokenizer_bpe.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_regex.h"
#include "core/lm/tokenizer_unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <unordered_map>

namespace kvlens::lm {

using nlohmann::json;

namespace {

/// GPT-2's pre-tokenizer regex, as Hugging Face's ByteLevel(use_regex) applies it (Radford et al.
/// 2019, the released encoder.py).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Pre-tokens at most this long are cached during one encode call.
constexpr std::size_t kMaxCachedWordBytes = 256;
/// The cache is emptied when it holds this many pre-tokens.
constexpr std::size_t kMaxCachedWords = 1 << 20;

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

    void add(std::string_view text, std::int32_t token)
    {
        std::int32_t node = 0;
        for (const char ch : text) {
            const auto b = static_cast<unsigned char>(ch);
            auto& children = m_nodes[node].children;
            auto it = std::lower_bound(children.begin(), children.end(), b,
                                       [](const auto& child, unsigned char key) { return child.first < key; });
            if (it != children.end() && it->first == b) {
                node = it->second;
            } else {
                const auto next = static_cast<std::int32_t>(m_nodes.size());
                children.insert(it, {b, next});
                m_nodes.emplace_back();
                node = next;
            }
        }
        m_nodes[node].token = token;
        m_first[static_cast<unsigned char>(text[0])] = true;
    }

    /// The longest token starting at text[pos]: its index and length, or {-1, 0}.
    std::pair<std::int32_t, std::size_t> longestAt(std::string_view text, std::size_t pos) const
    {
        if (!m_first[static_cast<unsigned char>(text[pos])])
            return {-1, 0};
        std::pair<std::int32_t, std::size_t> best{-1, 0};
        std::int32_t node = 0;
        for (std::size_t i = pos; i < text.size(); ++i) {
            const auto b = static_cast<unsigned char>(text[i]);
            const auto& children = m_nodes[node].children;
            auto it = std::lower_bound(children.begin(), children.end(), b,
                                       [](const auto& child, unsigned char key) { return child.first < key; });
            if (it == children.end() || it->first != b)
                break;
            node = it->second;
            if (m_nodes[node].token >= 0)
                best = {m_nodes[node].token, i + 1 - pos};
        }
        return best;
    }

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

std::uint64_t pairKey(std::int32_t a, std::int32_t b)
{
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

struct MergeValue {
    std::int32_t rank = 0;
    std::int32_t id = 0;
};

} // namespace

struct BpeTokenizer::Impl {
    std::string label;
    TokenizerOptions options;
    bool nfc = false;
    std::vector<PreStep> steps;
    bool ignoreMerges = false;
    std::array<std::int32_t, 256> byteIds{};
    std::unordered_map<std::uint64_t, MergeValue> merges;
    std::unordered_map<std::string, std::int32_t, TransparentHash, std::equal_to<>> bytesToId; // raw bytes -> id
    std::vector<AddedToken> added;
    std::unordered_map<std::string, std::int32_t, TransparentHash, std::equal_to<>> addedByContent;
    AddedTrie rawTrie;        // added tokens with normalized: false
    AddedTrie normalizedTrie; // added tokens with normalized: true
    std::vector<std::string> idBytes;
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
    };

    void splitAdded(std::string_view text, const AddedTrie& trie, std::vector<Segment>& out) const;
    Status segments(std::string_view text, Scratch& scratch, std::vector<Segment>& out) const;
    Status preTokenize(std::string_view piece, Scratch& scratch, std::vector<std::string_view>& words) const;
    void mergeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const;
    void encodeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const;
};

namespace {

/// The start of the code point that ends just before `pos` (pos > 0, on a boundary).
std::size_t previousCharStart(std::string_view text, std::size_t pos)
{
    std::size_t p = pos - 1;
    while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80)
        --p;
    return p;
}

} // namespace

void BpeTokenizer::Impl::splitAdded(std::string_view text, const AddedTrie& trie, std::vector<Segment>& out) const
{
    if (text.empty())
        return;
    if (trie.empty()) {
        out.push_back({text, -1});
        return;
    }
    const std::size_t n = text.size();
    std::size_t startOffset = 0;
    std::size_t pos = 0;
    while (pos < n) {
        std::size_t start = pos;
        std::pair<std::int32_t, std::size_t> found{-1, 0};
        for (; start < n; ++start) {
            found = trie.longestAt(text, start);
            if (found.first >= 0)
                break;
        }
        if (found.first < 0)
            break;
        std::size_t stop = start + found.second;
        pos = stop; // the automaton resumes after the match, kept or not
        const AddedToken& token = added[static_cast<std::size_t>(found.first)];
        if (token.special && !options.parseSpecialTokens)
            continue;
        if (token.singleWord) {
            bool wordBefore = false, wordAfter = false;
            if (start > 0) {
                std::size_t p = previousCharStart(text, start);
                wordBefore = isWordChar(decodeUtf8(text, p));
            }
            if (stop < n) {
                std::size_t p = stop;
                wordAfter = isWordChar(decodeUtf8(text, p));
            }
            if (wordBefore || wordAfter)
                continue;
        }
        if (token.lstrip) {
            std::size_t newStart = start;
            while (newStart > startOffset) {
                const std::size_t p = previousCharStart(text, newStart);
                std::size_t q = p;
                if (!isWhiteSpaceChar(decodeUtf8(text, q)))
                    break;
                newStart = p;
            }
            start = newStart;
        }
        if (token.rstrip) {
            while (stop < n) {
                std::size_t q = stop;
                if (!isWhiteSpaceChar(decodeUtf8(text, q)))
                    break;
                stop = q;
            }
            // Hugging Face resumes the search inside the absorbed white space; resuming after it
            // keeps the pieces from overlapping (they differ only for added tokens that begin with
            // white space).
            pos = stop;
        }
        if (startOffset < start)
            out.push_back({text.substr(startOffset, start - startOffset), -1});
        out.push_back({text.substr(start, stop - start), token.id});
        startOffset = stop;
    }
    if (startOffset < n)
        out.push_back({text.substr(startOffset), -1});
}

Status BpeTokenizer::Impl::segments(std::string_view text, Scratch& scratch, std::vector<Segment>& out) const
{
    std::vector<Segment> raw;
    splitAdded(text, rawTrie, raw);
    for (const Segment& segment : raw) {
        if (segment.token >= 0) {
            out.push_back(segment);
            continue;
        }
        std::string_view piece = segment.text;
        if (nfc) {
            auto normalized = toNfc(piece);
            if (!normalized)
                return Error{label, "normalizer: ICU failed to normalize the text to NFC"};
            scratch.storage.push_back(std::move(*normalized));
            piece = scratch.storage.back();
        }
        splitAdded(piece, normalizedTrie, out);
    }
    return Ok{};
}

namespace {

/// Hugging Face's SplitDelimiterBehavior applied to a cover of `piece` by (range, is-match) parts.
void applyBehavior(std::string_view piece, const std::vector<std::pair<RegexMatch, bool>>& parts, Behavior behavior,
                   std::vector<std::string_view>& out)
{
    std::vector<std::pair<RegexMatch, bool>> kept; // (range, remove)
    kept.reserve(parts.size());
    switch (behavior) {
    case Behavior::Isolated:
        for (const auto& [range, match] : parts)
            kept.push_back({range, false});
        break;
    case Behavior::Removed:
        kept = parts;
        break;
    case Behavior::Contiguous: {
        bool previous = false;
        for (const auto& [range, match] : parts) {
            if (match == previous && !kept.empty())
                kept.back().first.end = range.end;
            else
                kept.push_back({range, false});
            previous = match;
        }
        break;
    }
    case Behavior::MergedWithPrevious: {
        bool previous = false;
        for (const auto& [range, match] : parts) {
            if (match && !previous && !kept.empty())
                kept.back().first.end = range.end;
            else
                kept.push_back({range, false});
            previous = match;
        }
        break;
    }
    case Behavior::MergedWithNext: {
        bool previous = false;
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
            const auto& [range, match] = *it;
            if (match && !previous && !kept.empty())
                kept.back().first.begin = range.begin;
            else
                kept.push_back({range, false});
            previous = match;
        }
        std::reverse(kept.begin(), kept.end());
        break;
    }
    }
    for (const auto& [range, remove] : kept)
        if (!remove && range.end > range.begin)
            out.push_back(piece.substr(range.begin, range.end - range.begin));
}

/// The cover of `piece` by regex matches and the text between them (Hugging Face's Pattern).
void coverWithMatches(std::size_t size, const std::vector<RegexMatch>& matches,
                      std::vector<std::pair<RegexMatch, bool>>& parts)
{
    parts.clear();
    std::size_t previous = 0;
    for (const RegexMatch& m : matches) {
        if (previous != m.begin)
            parts.push_back({{previous, m.begin}, false});
        parts.push_back({m, true});
        previous = m.end;
    }
    if (previous != size)
        parts.push_back({{previous, size}, false});
}

} // namespace

Status BpeTokenizer::Impl::preTokenize(std::string_view piece, Scratch& scratch,
                                       std::vector<std::string_view>& words) const
{
    std::vector<std::string_view> current{piece};
    std::vector<std::string_view> next;
    std::vector<std::pair<RegexMatch, bool>> parts;
    for (const PreStep& step : steps) {
        next.clear();
        for (std::string_view p : current) {
            switch (step.kind) {
            case PreStep::Kind::Split: {
                scratch.matches.clear();
                if (Status s = step.regex->findAll(p, scratch.regex, scratch.matches); !s)
                    return Error{label, s.error().text()};
                coverWithMatches(p.size(), scratch.matches, parts);
                if (step.invert)
                    for (auto& part : parts)
                        part.second = !part.second;
                applyBehavior(p, parts, step.behavior, next);
                break;
            }
            case PreStep::Kind::Digits: {
                parts.clear();
                std::size_t last = 0;
                for (std::size_t i = 0; i < p.size();) {
                    const std::size_t begin = i;
                    if (isNumericChar(decodeUtf8(p, i))) {
                        if (last < begin)
                            parts.push_back({{last, begin}, false});
                        parts.push_back({{begin, i}, true});
                        last = i;
                    }
                }
                if (last < p.size())
                    parts.push_back({{last, p.size()}, false});
                applyBehavior(p, parts, step.individualDigits ? Behavior::Isolated : Behavior::Contiguous, next);
                break;
            }
            case PreStep::Kind::ByteLevel: {
                std::string_view q = p;
                if (step.addPrefixSpace && q.front() != ' ') {
                    scratch.storage.push_back(" " + std::string(q));
                    q = scratch.storage.back();
                }
                if (!step.regex) {
                    next.push_back(q);
                    break;
                }
                scratch.matches.clear();
                if (Status s = step.regex->findAll(q, scratch.regex, scratch.matches); !s)
                    return Error{label, s.error().text()};
                coverWithMatches(q.size(), scratch.matches, parts);
                applyBehavior(q, parts, Behavior::Isolated, next);
                break;
            }
            }
        }
        current.swap(next);
    }
    words.insert(words.end(), current.begin(), current.end());
    return Ok{};
}

void BpeTokenizer::Impl::mergeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const
{
    const auto m = static_cast<std::int32_t>(word.size());
    auto& syms = scratch.syms;
    auto& heap = scratch.heap;
    syms.resize(static_cast<std::size_t>(m));
    for (std::int32_t i = 0; i < m; ++i)
        syms[static_cast<std::size_t>(i)] = {byteIds[static_cast<unsigned char>(word[static_cast<std::size_t>(i)])],
                                             i - 1, i + 1 < m ? i + 1 : -1};
    // A min-heap on (rank, position): the lowest-ranked pair first, the leftmost among equals.
    const auto later = [](const Scratch::Candidate& a, const Scratch::Candidate& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    const auto candidate = [&](std::int32_t left, std::int32_t right, bool push) {
        const auto l = syms[static_cast<std::size_t>(left)].id, r = syms[static_cast<std::size_t>(right)].id;
        const auto it = merges.find(pairKey(l, r));
        if (it == merges.end())
            return;
        heap.push_back({it->second.rank, left, l, r, it->second.id});
        if (push)
            std::push_heap(heap.begin(), heap.end(), later);
    };
    heap.clear();
    for (std::int32_t i = 0; i + 1 < m; ++i)
        candidate(i, i + 1, false);
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const Scratch::Candidate c = heap.back();
        heap.pop_back();
        auto& left = syms[static_cast<std::size_t>(c.pos)];
        // Stale when either symbol has merged since: a symbol's id changes only by growing.
        if (left.id != c.left || left.next < 0 || syms[static_cast<std::size_t>(left.next)].id != c.right)
            continue;
        auto& right = syms[static_cast<std::size_t>(left.next)];
        left.id = c.merged;
        left.next = right.next;
        right.id = -1;
        if (left.next >= 0)
            syms[static_cast<std::size_t>(left.next)].prev = c.pos;
        if (left.prev >= 0)
            candidate(left.prev, c.pos, true);
        if (left.next >= 0)
            candidate(c.pos, left.next, true);
    }
    for (std::int32_t i = 0; i >= 0; i = syms[static_cast<std::size_t>(i)].next)
        out.push_back(syms[static_cast<std::size_t>(i)].id);
}

void BpeTokenizer::Impl::encodeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const
{
    if (word.size() == 1) {
        out.push_back(byteIds[static_cast<unsigned char>(word[0])]);
        return;
    }
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    if (cacheable) {
        const auto it = scratch.cache.find(word);
        if (it != scratch.cache.end()) {
            const auto begin = scratch.cacheIds.begin() + it->second.first;
            out.insert(out.end(), begin, begin + it->second.second);
            return;
        }
    }
    const std::size_t before = out.size();
    bool whole = false;
    if (ignoreMerges) {
        const auto it = bytesToId.find(word);
        if (it != bytesToId.end()) {
            out.push_back(it->second);
            whole = true;
        }
    }
    if (!whole)
        mergeWord(word, scratch, out);
    if (cacheable) {
        if (scratch.cache.size() >= kMaxCachedWords) {
            scratch.cache.clear();
            scratch.cacheIds.clear();
        }
        const auto offset = static_cast<std::uint32_t>(scratch.cacheIds.size());
        scratch.cacheIds.insert(scratch.cacheIds.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
        scratch.cache.emplace(word, std::pair{offset, static_cast<std::uint32_t>(out.size() - before)});
    }
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
BpeTokenizer::~BpeTokenizer() = default;

Result<std::vector<std::int32_t>> BpeTokenizer::encode(std::string_view text) const
{
    try {
        if (text.size() > kMaxEncodeBytes)
            return Error{m_impl->label, "the text is " + io::byteSizeText(text.size()) + ", above the cap of "
                                            + io::byteSizeText(kMaxEncodeBytes) + " for one encode call"};
        if (const auto bad = firstInvalidUtf8(text))
            return Error{m_impl->label, "the text is not valid UTF-8 at byte " + std::to_string(*bad)
                                            + " (byte-level BPE takes UTF-8 text, as Hugging Face's tokenizers does)"};
        Impl::Scratch scratch;
        std::vector<Segment> segments;
        if (Status s = m_impl->segments(text, scratch, segments); !s)
            return s.error();
        std::vector<std::int32_t> ids;
        ids.reserve(text.size() / 3 + 16);
        std::vector<std::string_view> words;
        for (const Segment& segment : segments) {
            if (segment.token >= 0) {
                ids.push_back(segment.token);
                continue;
            }
            words.clear();
            if (Status s = m_impl->preTokenize(segment.text, scratch, words); !s)
                return s.error();
            for (std::string_view word : words)
                m_impl->encodeWord(word, scratch, ids);
        }
        return ids;
    } catch (const std::exception& e) {
        return Error{m_impl->label, std::string("encoding failed: ") + e.what()};
    }
}

Result<std::vector<std::string>> BpeTokenizer::preTokenize(std::string_view text) const
{
    try {
        if (const auto bad = firstInvalidUtf8(text))
            return Error{m_impl->label, "the text is not valid UTF-8 at byte " + std::to_string(*bad)};
        Impl::Scratch scratch;
        std::vector<Segment> segments;
        if (Status s = m_impl->segments(text, scratch, segments); !s)
            return s.error();
        std::vector<std::string_view> words;
        for (const Segment& segment : segments)
            if (segment.token < 0)
                if (Status s = m_impl->preTokenize(segment.text, scratch, words); !s)
                    return s.error();
        return std::vector<std::string>(words.begin(), words.end());
    } catch (const std::exception& e) {
        return Error{m_impl->label, std::string("pre-tokenizing failed: ") + e.what()};
    }
}

std::string BpeTokenizer::tokenBytes(std::int32_t id) const
{
    if (id < 0 || id >= m_impl->vocabSize)
        return {};
    return m_impl->idBytes[static_cast<std::size_t>(id)];
}

std::int32_t BpeTokenizer::vocabSize() const
{
    return m_impl->vocabSize;
}

std::optional<std::int32_t> BpeTokenizer::bos() const
{
    return m_impl->bos;
}

std::optional<std::int32_t> BpeTokenizer::tokenId(std::string_view content) const
{
    if (const auto it = m_impl->addedByContent.find(content); it != m_impl->addedByContent.end())
        return it->second;
    if (const auto it = m_impl->bytesToId.find(content); it != m_impl->bytesToId.end())
        return it->second;
    return std::nullopt;
}

void BpeTokenizer::setBos(std::optional<std::int32_t> id)
{
    m_impl->bos = id;
}

const std::string& BpeTokenizer::label() const
{
    return m_impl->label;
}

// ---------------------------------------------------------------------------------------------
// Reading tokenizer.json

namespace {

/// Thrown inside the reader only; bpeFromJson turns it into an Error.
struct Refusal {
    std::string key;
    std::string message;
};

[[noreturn]] void refuse(const std::string& key, const std::string& message)
{
    throw Refusal{key, message};
}

bool isNull(const json& object, const char* key)
{
    const auto it = object.find(key);
    return it == object.end() || it->is_null();
}

bool readBool(const json& object, const char* key, const std::string& path, bool fallback)
{
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
        return fallback;
    if (!it->is_boolean())
        refuse(path + "." + key, "expected true or false, found " + io::describeJson(*it));
    return it->get<bool>();
}

const std::string& readString(const json& object, const char* key, const std::string& path)
{
    const auto it = object.find(key);
    if (it == object.end())
        refuse(path + "." + key, "missing");
    if (!it->is_string())
        refuse(path + "." + key, "expected a string, found " + io::describeJson(*it));
    return it->get_ref<const std::string&>();
}

const json& requireObject(const json& value, const std::string& path)
{
    if (!value.is_object())
        refuse(path, "expected an object, found " + io::describeJson(value));
    return value;
}

/// A token id: an integer in [0, kMaxVocabSize). `path` (a callable giving the key) is only built
/// for a refusal: the vocabulary loop calls this once per token.
template <class Path>
std::int32_t readIdAt(const json& value, const Path& path)
{
    if (!value.is_number_integer())
        refuse(path(), "expected an integer token id, found " + io::describeJson(value));
    const bool inRange = value.is_number_unsigned()
                             ? value.get<std::uint64_t>() < static_cast<std::uint64_t>(kMaxVocabSize)
                             : value.get<std::int64_t>() >= 0 && value.get<std::int64_t>() < kMaxVocabSize;
    if (!inRange)
        refuse(path(), "token id " + value.dump() + " is outside [0, " + std::to_string(kMaxVocabSize) + ")");
    return static_cast<std::int32_t>(value.get<std::int64_t>());
}

std::int32_t readId(const json& value, const std::string& path)
{
    return readIdAt(value, [&] { return path; });
}

std::string hexByte(unsigned b)
{
    static constexpr char kHex[] = "0123456789ABCDEF";
    return std::string("0x") + kHex[b >> 4] + kHex[b & 15];
}

std::string codePointName(char32_t c)
{
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string digits;
    for (int shift = c > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4)
        digits += kHex[(c >> shift) & 15];
    return "U+" + digits;
}

void parseNormalizer(const json& value, const std::string& path, bool& nfc)
{
    if (value.is_null())
        return;
    requireObject(value, path);
    const std::string& type = readString(value, "type", path);
    if (type == "NFC") {
        nfc = true;
    } else if (type == "Sequence") {
        const auto it = value.find("normalizers");
        if (it == value.end() || !it->is_array())
            refuse(path + ".normalizers", "expected an array");
        for (std::size_t i = 0; i < it->size(); ++i)
            parseNormalizer((*it)[i], path + ".normalizers[" + std::to_string(i) + "]", nfc);
    } else {
        refuse(path + ".type", io::quoteName(type) + " is not supported (null, NFC, or a Sequence of NFC)");
    }
}

Behavior parseBehavior(const json& object, const std::string& path)
{
    const std::string& name = readString(object, "behavior", path);
    if (name == "Removed")
        return Behavior::Removed;
    if (name == "Isolated")
        return Behavior::Isolated;
    if (name == "MergedWithPrevious")
        return Behavior::MergedWithPrevious;
    if (name == "MergedWithNext")
        return Behavior::MergedWithNext;
    if (name == "Contiguous")
        return Behavior::Contiguous;
    refuse(path + ".behavior", io::quoteName(name)
                                   + " is not a split behavior (Removed, Isolated, MergedWithPrevious, "
                                     "MergedWithNext, Contiguous)");
}

std::shared_ptr<const SplitRegex> compileOrRefuse(std::string_view pattern, bool literal, const std::string& path)
{
    auto regex = SplitRegex::compile(pattern, literal, path);
    if (!regex)
        refuse(regex.error().field, regex.error().message);
    return *regex;
}

void parsePreTokenizer(const json& value, const std::string& path, std::vector<PreStep>& steps)
{
    if (value.is_null())
        refuse(path, "null is not supported: byte-level BPE needs a ByteLevel pre-tokenizer");
    requireObject(value, path);
    const std::string& type = readString(value, "type", path);
    if (type == "Sequence") {
        const auto it = value.find("pretokenizers");
        if (it == value.end() || !it->is_array())
            refuse(path + ".pretokenizers", "expected an array");
        for (std::size_t i = 0; i < it->size(); ++i)
            parsePreTokenizer((*it)[i], path + ".pretokenizers[" + std::to_string(i) + "]", steps);
        return;
    }
    PreStep step;
    if (type == "Split") {
        step.kind = PreStep::Kind::Split;
        const auto it = value.find("pattern");
        if (it == value.end() || !it->is_object() || it->size() != 1)
            refuse(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
        const bool literal = it->contains("String");
        if (!literal && !it->contains("Regex"))
            refuse(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}, found the key "
                                          + io::quoteName(it->begin().key()));
        const char* key = literal ? "String" : "Regex";
        const std::string& pattern = readString(*it, key, path + ".pattern");
        step.regex = compileOrRefuse(pattern, literal, path + ".pattern." + key);
        step.behavior = parseBehavior(value, path);
        step.invert = readBool(value, "invert", path, false);
    } else if (type == "Digits") {
        step.kind = PreStep::Kind::Digits;
        step.individualDigits = readBool(value, "individual_digits", path, false);
    } else if (type == "ByteLevel") {
        step.kind = PreStep::Kind::ByteLevel;
        // Hugging Face's defaults when a key is absent: add_prefix_space true, use_regex true.
        step.addPrefixSpace = readBool(value, "add_prefix_space", path, true);
        if (readBool(value, "use_regex", path, true))
            step.regex = compileOrRefuse(kGpt2Pattern, false, path + " (GPT-2's pattern)");
    } else {
        refuse(path + ".type", io::quoteName(type)
                                   + " is not supported (ByteLevel, Split, Digits, and Sequences of them)");
    }
    steps.push_back(std::move(step));
}

void parsePostProcessor(const json& value, const std::string& path, std::optional<std::int32_t>& bos, bool& sawTemplate)
{
    if (value.is_null())
        return;
    requireObject(value, path);
    const std::string& type = readString(value, "type", path);
    if (type == "ByteLevel")
        return;
    if (type == "Sequence") {
        const auto it = value.find("processors");
        if (it == value.end() || !it->is_array())
            refuse(path + ".processors", "expected an array");
        for (std::size_t i = 0; i < it->size(); ++i)
            parsePostProcessor((*it)[i], path + ".processors[" + std::to_string(i) + "]", bos, sawTemplate);
        return;
    }
    if (type != "TemplateProcessing")
        refuse(path + ".type", io::quoteName(type)
                                   + " is not supported (null, ByteLevel, TemplateProcessing, or a Sequence of them)");
    if (sawTemplate)
        refuse(path, "a second TemplateProcessing is not supported");
    sawTemplate = true;
    const auto single = value.find("single");
    if (single == value.end() || !single->is_array())
        refuse(path + ".single", "expected an array of template pieces");
    const std::string shape = "only [$A] and [special token, $A] are supported: a template that adds other tokens "
                              "would change what the runner scores";
    const auto pieceKind = [&](const json& piece, std::size_t i, std::string& id) {
        const std::string where = path + ".single[" + std::to_string(i) + "]";
        if (!piece.is_object() || piece.size() != 1)
            refuse(where, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
        const auto first = piece.begin(); // items() would hand out a proxy that dies with its temporary
        const std::string& kind = first.key();
        const json& body = first.value();
        if (kind != "SpecialToken" && kind != "Sequence")
            refuse(where, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}, found " + io::quoteName(kind));
        requireObject(body, where + "." + kind);
        id = readString(body, "id", where + "." + kind);
        return kind;
    };
    std::string id;
    if (single->size() == 1) {
        if (pieceKind((*single)[0], 0, id) != "Sequence" || id != "A")
            refuse(path + ".single", shape);
        return;
    }
    if (single->size() != 2)
        refuse(path + ".single", shape);
    std::string second;
    if (pieceKind((*single)[0], 0, id) != "SpecialToken" || pieceKind((*single)[1], 1, second) != "Sequence"
        || second != "A")
        refuse(path + ".single", shape);
    const auto specials = value.find("special_tokens");
    if (specials == value.end() || !specials->is_object() || !specials->contains(id))
        refuse(path + ".special_tokens", "lacks " + io::quoteName(id) + ", which .single names");
    const json& entry = (*specials)[id];
    requireObject(entry, path + ".special_tokens." + id);
    const auto ids = entry.find("ids");
    if (ids == entry.end() || !ids->is_array() || ids->size() != 1)
        refuse(path + ".special_tokens." + id + ".ids", "expected exactly one id");
    bos = readId((*ids)[0], path + ".special_tokens." + id + ".ids[0]");
}

} // namespace

std::uint64_t jsonValueCount(std::string_view text)
{
    std::uint64_t values = 0;
    bool inString = false, escaped = false;
    for (const char c : text) {
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"')
            inString = true;
        else if (c == ',' || c == ':' || c == '[' || c == '{')
            ++values;
    }
    return values;
}

Result<json> parseTokenizerJsonText(std::string_view text, const std::string& label)
{
    if (text.size() > kMaxTokenizerJsonBytes)
        return Error{label, "is " + io::byteSizeText(text.size()) + ", above the cap of "
                                + io::byteSizeText(kMaxTokenizerJsonBytes) + " for tokenizer.json"};
    const std::uint64_t values = jsonValueCount(text);
    if (values > kMaxTokenizerJsonValues)
        return Error{label, "holds more than " + std::to_string(kMaxTokenizerJsonValues)
                                + " JSON values, above what a tokenizer.json needs"};
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return Error{label, parsed.error().message};
    return std::move(*parsed);
}

namespace {

bool hasByteLevelStep(const json& step)
{
    if (!step.is_object())
        return false;
    const auto type = step.find("type");
    if (type == step.end() || !type->is_string())
        return false;
    if (*type == "ByteLevel")
        return true;
    const auto list = step.find("pretokenizers");
    if (*type != "Sequence" || list == step.end() || !list->is_array())
        return false;
    // Recursion as deep as the JSON's nesting, which parseJsonText caps.
    return std::any_of(list->begin(), list->end(), [](const json& inner) { return hasByteLevelStep(inner); });
}

} // namespace

bool isByteLevelTokenizerJson(const json& root)
{
    if (!root.is_object())
        return false;
    const auto it = root.find("pre_tokenizer");
    return it != root.end() && hasByteLevelStep(*it);
}

Result<std::unique_ptr<BpeTokenizer>> bpeFromJson(const json& root, const std::string& label,
                                                  const TokenizerOptions& options)
{
    auto impl = std::make_unique<BpeTokenizer::Impl>();
    impl->label = label;
    impl->options = options;
    try {
        requireObject(root, "the top level");
        // --- model
        const auto modelIt = root.find("model");
        if (modelIt == root.end())
            refuse("model", "missing");
        const json& model = requireObject(*modelIt, "model");
        const std::string& type = readString(model, "type", "model");
        if (type != "BPE")
            refuse("model.type", io::quoteName(type) + " is not supported (BPE only)");
        if (const auto it = model.find("dropout"); it != model.end() && !it->is_null()
                                                   && !(it->is_number() && it->get<double>() == 0.0))
            refuse("model.dropout", "must be null or 0 (dropout randomises encoding), found " + io::describeJson(*it));
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
            const auto it = model.find(key);
            if (it != model.end() && !it->is_null() && !(it->is_string() && it->get_ref<const std::string&>().empty()))
                refuse(std::string("model.") + key, "must be null or \"\" for byte-level BPE, found "
                                                        + io::describeJson(*it));
        }
        if (readBool(model, "byte_fallback", "model", false))
            refuse("model.byte_fallback", "true is not supported (a SentencePiece-style vocabulary: use tokenizer.model)");
        impl->ignoreMerges = readBool(model, "ignore_merges", "model", false);

        const auto vocabIt = model.find("vocab");
        if (vocabIt == model.end() || !vocabIt->is_object())
            refuse("model.vocab", "expected an object of token -> id");
        if (vocabIt->empty())
            refuse("model.vocab", "is empty");
        std::unordered_map<std::string, std::int32_t> vocab;
        vocab.reserve(vocabIt->size());
        std::unordered_map<std::int32_t, const std::string*> byId;
        byId.reserve(vocabIt->size());
        std::int32_t maxId = -1;
        for (auto entry = vocabIt->cbegin(); entry != vocabIt->cend(); ++entry) {
            const std::string& token = entry.key(); // the object's own key: stable while `root` lives
            const json& idValue = entry.value();
            const std::int32_t id = readIdAt(idValue, [&] { return "model.vocab[" + io::quoteName(token) + "]"; });
            const auto [it, fresh] = byId.emplace(id, &token);
            if (!fresh)
                refuse("model.vocab", "id " + std::to_string(id) + " is given to both " + io::quoteName(*it->second)
                                          + " and " + io::quoteName(token));
            vocab.emplace(token, id);
            maxId = std::max(maxId, id);
        }
        for (unsigned b = 0; b < 256; ++b) {
            std::string symbol;
            appendUtf8(symbol, byteLevelChar(static_cast<std::uint8_t>(b)));
            const auto it = vocab.find(symbol);
            if (it == vocab.end())
                refuse("model.vocab", "lacks the byte symbol " + io::quoteName(symbol) + " ("
                                          + codePointName(byteLevelChar(static_cast<std::uint8_t>(b))) + ", byte "
                                          + hexByte(b) + "): a byte-level vocabulary needs all 256");
            impl->byteIds[b] = it->second;
        }

        const auto mergesIt = model.find("merges");
        if (mergesIt == model.end() || !mergesIt->is_array())
            refuse("model.merges", "expected an array of \"a b\" strings or [a, b] pairs");
        impl->merges.reserve(mergesIt->size());
        for (std::size_t rank = 0; rank < mergesIt->size(); ++rank) {
            const json& merge = (*mergesIt)[rank];
            const std::string where = "model.merges[" + std::to_string(rank) + "]";
            std::string a, b;
            if (merge.is_string()) {
                const std::string& text = merge.get_ref<const std::string&>();
                const auto space = text.find(' ');
                if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
                    refuse(where, io::quoteName(text) + " is not two tokens separated by one space");
                a = text.substr(0, space);
                b = text.substr(space + 1);
            } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
                a = merge[0].get<std::string>();
                b = merge[1].get<std::string>();
            } else {
                refuse(where, "expected \"a b\" or [\"a\", \"b\"], found " + io::describeJson(merge));
            }
            const std::string shown = io::quoteName(a + " " + b);
            const auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
            if (ia == vocab.end())
                refuse(where, "merge " + shown + ": " + io::quoteName(a) + " is not in model.vocab");
            if (ib == vocab.end())
                refuse(where, "merge " + shown + ": " + io::quoteName(b) + " is not in model.vocab");
            if (iab == vocab.end())
                refuse(where, "merge " + shown + ": the merged token " + io::quoteName(a + b) + " is not in model.vocab");
            // A pair listed twice keeps its later rank, as Hugging Face's map does.
            impl->merges[pairKey(ia->second, ib->second)] = {static_cast<std::int32_t>(rank), iab->second};
        }

        // --- added tokens
        const auto addedIt = root.find("added_tokens");
        if (addedIt != root.end() && !addedIt->is_null()) {
            if (!addedIt->is_array())
                refuse("added_tokens", "expected an array");
            if (addedIt->size() > kMaxAddedTokens)
                refuse("added_tokens", std::to_string(addedIt->size()) + " tokens, above the cap of "
                                           + std::to_string(kMaxAddedTokens));
        }
        bool nfc = false;
        if (const auto it = root.find("normalizer"); it != root.end())
            parseNormalizer(*it, "normalizer", nfc);
        impl->nfc = nfc;
        std::unordered_map<std::int32_t, std::size_t> addedIds;
        if (addedIt != root.end() && addedIt->is_array()) {
            for (std::size_t i = 0; i < addedIt->size(); ++i) {
                const std::string where = "added_tokens[" + std::to_string(i) + "]";
                const json& entry = requireObject((*addedIt)[i], where);
                AddedToken token;
                const auto idIt = entry.find("id");
                if (idIt == entry.end())
                    refuse(where + ".id", "missing");
                token.id = readId(*idIt, where + ".id");
                token.content = readString(entry, "content", where);
                if (token.content.empty())
                    refuse(where + ".content", "is empty");
                if (token.content.size() > kMaxAddedTokenBytes)
                    refuse(where + ".content", std::to_string(token.content.size()) + " bytes, above the cap of "
                                                   + std::to_string(kMaxAddedTokenBytes));
                token.special = readBool(entry, "special", where, false);
                token.singleWord = readBool(entry, "single_word", where, false);
                token.lstrip = readBool(entry, "lstrip", where, false);
                token.rstrip = readBool(entry, "rstrip", where, false);
                token.normalized = readBool(entry, "normalized", where, true);
                token.matchContent = token.content;
                if (token.normalized && nfc) {
                    auto normalized = toNfc(token.content);
                    if (!normalized || normalized->empty())
                        refuse(where + ".content", "ICU failed to normalize it to NFC");
                    token.matchContent = std::move(*normalized);
                }
                if (const auto [it, fresh] = addedIds.emplace(token.id, i); !fresh)
                    refuse(where + ".id", "id " + std::to_string(token.id) + " is also added_tokens["
                                              + std::to_string(it->second) + "]'s");
                if (!impl->addedByContent.emplace(token.content, token.id).second)
                    refuse(where + ".content", io::quoteName(token.content) + " is added twice");
                maxId = std::max(maxId, token.id);
                const auto index = static_cast<std::int32_t>(impl->added.size());
                (token.normalized ? impl->normalizedTrie : impl->rawTrie).add(token.matchContent, index);
                impl->added.push_back(std::move(token));
            }
        }

        // --- pre-tokenizer
        const auto preIt = root.find("pre_tokenizer");
        if (preIt == root.end())
            refuse("pre_tokenizer", "missing: byte-level BPE needs a ByteLevel pre-tokenizer");
        parsePreTokenizer(*preIt, "pre_tokenizer", impl->steps);
        std::size_t byteLevelSteps = 0;
        for (const PreStep& step : impl->steps)
            byteLevelSteps += step.kind == PreStep::Kind::ByteLevel ? 1 : 0;
        if (byteLevelSteps != 1 || impl->steps.back().kind != PreStep::Kind::ByteLevel)
            refuse("pre_tokenizer", "must end with exactly one ByteLevel step, after every Split and Digits step (found "
                                        + std::to_string(byteLevelSteps) + " ByteLevel step(s)"
                                        + (byteLevelSteps == 1 ? ", not last)" : ")"));

        // --- decoder
        if (!isNull(root, "decoder")) {
            const json& decoder = requireObject(root["decoder"], "decoder");
            const std::string& decoderType = readString(decoder, "type", "decoder");
            if (decoderType != "ByteLevel")
                refuse("decoder.type", io::quoteName(decoderType) + " is not supported (null or ByteLevel)");
        }

        // --- ids and bytes
        impl->vocabSize = maxId + 1;
        impl->idBytes.assign(static_cast<std::size_t>(impl->vocabSize), std::string());
        impl->bytesToId.reserve(vocab.size());
        for (const auto& [token, id] : vocab) {
            std::string bytes;
            bool byteLevel = !firstInvalidUtf8(token).has_value();
            for (std::size_t pos = 0; byteLevel && pos < token.size();) {
                const int b = byteLevelByte(decodeUtf8(token, pos));
                if (b < 0) {
                    byteLevel = false;
                    break;
                }
                bytes += static_cast<char>(b);
            }
            // Hugging Face's ByteLevel decoder: a token with any character outside the table
            // decodes to its own UTF-8.
            if (!byteLevel) {
                impl->idBytes[static_cast<std::size_t>(id)] = token;
                continue;
            }
            impl->idBytes[static_cast<std::size_t>(id)] = bytes;
            impl->bytesToId.emplace(std::move(bytes), id);
        }
        for (const AddedToken& token : impl->added)
            impl->idBytes[static_cast<std::size_t>(token.id)] = token.content;

        // --- post-processor (BOS)
        bool sawTemplate = false;
        if (const auto it = root.find("post_processor"); it != root.end())
            parsePostProcessor(*it, "post_processor", impl->bos, sawTemplate);
        if (impl->bos && (*impl->bos >= impl->vocabSize || (!byId.count(*impl->bos) && !addedIds.count(*impl->bos))))
            refuse("post_processor", "its BOS id " + std::to_string(*impl->bos) + " is no token of this tokenizer");
    } catch (const Refusal& r) {
        return Error{label, r.key + ": " + r.message};
    } catch (const std::exception& e) {
        return Error{label, std::string("unreadable tokenizer.json: ") + e.what()};
    }
    return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(impl)));
}

Result<std::unique_ptr<BpeTokenizer>> parseTokenizerJson(std::string_view json, const std::string& label,
                                                         const TokenizerOptions& options)
{
    auto root = parseTokenizerJsonText(json, label);
    if (!root)
        return root.error();
    return bpeFromJson(*root, label, options);
}

Result<std::unique_ptr<BpeTokenizer>> loadTokenizerJson(const std::string& path, const TokenizerOptions& options)
{
    auto text = io::readRegularFile(path, kMaxTokenizerJsonBytes);
    if (!text)
        return text.error();
    return parseTokenizerJson(*text, path, options);
}

} // namespace kvlens::lm
