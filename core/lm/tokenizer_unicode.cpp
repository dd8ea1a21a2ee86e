// SPDX-License-Identifier: GPL-3.0-or-later
// UTF-8 checks, GPT-2's byte-level table, NFC through ICU, and Unicode character classes.
#include "core/lm/tokenizer_unicode.h"

#include <unicode/bytestream.h>
#include <unicode/edits.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>

#include <algorithm>
#include <array>

namespace kvlens::lm {

std::optional<std::size_t> firstInvalidUtf8(std::string_view text)
{
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned c = s[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t length = 0;
        unsigned lo = 0x80, hi = 0xBF; // the allowed range of the second byte (Unicode table 3-7)
        if (c >= 0xC2 && c <= 0xDF) {
            length = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            length = 3;
            if (c == 0xE0)
                lo = 0xA0; // no overlong three-byte forms
            else if (c == 0xED)
                hi = 0x9F; // no surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            length = 4;
            if (c == 0xF0)
                lo = 0x90; // no overlong four-byte forms
            else if (c == 0xF4)
                hi = 0x8F; // nothing above U+10FFFF
        } else {
            return i;
        }
        if (i + length > n || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (std::size_t k = 2; k < length; ++k)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return i;
        i += length;
    }
    return std::nullopt;
}

char32_t decodeUtf8(std::string_view text, std::size_t& pos)
{
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const unsigned c = s[pos];
    if (c < 0x80) {
        ++pos;
        return c;
    }
    if (c < 0xE0) {
        const char32_t out = ((c & 0x1Fu) << 6) | (s[pos + 1] & 0x3Fu);
        pos += 2;
        return out;
    }
    if (c < 0xF0) {
        const char32_t out = ((c & 0x0Fu) << 12) | ((s[pos + 1] & 0x3Fu) << 6) | (s[pos + 2] & 0x3Fu);
        pos += 3;
        return out;
    }
    const char32_t out = ((c & 0x07u) << 18) | ((s[pos + 1] & 0x3Fu) << 12) | ((s[pos + 2] & 0x3Fu) << 6)
                         | (s[pos + 3] & 0x3Fu);
    pos += 4;
    return out;
}

void appendUtf8(std::string& out, char32_t c)
{
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

namespace {

bool standsForItself(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteLevelTable {
    std::array<char32_t, 256> chars{};
    std::array<int, 256> ranks{};
    std::array<int, 68> remapped{}; // the byte that U+0100 + i stands for
    ByteLevelTable()
    {
        int rank = 0;
        for (unsigned b = 0; b < 256; ++b)
            if (standsForItself(b)) {
                chars[b] = b;
                ranks[b] = rank++;
            }
        char32_t next = 0x100;
        for (unsigned b = 0; b < 256; ++b)
            if (!standsForItself(b)) {
                remapped[next - 0x100] = static_cast<int>(b);
                chars[b] = next++;
                ranks[b] = rank++;
            }
    }
};

const ByteLevelTable& byteLevelTable()
{
    static const ByteLevelTable table;
    return table;
}

} // namespace

char32_t byteLevelChar(std::uint8_t byte)
{
    return byteLevelTable().chars[byte];
}

int byteLevelByte(char32_t c)
{
    if (c < 0x100)
        return standsForItself(c) ? static_cast<int>(c) : -1;
    if (c >= 0x100 + 68)
        return -1;
    return byteLevelTable().remapped[c - 0x100];
}

int byteLevelRank(std::uint8_t b)
{
    return byteLevelTable().ranks[b];
}

std::optional<std::string> toNfc(std::string_view text)
{
    bool ascii = true;
    for (const char c : text)
        if (static_cast<unsigned char>(c) >= 0x80) {
            ascii = false;
            break;
        }
    if (ascii)
        return std::string(text);
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status) || nfc == nullptr)
        return std::nullopt;
    const icu::StringPiece piece(text.data(), static_cast<std::int32_t>(text.size()));
    if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status))
        return std::string(text);
    status = U_ZERO_ERROR;
    std::string out;
    out.reserve(text.size());
    icu::StringByteSink<std::string> sink(&out);
    nfc->normalizeUTF8(0, piece, sink, nullptr, status);
    if (U_FAILURE(status))
        return std::nullopt;
    return out;
}

bool nfcBoundaryBefore(char32_t c)
{
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    return U_SUCCESS(status) && nfc != nullptr && nfc->hasBoundaryBefore(static_cast<UChar32>(c));
}

std::optional<std::size_t> NfcMapped::sourceOffset(std::size_t at) const
{
    if (spans.empty())
        return at;
    const auto it = std::upper_bound(spans.begin(), spans.end(), at,
                                     [](std::size_t value, const Span& span) { return value < span.textBegin; });
    if (it == spans.begin())
        return at == 0 ? std::optional<std::size_t>(0) : std::nullopt;
    const Span& span = *(it - 1);
    const std::size_t inside = at - span.textBegin;
    if (inside == 0)
        return span.sourceBegin;
    if (inside >= span.textLength) // the end of the last span
        return inside == span.textLength ? std::optional<std::size_t>(span.sourceBegin + span.sourceLength) : std::nullopt;
    if (span.changed)
        return std::nullopt;
    return span.sourceBegin + inside;
}

std::optional<NfcMapped> toNfcMapped(std::string_view text)
{
    NfcMapped out;
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status) || nfc == nullptr)
        return std::nullopt;
    const icu::StringPiece piece(text.data(), static_cast<std::int32_t>(text.size()));
    if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
        out.text.assign(text);
        return out;
    }
    status = U_ZERO_ERROR;
    icu::Edits edits;
    icu::StringByteSink<std::string> sink(&out.text);
    nfc->normalizeUTF8(0, piece, sink, &edits, status);
    if (U_FAILURE(status))
        return std::nullopt;
    for (auto it = edits.getFineIterator(); it.next(status);)
        out.spans.push_back({static_cast<std::size_t>(it.sourceIndex()), static_cast<std::size_t>(it.oldLength()),
                             static_cast<std::size_t>(it.destinationIndex()), static_cast<std::size_t>(it.newLength()),
                             static_cast<bool>(it.hasChange())});
    if (U_FAILURE(status))
        return std::nullopt;
    return out;
}

bool isNumericChar(char32_t c)
{
    const auto type = u_charType(static_cast<UChar32>(c));
    return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool isWhiteSpaceChar(char32_t c)
{
    return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool isWordChar(char32_t c)
{
    const auto cp = static_cast<UChar32>(c);
    if (u_hasBinaryProperty(cp, UCHAR_ALPHABETIC) || u_hasBinaryProperty(cp, UCHAR_JOIN_CONTROL))
        return true;
    return (U_GET_GC_MASK(cp) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

} // namespace kvlens::lm
