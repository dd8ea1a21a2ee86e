// SPDX-License-Identifier: GPL-3.0-or-later
// Tokenizers from GGUF-style vocabularies: the same ids as the folder's tokenizer on the same vocabulary, llama.cpp's rules where they differ, BOS, streaming and refusals.
#include "core/lm/tokenizer_vocab.h"

#include "core/lm/tokenizer_bpe.h"
#include "core/lm/tokenizer_sentencepiece.h"
#include "core/lm/tokenizer_unicode.h"

#include "common/sentencepiece_proto.h"
#include "common/tokenizer_texts.h"

#include <QTest>

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace kvlens;
using namespace kvlens::lm;
using nlohmann::json;

namespace {

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::string fixturePath(const std::string& name)
{
    return std::string(KVLENS_TEST_DATA_DIR) + "/tokenizers/" + name;
}

json fixture(const std::string& name)
{
    return json::parse(readFile(fixturePath(name)));
}

/// What llama.cpp's convert_hf_to_gguf writes for a tokenizer.json: the tokens by id (a gap filled
/// with "[PAD<id>]" of type unused), the merges as "a b", special added tokens as control (3),
/// the others as user-defined (4); BOS from the post_processor's template.
TokenizerVocab vocabFromJson(const json& root, const std::string& pre)
{
    std::map<int, std::pair<std::string, int>> byId;
    for (const auto& [token, id] : root["model"]["vocab"].items())
        byId[id.get<int>()] = {token, 1};
    for (const json& added : root["added_tokens"])
        byId[added["id"].get<int>()] = {added["content"].get<std::string>(), added["special"].get<bool>() ? 3 : 4};
    TokenizerVocab vocab;
    vocab.label = "test.gguf";
    vocab.model = "gpt2";
    vocab.pre = pre;
    for (int id = 0; id <= byId.rbegin()->first; ++id) {
        const auto it = byId.find(id);
        vocab.tokens.push_back(it != byId.end() ? it->second.first : "[PAD" + std::to_string(id) + "]");
        vocab.types.push_back(it != byId.end() ? it->second.second : 5);
    }
    for (const json& merge : root["model"]["merges"])
        vocab.merges.push_back(merge.is_string() ? merge.get<std::string>()
                                                 : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
    const json& post = root["post_processor"];
    if (post.is_object() && post.value("type", "") == "Sequence")
        for (const json& p : post["processors"])
            if (p.value("type", "") == "TemplateProcessing")
                vocab.bos = p["special_tokens"].begin().value()["ids"][0].get<int>();
    return vocab;
}

/// A "llama" vocabulary from a SentencePiece model, read through the library (independently of
/// KVLens's own reader): pieces, scores and types.
TokenizerVocab vocabFromSentencePiece(const sentencepiece::SentencePieceProcessor& sp)
{
    TokenizerVocab vocab;
    vocab.label = "test.gguf";
    vocab.model = "llama";
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
        vocab.tokens.push_back(sp.IdToPiece(id));
        vocab.scores.push_back(sp.GetScore(id));
        vocab.types.push_back(sp.IsUnknown(id) ? 2 : sp.IsControl(id) ? 3 : sp.IsByte(id) ? 6 : sp.IsUnused(id) ? 5 : 1);
    }
    vocab.bos = sp.bos_id();
    return vocab;
}

/// The hand-worked "llama" vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, 259 "▁" -10,
/// 260 "a" -10, 261 "b" -10, 262 "▁a" -1, 263 "<ud>" (user-defined).
TokenizerVocab handVocab()
{
    TokenizerVocab vocab;
    vocab.label = "hand.gguf";
    vocab.model = "llama";
    const auto add = [&](const std::string& token, float score, int type) {
        vocab.tokens.push_back(token);
        vocab.scores.push_back(score);
        vocab.types.push_back(type);
    };
    add("<unk>", 0, 2);
    add("<s>", 0, 3);
    add("</s>", 0, 3);
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b)
        add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, 6);
    add("\xE2\x96\x81", -10, 1);
    add("a", -10, 1);
    add("b", -10, 1);
    add("\xE2\x96\x81" "a", -1, 1);
    add("<ud>", 0, 4);
    return vocab;
}

std::vector<std::int32_t> ids(const Tokenizer& tokenizer, const std::string& text)
{
    auto result = tokenizer.encode(text);
    if (!result) {
        qWarning("%s", result.error().text().c_str());
        return {-1};
    }
    return *result;
}

QList<int> toList(const std::vector<std::int32_t>& v)
{
    return QList<int>(v.begin(), v.end());
}

} // namespace

