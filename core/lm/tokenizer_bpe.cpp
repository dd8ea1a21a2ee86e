// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level BPE encoding: added tokens, pre-tokenization, merges by rank, and the streaming session that encodes a block up to where no later text can change the ids.
#include "core/lm/tokenizer_bpe.h"

#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_bpe_impl.h"
#include "core/lm/tokenizer_unicode.h"

#include <algorithm>

namespace kvlens::lm {

namespace {

/// Pre-tokens at most this long are cached during one encode call.
constexpr std::size_t kMaxCachedWordBytes = 256;
/// The cache is emptied when it holds this many pre-tokens.
constexpr std::size_t kMaxCachedWords = 1 << 20;
/// Cancellation is polled every this many pre-tokens.
constexpr std::size_t kPollWords = 256;

/// The start of the code point that ends just before `pos` (pos > 0, on a boundary).
std::size_t previousCharStart(std::string_view text, std::size_t pos)
{
    std::size_t p = pos - 1;
    while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80)
        --p;
    return p;
}

char32_t charBefore(std::string_view text, std::size_t pos)
{
    std::size_t p = previousCharStart(text, pos);
    return decodeUtf8(text, p);
}

char32_t charAt(std::string_view text, std::size_t pos)
{
    return decodeUtf8(text, pos);
}

/// A range of a piece and whether it is a match (or, after a behavior, removed).
using Part = std::pair<RegexMatch, bool>;

/// Hugging Face's SplitDelimiterBehavior applied to a cover of a piece by (range, is-match) parts:
/// the ranges that result, each with whether it is removed.
std::vector<Part> behaviorRanges(const std::vector<Part>& parts, bpe::Behavior behavior)
{
    std::vector<Part> kept; // (range, remove)
    kept.reserve(parts.size());
    bool previous = false;
    switch (behavior) {
    case bpe::Behavior::Isolated:
        for (const auto& [range, match] : parts)
            kept.push_back({range, false});
        break;
    case bpe::Behavior::Removed:
        kept = parts;
        break;
    case bpe::Behavior::Contiguous:
        for (const auto& [range, match] : parts) {
            if (match == previous && !kept.empty())
                kept.back().first.end = range.end;
            else
                kept.push_back({range, false});
            previous = match;
        }
        break;
    case bpe::Behavior::MergedWithPrevious:
        for (const auto& [range, match] : parts) {
            if (match && !previous && !kept.empty())
                kept.back().first.end = range.end;
            else
                kept.push_back({range, false});
            previous = match;
        }
        break;
    case bpe::Behavior::MergedWithNext:
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
            if (it->second && !previous && !kept.empty())
                kept.back().first.begin = it->first.begin;
            else
                kept.push_back({it->first, false});
            previous = it->second;
        }
        std::reverse(kept.begin(), kept.end());
        break;
    }
    return kept;
}

/// The cover of [0, size) by regex matches and the text between them (Hugging Face's Pattern).
void coverWithMatches(std::size_t size, const std::vector<RegexMatch>& matches, bool invert, std::vector<Part>& parts)
{
    parts.clear();
    std::size_t previous = 0;
    for (const RegexMatch& m : matches) {
        if (previous != m.begin)
            parts.push_back({{previous, m.begin}, invert});
        parts.push_back({m, !invert});
        previous = m.end;
    }
    if (previous != size)
        parts.push_back({{previous, size}, invert});
}

