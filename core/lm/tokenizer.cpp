// SPDX-License-Identifier: GPL-3.0-or-later
// Choosing the tokenizer of a model folder, its BOS rule, and the byte and ids tokenizers.
#include "core/lm/tokenizer.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_bpe.h"
#include "core/lm/tokenizer_sentencepiece.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace kvlens::lm {

namespace {

/// A session that gives each block's bytes as ids at once.
class ByteSession final : public EncodeSession {
public:
    Status feed(std::string_view block, bool, std::vector<std::int32_t>& out) override
    {
        for (const char c : block)
            out.push_back(static_cast<unsigned char>(c));
        return Ok{};
    }
};

class ByteTokenizer final : public Tokenizer {
public:
    std::unique_ptr<EncodeSession> startEncode(const EncodeControl&) const override
    {
        return std::make_unique<ByteSession>();
    }
    std::string tokenBytes(std::int32_t id) const override
    {
        return id >= 0 && id < 256 ? std::string(1, static_cast<char>(id)) : std::string();
    }
    std::int32_t vocabSize() const override { return 256; }
    std::optional<std::int32_t> bos() const override { return std::nullopt; }
    std::string kind() const override { return "bytes"; }
};

class RefusingSession final : public EncodeSession {
public:
    Status feed(std::string_view, bool, std::vector<std::int32_t>&) override
    {
        return Error{"", "this model has no tokenizer: give the text as token ids (a .npy of int32 or int64)"};
    }
};

class IdsTokenizer final : public Tokenizer {
public:
    explicit IdsTokenizer(std::int32_t vocabSize) : m_vocabSize(vocabSize) {}
    std::unique_ptr<EncodeSession> startEncode(const EncodeControl&) const override
    {
        return std::make_unique<RefusingSession>();
    }
    std::string tokenBytes(std::int32_t id) const override
    {
        return id >= 0 && id < m_vocabSize ? "<" + std::to_string(id) + ">" : std::string();
    }
    std::int32_t vocabSize() const override { return m_vocabSize; }
    std::optional<std::int32_t> bos() const override { return std::nullopt; }
    std::string kind() const override { return "ids"; }

private:
    std::int32_t m_vocabSize;
};

bool fileExists(const std::filesystem::path& path)
{
    std::error_code error;
    return std::filesystem::exists(path, error) && !error;
}

/// Applies tokenizer_config.json's add_bos_token (when it says) to `tokenizer`.
Status applyBosRule(Tokenizer& tokenizer, const std::string& configPath)
{
    if (!fileExists(configPath))
        return Ok{};
    auto text = io::readRegularFile(configPath, kMaxTokenizerConfigBytes);
    if (!text)
        return text.error();
    auto config = parseTokenizerConfig(*text, configPath);
    if (!config)
        return config.error();
    if (!config->addBosToken)
        return Ok{};
    auto* bpe = dynamic_cast<BpeTokenizer*>(&tokenizer);
    auto* spm = dynamic_cast<SentencePieceTokenizer*>(&tokenizer);
    const auto set = [&](std::optional<std::int32_t> id) {
        if (bpe)
            bpe->setBos(id);
        if (spm)
            spm->setBos(id);
    };
    if (!*config->addBosToken) {
        set(std::nullopt);
        return Ok{};
    }
    if (tokenizer.bos())
        return Ok{};
    if (spm && spm->modelBos()) {
        set(spm->modelBos());
        return Ok{};
    }
    if (!config->bosToken)
        return Error{configPath, "add_bos_token is true but bos_token names no token, and the tokenizer has no BOS"};
    std::optional<std::int32_t> id;
    if (bpe)
        id = bpe->tokenId(*config->bosToken);
    if (spm)
        id = spm->pieceId(*config->bosToken);
    if (!id)
        return Error{configPath, "bos_token " + io::quoteName(*config->bosToken) + " is no token of the tokenizer"};
    set(id);
    return Ok{};
}

} // namespace

Result<std::vector<std::int32_t>> Tokenizer::encode(std::string_view text) const
{
    if (text.size() > kMaxEncodeBytes)
        return Error{kind(), "the text is " + io::byteSizeText(text.size()) + ", above the cap of "
                                 + io::byteSizeText(kMaxEncodeBytes) + " for one encode call (encodeStream has none)"};
    try {
        std::vector<std::int32_t> ids;
        ids.reserve(text.size() / 3 + 16);
        if (Status s = startEncode(EncodeControl{})->feed(text, true, ids); !s)
            return s.error();
        return ids;
    } catch (const std::exception& e) {
        return Error{kind(), std::string("encoding failed: ") + e.what()};
    }
}

