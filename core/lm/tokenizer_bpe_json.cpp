// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level BPE's description read from tokenizer.json, phase by phase, and the checks and tables every byte-level BPE tokenizer is built with.
#include "core/lm/tokenizer_bpe.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_bpe_impl.h"
#include "core/lm/tokenizer_unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>

namespace kvlens::lm {

using nlohmann::json;
namespace {

/// Thrown inside the reader only; bpeFromJson turns it into an Error.
struct Refusal {
    std::string key;
    std::string message;
};

[[noreturn]] void refuse(const std::string& key, const std::string& message)
{
    throw Refusal{key, message};
}

bool isNull(const json& object, const char* key)
{
    const auto it = object.find(key);
    return it == object.end() || it->is_null();
}

bool readBool(const json& object, const char* key, const std::string& path, bool fallback)
{
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
        return fallback;
    if (!it->is_boolean())
        refuse(path + "." + key, "expected true or false, found " + io::describeJson(*it));
    return it->get<bool>();
}

const std::string& readString(const json& object, const char* key, const std::string& path)
{
    const auto it = object.find(key);
    if (it == object.end())
        refuse(path + "." + key, "missing");
    if (!it->is_string())
        refuse(path + "." + key, "expected a string, found " + io::describeJson(*it));
    return it->get_ref<const std::string&>();
}

const json& requireObject(const json& value, const std::string& path)
{
    if (!value.is_object())
        refuse(path, "expected an object, found " + io::describeJson(value));
    return value;
}

/// A token id: an integer in [0, limit) (the embedding's rows, at most kMaxVocabSize), checked
/// before anything is sized by it. `path` (a callable giving the key) is only built for a refusal:
/// the vocabulary loop calls this once per token.
template <class Path>
std::int32_t readIdAt(const json& value, std::int32_t limit, const Path& path)
{
    if (!value.is_number_integer())
        refuse(path(), "expected an integer token id, found " + io::describeJson(value));
    const bool inRange = value.is_number_unsigned() ? value.get<std::uint64_t>() < static_cast<std::uint64_t>(limit)
                                                    : value.get<std::int64_t>() >= 0 && value.get<std::int64_t>() < limit;
    if (!inRange)
        refuse(path(), "token id " + value.dump() + " is outside [0, " + std::to_string(limit) + ")"
                           + (limit < kMaxVocabSize ? ": the model's embedding has " + std::to_string(limit) + " rows" : ""));
    return static_cast<std::int32_t>(value.get<std::int64_t>());
}

std::int32_t readId(const json& value, std::int32_t limit, const std::string& path)
{
    return readIdAt(value, limit, [&] { return path; });
}

std::string hexByte(unsigned b)
{
    static constexpr char kHex[] = "0123456789ABCDEF";
    return std::string("0x") + kHex[b >> 4] + kHex[b & 15];
}

std::string codePointName(char32_t c)
{
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string digits;
    for (int shift = c > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4)
        digits += kHex[(c >> shift) & 15];
    return "U+" + digits;
}

void parseNormalizer(const json& value, const std::string& path, bool& nfc)
{
    if (value.is_null())
        return;
    requireObject(value, path);
    const std::string& type = readString(value, "type", path);
    if (type == "NFC") {
        nfc = true;
    } else if (type == "Sequence") {
        const auto it = value.find("normalizers");
        if (it == value.end() || !it->is_array())
            refuse(path + ".normalizers", "expected an array");
        for (std::size_t i = 0; i < it->size(); ++i)
            parseNormalizer((*it)[i], path + ".normalizers[" + std::to_string(i) + "]", nfc);
    } else {
        refuse(path + ".type", io::quoteName(type) + " is not supported (null, NFC, or a Sequence of NFC)");
    }
}

bpe::Behavior parseBehavior(const json& object, const std::string& path)
{
    const std::string& name = readString(object, "behavior", path);
    if (name == "Removed")
        return bpe::Behavior::Removed;
    if (name == "Isolated")
        return bpe::Behavior::Isolated;
    if (name == "MergedWithPrevious")
        return bpe::Behavior::MergedWithPrevious;
    if (name == "MergedWithNext")
        return bpe::Behavior::MergedWithNext;
    if (name == "Contiguous")
        return bpe::Behavior::Contiguous;
    refuse(path + ".behavior", io::quoteName(name)
                                   + " is not a split behavior (Removed, Isolated, MergedWithPrevious, "
                                     "MergedWithNext, Contiguous)");
}

std::shared_ptr<const SplitRegex> compileOrRefuse(std::string_view pattern, bool literal, const std::string& path)
{
    auto regex = SplitRegex::compile(pattern, literal, path);
    if (!regex)
        refuse(regex.error().field, regex.error().message);
    return *regex;
}

void parsePreTokenizer(const json& value, const std::string& path, std::vector<bpe::PreStep>& steps)
{
    if (value.is_null())
        refuse(path, "null is not supported: byte-level BPE needs a ByteLevel pre-tokenizer");
    requireObject(value, path);
    const std::string& type = readString(value, "type", path);
    if (type == "Sequence") {
        const auto it = value.find("pretokenizers");
        if (it == value.end() || !it->is_array())
            refuse(path + ".pretokenizers", "expected an array");
        for (std::size_t i = 0; i < it->size(); ++i)
            parsePreTokenizer((*it)[i], path + ".pretokenizers[" + std::to_string(i) + "]", steps);
        return;
    }
    bpe::PreStep step;
    if (type == "Split") {
        step.kind = bpe::PreStep::Kind::Split;
        const auto it = value.find("pattern");
        if (it == value.end() || !it->is_object() || it->size() != 1)
            refuse(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
        const bool literal = it->contains("String");
        if (!literal && !it->contains("Regex"))
            refuse(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}, found the key "
                                          + io::quoteName(it->begin().key()));
        const char* key = literal ? "String" : "Regex";
        const std::string& pattern = readString(*it, key, path + ".pattern");
        step.regex = compileOrRefuse(pattern, literal, path + ".pattern." + key);
        step.behavior = parseBehavior(value, path);
        step.invert = readBool(value, "invert", path, false);
    } else if (type == "Digits") {
        step.kind = bpe::PreStep::Kind::Digits;
        step.individualDigits = readBool(value, "individual_digits", path, false);
    } else if (type == "ByteLevel") {
        step.kind = bpe::PreStep::Kind::ByteLevel;
        // Hugging Face's defaults when a key is absent: add_prefix_space true, use_regex true.
        step.addPrefixSpace = readBool(value, "add_prefix_space", path, true);
        if (readBool(value, "use_regex", path, true))
            step.regex = compileOrRefuse(bpe::kGpt2Pattern, false, path + " (GPT-2's pattern)");
    } else {
        refuse(path + ".type", io::quoteName(type)
                                   + " is not supported (ByteLevel, Split, Digits, and Sequences of them)");
    }
    steps.push_back(std::move(step));
}

void parsePostProcessor(const json& value, const std::string& path, std::int32_t limit, std::optional<std::int32_t>& bos,
                        bool& sawTemplate)
{
    if (value.is_null())
        return;
    requireObject(value, path);
    const std::string& type = readString(value, "type", path);
    if (type == "ByteLevel")
        return;
    if (type == "Sequence") {
        const auto it = value.find("processors");
        if (it == value.end() || !it->is_array())
            refuse(path + ".processors", "expected an array");
        for (std::size_t i = 0; i < it->size(); ++i)
            parsePostProcessor((*it)[i], path + ".processors[" + std::to_string(i) + "]", limit, bos, sawTemplate);
        return;
    }
    if (type != "TemplateProcessing")
        refuse(path + ".type", io::quoteName(type)
                                   + " is not supported (null, ByteLevel, TemplateProcessing, or a Sequence of them)");
    if (sawTemplate)
        refuse(path, "a second TemplateProcessing is not supported");
    sawTemplate = true;
    const auto single = value.find("single");
    if (single == value.end() || !single->is_array())
        refuse(path + ".single", "expected an array of template pieces");
    const std::string shape = "only [$A] and [special token, $A] are supported: a template that adds other tokens "
                              "would change what the runner scores";
    const auto pieceKind = [&](const json& piece, std::size_t i, std::string& id) {
        const std::string where = path + ".single[" + std::to_string(i) + "]";
        if (!piece.is_object() || piece.size() != 1)
            refuse(where, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
        const auto first = piece.begin(); // items() would hand out a proxy that dies with its temporary
        const std::string& kind = first.key();
        const json& body = first.value();
        if (kind != "SpecialToken" && kind != "Sequence")
            refuse(where, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}, found " + io::quoteName(kind));
        requireObject(body, where + "." + kind);
        id = readString(body, "id", where + "." + kind);
        return kind;
    };
    std::string id;
    if (single->size() == 1) {
        if (pieceKind((*single)[0], 0, id) != "Sequence" || id != "A")
            refuse(path + ".single", shape);
        return;
    }
    if (single->size() != 2)
        refuse(path + ".single", shape);
    std::string second;
    if (pieceKind((*single)[0], 0, id) != "SpecialToken" || pieceKind((*single)[1], 1, second) != "Sequence"
        || second != "A")
        refuse(path + ".single", shape);
    const auto specials = value.find("special_tokens");
    if (specials == value.end() || !specials->is_object() || !specials->contains(id))
        refuse(path + ".special_tokens", "lacks " + io::quoteName(id) + ", which .single names");
    const json& entry = (*specials)[id];
    requireObject(entry, path + ".special_tokens." + id);
    const auto ids = entry.find("ids");
    if (ids == entry.end() || !ids->is_array() || ids->size() != 1)
        refuse(path + ".special_tokens." + id + ".ids", "expected exactly one id");
    bos = readId((*ids)[0], limit, path + ".special_tokens." + id + ".ids[0]");
}

/// model: the BPE options, the vocabulary (ids below the build's limit) and the merges.
void readModel(const json& root, bpe::Build& build)
{
    const auto modelIt = root.find("model");
    if (modelIt == root.end())
        refuse("model", "missing");
    const json& model = requireObject(*modelIt, "model");
    const std::string& type = readString(model, "type", "model");
    if (type != "BPE")
        refuse("model.type", io::quoteName(type) + " is not supported (BPE only)");
    if (const auto it = model.find("dropout");
        it != model.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0.0))
        refuse("model.dropout", "must be null or 0 (dropout randomises encoding), found " + io::describeJson(*it));
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const auto it = model.find(key);
        if (it != model.end() && !it->is_null() && !(it->is_string() && it->get_ref<const std::string&>().empty()))
            refuse(std::string("model.") + key, "must be null or \"\" for byte-level BPE, found " + io::describeJson(*it));
    }
    if (readBool(model, "byte_fallback", "model", false))
        refuse("model.byte_fallback", "true is not supported (a SentencePiece-style vocabulary: use tokenizer.model)");
    build.ignoreMerges = readBool(model, "ignore_merges", "model", false);

