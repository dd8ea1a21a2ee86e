// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/eval/model_input.h"

#include "core/io/file_read.h"
#include "core/lm/token_ids.h"

namespace kvlens::eval {

Result<ModelInput> readModelInput(const std::string& modelDir, const std::string& textFile,
                                  const std::string& tokensFile, bool parseSpecialTokens, int vocab,
                                  std::size_t maxTokens, const std::function<bool()>& cancelled)
{
    (void)cancelled;
    ModelInput in;
    if (!tokensFile.empty()) {
        auto ids = lm::readTokenIds(tokensFile);
        if (!ids)
            return ids.error();
        in.tokens = std::move(ids).value();
        in.tokenizer = lm::makeIdsTokenizer(vocab);
        return in;
    }
    lm::TokenizerOptions options;
    options.parseSpecialTokens = parseSpecialTokens;
    auto loaded = lm::loadTokenizer(modelDir, vocab, options);
    if (!loaded)
        return loaded.error();
    in.tokenizer = std::move(loaded).value();
    constexpr std::uint64_t kMaxTextBytes = 256ull << 20;
    auto text = io::readRegularFile(textFile, kMaxTextBytes);
    if (!text)
        return text.error();
    auto encoded = in.tokenizer->encode(*text);
    if (!encoded)
        return Error{"text", textFile + ": " + encoded.error().text()};
    in.tokens = std::move(encoded).value();
    if (maxTokens > 0 && in.tokens.size() > maxTokens)
        in.tokens.resize(maxTokens);
    return in;
}

} // namespace kvlens::eval