/// Digits: each numeric character's range as a match, the rest between.
void digitParts(std::string_view piece, std::vector<Part>& parts)
{
    parts.clear();
    std::size_t last = 0;
    for (std::size_t i = 0; i < piece.size();) {
        const std::size_t begin = i;
        if (isNumericChar(decodeUtf8(piece, i))) {
            if (last < begin)
                parts.push_back({{last, begin}, false});
            parts.push_back({{begin, i}, true});
            last = i;
        }
    }
    if (last < piece.size())
        parts.push_back({{last, piece.size()}, false});
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Added tokens

void bpe::AddedTrie::add(std::string_view text, std::int32_t token)
{
    std::int32_t node = 0;
    for (const char ch : text) {
        const auto b = static_cast<unsigned char>(ch);
        auto& children = m_nodes[static_cast<std::size_t>(node)].children;
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
    m_nodes[static_cast<std::size_t>(node)].token = token;
    m_first[static_cast<unsigned char>(text[0])] = true;
}

std::pair<std::int32_t, std::size_t> bpe::AddedTrie::longestAt(std::string_view text, std::size_t pos, bool* open) const
{
    if (open != nullptr)
        *open = false;
    if (!m_first[static_cast<unsigned char>(text[pos])])
        return {-1, 0};
    std::pair<std::int32_t, std::size_t> best{-1, 0};
    std::int32_t node = 0;
    for (std::size_t i = pos;; ++i) {
        if (i == text.size()) {
            if (open != nullptr)
                *open = !m_nodes[static_cast<std::size_t>(node)].children.empty();
            break;
        }
        const auto b = static_cast<unsigned char>(text[i]);
        const auto& children = m_nodes[static_cast<std::size_t>(node)].children;
        auto it = std::lower_bound(children.begin(), children.end(), b,
                                   [](const auto& child, unsigned char key) { return child.first < key; });
        if (it == children.end() || it->first != b)
            break;
        node = it->second;
        if (m_nodes[static_cast<std::size_t>(node)].token >= 0)
            best = {m_nodes[static_cast<std::size_t>(node)].token, i + 1 - pos};
    }
    return best;
}

void BpeTokenizer::Impl::splitAdded(std::string_view text, const bpe::AddedTrie& trie, std::vector<bpe::Segment>& out,
                                    bpe::OpenSplit* open) const
{
    const std::size_t n = text.size();
    std::size_t startOffset = 0;
    // With more text to come, everything from `at` on waits: [startOffset, at) is text so far.
    const auto stopAt = [&](std::size_t at) {
        open->openStart = startOffset;
        open->stableEnd = at;
    };
    if (open != nullptr)
        *open = bpe::OpenSplit{};
    if (trie.empty()) {
        if (open != nullptr)
            stopAt(n);
        else if (n > 0)
            out.push_back({text, -1});
        return;
    }
    for (std::size_t pos = 0; pos < n;) {
        std::size_t start = pos;
        std::pair<std::int32_t, std::size_t> found{-1, 0};
        bool walkOpen = false;
        for (; start < n; ++start) {
            found = trie.longestAt(text, start, open != nullptr ? &walkOpen : nullptr);
            if (walkOpen || found.first >= 0)
                break;
        }
        if (walkOpen)
            return stopAt(start);
        if (found.first < 0)
            break;
        std::size_t stop = start + found.second;
        pos = stop; // the automaton resumes after the match, kept or not
        const bpe::AddedToken& token = added[static_cast<std::size_t>(found.first)];
        bool skip = token.special && !options.parseSpecialTokens;
        if (!skip && token.singleWord) {
            if (open != nullptr && stop == n)
                return stopAt(start); // the character after it decides
            skip = (start > 0 && isWordChar(charBefore(text, start))) || (stop < n && isWordChar(charAt(text, stop)));
        }
        if (skip) {
            if (open != nullptr)
                open->unsafe.emplace_back(start, stop);
            continue;
        }
        if (token.lstrip)
            while (start > startOffset && isWhiteSpaceChar(charBefore(text, start)))
                start = previousCharStart(text, start);
        if (token.rstrip) {
            while (stop < n && isWhiteSpaceChar(charAt(text, stop))) {
                std::size_t q = stop;
                decodeUtf8(text, q);
                stop = q;
            }
            if (open != nullptr && stop == n)
                return stopAt(start); // the white space may go on
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
    if (open != nullptr)
        stopAt(n);
    else if (startOffset < n)
        out.push_back({text.substr(startOffset), -1});
}

Status BpeTokenizer::Impl::segments(std::string_view text, Scratch& scratch, std::vector<bpe::Segment>& out) const
{
    std::vector<bpe::Segment> raw;
    splitAdded(text, rawTrie, raw);
    for (const bpe::Segment& segment : raw) {
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

// ---------------------------------------------------------------------------------------------
// Pre-tokenization

Status BpeTokenizer::Impl::preTokenize(std::string_view piece, std::size_t first, Scratch& scratch,
                                       std::vector<std::string_view>& words) const
{
    std::vector<std::string_view> current{piece};
    std::vector<std::string_view> next;
    std::vector<Part> parts;
    for (std::size_t k = first; k < steps.size(); ++k) {
        const bpe::PreStep& step = steps[k];
        next.clear();
        for (std::string_view p : current) {
            bpe::Behavior behavior = bpe::Behavior::Isolated;
            if (step.kind == bpe::PreStep::Kind::Digits) {
                digitParts(p, parts);
                behavior = step.individualDigits ? bpe::Behavior::Isolated : bpe::Behavior::Contiguous;
            } else {
                if (step.kind == bpe::PreStep::Kind::ByteLevel && step.addPrefixSpace && p.front() != ' ') {
                    scratch.storage.push_back(" " + std::string(p));
                    p = scratch.storage.back();
                }
                if (!step.regex) {
                    next.push_back(p);
                    continue;
                }
                scratch.matches.clear();
                if (Status s = step.regex->findAll(p, scratch.regex, scratch.matches, scratch.cancelled); !s)
                    return s.error().cancelled() ? s.error() : Error{label, s.error().text()};
                coverWithMatches(p.size(), scratch.matches, step.kind == bpe::PreStep::Kind::Split && step.invert, parts);
                behavior = step.kind == bpe::PreStep::Kind::Split ? step.behavior : bpe::Behavior::Isolated;
            }
            for (const auto& [range, remove] : behaviorRanges(parts, behavior))
                if (!remove && range.end > range.begin)
                    next.push_back(p.substr(range.begin, range.end - range.begin));
        }
        current.swap(next);
    }
    words.insert(words.end(), current.begin(), current.end());
    return Ok{};
}

Status BpeTokenizer::Impl::preTokenizeOpen(std::size_t k, std::string_view piece, std::size_t base,
                                           const bpe::RestartAllowed& allowed, Scratch& scratch,
                                           std::vector<std::string_view>& words, std::size_t& consumed) const
{
    consumed = 0;
    if (k >= steps.size() || piece.empty())
        return Ok{};
    const bpe::PreStep& step = steps[k];
    const bool byteLevel = step.kind == bpe::PreStep::Kind::ByteLevel;
    if (step.kind != bpe::PreStep::Kind::Digits && !(step.regex && step.regex->streamable()))
        return Ok{}; // a whole open piece (BPE needs the whole word), or a pattern that cannot be cut
    // A restart inside this step's piece makes a new piece: ByteLevel would give it a prefix space
    // the whole text never had, unless it starts with one.
    const auto allowedHere = [&](std::size_t p) {
        return p > 0 && p < piece.size() && allowed(base + p) && !(byteLevel && step.addPrefixSpace && piece[p] != ' ');
    };
    std::string_view subject = piece;
    std::size_t shift = 0; // subject offset of piece offset 0
    if (byteLevel && step.addPrefixSpace && piece.front() != ' ') {
        scratch.storage.push_back(" " + std::string(piece));
        subject = scratch.storage.back();
        shift = 1;
    }
    std::vector<Part> parts, ranges;
    RegexMatch tail{0, 0}; // the open part to cut further, in subject offsets
    if (step.kind == bpe::PreStep::Kind::Digits) {
        digitParts(piece, parts);
        ranges = behaviorRanges(parts, step.individualDigits ? bpe::Behavior::Isolated : bpe::Behavior::Contiguous);
        tail = ranges.back().first; // the last run may go on: it alone is open
        ranges.pop_back();
    } else {
        scratch.matches.clear();
        SplitRegex::OpenEnd end;
        if (Status s = step.regex->findOpen(subject, scratch.regex, scratch.matches, end, scratch.cancelled); !s)
            return s.error().cancelled() ? s.error() : Error{label, s.error().text()};
        const bool invert = step.kind == bpe::PreStep::Kind::Split && step.invert;
        const bpe::Behavior behavior = step.kind == bpe::PreStep::Kind::Split ? step.behavior : bpe::Behavior::Isolated;
        coverWithMatches(end.gapFrom, scratch.matches, invert, parts);
        ranges = behaviorRanges(parts, behavior);
        if (behavior == bpe::Behavior::Isolated || (behavior == bpe::Behavior::Removed && !invert))
            tail = {end.gapFrom, end.gapTo}; // positions that start no match: a kept gap of its own
        else if (!ranges.empty())
            ranges.pop_back(); // a merging behavior may join the last range with what follows
    }
    std::vector<std::pair<std::size_t, std::size_t>> checkpoints; // (piece offset, words so far)
    const std::size_t wordsBefore = words.size();
    for (const auto& [range, remove] : ranges) {
        if (!remove && range.end > range.begin)
            if (Status s = preTokenize(subject.substr(range.begin, range.end - range.begin), k + 1, scratch, words); !s)
                return s;
        if (range.end > shift)
            checkpoints.emplace_back(range.end - shift, words.size());
    }
    if (tail.end > tail.begin && tail.begin >= shift) {
        std::size_t inner = 0;
        const std::size_t tailBase = tail.begin - shift;
        const bpe::RestartAllowed inTail = [&](std::size_t p) { return allowedHere(p - base); };
        if (Status s = preTokenizeOpen(k + 1, subject.substr(tail.begin, tail.end - tail.begin), base + tailBase, inTail,
                                       scratch, words, inner);
            !s)
            return s;
        if (inner > 0) {
            consumed = tailBase + inner;
            return Ok{};
        }
    }
    for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it)
        if (allowedHere(it->first)) {
            words.resize(it->second);
            consumed = it->first;
            return Ok{};
        }
    words.resize(wordsBefore);
    return Ok{};
}

// ---------------------------------------------------------------------------------------------
// Merges

void BpeTokenizer::Impl::mergeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const
{
    using Candidate = Scratch::Candidate;
    const auto m = static_cast<std::int32_t>(word.size());
    auto& syms = scratch.syms;
    auto& heap = scratch.heap;
    syms.resize(static_cast<std::size_t>(m));
    for (std::int32_t i = 0; i < m; ++i)
        syms[static_cast<std::size_t>(i)] = {byteIds[static_cast<unsigned char>(word[static_cast<std::size_t>(i)])],
                                             i - 1, i + 1 < m ? i + 1 : -1};
    // A min-heap on (rank, position): the lowest-ranked pair first, the leftmost among equals.
    const auto later = [](const Candidate& a, const Candidate& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    const auto candidate = [&](std::int32_t left, std::int32_t right, bool push) {
        const auto l = syms[static_cast<std::size_t>(left)].id, r = syms[static_cast<std::size_t>(right)].id;
        const auto it = merges.find(bpe::pairKey(l, r));
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
        const Candidate c = heap.back();
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

Status BpeTokenizer::Impl::encodeWord(std::string_view word, Scratch& scratch, std::vector<std::int32_t>& out) const
{
    if (++scratch.words % kPollWords == 0 && scratch.cancelled && scratch.cancelled())
        return Error::cancellation(label);
    if (word.size() == 1) {
        out.push_back(byteIds[static_cast<unsigned char>(word[0])]);
        return Ok{};
    }
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    if (cacheable) {
        const auto it = scratch.cache.find(word);
        if (it != scratch.cache.end()) {
            const auto begin = scratch.cacheIds.begin() + it->second.first;
            out.insert(out.end(), begin, begin + it->second.second);
            return Ok{};
        }
    }
    const std::size_t before = out.size();
    const auto whole = ignoreMerges ? bytesToId.find(word) : bytesToId.end();
    if (whole != bytesToId.end())
        out.push_back(whole->second);
    else
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
    return Ok{};
}

// ---------------------------------------------------------------------------------------------
// Whole texts and open ones

Status BpeTokenizer::Impl::encodeRawSegment(std::string_view text, Scratch& scratch, std::vector<std::int32_t>& out) const
{
    std::string_view piece = text;
    if (nfc) {
        auto normalized = toNfc(piece);
        if (!normalized)
            return Error{label, "normalizer: ICU failed to normalize the text to NFC"};
        piece = scratch.storage.emplace_back(std::move(*normalized));
    }
    std::vector<bpe::Segment> pieces;
    splitAdded(piece, normalizedTrie, pieces);
    std::vector<std::string_view> words;
    for (const bpe::Segment& segment : pieces) {
        if (segment.token >= 0) {
            out.push_back(segment.token);
            continue;
        }
        words.clear();
        if (Status s = preTokenize(segment.text, 0, scratch, words); !s)
            return s;
        for (std::string_view word : words)
            if (Status s = encodeWord(word, scratch, out); !s)
                return s;
    }
    return Ok{};
}

Status BpeTokenizer::Impl::encodeText(std::string_view text, Scratch& scratch, std::vector<std::int32_t>& out) const
{
    std::vector<bpe::Segment> raw;
    splitAdded(text, rawTrie, raw);
    for (const bpe::Segment& segment : raw) {
        if (segment.token >= 0)
            out.push_back(segment.token);
        else if (Status s = encodeRawSegment(segment.text, scratch, out); !s)
            return s;
    }
    return Ok{};
}

Status BpeTokenizer::Impl::encodeOpen(std::string_view text, Scratch& scratch, std::vector<std::int32_t>& out,
                                      std::size_t& taken) const
{
    std::vector<bpe::Segment> final;
    bpe::OpenSplit split;
    splitAdded(text, rawTrie, final, &split);
    // The segments before the open one are whole: tokens, or text between tokens.
    for (const bpe::Segment& segment : final) {
        if (segment.token >= 0)
            out.push_back(segment.token);
        else if (Status s = encodeRawSegment(segment.text, scratch, out); !s)
            return s;
    }
    std::size_t itemTaken = 0;
    if (Status s = encodeOpenItem(text, split.openStart, split.stableEnd, split.unsafe, scratch, out, itemTaken); !s)
        return s;
    taken = split.openStart + itemTaken;
    return Ok{};
}

Status BpeTokenizer::Impl::encodeOpenItem(std::string_view text, std::size_t itemBegin, std::size_t itemEnd,
                                          const std::vector<std::pair<std::size_t, std::size_t>>& unsafe,
                                          Scratch& scratch, std::vector<std::int32_t>& out, std::size_t& taken) const
{
    taken = 0;
    const std::string_view item = text.substr(itemBegin, itemEnd - itemBegin);
    // NFC up to the last character that composes with nothing before it.
    std::size_t q = item.size();
    NfcMapped mapped;
    if (nfc) {
        while (q > 0 && !nfcBoundaryBefore(charAt(item, q = previousCharStart(item, q))))
            ;
        auto normalized = toNfcMapped(item.substr(0, q));
        if (!normalized)
            return Error{label, "normalizer: ICU failed to normalize the text to NFC"};
        mapped = std::move(*normalized);
    } else {
        mapped.text.assign(item);
    }
    const std::string_view norm = scratch.storage.emplace_back(std::move(mapped.text));
    std::vector<bpe::Segment> final;
    bpe::OpenSplit split;
    splitAdded(norm, normalizedTrie, final, &split);
    const auto inside = [](const auto& spans, std::size_t at) {
        return std::any_of(spans.begin(), spans.end(), [&](const auto& s) { return s.first < at && at < s.second; });
    };
    // A restart at normalized offset c: raw offset r; NFC boundary; not inside a skipped token; no
    // lstrip token could reach back over it, no single-word token could lose its left neighbour.
    const bpe::RestartAllowed allowed = [&](std::size_t c) {
        const auto r = mapped.sourceOffset(c);
        if (!r || *r == 0 || *r >= q || (nfc && !nfcBoundaryBefore(charAt(item, *r))))
            return false;
        if (inside(unsafe, itemBegin + *r) || inside(split.unsafe, c))
            return false;
        const char32_t rawBefore = charBefore(item, *r), normBefore = charBefore(norm, c);
        if (anyLstrip && (isWhiteSpaceChar(rawBefore) || isWhiteSpaceChar(normBefore)))
            return false;
        return !(anySingleWord && (isWordChar(rawBefore) || isWordChar(normBefore)));
    };
    std::vector<std::string_view> openWords;
    std::size_t consumed = 0;
    const std::size_t openStart = split.openStart;
    if (Status s = preTokenizeOpen(0, norm.substr(openStart, split.stableEnd - openStart), openStart, allowed, scratch,
                                   openWords, consumed);
        !s)
        return s;
    const std::size_t cut = openStart + consumed;
    if (cut == 0 || (consumed == 0 && !allowed(cut)))
        return Ok{};
    std::vector<std::string_view> words;
    for (const bpe::Segment& segment : final) {
        if (segment.token >= 0) {
            out.push_back(segment.token);
            continue;
        }
        words.clear();
        if (Status s = preTokenize(segment.text, 0, scratch, words); !s)
            return s;
        for (std::string_view word : words)
            if (Status s = encodeWord(word, scratch, out); !s)
                return s;
    }
    for (std::string_view word : openWords)
        if (Status s = encodeWord(word, scratch, out); !s)
            return s;
    taken = *mapped.sourceOffset(cut);
    return Ok{};
}

// ---------------------------------------------------------------------------------------------
// The streaming session

namespace {

/// The bytes at `pos` (the first invalid UTF-8 of `text`) begin a character the next block may
/// complete: a lead byte and the continuation bytes it allows, cut by the end.
bool incompleteAtEnd(std::string_view text, std::size_t pos)
{
    const auto lead = static_cast<unsigned char>(text[pos]);
    const std::size_t length = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    if (length == 0 || pos + length <= text.size())
        return false;
    for (std::size_t i = pos + 1; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        unsigned lo = 0x80, hi = 0xBF; // Unicode table 3-7, as firstInvalidUtf8 checks
        if (i == pos + 1 && lead == 0xE0)
            lo = 0xA0;
        else if (i == pos + 1 && lead == 0xED)
            hi = 0x9F;
        else if (i == pos + 1 && lead == 0xF0)
            lo = 0x90;
        else if (i == pos + 1 && lead == 0xF4)
            hi = 0x8F;
        if (b < lo || b > hi)
            return false;
    }
    return true;
}

class BpeSession final : public EncodeSession {
public:
    BpeSession(const BpeTokenizer::Impl& impl, const EncodeControl& control) : m(impl)
    {
        m_scratch.cancelled = control.cancelled;
    }

    Status feed(std::string_view block, bool last, std::vector<std::int32_t>& out) override
    {
        if (m_scratch.cancelled && m_scratch.cancelled())
            return Error::cancellation(m.label);
        m_pending.append(block);
        std::size_t valid = m_pending.size();
        if (const auto bad = firstInvalidUtf8(m_pending)) {
            if (last || !incompleteAtEnd(m_pending, *bad))
                return Error{m.label, "the text is not valid UTF-8 at byte " + std::to_string(m_offset + *bad)
                                          + " (byte-level BPE takes UTF-8 text, as Hugging Face's tokenizers does)"};
            valid = *bad;
        }
        if (last) {
            Status s = m.encodeText(m_pending, m_scratch, out);
            m_pending.clear();
            return s;
        }
        if (valid < m_retryAt)
            return Ok{};
        std::size_t taken = 0;
        if (Status s = m.encodeOpen(std::string_view(m_pending).substr(0, valid), m_scratch, out, taken); !s)
            return s;
        // The cache and the prefixed pieces point into the text about to be dropped.
        m_scratch.cache.clear();
        m_scratch.cacheIds.clear();
        m_scratch.storage.clear();
        m_pending.erase(0, taken);
        m_offset += taken;
        // Nothing decided (one pre-token longer than the text so far): try again once the text has
        // doubled, so a giant pre-token costs O(n), not O(n^2), re-scans.
        m_retryAt = taken == 0 ? 2 * valid : 0;
        return Ok{};
    }

private:
    const BpeTokenizer::Impl& m;
    BpeTokenizer::Impl::Scratch m_scratch;
    std::string m_pending;
    std::uint64_t m_offset = 0; // bytes of the text before m_pending
    std::size_t m_retryAt = 0;
};

} // namespace

// ---------------------------------------------------------------------------------------------

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
BpeTokenizer::~BpeTokenizer() = default;

std::unique_ptr<EncodeSession> BpeTokenizer::startEncode(const EncodeControl& control) const
{
    return std::make_unique<BpeSession>(*m_impl, control);
}

Result<std::vector<std::string>> BpeTokenizer::preTokenize(std::string_view text) const
{
    try {
        if (const auto bad = firstInvalidUtf8(text))
            return Error{m_impl->label, "the text is not valid UTF-8 at byte " + std::to_string(*bad)};
        Impl::Scratch scratch;
        std::vector<bpe::Segment> segments;
        if (Status s = m_impl->segments(text, scratch, segments); !s)
            return s.error();
        std::vector<std::string_view> words;
        for (const bpe::Segment& segment : segments)
            if (segment.token < 0)
                if (Status s = m_impl->preTokenize(segment.text, 0, scratch, words); !s)
                    return s.error();
        return std::vector<std::string>(words.begin(), words.end());
    } catch (const std::exception& e) {
        return Error{m_impl->label, std::string("pre-tokenizing failed: ") + e.what()};
    }
}

std::string BpeTokenizer::tokenBytes(std::int32_t id) const
{
    const auto& table = m_impl->idBytes;
    const auto it = std::lower_bound(table.begin(), table.end(), id,
                                     [](const auto& entry, std::int32_t key) { return entry.first < key; });
    return it != table.end() && it->first == id ? it->second : std::string();
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

} // namespace kvlens::lm
