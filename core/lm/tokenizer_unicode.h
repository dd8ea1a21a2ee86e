// SPDX-License-Identifier: GPL-3.0-or-later
// The Unicode pieces the tokenizers share: UTF-8 checks, GPT-2's byte-to-character table, NFC (ICU) and character classes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::lm {

/// The offset of the first byte of `text` that does not begin a well-formed UTF-8 sequence
/// (Unicode 15, table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF; a sequence cut
/// by the end counts), or nullopt when all of `text` is well-formed.
std::optional<std::size_t> firstInvalidUtf8(std::string_view text);

/// The code point starting at `text[pos]` and the offset after it. `text` must be well-formed
/// UTF-8 (firstInvalidUtf8) and pos < text.size(), on a sequence boundary.
char32_t decodeUtf8(std::string_view text, std::size_t& pos);

/// Appends the UTF-8 form of code point `c` (c <= 0x10FFFF, not a surrogate) to `out`.
void appendUtf8(std::string& out, char32_t c);

/// GPT-2's byte-to-character table (Radford et al. 2019, the released encoder.py's
/// bytes_to_unicode; Hugging Face tokenizers' ByteLevel): bytes '!'..'~', 0xA1..0xAC and
/// 0xAE..0xFF stand for themselves; the other 68 bytes, in increasing order, for U+0100, U+0101, ...
/// So ' ' (0x20) is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A.
char32_t byteLevelChar(std::uint8_t byte);

/// The byte that `c` stands for in that table, or -1 when c is none of its 256 characters.
int byteLevelByte(char32_t c);

/// The position of byte `b` in the order GPT-2's vocabulary lists the 256 byte symbols (the table's
/// order: the 188 self-standing bytes ascending, then the 68 others ascending); GPT-2's own ids of
/// the 256 single-byte tokens are these positions ('!' 0, 'A' 32, '\n' 198, ' ' 220).
int byteLevelRank(std::uint8_t b);

/// Canonical composition (Unicode UAX #15, NFC) of well-formed UTF-8 `text`, through ICU's
/// Normalizer2. Returns `text` unchanged when it is already NFC (checked first; ASCII always is).
/// nullopt when ICU fails (it reports no failure for well-formed input).
std::optional<std::string> toNfc(std::string_view text);

/// True when NFC never composes or reorders `c` with what comes before it (ICU's
/// Normalizer2::hasBoundaryBefore): then NFC(x + y) = NFC(x) + NFC(y) for any y starting with c.
bool nfcBoundaryBefore(char32_t c);

/// NFC of well-formed UTF-8 with the way back: which source offset each normalized offset starts at.
struct NfcMapped {
    std::string text;
    /// Spans (sourceBegin, sourceLength, textBegin, textLength, changed), in order; empty when the
    /// source was already NFC (then offsets are equal).
    struct Span {
        std::size_t sourceBegin, sourceLength, textBegin, textLength;
        bool changed;
    };
    std::vector<Span> spans;
    /// The source offset where normalized offset `at` begins: exact inside an unchanged span or at
    /// the start of a change (or at the end), nullopt inside a change.
    std::optional<std::size_t> sourceOffset(std::size_t at) const;
};
/// nullopt when ICU fails (it reports no failure for well-formed input).
std::optional<NfcMapped> toNfcMapped(std::string_view text);

/// Unicode character classes, as Rust's char methods and regex crate define them (what Hugging
/// Face tokenizers uses): General_Category N (Nd, Nl, No: char::is_numeric), White_Space (\s,
/// char::is_whitespace), and \w (Alphabetic, M, Nd, Pc, Join_Control).
bool isNumericChar(char32_t c);
bool isWhiteSpaceChar(char32_t c);
bool isWordChar(char32_t c);

} // namespace kvlens::lm