Result<std::vector<std::int32_t>> Tokenizer::encodeStream(const TextReader& read, const EncodeControl& control) const
{
    try {
        const auto session = startEncode(control);
        std::vector<std::int32_t> ids;
        std::string block(std::max<std::size_t>(control.blockBytes, 1), '\0');
        for (;;) {
            if (control.cancelled && control.cancelled())
                return Error::cancellation("text");
            auto got = read(block.data(), block.size());
            if (!got)
                return got.error();
            const bool last = *got == 0;
            if (Status s = session->feed(std::string_view(block.data(), *got), last, ids); !s)
                return s.error();
            // Every id a session has given is final, so the first maxTokens are those of the whole text.
            if (control.maxTokens > 0 && ids.size() >= control.maxTokens) {
                ids.resize(control.maxTokens);
                return ids;
            }
            if (last)
                return ids;
        }
    } catch (const std::exception& e) {
        return Error{kind(), std::string("encoding failed: ") + e.what()};
    }
}

std::unique_ptr<Tokenizer> makeByteTokenizer()
{
    return std::make_unique<ByteTokenizer>();
}

std::unique_ptr<Tokenizer> makeIdsTokenizer(std::int32_t vocabSize)
{
    return std::make_unique<IdsTokenizer>(vocabSize);
}

Result<TokenizerConfig> parseTokenizerConfig(std::string_view json, const std::string& label)
{
    if (json.size() > kMaxTokenizerConfigBytes)
        return Error{label, "is " + io::byteSizeText(json.size()) + ", above the cap of "
                                + io::byteSizeText(kMaxTokenizerConfigBytes) + " for tokenizer_config.json"};
    if (jsonValueCount(json) > kMaxTokenizerConfigValues)
        return Error{label, "holds more than " + std::to_string(kMaxTokenizerConfigValues)
                                + " JSON values, above what a tokenizer_config.json needs"};
    auto parsed = io::parseJsonText(json);
    if (!parsed)
        return Error{label, parsed.error().message};
    const nlohmann::json& root = *parsed;
    if (!root.is_object())
        return Error{label, "expected a JSON object, found " + io::describeJson(root)};
    TokenizerConfig config;
    if (const auto it = root.find("add_bos_token"); it != root.end() && !it->is_null()) {
        if (!it->is_boolean())
            return Error{label, "add_bos_token: expected true, false or null, found " + io::describeJson(*it)};
        config.addBosToken = it->get<bool>();
    }
    if (const auto it = root.find("bos_token"); it != root.end() && !it->is_null()) {
        if (it->is_string()) {
            config.bosToken = it->get<std::string>();
        } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
            config.bosToken = (*it)["content"].get<std::string>();
        } else {
            return Error{label, "bos_token: expected a string or an object with a string 'content', found "
                                    + io::describeJson(*it)};
        }
    }
    return config;
}

Result<std::unique_ptr<Tokenizer>> loadTokenizer(const std::string& modelDir, std::int32_t embeddingRows,
                                                 const TokenizerOptions& options)
{
    std::error_code error;
    if (!std::filesystem::is_directory(modelDir, error))
        return Error{modelDir, "is not a model folder (a directory holding tokenizer.json or tokenizer.model)"};
    if (embeddingRows <= 0)
        return Error{modelDir, "the embedding has " + std::to_string(embeddingRows) + " rows"};
    const std::filesystem::path dir(modelDir);
    const std::string jsonPath = (dir / "tokenizer.json").string();
    const std::string modelPath = (dir / "tokenizer.model").string();
    const bool haveJson = fileExists(jsonPath);
    const bool haveModel = fileExists(modelPath);

    std::unique_ptr<Tokenizer> tokenizer;
    std::string source;
    if (haveJson) {
        auto text = io::readRegularFile(jsonPath, kMaxTokenizerJsonBytes);
        if (!text)
            return text.error();
        auto root = parseTokenizerJsonText(*text, jsonPath);
        if (!root)
            return root.error();
        if (!haveModel || isByteLevelTokenizerJson(*root)) {
            auto bpe = bpeFromJson(*root, jsonPath, options, embeddingRows);
            if (!bpe)
                return bpe.error();
            tokenizer = std::move(*bpe);
            source = jsonPath;
        }
    }
    if (!tokenizer && haveModel) {
        auto spm = loadSentencePieceModel(modelPath, embeddingRows);
        if (!spm)
            return spm.error();
        tokenizer = std::move(*spm);
        source = modelPath;
    }
    if (!tokenizer) {
        if (embeddingRows != 256)
            return Error{modelDir, "has neither tokenizer.json nor tokenizer.model, and its embedding has "
                                       + std::to_string(embeddingRows)
                                       + " rows, not the 256 of a byte model: give the text as token ids"};
        return makeByteTokenizer();
    }
    if (tokenizer->vocabSize() > embeddingRows)
        return Error{source, "its token ids reach " + std::to_string(tokenizer->vocabSize() - 1)
                                 + " but the model's embedding has " + std::to_string(embeddingRows)
                                 + " rows (ids 0 to " + std::to_string(embeddingRows - 1) + ")"};
    if (Status s = applyBosRule(*tokenizer, (dir / "tokenizer_config.json").string()); !s)
        return s.error();
    return tokenizer;
}

} // namespace kvlens::lm