class TestTokenizerVocab : public QObject {
    Q_OBJECT

private slots:
    void gpt2SameAsFolder_data();
    void gpt2SameAsFolder();
    void llamaSameAsSentencePiece_data();
    void llamaSameAsSentencePiece();
    void llamaUserDefinedAsLlamaCpp();
    void bosRules();
    void streaming();
    void knownPreTokenizers();
    void refusals();
};

void TestTokenizerVocab::gpt2SameAsFolder_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("pre");
    QTest::addColumn<bool>("special");
    const std::vector<std::pair<const char*, const char*>> fixtures = {
        {"gpt2_tiny.json", "gpt-2"}, {"gpt2_subset.json", "gpt-2"}, {"llama3_tiny.json", "llama-bpe"},
        {"qwen2_tiny.json", "qwen2"}, {"smollm_tiny.json", "smollm"}};
    for (const auto& [file, pre] : fixtures)
        for (const bool special : {true, false})
            QTest::newRow((std::string(file) + (special ? " special" : " plain")).c_str()) << file << pre << special;
}

void TestTokenizerVocab::gpt2SameAsFolder()
{
    // The tokenizer.json fixtures and their GGUF-style vocabularies give the same ids on the same
    // texts. Two things GGUF cannot say are left out of the texts: Qwen2's NFC normalizer
    // (llama.cpp applies none: the texts are NFC already) and <mask>'s lstrip.
    QFETCH(QString, file);
    QFETCH(QString, pre);
    QFETCH(bool, special);
    const json root = fixture(file.toStdString());
    TokenizerOptions options;
    options.parseSpecialTokens = special;
    const auto folder = bpeFromJson(root, "folder.json", options);
    QVERIFY(folder);
    const TokenizerVocab vocab = vocabFromJson(root, pre.toStdString());
    const auto gguf = tokenizerFromVocab(vocab, static_cast<std::int32_t>(vocab.tokens.size()), options);
    QVERIFY2(gguf, gguf ? "" : gguf.error().text().c_str());
    QCOMPARE((*gguf)->kind(), std::string("bpe"));
    QCOMPARE((*gguf)->bos(), (*folder)->bos());
    QCOMPARE((*gguf)->vocabSize(), (*folder)->vocabSize());
    for (std::int32_t id = 0; id < (*folder)->vocabSize(); ++id)
        if (!(*folder)->tokenBytes(id).empty())
            QCOMPARE((*gguf)->tokenBytes(id), (*folder)->tokenBytes(id));
    auto texts = test::stressTexts(81, 500, 16, false,
                                   {"<|endoftext|>", "<|begin_of_text|>", "<|x|>", "<|x|>y", "café", "Hello world", "xyz"});
    int compared = 0;
    for (std::string text : texts) {
        text = *toNfc(text);
        const auto expected = ids(**folder, text);
        const auto got = ids(**gguf, text);
        if (got != expected) {
            qWarning("text %s", QByteArray::fromStdString(text).toPercentEncoding().constData());
            QCOMPARE(toList(got), toList(expected));
        }
        ++compared;
    }
    QCOMPARE(compared, 500);
}

void TestTokenizerVocab::llamaSameAsSentencePiece_data()
{
    QTest::addColumn<std::string>("model");
    QTest::newRow("llama2_bpe_tiny.model") << readFile(fixturePath("llama2_bpe_tiny.model"));
    QTest::newRow("hand-built bpe byte fallback") << test::bpeByteFallbackModel();
}

void TestTokenizerVocab::llamaSameAsSentencePiece()
{
    // A Llama 2-style tokenizer.model (BPE, byte fallback, identity normalizer, no white-space
    // collapsing) and its GGUF "llama" vocabulary give libsentencepiece's ids, and KVLens's
    // folder tokenizer's, on valid UTF-8 (llama.cpp keeps invalid bytes as bytes where the library
    // writes U+FFFD).
    QFETCH(std::string, model);
    sentencepiece::SentencePieceProcessor library;
    QVERIFY(library.LoadFromSerializedProto(model).ok());
    const auto folder = parseSentencePieceModel(model, "tokenizer.model");
    QVERIFY(folder);
    const TokenizerVocab vocab = vocabFromSentencePiece(library);
    const auto gguf = tokenizerFromVocab(vocab, library.GetPieceSize());
    QVERIFY2(gguf, gguf ? "" : gguf.error().text().c_str());
    QCOMPARE((*gguf)->bos(), (*folder)->bos());
    for (const std::string& text : test::stressTexts(91, 500, 16, false)) {
        std::vector<int> expected;
        QVERIFY(library.Encode(text, &expected).ok());
        QCOMPARE(toList(ids(**gguf, text)), QList<int>(expected.begin(), expected.end()));
        QCOMPARE(toList(ids(**gguf, text)), toList(ids(**folder, text)));
    }
}

