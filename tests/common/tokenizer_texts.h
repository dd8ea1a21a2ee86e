// SPDX-License-Identifier: GPL-3.0-or-later
// Texts that stress tokenizers, drawn with a fixed seed, and a TextReader that hands a text out in small blocks.
#pragma once

#include "core/lm/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::test {

/// Fragments a text is built from: words, digits, runs of white space of every kind, punctuation,
/// contractions, composed and decomposed accents, CJK, emoji (4-byte UTF-8), U+2581 itself,
/// fullwidth forms and ligatures (which NFKC rewrites), NUL and other control characters.
inline const std::vector<std::string>& textFragments()
{
    static const std::vector<std::string> fragments = {
        "the", "quick", "brown", "fox", "Hello", "world", "abc", "ab", "bc", "a", "b", "c", "tokenizer", "piece",
        "It's", "we'll", "I'M", "don't", "0", "7", "42", "123", "2024", "3.14", "1,000,000",
        " ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u3000", "\u00A0", "\u2581", "\u2581\u2581",
        ".", ",", "!", "?", "...", "--", "(", ")", "<s>", "</s>", "<unk>", "#", "$", "%", "@", "\"", "'",
        "caf\u00E9", "cafe\u0301", "na\u00EFve", "\u00C5ngstr\u00F6m", "Stra\u00DFe", "\u65E5\u672C\u8A9E",
        "\u30C6\u30B9\u30C8", "\uD55C\uAD6D\uC5B4", "\u0645\u0631\u062D\u0628\u0627", "\u03B1\u03B2\u03B3",
        "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001D400", "\uFF21\uFF22\uFF23", "\uFB01", "\u2460", "\u00BD",
        "\u212B", "x\u0301\u0323", "\u1100\u1161", std::string(1, '\0'), "\x01", "\x7F", "\u200B", "\u0085",
    };
    return fragments;
}

/// Bytes that are not UTF-8: stray continuation bytes, cut sequences, overlong forms, surrogates.
inline const std::vector<std::string>& invalidFragments()
{
    static const std::vector<std::string> fragments = {"\x80", "\xBF", "\xC3", "\xE2\x96", "\xF0\x9F\x98",
                                                       "\xC0\xAF", "\xED\xA0\x80", "\xF8\x88\x80\x80\x80", "\xFF"};
    return fragments;
}

/// `count` texts of 1 to `maxFragments` fragments each (fixed `seed`); with `invalidUtf8`, about
/// one fragment in eight is invalid UTF-8. `extra` fragments (a tokenizer's added tokens) join the pool.
inline std::vector<std::string> stressTexts(std::uint64_t seed, std::size_t count, std::size_t maxFragments,
                                            bool invalidUtf8, const std::vector<std::string>& extra = {})
{
    std::mt19937_64 rng(seed);
    std::vector<std::string> pool = textFragments();
    pool.insert(pool.end(), extra.begin(), extra.end());
    std::vector<std::string> texts;
    texts.reserve(count);
    for (std::size_t t = 0; t < count; ++t) {
        const std::size_t n = 1 + rng() % maxFragments;
        std::string text;
        for (std::size_t i = 0; i < n; ++i) {
            if (invalidUtf8 && rng() % 8 == 0)
                text += invalidFragments()[rng() % invalidFragments().size()];
            else
                text += pool[rng() % pool.size()];
        }
        texts.push_back(std::move(text));
    }
    return texts;
}

/// A TextReader over `text` that hands out at most `block` bytes per call and counts what it gave.
struct BlockReader {
    std::string_view text;
    std::size_t block = 1;
    std::size_t given = 0;

    lm::TextReader reader()
    {
        return [this](char* buffer, std::size_t capacity) -> Result<std::size_t> {
            const std::size_t n = std::min({block, capacity, text.size() - given});
            std::copy_n(text.data() + given, n, buffer);
            given += n;
            return n;
        };
    }
};

} // namespace kvlens::test
