// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: tokenizer.json text from arbitrary bytes, and encoding a short text with every tokenizer that parses.
#include "core/lm/tokenizer_bpe.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view json(reinterpret_cast<const char*>(data), size);
    const auto tokenizer = kvlens::lm::parseTokenizerJson(json, "fuzz.json");
    if (!tokenizer)
        return 0;
    const auto& t = **tokenizer;
    // A fixed text that exercises contractions, digits, white space runs, non-ASCII letters and
    // special-token spellings, then the input's last bytes (often the strings a mutation changed).
    std::string text = "It's 2024!  Hello,\tworld\n\n  naïve café 日本 <|endoftext|><|begin_of_text|> x";
    text.append(json.substr(size > 48 ? size - 48 : 0));
    const auto ids = t.encode(text);
    if (ids) {
        for (const std::int32_t id : *ids) {
            // Every id emitted is a token of the tokenizer.
            if (id < 0 || id >= t.vocabSize())
                std::abort();
            (void)t.tokenBytes(id);
        }
    }
    (void)t.preTokenize(text);
    (void)t.tokenBytes(-1);
    (void)t.tokenBytes(t.vocabSize());
    return 0;
}
