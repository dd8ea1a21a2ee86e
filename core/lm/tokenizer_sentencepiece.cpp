// SPDX-License-Identifier: GPL-3.0-or-later
// SentencePiece's unigram and BPE segmentations, byte fallback and unknown runs, and the streaming session that cuts where no piece spans.
#include "core/lm/tokenizer_sentencepiece.h"

#include "core/io/file_read.h"
#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_normalizer.h"

#include <array>
#include <cfloat>
#include <queue>
#include <unordered_map>
#include <vector>

namespace kvlens::lm {

namespace {

/// unigram_model.cc's penalty below the lowest score for an unknown character.
constexpr float kUnkPenalty = 10.0;
/// The library's PrefixMatcher keeps this many matches.
constexpr std::size_t kPrefixResults = 64;
/// Cancellation is polled every this many merges or lattice positions.
constexpr std::size_t kPollEvery = 1 << 14;
/// At most this many candidate cuts are checked per block when the vocabulary has pieces with
/// white space inside (each check walks the trie from every start within a piece's length).
constexpr int kMaxCutTries = 256;

/// A piece of the normalized text and its id, as the library's EncodeResult holds them.
using PieceSegment = std::pair<std::string_view, std::int32_t>;

/// A piece's text for display: each U+2581 as ' '.
std::string displayText(std::string_view piece)
{
    std::string out;
    out.reserve(piece.size());
    for (std::size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
            out += ' ';
            i += kSpaceSymbol.size();
        } else {
            out += piece[i++];
        }
    }
    return out;
}

/// What a segmentation carries from one stretch of text to the next.
struct SegmentState {
    float unigramScore = 0; ///< the best path's score where the stretch starts
    bool prevUnknown = false;
};

} // namespace

struct SentencePieceTokenizer::Impl {
    SentencePieceSpec spec;
    CharsMap charsmap;
    PieceTrie userDefined; ///< the library's prefix matcher; llama.cpp's fragment cutter
    PieceTrie trie;        ///< normal, user-defined and unused pieces (the unigram lattice; cut checks)
    std::unordered_map<std::string_view, std::int32_t> normal, reserved; ///< the library's two piece maps
    NormalizerRules rules;
    std::int32_t unkId = 0;
    std::array<std::int32_t, 256> byteIds{};
    float minScore = FLT_MAX; // unigram_model.cc's initial values, FLT_MIN included
    float maxScore = FLT_MIN;
    enum class Cut { BeforeSpace, AfterSpace, Anywhere } cut = Cut::Anywhere;
    std::size_t maxPieceBytes = 0;
    std::vector<std::string> idBytes;
    std::optional<std::int32_t> modelBos, bos;

    bool isType(std::int32_t id, PieceType type) const { return spec.types[static_cast<std::size_t>(id)] == type; }
    /// ModelInterface::PieceToId: the reserved map first, then the normal one, else unk.
    std::int32_t pieceToId(std::string_view piece) const
    {
        if (const auto it = reserved.find(piece); it != reserved.end())
            return it->second;
        if (const auto it = normal.find(piece); it != normal.end())
            return it->second;
        return unkId;
    }
    void chooseCut();
    bool cutIsSafe(std::string_view text, std::size_t c) const;
    std::size_t findCut(std::string_view text) const;
    Status bpe(std::string_view text, const EncodeControl& control, std::vector<PieceSegment>& out) const;
    Status unigram(std::string_view text, const EncodeControl& control, SegmentState& state,
                   std::vector<PieceSegment>& out) const;
    Status emit(const std::vector<PieceSegment>& segments, SegmentState& state, std::vector<std::int32_t>& out) const;
    Status segment(std::string_view text, const EncodeControl& control, SegmentState& state,
                   std::vector<std::int32_t>& out) const;
};

// ---------------------------------------------------------------------------------------------
// Where a text may be cut