    const auto vocabIt = model.find("vocab");
    if (vocabIt == model.end() || !vocabIt->is_object())
        refuse("model.vocab", "expected an object of token -> id");
    if (vocabIt->empty())
        refuse("model.vocab", "is empty");
    build.vocab.reserve(vocabIt->size());
    for (auto entry = vocabIt->cbegin(); entry != vocabIt->cend(); ++entry) {
        const std::string& token = entry.key();
        build.vocab.emplace_back(token, readIdAt(entry.value(), build.idLimit,
                                                 [&] { return "model.vocab[" + io::quoteName(token) + "]"; }));
    }

    const auto mergesIt = model.find("merges");
    if (mergesIt == model.end() || !mergesIt->is_array())
        refuse("model.merges", "expected an array of \"a b\" strings or [a, b] pairs");
    build.merges.reserve(mergesIt->size());
    for (std::size_t rank = 0; rank < mergesIt->size(); ++rank) {
        const json& merge = (*mergesIt)[rank];
        const std::string where = "model.merges[" + std::to_string(rank) + "]";
        if (merge.is_string()) {
            const std::string& text = merge.get_ref<const std::string&>();
            const auto space = text.find(' ');
            if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
                refuse(where, io::quoteName(text) + " is not two tokens separated by one space");
            build.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
        } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
            build.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
        } else {
            refuse(where, "expected \"a b\" or [\"a\", \"b\"], found " + io::describeJson(merge));
        }
    }
}