void TestTokenizerVocab::llamaUserDefinedAsLlamaCpp()
{
    // llama.cpp cuts user-defined tokens out of the text first and gives every fragment its own
    // space prefix; control tokens are never matched.
    const auto gguf = tokenizerFromVocab(handVocab(), 264);
    QVERIFY2(gguf, gguf ? "" : gguf.error().text().c_str());
    // "a" -> "▁a" merges (score -1) -> 262; <ud> 263; "b" -> "▁b" is no token: ▁ 259, b 261.
    QCOMPARE(toList(ids(**gguf, "a<ud>b")), (QList<int>{262, 263, 259, 261}));
    QCOMPARE(toList(ids(**gguf, "<ud>")), (QList<int>{263}));
    QCOMPARE(toList(ids(**gguf, "<ud><ud>")), (QList<int>{263, 263}));
    // "<s>" stays text: ▁ then the bytes of '<', 's', '>' (ids 3 + byte), then "a".
    QCOMPARE(toList(ids(**gguf, "<s>a")), (QList<int>{259, 3 + '<', 3 + 's', 3 + '>', 260}));
    // An invalid byte stays a byte (llama.cpp), not U+FFFD.
    QCOMPARE(toList(ids(**gguf, "a\xFF")), (QList<int>{262, 3 + 0xFF}));
    TokenizerVocab noPrefix = handVocab();
    noPrefix.addSpacePrefix = false;
    const auto bare = tokenizerFromVocab(noPrefix, 264);
    QVERIFY(bare);
    QCOMPARE(toList(ids(**bare, "a<ud>b")), (QList<int>{260, 263, 261}));
    // The library's rule for the same pieces (a tokenizer.model): the user-defined piece is frozen
    // inside the text and "b" gets no prefix of its own.
    std::vector<test::Piece> pieces;
    const TokenizerVocab hand = handVocab();
    for (std::size_t i = 0; i < hand.tokens.size(); ++i)
        pieces.push_back({hand.tokens[i], hand.scores[i], static_cast<test::PieceType>(hand.types[i])});
    const auto folder = parseSentencePieceModel(test::sentencePieceModel(pieces, 2, true), "tokenizer.model");
    QVERIFY(folder);
    QCOMPARE(toList(ids(**folder, "a<ud>b")), (QList<int>{262, 263, 261}));
}

void TestTokenizerVocab::bosRules()
{
    TokenizerVocab llama = handVocab();
    QCOMPARE((*tokenizerFromVocab(llama, 264))->bos(), std::optional<std::int32_t>(1)); // llama.cpp's default
    llama.bos = 2;
    QCOMPARE((*tokenizerFromVocab(llama, 264))->bos(), std::optional<std::int32_t>(2));
    llama.addBos = false;
    QCOMPARE((*tokenizerFromVocab(llama, 264))->bos(), std::optional<std::int32_t>());
    TokenizerVocab gpt2 = vocabFromJson(fixture("gpt2_tiny.json"), "gpt-2");
    gpt2.bos = 271;
    QCOMPARE((*tokenizerFromVocab(gpt2, 272))->bos(), std::optional<std::int32_t>()); // GPT-2 adds none
    gpt2.addBos = true;
    QCOMPARE((*tokenizerFromVocab(gpt2, 272))->bos(), std::optional<std::int32_t>(271));
    gpt2.pre = "llama-bpe";
    gpt2.addBos.reset();
    QCOMPARE((*tokenizerFromVocab(gpt2, 272))->bos(), std::optional<std::int32_t>(271)); // Llama 3 adds it
}

void TestTokenizerVocab::streaming()
{
    // User-defined tokens cut by block ends, in both families: the same ids as the whole text.
    TokenizerVocab gpt2 = vocabFromJson(fixture("llama3_tiny.json"), "llama-bpe");
    const auto bpe = tokenizerFromVocab(gpt2, 304);
    const auto llama = tokenizerFromVocab(handVocab(), 264);
    QVERIFY(bpe && llama);
    for (const Tokenizer* tokenizer : {bpe->get(), llama->get()})
        for (const std::string& text : test::stressTexts(101, 60, 30, false, {"<ud>", "<|x|>y", "<|begin_of_text|>", "ab"})) {
            const auto whole = tokenizer->encode(text);
            QVERIFY(whole);
            for (const std::size_t block : {std::size_t(1), std::size_t(2), std::size_t(5)}) {
                test::BlockReader reader{text, block};
                const auto streamed = tokenizer->encodeStream(reader.reader(), EncodeControl{});
                QVERIFY(streamed);
                QCOMPARE(toList(*streamed), toList(*whole));
            }
        }
}