void SentencePieceTokenizer::Impl::chooseCut()
{
    const std::string_view ws = rules.escapeWhitespaces ? kSpaceSymbol : std::string_view(" ");
    bool wsAfterOther = false; // a piece holds white space right after another character
    bool otherAfterWs = false; // ... or another character right after white space
    for (std::size_t i = 0; i < spec.pieces.size(); ++i) {
        if (isType(static_cast<std::int32_t>(i), PieceType::Control) || isType(static_cast<std::int32_t>(i), PieceType::Unknown)
            || isType(static_cast<std::int32_t>(i), PieceType::Byte))
            continue;
        const std::string_view piece = spec.pieces[i];
        maxPieceBytes = std::max(maxPieceBytes, piece.size());
        for (std::size_t at = piece.find(ws); at != std::string_view::npos; at = piece.find(ws, at + 1)) {
            if (at >= ws.size() && piece.compare(at - ws.size(), ws.size(), ws) != 0)
                wsAfterOther = true;
            const std::size_t next = at + ws.size();
            if (next < piece.size() && piece.compare(next, ws.size(), ws) != 0)
                otherAfterWs = true;
        }
    }
    cut = !wsAfterOther ? Cut::BeforeSpace : !otherAfterWs ? Cut::AfterSpace : Cut::Anywhere;
}

bool SentencePieceTokenizer::Impl::cutIsSafe(std::string_view text, std::size_t c) const
{
    // No piece of the vocabulary may start before c and reach byte c: walk the trie from every
    // start within a piece's length (piece boundaries are byte positions; a walk is cheap).
    const std::size_t first = c > maxPieceBytes ? c - maxPieceBytes : 0;
    for (std::size_t s = first; s < c; ++s) {
        std::int32_t node = 0;
        for (std::size_t i = s; i < text.size(); ++i) {
            node = trie.step(node, static_cast<unsigned char>(text[i]));
            if (node < 0)
                break;
            if (i >= c)
                return false;
        }
    }
    return true;
}