/// added_tokens: at most kMaxAddedTokens, each with its flags (ids below the build's limit).
void readAddedTokens(const json& root, bpe::Build& build)
{
    const auto addedIt = root.find("added_tokens");
    if (addedIt == root.end() || addedIt->is_null())
        return;
    if (!addedIt->is_array())
        refuse("added_tokens", "expected an array");
    if (addedIt->size() > kMaxAddedTokens)
        refuse("added_tokens", std::to_string(addedIt->size()) + " tokens, above the cap of " + std::to_string(kMaxAddedTokens));
    for (std::size_t i = 0; i < addedIt->size(); ++i) {
        const std::string where = "added_tokens[" + std::to_string(i) + "]";
        const json& entry = requireObject((*addedIt)[i], where);
        bpe::AddedToken token;
        const auto idIt = entry.find("id");
        if (idIt == entry.end())
            refuse(where + ".id", "missing");
        token.id = readId(*idIt, build.idLimit, where + ".id");
        token.content = readString(entry, "content", where);
        token.special = readBool(entry, "special", where, false);
        token.singleWord = readBool(entry, "single_word", where, false);
        token.lstrip = readBool(entry, "lstrip", where, false);
        token.rstrip = readBool(entry, "rstrip", where, false);
        token.normalized = readBool(entry, "normalized", where, true);
        build.added.push_back(std::move(token));
    }
}

