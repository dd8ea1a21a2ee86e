// SPDX-License-Identifier: GPL-3.0-or-later
// tokenizer.ggml.* keys into a TokenizerVocab, each refusal naming its key.
#include "core/lm/gguf_vocab.h"

#include "core/io/tensor_file.h"

namespace kvlens::lm {

namespace {

/// Reads the optional key `key` of type T into `to`; false with `error` set on a wrong type.
template <class T>
bool readOptional(const io::GgufFile& gguf, std::string_view key, std::optional<T>& to, Error& error)
{
    auto v = gguf.getOptional<T>(key);
    if (!v) {
        error = v.error();
        return false;
    }
    to = *v;
    return true;
}

template <class T>
bool readArray(const io::GgufFile& gguf, std::string_view key, std::vector<T>& to, Error& error)
{
    std::optional<std::vector<T>> v;
    if (!readOptional(gguf, key, v, error))
        return false;
    if (v)
        to = std::move(*v);
    return true;
}

} // namespace

Result<TokenizerVocab> vocabFromGguf(const io::GgufFile& gguf)
{
    TokenizerVocab vocab;
    vocab.label = gguf.path;
    auto model = gguf.getString("tokenizer.ggml.model");
    if (!model)
        return model.error();
    vocab.model = std::move(*model);
    std::optional<std::string> pre;
    Error error;
    if (!readOptional(gguf, "tokenizer.ggml.pre", pre, error))
        return error;
    vocab.pre = pre.value_or("");
    auto tokens = gguf.getArray<std::string>("tokenizer.ggml.tokens");
    if (!tokens)
        return tokens.error();
    if (tokens->empty())
        return Error{gguf.path, "key " + io::quoteName("tokenizer.ggml.tokens") + " is empty: a vocabulary needs tokens"};
    vocab.tokens = std::move(*tokens);
    if (!readArray(gguf, "tokenizer.ggml.scores", vocab.scores, error)
        || !readArray(gguf, "tokenizer.ggml.token_type", vocab.types, error)
        || !readArray(gguf, "tokenizer.ggml.merges", vocab.merges, error))
        return error;
    const std::pair<const char*, std::optional<std::int32_t>*> ids[] = {
        {"tokenizer.ggml.bos_token_id", &vocab.bos},
        {"tokenizer.ggml.eos_token_id", &vocab.eos},
        {"tokenizer.ggml.unknown_token_id", &vocab.unk},
        {"tokenizer.ggml.padding_token_id", &vocab.pad},
    };
    for (const auto& [key, to] : ids) {
        std::optional<std::uint32_t> id;
        if (!readOptional(gguf, key, id, error))
            return error;
        if (id && *id >= vocab.tokens.size())
            return Error{gguf.path, "key " + io::quoteName(key) + " = " + std::to_string(*id) + " is not a token: it must be in [0, "
                                        + std::to_string(vocab.tokens.size()) + ")"};
        if (id)
            *to = static_cast<std::int32_t>(*id);
    }
    if (!readOptional(gguf, "tokenizer.ggml.add_bos_token", vocab.addBos, error)
        || !readOptional(gguf, "tokenizer.ggml.add_eos_token", vocab.addEos, error)
        || !readOptional(gguf, "tokenizer.ggml.add_space_prefix", vocab.addSpacePrefix, error))
        return error;
    return vocab;
}

} // namespace kvlens::lm
