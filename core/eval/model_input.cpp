// SPDX-License-Identifier: GPL-3.0-or-later
// Token ids read whole, or a text file streamed through the model's tokenizer up to the tokens a run needs.
#include "core/eval/model_input.h"

#include "core/io/file_read.h"
#include "core/io/gguf.h"
#include "core/lm/gguf_vocab.h"
#include "core/lm/token_ids.h"
#include "core/lm/tokenizer_vocab.h"

#include <algorithm>
#include <filesystem>

namespace kvlens::eval {

namespace {

/// The model's tokenizer: a folder's tokenizer.json or tokenizer.model, or a GGUF file's
/// tokenizer.ggml.* metadata (lm::vocabFromGguf, built by lm::tokenizerFromVocab).
Result<std::unique_ptr<lm::Tokenizer>> tokenizerOf(const std::string& model, int vocab, const lm::TokenizerOptions& options)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model, ec))
        return lm::loadTokenizer(model, vocab, options);
    auto gguf = io::readGgufHeader(model);
    if (!gguf)
        return gguf.error();
    auto described = lm::vocabFromGguf(*gguf);
    if (!described)
        return described.error();
    return lm::tokenizerFromVocab(*described, vocab, options);
}

} // namespace

Result<ModelInput> readModelInput(const std::string& modelDir, const std::string& textFile,
                                  const std::string& tokensFile, bool parseSpecialTokens, int vocab,
                                  std::size_t maxTokens, const std::function<bool()>& cancelled)
{
    ModelInput in;
    if (!tokensFile.empty()) {
        auto ids = lm::readTokenIds(tokensFile);
        if (!ids)
            return ids.error();
        in.tokens = std::move(ids).value();
        if (maxTokens > 0 && in.tokens.size() > maxTokens)
            in.tokens.resize(maxTokens);
        in.tokenizer = lm::makeIdsTokenizer(vocab);
        return in;
    }
    lm::TokenizerOptions options;
    options.parseSpecialTokens = parseSpecialTokens;
    auto loaded = tokenizerOf(modelDir, vocab, options);
    if (!loaded)
        return loaded.error();
    in.tokenizer = std::move(loaded).value();
    auto file = io::RegularFileReader::open(textFile);
    if (!file)
        return file.error();
    if (file->size() > kMaxTextBytes)
        return Error{textFile, "is " + io::byteSizeText(file->size()) + ", above the cap of "
                                   + io::byteSizeText(kMaxTextBytes) + " for a text; refused"};
    std::uint64_t read = 0;
    const lm::TextReader reader = [&](char* buffer, std::size_t capacity) -> Result<std::size_t> {
        // A file that grew after it was opened is read no further than the cap.
        auto got = file->read(buffer, static_cast<std::size_t>(std::min<std::uint64_t>(capacity, kMaxTextBytes - read)));
        if (got)
            read += *got;
        return got;
    };
    lm::EncodeControl control;
    control.maxTokens = maxTokens;
    control.cancelled = cancelled;
    auto encoded = in.tokenizer->encodeStream(reader, control);
    if (!encoded)
        return encoded.error().cancelled() ? encoded.error() : Error{"text", textFile + ": " + encoded.error().text()};
    in.tokens = std::move(encoded).value();
    return in;
}

} // namespace kvlens::eval