void TestTokenizerVocab::knownPreTokenizers()
{
    const auto known = lm::knownPreTokenizers();
    for (const char* name : {"default", "gpt-2", "llama3", "llama-bpe", "qwen2", "smollm"})
        QVERIFY2(std::find(known.begin(), known.end(), name) != known.end(), name);
}

void TestTokenizerVocab::refusals()
{
    struct Case {
        const char* name;
        std::function<void(TokenizerVocab&)> mutate;
        std::int32_t rows;
        const char* expected;
    };
    const auto gpt2 = [] { return vocabFromJson(fixture("gpt2_tiny.json"), "gpt-2"); };
    const std::vector<Case> cases = {
        {"model", [](TokenizerVocab& v) { v.model = "bert"; }, 300, "tokenizer.ggml.model: 'bert' is not supported"},
        {"pre", [](TokenizerVocab& v) { v.pre = "deepseek-coder"; }, 300,
         "tokenizer.ggml.pre: 'deepseek-coder' is not a pre-tokenizer KVLens knows (default, gpt-2"},
        {"no tokens", [](TokenizerVocab& v) { v.tokens.clear(); v.types.clear(); }, 300, "tokenizer.ggml.tokens: is empty"},
        {"more tokens than rows", [](TokenizerVocab&) {}, 271, "272 tokens, more than the model's embedding has rows (271)"},
        {"not UTF-8", [](TokenizerVocab& v) { v.tokens[5] = "a\xC3"; }, 300, "tokenizer.ggml.tokens[5]: is not valid UTF-8"},
        {"NUL", [](TokenizerVocab& v) { v.tokens[6] = std::string("a\0b", 3); }, 300, "tokenizer.ggml.tokens[6]: holds a NUL"},
        {"too long", [](TokenizerVocab& v) { v.tokens[7] = std::string(kMaxVocabTokenBytes + 1, 'x'); }, 300,
         "tokenizer.ggml.tokens[7]: 1025 bytes, above the cap of 1024"},
        {"scores", [](TokenizerVocab& v) { v.scores = {1, 2}; }, 300, "tokenizer.ggml.scores: 2 scores for 272 tokens"},
        {"types", [](TokenizerVocab& v) { v.types.pop_back(); }, 300, "tokenizer.ggml.token_type: 271 types for 272 tokens"},
        {"type 9", [](TokenizerVocab& v) { v.types[3] = 9; }, 300, "tokenizer.ggml.token_type[3]: 9 is not a token type"},
        {"NaN score", [](TokenizerVocab& v) { v.scores.assign(v.tokens.size(), 0); v.scores[4] = NAN; }, 300,
         "tokenizer.ggml.scores[4]: is not finite"},
        {"merge without space", [](TokenizerVocab& v) { v.merges[0] = "bc"; }, 300,
         "tokenizer.ggml.merges[0]: 'bc' is not two tokens separated by a space"},
        {"merge of unknown", [](TokenizerVocab& v) { v.merges[1] = "a zz"; }, 300,
         "tokenizer.ggml.merges[1]: merge 'a zz': 'zz' is not in tokenizer.ggml.tokens"},
        {"bos", [](TokenizerVocab& v) { v.bos = 272; }, 300, "tokenizer.ggml.bos_token_id: 272 is not a token id (0 to 271)"},
        {"twice", [](TokenizerVocab& v) { v.tokens[256] = v.tokens[257]; }, 300, "is listed twice"},
    };
    for (const Case& c : cases) {
        TokenizerVocab vocab = gpt2();
        c.mutate(vocab);
        const auto result = tokenizerFromVocab(vocab, c.rows);
        QVERIFY2(!result, c.name);
        QVERIFY2(result.error().text().rfind("test.gguf: ", 0) == 0, result.error().text().c_str());
        QVERIFY2(result.error().text().find(c.expected) != std::string::npos, result.error().text().c_str());
    }
    // "llama": byte tokens must be all 256; pieces once.
    TokenizerVocab bytes = handVocab();
    bytes.types[3 + 0x41] = 1;
    const auto missing = tokenizerFromVocab(bytes, 264);
    QVERIFY(!missing);
    QVERIFY2(missing.error().text().find("no piece <0x41>") != std::string::npos, missing.error().text().c_str());
    TokenizerVocab twice = handVocab();
    twice.tokens[261] = "a";
    const auto repeated = tokenizerFromVocab(twice, 264);
    QVERIFY(!repeated);
    QVERIFY2(repeated.error().text().find("tokenizer.ggml.tokens[261]: 'a' is already tokenizer.ggml.tokens[260]")
                 != std::string::npos,
             repeated.error().text().c_str());
}

QTEST_APPLESS_MAIN(TestTokenizerVocab)
#include "tst_tokenizer_vocab.moc"