/// pre_tokenizer: Split and Digits steps ending with exactly one ByteLevel.
void readPreTokenizer(const json& root, bpe::Build& build)
{
    const auto preIt = root.find("pre_tokenizer");
    if (preIt == root.end())
        refuse("pre_tokenizer", "missing: byte-level BPE needs a ByteLevel pre-tokenizer");
    parsePreTokenizer(*preIt, "pre_tokenizer", build.steps);
    std::size_t byteLevelSteps = 0;
    for (const bpe::PreStep& step : build.steps)
        byteLevelSteps += step.kind == bpe::PreStep::Kind::ByteLevel ? 1 : 0;
    if (byteLevelSteps != 1 || build.steps.back().kind != bpe::PreStep::Kind::ByteLevel)
        refuse("pre_tokenizer", "must end with exactly one ByteLevel step, after every Split and Digits step (found "
                                    + std::to_string(byteLevelSteps) + " ByteLevel step(s)"
                                    + (byteLevelSteps == 1 ? ", not last)" : ")"));
}

// ---------------------------------------------------------------------------------------------
// Building, from either reader

/// The vocabulary's map, with every id checked (below the limit, none twice) and the byte symbols.
std::unordered_map<std::string_view, std::int32_t> indexVocab(const bpe::Build& build, BpeTokenizer::Impl& impl,
                                                              std::int32_t& maxId)
{
    std::unordered_map<std::string_view, std::int32_t> vocab;
    std::unordered_map<std::int32_t, std::size_t> byId;
    vocab.reserve(build.vocab.size());
    byId.reserve(build.vocab.size());
    for (std::size_t i = 0; i < build.vocab.size(); ++i) {
        const auto& [token, id] = build.vocab[i];
        if (id < 0 || id >= build.idLimit)
            refuse(build.vocabKey, io::quoteName(token) + ": id " + std::to_string(id) + " is outside [0, "
                                       + std::to_string(build.idLimit) + ")");
        if (const auto [it, fresh] = byId.emplace(id, i); !fresh)
            refuse(build.vocabKey, "id " + std::to_string(id) + " is given to both "
                                       + io::quoteName(build.vocab[it->second].first) + " and " + io::quoteName(token));
        if (!vocab.emplace(token, id).second)
            refuse(build.vocabKey, io::quoteName(token) + " is listed twice");
        maxId = std::max(maxId, id);
    }
    for (unsigned b = 0; b < 256; ++b) {
        std::string symbol;
        appendUtf8(symbol, byteLevelChar(static_cast<std::uint8_t>(b)));
        const auto it = vocab.find(symbol);
        if (it == vocab.end())
            refuse(build.vocabKey, "lacks the byte symbol " + io::quoteName(symbol) + " ("
                                       + codePointName(byteLevelChar(static_cast<std::uint8_t>(b))) + ", byte " + hexByte(b)
                                       + "): a byte-level vocabulary needs all 256");
        impl.byteIds[b] = it->second;
    }
    return vocab;
}

