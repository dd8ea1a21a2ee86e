// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: bytes read as a GGUF-style vocabulary (a line format), through tokenizerFromVocab, then texts encoded whole and streamed, which must agree.
//
// The line format (the seeds are tests/data/tokenizers/vocab_*.txt): the first line is the model
// ("gpt2" or "llama"), then optionally the pre-tokenizer and words: "special" (parse special
// tokens), "nospace" (no space prefix), "bos" (add BOS), "rows-N" (N fewer embedding rows than
// tokens); each next line is a token, "TYPE SCORE TEXT" (TEXT is the rest of the line); a line
// "#merges" starts the merges, one "a b" per line.
#include "core/lm/tokenizer_vocab.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<std::string_view> splitLines(std::string_view text)
{
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        const auto end = text.find('\n');
        lines.push_back(text.substr(0, end));
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    }
    return lines;
}

long long number(std::string_view word)
{
    long long value = 0;
    bool negative = !word.empty() && word[0] == '-';
    for (const char c : word.substr(negative ? 1 : 0)) {
        if (c < '0' || c > '9' || value > 1'000'000'000)
            break;
        value = value * 10 + (c - '0');
    }
    return negative ? -value : value;
}

/// The header line: model, pre, flags.
void readHeader(std::string_view line, kvlens::lm::TokenizerVocab& vocab, kvlens::lm::TokenizerOptions& options,
                long long& fewerRows)
{
    std::size_t word = 0;
    while (!line.empty()) {
        const auto space = line.find(' ');
        const std::string_view w = line.substr(0, space);
        line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
        if (word++ == 0)
            vocab.model = std::string(w);
        else if (w == "special")
            options.parseSpecialTokens = true;
        else if (w == "nospace")
            vocab.addSpacePrefix = false;
        else if (w == "bos")
            vocab.addBos = true;
        else if (w.substr(0, 5) == "rows-")
            fewerRows = number(w.substr(5));
        else
            vocab.pre = std::string(w);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto lines = splitLines(input);
    if (lines.empty())
        return 0;
    kvlens::lm::TokenizerVocab vocab;
    vocab.label = "fuzz.gguf";
    kvlens::lm::TokenizerOptions options;
    options.parseSpecialTokens = false;
    long long fewerRows = 0;
    readHeader(lines[0], vocab, options, fewerRows);
    bool merges = false;
    for (std::size_t i = 1; i < lines.size(); ++i) {
        const std::string_view line = lines[i];
        if (line == "#merges") {
            merges = true;
        } else if (merges) {
            vocab.merges.emplace_back(line);
        } else {
            const auto a = line.find(' ');
            const auto b = a == std::string_view::npos ? a : line.find(' ', a + 1);
            vocab.types.push_back(static_cast<std::int32_t>(number(line.substr(0, a))));
            vocab.scores.push_back(a == std::string_view::npos ? 0.0f : static_cast<float>(number(line.substr(a + 1, b - a - 1))) / 8);
            vocab.tokens.emplace_back(b == std::string_view::npos ? std::string_view() : line.substr(b + 1));
        }
    }
    if (!vocab.tokens.empty())
        vocab.bos = static_cast<std::int32_t>(size % vocab.tokens.size());
    const auto rows = static_cast<std::int32_t>(std::max<long long>(1, static_cast<long long>(vocab.tokens.size()) - fewerRows));
    const auto tokenizer = kvlens::lm::tokenizerFromVocab(vocab, rows, options);
    if (!tokenizer)
        return 0;
    const auto& t = **tokenizer;
    const std::vector<std::string> texts = {"It's 2024!  Hello,\tworld\n\n  na\xC3\xAFve <s> <|endoftext|> <ud> x",
                                            std::string(input.substr(size > 40 ? size - 40 : 0))};
    for (const std::string& text : texts) {
        const auto whole = t.encode(text);
        std::size_t given = 0;
        const kvlens::lm::TextReader reader = [&](char* buffer, std::size_t capacity) -> kvlens::Result<std::size_t> {
            const std::size_t n = std::min({std::size_t(2), capacity, text.size() - given});
            std::copy_n(text.data() + given, n, buffer);
            given += n;
            return n;
        };
        const auto again = t.encodeStream(reader, kvlens::lm::EncodeControl{});
        if (whole.ok() != again.ok())
            std::abort();
        if (!whole)
            continue;
        for (const std::int32_t id : *whole)
            if (id < 0 || id >= t.vocabSize() || id >= rows)
                std::abort();
        if (*again != *whole)
            std::abort();
    }
    (void)t.tokenBytes(-1);
    (void)t.tokenBytes(t.vocabSize());
    return 0;
}