/// The largest c in (0, text.size()) where text may be cut: the segmentation of text[0:c) then of
/// the rest equals the segmentation of the whole (no piece crosses c, and c starts a character as
/// the segmentation steps through them), and the part before c does not end inside a trailing
/// white-space run the normalizer may remove later. 0 when none.
std::size_t SentencePieceTokenizer::Impl::findCut(std::string_view text) const
{
    const std::string_view ws = rules.escapeWhitespaces ? kSpaceSymbol : std::string_view(" ");
    const std::size_t w = ws.size();
    if (text.size() < 2 * w)
        return 0;
    // Valid UTF-8 (the library's normalizer makes it so) starts a character at every non-continuation
    // byte; llama.cpp's raw bytes are stepped through by lead-byte length, so walk them.
    std::vector<bool> starts;
    if (spec.llamaCpp) {
        starts.assign(text.size() + 1, false);
        for (std::size_t p = 0; p < text.size(); p += utf8LeadLength(static_cast<unsigned char>(text[p])))
            starts[p] = true;
    }
    const auto startsChar = [&](std::size_t at) {
        return spec.llamaCpp ? starts[at] : (static_cast<unsigned char>(text[at]) & 0xC0) != 0x80;
    };
    const auto isWsAt = [&](std::size_t at) { return at + w <= text.size() && text.compare(at, w, ws) == 0; };
    int tries = 0;
    for (std::size_t c = text.size() - 1; c >= w; --c) {
        if (!startsChar(c))
            continue;
        if (cut == Cut::BeforeSpace) {
            // A piece crossing c would hold the character before c (not white space), then white space.
            if (isWsAt(c) && !isWsAt(c - w))
                return c;
        } else if (cut == Cut::AfterSpace) {
            if (isWsAt(c - w) && !isWsAt(c))
                return c;
        } else if (!(isWsAt(c) && isWsAt(c - w))) {
            if (++tries > kMaxCutTries)
                return 0;
            if (cutIsSafe(text, c))
                return c;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Segmentation

Status SentencePieceTokenizer::Impl::bpe(std::string_view text, const EncodeControl& control,
                                         std::vector<PieceSegment>& out) const
{
    struct Symbol {
        int prev, next;
        bool freeze;
        std::size_t begin, size;
    };
    struct Pair {
        float score;
        int left, right;
        std::size_t size;
    };
    // bpe_model.cc's agenda: the highest score first, the leftmost among equals.
    const auto lower = [](const Pair& a, const Pair& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); };
    std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> agenda(lower);
    std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> revMerge;
    std::vector<Symbol> symbols;
    const bool matchUserDefined = !spec.llamaCpp && !userDefined.empty();
    for (std::size_t pos = 0; pos < text.size();) {
        Symbol s{static_cast<int>(symbols.size()) - 1, -1, false, pos, 0};
        const auto match = matchUserDefined ? userDefined.longestPrefix(text.substr(pos), kPrefixResults) : PieceTrie::Prefix{};
        s.freeze = match.length > 0;
        s.size = s.freeze ? match.length : std::min(text.size() - pos, utf8LeadLength(static_cast<unsigned char>(text[pos])));
        pos += s.size;
        s.next = pos < text.size() ? static_cast<int>(symbols.size()) + 1 : -1;
        symbols.push_back(s);
    }
    const auto piece = [&](int i) { return text.substr(symbols[static_cast<std::size_t>(i)].begin, symbols[static_cast<std::size_t>(i)].size); };
    const auto maybeAdd = [&](int left, int right) {
        if (left == -1 || right == -1 || symbols[static_cast<std::size_t>(left)].freeze || symbols[static_cast<std::size_t>(right)].freeze)
            return;
        const std::size_t size = symbols[static_cast<std::size_t>(left)].size + symbols[static_cast<std::size_t>(right)].size;
        const std::string_view merged = text.substr(symbols[static_cast<std::size_t>(left)].begin, size);
        const auto it = normal.find(merged);
        if (it == normal.end())
            return;
        agenda.push({spec.scores[static_cast<std::size_t>(it->second)], left, right, size});
        if (!spec.llamaCpp && isType(it->second, PieceType::Unused))
            revMerge[merged] = {piece(left), piece(right)};
    };
    for (std::size_t i = 1; i < symbols.size(); ++i)
        maybeAdd(static_cast<int>(i) - 1, static_cast<int>(i));
    for (std::size_t step = 1; !agenda.empty(); ++step) {
        if (step % kPollEvery == 0 && control.cancelled && control.cancelled())
            return Error::cancellation(spec.label);
        const Pair top = agenda.top();
        agenda.pop();
        Symbol& left = symbols[static_cast<std::size_t>(top.left)];
        Symbol& right = symbols[static_cast<std::size_t>(top.right)];
        if (left.size == 0 || right.size == 0 || left.size + right.size != top.size)
            continue; // stale: one of them has merged since
        left.size += right.size;
        left.next = right.next;
        if (right.next >= 0)
            symbols[static_cast<std::size_t>(right.next)].prev = top.left;
        right.size = 0;
        maybeAdd(left.prev, top.left);
        maybeAdd(top.left, left.next);
    }
    // Unused pieces split back into what they were merged from (the library's resegment).
    std::vector<std::string_view> stack;
    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<std::size_t>(i)].next) {
        stack.push_back(piece(i));
        while (!stack.empty()) {
            const std::string_view w = stack.back();
            stack.pop_back();
            const std::int32_t id = pieceToId(w);
            const auto it = isType(id, PieceType::Unused) ? revMerge.find(w) : revMerge.end();
            if (it == revMerge.end()) {
                out.emplace_back(w, id);
                continue;
            }
            stack.push_back(it->second.second);
            stack.push_back(it->second.first);
        }
    }
    return Ok{};
}

