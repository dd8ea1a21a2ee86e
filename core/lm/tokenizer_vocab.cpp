// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF-style vocabularies checked array by array and turned into a SentencePiece ("llama") or byte-level BPE ("gpt2") tokenizer.
#include "core/lm/tokenizer_vocab.h"

#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_bpe_impl.h"
#include "core/lm/tokenizer_sentencepiece.h"
#include "core/lm/tokenizer_unicode.h"

#include <algorithm>
#include <cmath>

namespace kvlens::lm {

namespace {

// The pre-tokenizer patterns llama.cpp's llm_tokenizer_bpe uses (llama-vocab.cpp), Llama 3's and
// Qwen2's in Hugging Face's spelling.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2NoTrailing = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

/// One family of `pre` names: its names, its Split patterns (then ByteLevel without regex), or
/// GPT-2's ByteLevel regex after optional single digits.
struct PreFamily {
    std::vector<std::string_view> names;
    std::vector<std::string_view> patterns;
    bool gpt2Regex = false;      ///< ByteLevel(use_regex) instead of Split steps
    bool singleDigits = false;   ///< Digits(individual_digits) first
    bool llama3 = false;         ///< ignore_merges, BOS added by default
};

const std::vector<PreFamily>& preFamilies()
{
    static const std::vector<PreFamily> families = {
        {{"", "default"},
         {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2NoTrailing, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
        {{"gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"}, {}, true},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3Pattern}, false, false, true},
        {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3Pattern}},
        {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {kQwen2Pattern}},
        {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}, {}, true, true},
        {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2NoTrailing, R"([0-9][0-9][0-9])"}},
    };
    return families;
}

/// Thrown inside the checks only; tokenizerFromVocab turns it into an Error.
struct VocabRefusal {
    std::string key;
    std::string message;
};

[[noreturn]] void refuseVocab(std::string key, std::string message)
{
    throw VocabRefusal{std::move(key), std::move(message)};
}

