// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: tokenizer.model bytes through KVLens's own SentencePiece reader, then a few texts and a slice of the input encoded whole and streamed, which must agree.
#include "core/lm/tokenizer_sentencepiece.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

/// Streams `text` in blocks of `block` bytes, stopping after `maxTokens` ids (0: all).
kvlens::Result<std::vector<std::int32_t>> streamed(const kvlens::lm::Tokenizer& t, std::string_view text,
                                                   std::size_t block, std::size_t maxTokens)
{
    std::size_t given = 0;
    const kvlens::lm::TextReader reader = [&](char* buffer, std::size_t capacity) -> kvlens::Result<std::size_t> {
        const std::size_t n = std::min({block, capacity, text.size() - given});
        std::copy_n(text.data() + given, n, buffer);
        given += n;
        return n;
    };
    kvlens::lm::EncodeControl control;
    control.maxTokens = maxTokens;
    return t.encodeStream(reader, control);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const auto tokenizer = kvlens::lm::parseSentencePieceModel(bytes, "fuzz.model");
    if (!tokenizer)
        return 0;
    const auto& t = **tokenizer;
    // White-space runs, digits, non-ASCII letters, an emoji, control-symbol spellings, invalid
    // UTF-8; then the input's last bytes (often the strings a mutation changed).
    const std::vector<std::string> texts = {"It's 2024!  Hello,\tworld\n\n  na\xC3\xAFve caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC <s></s> x",
                                            "\xF0\x9F\x98\x80 \xE2\x96\x81\xE2\x96\x81 \xFF\xC3 a  b   c", std::string(bytes.substr(size > 48 ? size - 48 : 0))};
    for (const std::string& text : texts) {
        const auto whole = t.encode(text);
        const auto again = streamed(t, text, 1, 0);
        if (whole.ok() != again.ok())
            std::abort(); // streaming must fail exactly where the whole text does
        if (!whole)
            continue;
        for (const std::int32_t id : *whole)
            if (id < 0 || id >= t.vocabSize())
                std::abort();
        if (*again != *whole)
            std::abort();
        const std::size_t half = whole->size() / 2;
        const auto prefix = streamed(t, text, 3, half);
        if (!prefix || (half > 0 && !std::equal(prefix->begin(), prefix->end(), whole->begin())) || (half > 0 && prefix->size() != half))
            std::abort();
    }
    (void)t.tokenBytes(-1);
    (void)t.tokenBytes(t.vocabSize());
    return 0;
}