void indexMerges(const bpe::Build& build, const std::unordered_map<std::string_view, std::int32_t>& vocab,
                 BpeTokenizer::Impl& impl)
{
    impl.merges.reserve(build.merges.size());
    for (std::size_t rank = 0; rank < build.merges.size(); ++rank) {
        const auto& [a, b] = build.merges[rank];
        const std::string where = build.mergesKey + "[" + std::to_string(rank) + "]";
        const std::string shown = io::quoteName(a + " " + b);
        const auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
        if (ia == vocab.end())
            refuse(where, "merge " + shown + ": " + io::quoteName(a) + " is not in " + build.vocabKey);
        if (ib == vocab.end())
            refuse(where, "merge " + shown + ": " + io::quoteName(b) + " is not in " + build.vocabKey);
        if (iab == vocab.end())
            refuse(where, "merge " + shown + ": the merged token " + io::quoteName(a + b) + " is not in " + build.vocabKey);
        // A pair listed twice keeps its later rank, as Hugging Face's map does.
        impl.merges[bpe::pairKey(ia->second, ib->second)] = {static_cast<std::int32_t>(rank), iab->second};
    }
}

void indexAdded(bpe::Build& build, BpeTokenizer::Impl& impl, std::int32_t& maxId,
                std::unordered_map<std::int32_t, std::size_t>& addedIds)
{
    for (std::size_t i = 0; i < build.added.size(); ++i) {
        bpe::AddedToken& token = build.added[i];
        const std::string where = build.addedKey + "[" + std::to_string(i) + "]";
        if (token.content.empty())
            refuse(where + ".content", "is empty");
        if (token.content.size() > kMaxAddedTokenBytes)
            refuse(where + ".content", std::to_string(token.content.size()) + " bytes, above the cap of "
                                           + std::to_string(kMaxAddedTokenBytes));
        if (firstInvalidUtf8(token.content))
            refuse(where + ".content", "is not valid UTF-8");
        if (token.id < 0 || token.id >= build.idLimit)
            refuse(where + ".id", "id " + std::to_string(token.id) + " is outside [0, " + std::to_string(build.idLimit) + ")");
        token.matchContent = token.content;
        if (token.normalized && build.nfc) {
            auto normalized = toNfc(token.content);
            if (!normalized || normalized->empty())
                refuse(where + ".content", "ICU failed to normalize it to NFC");
            token.matchContent = std::move(*normalized);
        }
        if (const auto [it, fresh] = addedIds.emplace(token.id, i); !fresh)
            refuse(where + ".id", "id " + std::to_string(token.id) + " is also " + build.addedKey + "["
                                      + std::to_string(it->second) + "]'s");
        if (!impl.addedByContent.emplace(token.content, token.id).second)
            refuse(where + ".content", io::quoteName(token.content) + " is added twice");
        maxId = std::max(maxId, token.id);
        impl.anyLstrip = impl.anyLstrip || token.lstrip;
        impl.anySingleWord = impl.anySingleWord || token.singleWord;
        const auto index = static_cast<std::int32_t>(impl.added.size());
        (token.normalized ? impl.normalizedTrie : impl.rawTrie).add(token.matchContent, index);
        impl.added.push_back(std::move(token));
    }
}