/// The arrays every model needs, checked: sizes first (nothing is sized by a length or id before).
void checkArrays(const TokenizerVocab& vocab, std::int32_t embeddingRows)
{
    const std::size_t n = vocab.tokens.size();
    if (n == 0)
        refuseVocab("tokenizer.ggml.tokens", "is empty");
    if (n > static_cast<std::size_t>(std::min(embeddingRows, kMaxVocabSize)))
        refuseVocab("tokenizer.ggml.tokens", std::to_string(n) + " tokens, more than the model's embedding has rows ("
                                            + std::to_string(embeddingRows) + ")");
    if (!vocab.scores.empty() && vocab.scores.size() != n)
        refuseVocab("tokenizer.ggml.scores", std::to_string(vocab.scores.size()) + " scores for " + std::to_string(n) + " tokens");
    if (!vocab.types.empty() && vocab.types.size() != n)
        refuseVocab("tokenizer.ggml.token_type", std::to_string(vocab.types.size()) + " types for " + std::to_string(n) + " tokens");
    for (std::size_t i = 0; i < n; ++i) {
        const std::string key = "tokenizer.ggml.tokens[" + std::to_string(i) + "]";
        if (vocab.tokens[i].size() > kMaxVocabTokenBytes)
            refuseVocab(key, std::to_string(vocab.tokens[i].size()) + " bytes, above the cap of " + std::to_string(kMaxVocabTokenBytes));
        if (const auto bad = firstInvalidUtf8(vocab.tokens[i]))
            refuseVocab(key, "is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
        if (vocab.tokens[i].find('\0') != std::string::npos)
            refuseVocab(key, "holds a NUL byte");
        if (!vocab.scores.empty() && !std::isfinite(vocab.scores[i]))
            refuseVocab("tokenizer.ggml.scores[" + std::to_string(i) + "]", "is not finite");
        if (!vocab.types.empty() && (vocab.types[i] < 0 || vocab.types[i] > 6))
            refuseVocab("tokenizer.ggml.token_type[" + std::to_string(i) + "]",
                   std::to_string(vocab.types[i]) + " is not a token type (0 undefined .. 6 byte)");
    }
    const std::pair<const char*, const std::optional<std::int32_t>*> ids[] = {
        {"tokenizer.ggml.bos_token_id", &vocab.bos}, {"tokenizer.ggml.eos_token_id", &vocab.eos},
        {"tokenizer.ggml.unknown_token_id", &vocab.unk}, {"tokenizer.ggml.padding_token_id", &vocab.pad}};
    for (const auto& [key, id] : ids)
        if (*id && (**id < 0 || static_cast<std::size_t>(**id) >= n))
            refuseVocab(key, std::to_string(**id) + " is not a token id (0 to " + std::to_string(n - 1) + ")");
}

/// llama.cpp's type of token i: the array's, 1 (normal) when there is none; 0 (undefined) counts as normal.
PieceType typeOf(const TokenizerVocab& vocab, std::size_t i)
{
    const std::int32_t t = vocab.types.empty() ? 1 : vocab.types[i];
    return t == 0 ? PieceType::Normal : static_cast<PieceType>(t);
}

/// A token's text: llama.cpp names an empty one "[EMPTY_<id>]".
std::string tokenText(const TokenizerVocab& vocab, std::size_t i)
{
    return vocab.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : vocab.tokens[i];
}

Result<std::unique_ptr<Tokenizer>> llamaTokenizer(const TokenizerVocab& vocab)
{
    SentencePieceSpec spec;
    spec.label = vocab.label;
    spec.algorithm = SentencePieceSpec::Algorithm::Bpe;
    spec.llamaCpp = true;
    spec.addDummyPrefix = vocab.addSpacePrefix.value_or(true);
    spec.removeExtraWhitespaces = false;
    const std::size_t n = vocab.tokens.size();
    spec.pieces.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        spec.pieces.push_back(tokenText(vocab, i));
        spec.scores.push_back(vocab.scores.empty() ? 0.0f : vocab.scores[i]);
        spec.types.push_back(typeOf(vocab, i));
        spec.byteFallback = spec.byteFallback || spec.types.back() == PieceType::Byte;
    }
    // The unknown token: the one typed so, else the id the file names (llama.cpp's default 0).
    if (std::none_of(spec.types.begin(), spec.types.end(), [](PieceType t) { return t == PieceType::Unknown; })) {
        const auto unk = static_cast<std::size_t>(vocab.unk.value_or(0));
        if (spec.types[unk] != PieceType::Normal)
            return Error{vocab.label, "tokenizer.ggml.token_type: no unknown token (type 2), and token " + std::to_string(unk)
                                          + " (the unknown id) is not a normal token to take as one"};
        spec.types[unk] = PieceType::Unknown;
    }
    auto tokenizer = makeSentencePieceTokenizer(std::move(spec));
    if (!tokenizer)
        return tokenizer.error();
    std::optional<std::int32_t> bos;
    if (vocab.addBos.value_or(true)) {
        bos = vocab.bos.value_or(1);
        if (static_cast<std::size_t>(*bos) >= n)
            return Error{vocab.label, "tokenizer.ggml.bos_token_id: absent, and llama.cpp's default 1 is not a token"};
    }
    (*tokenizer)->setBos(bos);
    return std::unique_ptr<Tokenizer>(std::move(*tokenizer));
}

/// The pre-tokenizer steps `pre` names, ending with ByteLevel.
Result<std::vector<bpe::PreStep>> preSteps(const PreFamily& family, const std::string& pre)
{
    std::vector<bpe::PreStep> steps;
    const std::string what = "tokenizer.ggml.pre " + io::quoteName(pre);
    if (family.singleDigits) {
        bpe::PreStep digits;
        digits.kind = bpe::PreStep::Kind::Digits;
        digits.individualDigits = true;
        steps.push_back(digits);
    }
    for (const std::string_view pattern : family.patterns) {
        auto step = bpe::splitStep(pattern, what);
        if (!step)
            return step.error();
        steps.push_back(std::move(*step));
    }
    auto byteLevel = bpe::byteLevelStep(false, family.gpt2Regex, what);
    if (!byteLevel)
        return byteLevel.error();
    steps.push_back(std::move(*byteLevel));
    return steps;
}