Status SentencePieceTokenizer::Impl::unigram(std::string_view text, const EncodeControl& control, SegmentState& state,
                                             std::vector<PieceSegment>& out) const
{
    struct BestPathNode {
        std::int32_t id = -1;
        float bestPathScore = 0;
        std::int64_t startsAt = -1;
    };
    const std::size_t size = text.size();
    const float unkScore = minScore - kUnkPenalty;
    std::vector<BestPathNode> best(size + 1);
    best[0].bestPathScore = state.unigramScore; // 0 at the text's start; the path's score at a cut
    for (std::size_t startsAt = 0; startsAt < size;) {
        if ((startsAt + 1) % kPollEvery == 0 && control.cancelled && control.cancelled())
            return Error::cancellation(spec.label);
        const float tillHere = best[startsAt].bestPathScore;
        const std::size_t mblen = std::min(utf8LeadLength(static_cast<unsigned char>(text[startsAt])), size - startsAt);
        bool hasSingleNode = false;
        std::int32_t node = 0;
        for (std::size_t keyPos = startsAt; keyPos < size;) {
            node = trie.step(node, static_cast<unsigned char>(text[keyPos++]));
            if (node < 0)
                break;
            const std::int32_t id = trie.value(node);
            if (id < 0 || isType(id, PieceType::Unused))
                continue;
            BestPathNode& target = best[keyPos];
            const std::size_t length = keyPos - startsAt;
            // The library's types: user-defined scores are double (float times length, minus 0.1),
            // the sum is double, the stored best score float.
            const double score = isType(id, PieceType::UserDefined)
                                     ? static_cast<double>(static_cast<float>(length) * maxScore) - 0.1
                                     : static_cast<double>(spec.scores[static_cast<std::size_t>(id)]);
            const double candidate = score + static_cast<double>(tillHere);
            if (target.startsAt == -1 || candidate > static_cast<double>(target.bestPathScore)) {
                target.bestPathScore = static_cast<float>(candidate);
                target.startsAt = static_cast<std::int64_t>(startsAt);
                target.id = id;
            }
            hasSingleNode = hasSingleNode || length == mblen;
        }
        if (!hasSingleNode) {
            BestPathNode& target = best[startsAt + mblen];
            const float candidate = unkScore + tillHere;
            if (target.startsAt == -1 || candidate > target.bestPathScore) {
                target.bestPathScore = candidate;
                target.startsAt = static_cast<std::int64_t>(startsAt);
                target.id = unkId;
            }
        }
        startsAt += mblen;
    }
    state.unigramScore = best[size].bestPathScore;
    const std::size_t first = out.size();
    for (std::size_t endsAt = size; endsAt > 0;) {
        const BestPathNode& node = best[endsAt];
        const auto startsAt = static_cast<std::size_t>(node.startsAt);
        out.emplace_back(text.substr(startsAt, endsAt - startsAt), node.id);
        endsAt = startsAt;
    }
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    return Ok{};
}

/// The library's PopulateSentencePieceText, ids only.
Status SentencePieceTokenizer::Impl::emit(const std::vector<PieceSegment>& segments, SegmentState& state,
                                          std::vector<std::int32_t>& out) const
{
    for (const auto& [w, id] : segments) {
        if (isType(id, PieceType::Control) && !spec.llamaCpp)
            return Error{spec.label, "the text segments into the control piece " + io::quoteName(w)
                                         + " (a control piece spelled like a character or a merge), which "
                                           "SentencePiece refuses to encode"};
        const bool unknown = isType(id, PieceType::Unknown);
        if (unknown && spec.byteFallback) {
            for (const char b : w)
                out.push_back(byteIds[static_cast<unsigned char>(b)]);
        } else if (!(unknown && state.prevUnknown)) {
            out.push_back(id); // a run of unknown pieces is one unk id
        }
        state.prevUnknown = unknown;
    }
    return Ok{};
}

Status SentencePieceTokenizer::Impl::segment(std::string_view text, const EncodeControl& control,
                                             SegmentState& state, std::vector<std::int32_t>& out) const
{
    if (text.empty())
        return Ok{};
    std::vector<PieceSegment> segments;
    Status s = spec.algorithm == SentencePieceSpec::Algorithm::Bpe ? bpe(text, control, segments)
                                                                    : unigram(text, control, state, segments);
    if (!s)
        return s;
    return emit(segments, state, out);
}