/// Each token's bytes, sorted by id: a vocabulary entry decodes through the byte-level table (one
/// with a character outside it decodes to its own UTF-8, as Hugging Face's ByteLevel decoder
/// does); an added token is its content.
void indexBytes(const bpe::Build& build, BpeTokenizer::Impl& impl)
{
    impl.idBytes.reserve(build.vocab.size() + impl.added.size());
    impl.bytesToId.reserve(build.vocab.size());
    for (const auto& [token, id] : build.vocab) {
        std::string bytes;
        bool byteLevel = !firstInvalidUtf8(token).has_value();
        for (std::size_t pos = 0; byteLevel && pos < token.size();) {
            const int b = byteLevelByte(decodeUtf8(token, pos));
            byteLevel = b >= 0;
            bytes += static_cast<char>(b);
        }
        if (!byteLevel) {
            impl.idBytes.emplace_back(id, token);
            continue;
        }
        impl.idBytes.emplace_back(id, bytes);
        impl.bytesToId.emplace(std::move(bytes), id);
    }
    for (const bpe::AddedToken& token : impl.added)
        impl.idBytes.emplace_back(token.id, token.content);
    // An added token that is also a vocabulary entry shows its content: stable sort keeps it last.
    std::stable_sort(impl.idBytes.begin(), impl.idBytes.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const auto last = std::unique(impl.idBytes.rbegin(), impl.idBytes.rend(),
                                  [](const auto& a, const auto& b) { return a.first == b.first; });
    impl.idBytes.erase(impl.idBytes.begin(), last.base());
}

} // namespace

namespace bpe {

Result<std::unique_ptr<BpeTokenizer>> buildTokenizer(bpe::Build build)
{
    auto impl = std::make_unique<BpeTokenizer::Impl>();
    impl->label = build.label;
    impl->options = build.options;
    impl->nfc = build.nfc;
    impl->ignoreMerges = build.ignoreMerges;
    try {
        std::int32_t maxId = -1;
        const auto vocab = indexVocab(build, *impl, maxId);
        indexMerges(build, vocab, *impl);
        std::unordered_map<std::int32_t, std::size_t> addedIds;
        indexAdded(build, *impl, maxId, addedIds);
        indexBytes(build, *impl);
        impl->steps = std::move(build.steps);
        impl->vocabSize = maxId + 1;
        impl->bos = build.bos;
        if (impl->bos) {
            const auto it = std::lower_bound(impl->idBytes.begin(), impl->idBytes.end(), *impl->bos,
                                             [](const auto& entry, std::int32_t key) { return entry.first < key; });
            if (it == impl->idBytes.end() || it->first != *impl->bos)
                refuse(build.bosKey, "its BOS id " + std::to_string(*impl->bos) + " is no token of this tokenizer");
        }
    } catch (const Refusal& r) {
        return Error{build.label, r.key + ": " + r.message};
    } catch (const std::exception& e) {
        return Error{build.label, std::string("unreadable tokenizer: ") + e.what()};
    }
    return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(impl)));
}

Result<bpe::PreStep> byteLevelStep(bool addPrefixSpace, bool useRegex, const std::string& what)
{
    bpe::PreStep step;
    step.kind = bpe::PreStep::Kind::ByteLevel;
    step.addPrefixSpace = addPrefixSpace;
    if (useRegex) {
        auto regex = SplitRegex::compile(bpe::kGpt2Pattern, false, what + " (GPT-2's pattern)");
        if (!regex)
            return regex.error();
        step.regex = *regex;
    }
    return step;
}

Result<bpe::PreStep> splitStep(std::string_view pattern, const std::string& what)
{
    auto regex = SplitRegex::compile(pattern, false, what);
    if (!regex)
        return regex.error();
    bpe::PreStep step;
    step.kind = bpe::PreStep::Kind::Split;
    step.regex = *regex;
    step.behavior = bpe::Behavior::Isolated;
    return step;
}

} // namespace bpe