Result<std::unique_ptr<Tokenizer>> gpt2Tokenizer(const TokenizerVocab& vocab, std::int32_t embeddingRows,
                                                 const TokenizerOptions& options)
{
    const auto& families = preFamilies();
    const auto family = std::find_if(families.begin(), families.end(), [&](const PreFamily& f) {
        return std::find(f.names.begin(), f.names.end(), vocab.pre) != f.names.end();
    });
    if (family == families.end()) {
        std::string known;
        for (const std::string& name : knownPreTokenizers())
            known += (known.empty() ? "" : ", ") + name;
        return Error{vocab.label, "tokenizer.ggml.pre: " + io::quoteName(vocab.pre) + " is not a pre-tokenizer KVLens knows ("
                                      + known + ")"};
    }
    bpe::Build build;
    build.label = vocab.label;
    build.options = options;
    build.idLimit = embeddingRows;
    build.vocabKey = "tokenizer.ggml.tokens";
    build.mergesKey = "tokenizer.ggml.merges";
    build.addedKey = "tokenizer.ggml.tokens (control and user-defined)";
    build.bosKey = "tokenizer.ggml.bos_token_id";
    build.ignoreMerges = family->llama3;
    auto steps = preSteps(*family, vocab.pre);
    if (!steps)
        return steps.error();
    build.steps = std::move(*steps);
    for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
        const PieceType type = typeOf(vocab, i);
        const auto id = static_cast<std::int32_t>(i);
        if (type == PieceType::Control || type == PieceType::Unknown || type == PieceType::UserDefined) {
            bpe::AddedToken token;
            token.content = tokenText(vocab, i);
            token.id = id;
            token.special = type != PieceType::UserDefined;
            token.normalized = false;
            build.added.push_back(std::move(token));
        } else {
            build.vocab.emplace_back(tokenText(vocab, i), id);
        }
    }
    build.merges.reserve(vocab.merges.size());
    for (std::size_t i = 0; i < vocab.merges.size(); ++i) {
        const std::string& merge = vocab.merges[i];
        const auto space = merge.find(' ', 1); // llama.cpp splits at the first space after the first byte
        if (space == std::string::npos || space + 1 >= merge.size())
            return Error{vocab.label, "tokenizer.ggml.merges[" + std::to_string(i) + "]: " + io::quoteName(merge)
                                          + " is not two tokens separated by a space"};
        build.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
    }
    if (vocab.addBos.value_or(family->llama3) && vocab.bos)
        build.bos = vocab.bos;
    auto tokenizer = bpe::buildTokenizer(std::move(build));
    if (!tokenizer)
        return tokenizer.error();
    return std::unique_ptr<Tokenizer>(std::move(*tokenizer));
}

} // namespace

std::vector<std::string> knownPreTokenizers()
{
    std::vector<std::string> names;
    for (const PreFamily& family : preFamilies())
        for (const std::string_view name : family.names)
            if (!name.empty())
                names.emplace_back(name);
    return names;
}

Result<std::unique_ptr<Tokenizer>> tokenizerFromVocab(const TokenizerVocab& vocab, std::int32_t embeddingRows,
                                                      const TokenizerOptions& options)
{
    if (vocab.model != "gpt2" && vocab.model != "llama")
        return Error{vocab.label, "tokenizer.ggml.model: " + io::quoteName(vocab.model)
                                      + " is not supported (\"gpt2\": byte-level BPE, \"llama\": SentencePiece)"};
    if (embeddingRows <= 0)
        return Error{vocab.label, "the embedding has " + std::to_string(embeddingRows) + " rows"};
    try {
        checkArrays(vocab, embeddingRows);
    } catch (const VocabRefusal& r) {
        return Error{vocab.label, r.key + ": " + r.message};
    }
    if (vocab.model == "llama")
        return llamaTokenizer(vocab);
    if (vocab.merges.size() > static_cast<std::size_t>(kMaxVocabSize))
        return Error{vocab.label, "tokenizer.ggml.merges: " + std::to_string(vocab.merges.size()) + " merges, above the cap of "
                                      + std::to_string(kMaxVocabSize)};
    return gpt2Tokenizer(vocab, embeddingRows, options);
}

} // namespace kvlens::lm