// ---------------------------------------------------------------------------------------------
// The streaming session

namespace {

class SentencePieceSession final : public EncodeSession {
public:
    SentencePieceSession(const SentencePieceTokenizer::Impl& impl, EncodeControl control)
        : m(impl), m_control(std::move(control)), m_normalizer(impl.rules)
    {
    }

    Status feed(std::string_view block, bool last, std::vector<std::int32_t>& out) override
    {
        if (m_control.cancelled && m_control.cancelled())
            return Error::cancellation(m.spec.label);
        m_raw.append(block);
        return m.spec.llamaCpp && !m.userDefined.empty() ? feedFragments(last, out) : feedText(m_raw.size(), last, out);
    }

private:
    /// Normalizes m_raw[0:end) (`last`: the text or fragment ends there) and segments what no
    /// later text can change; drops what it used from m_raw.
    Status feedText(std::size_t end, bool last, std::vector<std::int32_t>& out)
    {
        auto taken = m_normalizer.feed(std::string_view(m_raw).substr(0, end), last, m_norm);
        if (!taken)
            return taken.error();
        m_raw.erase(0, *taken);
        std::size_t cut = m_norm.size();
        if (last)
            m_normalizer.finish(m_norm);
        else
            cut = m.findCut(m_norm);
        if (Status s = m.segment(std::string_view(m_norm).substr(0, last ? m_norm.size() : cut), m_control, m_state, out); !s)
            return s;
        m_norm.erase(0, last ? m_norm.size() : cut);
        return Ok{};
    }

    /// llama.cpp: user-defined pieces split the raw text; each fragment is a text of its own.
    Status feedFragments(bool last, std::vector<std::int32_t>& out)
    {
        for (std::size_t s = 0; s < m_raw.size();) {
            const auto match = m.userDefined.longestPrefix(std::string_view(m_raw).substr(s), SIZE_MAX);
            if (match.open && !last)
                return feedText(s, false, out); // a piece may start here: wait for more text
            if (match.length == 0) {
                ++s;
                continue;
            }
            if (Status st = feedText(s, true, out); !st)
                return st;
            out.push_back(match.value);
            m_raw.erase(0, match.length);
            m_normalizer.reset();
            m_state.prevUnknown = false;
            s = 0;
        }
        return feedText(m_raw.size(), last, out);
    }

    const SentencePieceTokenizer::Impl& m;
    EncodeControl m_control;
    SpmNormalizer m_normalizer;
    std::string m_raw;  ///< text not normalized yet
    std::string m_norm; ///< normalized text not segmented yet
    SegmentState m_state;
};

} // namespace

// ---------------------------------------------------------------------------------------------

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<EncodeSession> SentencePieceTokenizer::startEncode(const EncodeControl& control) const
{
    return std::make_unique<SentencePieceSession>(*m_impl, control);
}

std::string SentencePieceTokenizer::tokenBytes(std::int32_t id) const
{
    if (id < 0 || static_cast<std::size_t>(id) >= m_impl->idBytes.size())
        return {};
    return m_impl->idBytes[static_cast<std::size_t>(id)];
}

std::int32_t SentencePieceTokenizer::vocabSize() const
{
    return static_cast<std::int32_t>(m_impl->idBytes.size());
}

std::optional<std::int32_t> SentencePieceTokenizer::bos() const
{
    return m_impl->bos;
}

std::optional<std::int32_t> SentencePieceTokenizer::modelBos() const
{
    return m_impl->modelBos;
}

void SentencePieceTokenizer::setBos(std::optional<std::int32_t> id)
{
    m_impl->bos = id;
}