std::uint64_t jsonValueCount(std::string_view text)
{
    std::uint64_t values = 0;
    bool inString = false, escaped = false;
    for (const char c : text) {
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"')
            inString = true;
        else if (c == ',' || c == ':' || c == '[' || c == '{')
            ++values;
    }
    return values;
}

Result<json> parseTokenizerJsonText(std::string_view text, const std::string& label)
{
    if (text.size() > kMaxTokenizerJsonBytes)
        return Error{label, "is " + io::byteSizeText(text.size()) + ", above the cap of "
                                + io::byteSizeText(kMaxTokenizerJsonBytes) + " for tokenizer.json"};
    const std::uint64_t values = jsonValueCount(text);
    if (values > kMaxTokenizerJsonValues)
        return Error{label, "holds more than " + std::to_string(kMaxTokenizerJsonValues)
                                + " JSON values, above what a tokenizer.json needs"};
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return Error{label, parsed.error().message};
    return std::move(*parsed);
}

namespace {

bool hasByteLevelStep(const json& step)
{
    if (!step.is_object())
        return false;
    const auto type = step.find("type");
    if (type == step.end() || !type->is_string())
        return false;
    if (*type == "ByteLevel")
        return true;
    const auto list = step.find("pretokenizers");
    if (*type != "Sequence" || list == step.end() || !list->is_array())
        return false;
    // Recursion as deep as the JSON's nesting, which parseJsonText caps.
    return std::any_of(list->begin(), list->end(), [](const json& inner) { return hasByteLevelStep(inner); });
}

} // namespace

bool isByteLevelTokenizerJson(const json& root)
{
    if (!root.is_object())
        return false;
    const auto it = root.find("pre_tokenizer");
    return it != root.end() && hasByteLevelStep(*it);
}

Result<std::unique_ptr<BpeTokenizer>> bpeFromJson(const json& root, const std::string& label,
                                                  const TokenizerOptions& options, std::int32_t idLimit)
{
    bpe::Build build;
    build.label = label;
    build.options = options;
    build.idLimit = std::min(idLimit, kMaxVocabSize);
    try {
        requireObject(root, "the top level");
        readModel(root, build);
        if (const auto it = root.find("normalizer"); it != root.end())
            parseNormalizer(*it, "normalizer", build.nfc);
        readAddedTokens(root, build);
        readPreTokenizer(root, build);
        if (!isNull(root, "decoder")) {
            const json& decoder = requireObject(root["decoder"], "decoder");
            const std::string& decoderType = readString(decoder, "type", "decoder");
            if (decoderType != "ByteLevel")
                refuse("decoder.type", io::quoteName(decoderType) + " is not supported (null or ByteLevel)");
        }
        bool sawTemplate = false;
        if (const auto it = root.find("post_processor"); it != root.end())
            parsePostProcessor(*it, "post_processor", build.idLimit, build.bos, sawTemplate);
    } catch (const Refusal& r) {
        return Error{label, r.key + ": " + r.message};
    } catch (const std::exception& e) {
        return Error{label, std::string("unreadable tokenizer.json: ") + e.what()};
    }
    return buildTokenizer(std::move(build));
}

Result<std::unique_ptr<BpeTokenizer>> parseTokenizerJson(std::string_view json, const std::string& label,
                                                         const TokenizerOptions& options, std::int32_t idLimit)
{
    auto root = parseTokenizerJsonText(json, label);
    if (!root)
        return root.error();
    return bpeFromJson(*root, label, options, idLimit);
}

Result<std::unique_ptr<BpeTokenizer>> loadTokenizerJson(const std::string& path, const TokenizerOptions& options,
                                                        std::int32_t idLimit)
{
    auto text = io::readRegularFile(path, kMaxTokenizerJsonBytes);
    if (!text)
        return text.error();
    return parseTokenizerJson(*text, path, options, idLimit);
}

} // namespace kvlens::lm