std::optional<std::int32_t> SentencePieceTokenizer::pieceId(std::string_view piece) const
{
    if (const auto it = m_impl->reserved.find(piece); it != m_impl->reserved.end())
        return it->second;
    if (const auto it = m_impl->normal.find(piece); it != m_impl->normal.end())
        return it->second;
    return std::nullopt;
}

namespace {

/// The piece maps, tries, scores and display bytes of a checked spec.
void indexPieces(SentencePieceTokenizer::Impl& impl)
{
    const SentencePieceSpec& spec = impl.spec;
    std::vector<std::pair<std::string_view, std::int32_t>> all, userDefined;
    impl.idBytes.resize(spec.pieces.size());
    for (std::size_t i = 0; i < spec.pieces.size(); ++i) {
        const auto id = static_cast<std::int32_t>(i);
        const std::string& piece = spec.pieces[i];
        const PieceType type = spec.types[i];
        const bool isNormal = type == PieceType::Normal || type == PieceType::UserDefined || type == PieceType::Unused;
        (isNormal ? impl.normal : impl.reserved).emplace(piece, id); // checked: no duplicates in either
        if (isNormal)
            all.emplace_back(piece, id);
        if (type == PieceType::UserDefined)
            userDefined.emplace_back(piece, id);
        if (type == PieceType::Unknown)
            impl.unkId = id;
        if (type == PieceType::Normal) {
            impl.minScore = std::min(impl.minScore, spec.scores[i]);
            impl.maxScore = std::max(impl.maxScore, spec.scores[i]);
        }
        const int byte = type == PieceType::Byte ? bytePieceValue(piece) : -1;
        if (byte >= 0)
            impl.byteIds[static_cast<std::size_t>(byte)] = id;
        impl.idBytes[i] = byte >= 0 ? std::string(1, static_cast<char>(byte))
                                    : (type == PieceType::Control || type == PieceType::Unknown ? piece : displayText(piece));
    }
    impl.trie.build(std::move(all));
    impl.userDefined.build(std::move(userDefined));
}

} // namespace

Result<std::unique_ptr<SentencePieceTokenizer>> makeSentencePieceTokenizer(SentencePieceSpec spec)
{
    if (Status s = checkSentencePieceSpec(spec, spec.llamaCpp ? "tokenizer.ggml.tokens" : "pieces"); !s)
        return s.error();
    auto impl = std::make_unique<SentencePieceTokenizer::Impl>();
    auto charsmap = CharsMap::parse(spec.charsmap, spec.label);
    if (!charsmap)
        return charsmap.error();
    impl->charsmap = std::move(*charsmap);
    impl->spec = std::move(spec);
    indexPieces(*impl);
    const SentencePieceSpec& s = impl->spec;
    impl->rules = NormalizerRules{&impl->charsmap, s.llamaCpp ? nullptr : &impl->userDefined, s.addDummyPrefix,
                                  s.removeExtraWhitespaces, s.escapeWhitespaces, s.treatWhitespaceAsSuffix, !s.llamaCpp};
    impl->chooseCut();
    // ModelInterface::bos_id(): the bos piece's id when it names a control piece.
    if (const auto it = impl->reserved.find(s.bosPiece); it != impl->reserved.end() && impl->isType(it->second, PieceType::Control))
        impl->modelBos = it->second;
    impl->bos = impl->modelBos;
    return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl)));
}

Result<std::unique_ptr<SentencePieceTokenizer>> parseSentencePieceModel(std::string_view bytes, const std::string& label,
                                                                        std::int32_t maxPieces)
{
    auto spec = parseSentencePieceModelProto(bytes, label, maxPieces);
    if (!spec)
        return spec.error();
    return makeSentencePieceTokenizer(std::move(*spec));
}

Result<std::unique_ptr<SentencePieceTokenizer>> loadSentencePieceModel(const std::string& path, std::int32_t maxPieces)
{
    auto bytes = io::readRegularFile(path, kMaxSentencePieceModelBytes);
    if (!bytes)
        return bytes.error();
    return parseSentencePieceModel(*bytes, path, maxPieces);
}

} // namespace kvlens::lm
