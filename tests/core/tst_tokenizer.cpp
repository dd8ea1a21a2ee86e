// SPDX-License-Identifier: GPL-3.0-or-later
// The tokenizer loader: which file of a model folder it takes, the BOS rule, the embedding check, and the byte and ids tokenizers.
#include "core/lm/tokenizer.h"

#include "core/eval/model_input.h"
#include "core/lm/tokenizer_bpe.h"
#include "core/lm/tokenizer_sentencepiece.h"

#include "common/sentencepiece_proto.h"
#include "common/tokenizer_texts.h"

#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kvlens;
using namespace kvlens::lm;
using nlohmann::json;

namespace {

std::string fixtureText(const std::string& name)
{
    std::ifstream in(std::string(KVLENS_TEST_DATA_DIR) + "/tokenizers/" + name, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

void writeFile(const QTemporaryDir& dir, const char* name, const std::string& contents)
{
    std::ofstream out(dir.filePath(name).toStdString(), std::ios::binary);
    out << contents;
}

/// A Llama-2-style tokenizer.json (what transformers writes beside tokenizer.model): BPE with byte
/// fallback over Metaspace pieces, which is not byte-level BPE.
std::string llama2StyleJson()
{
    json root = json::parse(fixtureText("gpt2_tiny.json"));
    root["model"]["byte_fallback"] = true;
    root["pre_tokenizer"] = json{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}};
    root["decoder"] = nullptr;
    return root.dump();
}

std::string message(const Result<std::unique_ptr<Tokenizer>>& result)
{
    return result ? std::string("(loaded)") : result.error().text();
}

/// Bytes the heap holds now (glibc: small blocks plus mmapped ones).
std::size_t heapBytes()
{
    const struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

/// gpt2_tiny.json with one more vocabulary entry, "zzz", at id `id`.
std::string gpt2WithId(std::int32_t id)
{
    json root = json::parse(fixtureText("gpt2_tiny.json"));
    root["model"]["vocab"]["zzz"] = id;
    return root.dump();
}

} // namespace

class TestTokenizer : public QObject {
    Q_OBJECT

private slots:
    void byteTokenizer();
    void idsTokenizer();
    void tokenizerConfig();
    void loadsByteLevelBpe();
    void bosRuleFromConfig();
    void loadsSentencePiece();
    void prefersTokenizerModelOverANonByteLevelJson();
    void byteModelWithoutTokenizerFiles();
    void embeddingMustHoldTheIds();
    void idsCheckedBeforeAnythingIsSized();
    void encodeStreamDriver();
    void readModelInputStreams();
    void refusesBadFolders();
};

void TestTokenizer::byteTokenizer()
{
    const auto tokenizer = makeByteTokenizer();
    const std::string text("A\xFF\x00\n", 4); // any bytes, valid UTF-8 or not
    const auto ids = tokenizer->encode(text);
    QVERIFY(ids);
    QCOMPARE(*ids, (std::vector<std::int32_t>{65, 255, 0, 10}));
    QCOMPARE(tokenizer->tokenBytes(255), std::string("\xFF"));
    QCOMPARE(tokenizer->tokenBytes(256), std::string());
    QCOMPARE(tokenizer->vocabSize(), 256);
    QCOMPARE(tokenizer->bos(), std::optional<std::int32_t>());
    QCOMPARE(tokenizer->kind(), std::string("bytes"));
}

void TestTokenizer::idsTokenizer()
{
    const auto tokenizer = makeIdsTokenizer(1000);
    QVERIFY(!tokenizer->encode("text"));
    QVERIFY(tokenizer->encode("text").error().text().find("token ids") != std::string::npos);
    QCOMPARE(tokenizer->tokenBytes(42), std::string("<42>"));
    QCOMPARE(tokenizer->tokenBytes(1000), std::string());
    QCOMPARE(tokenizer->vocabSize(), 1000);
    QCOMPARE(tokenizer->kind(), std::string("ids"));
}

void TestTokenizer::tokenizerConfig()
{
    const auto plain = parseTokenizerConfig(R"({"add_bos_token": true, "bos_token": "<s>"})", "c.json");
    QVERIFY(plain);
    QCOMPARE(plain->addBosToken, std::optional<bool>(true));
    QCOMPARE(plain->bosToken, std::optional<std::string>("<s>"));
    const auto object = parseTokenizerConfig(
        R"({"add_bos_token": false, "bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>"}})", "c.json");
    QVERIFY(object);
    QCOMPARE(object->addBosToken, std::optional<bool>(false));
    QCOMPARE(object->bosToken, std::optional<std::string>("<|begin_of_text|>"));
    const auto nulls = parseTokenizerConfig(R"({"add_bos_token": null, "bos_token": null, "chat_template": "x"})", "c.json");
    QVERIFY(nulls);
    QVERIFY(!nulls->addBosToken && !nulls->bosToken);
    const auto notBool = parseTokenizerConfig(R"({"add_bos_token": "yes"})", "c.json");
    QVERIFY(!notBool);
    QVERIFY2(notBool.error().text().find("c.json: add_bos_token") == 0, notBool.error().text().c_str());
    const auto badToken = parseTokenizerConfig(R"({"bos_token": 5})", "c.json");
    QVERIFY(!badToken);
    QVERIFY2(badToken.error().text().find("c.json: bos_token") == 0, badToken.error().text().c_str());
    QVERIFY(!parseTokenizerConfig("[]", "c.json"));
    std::string many = "[";
    for (std::uint64_t i = 0; i < kMaxTokenizerConfigValues; ++i)
        many += "0,";
    const auto values = parseTokenizerConfig(many + "0]", "c.json");
    QVERIFY(!values);
    QVERIFY2(values.error().text().find("more than 1048576 JSON values") != std::string::npos, values.error().text().c_str());
    QVERIFY(!parseTokenizerConfig("{", "c.json"));
}

void TestTokenizer::loadsByteLevelBpe()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    writeFile(dir, "tokenizer.json", fixtureText("llama3_tiny.json"));
    const auto tokenizer = loadTokenizer(dir.path().toStdString(), 304);
    QVERIFY2(tokenizer, message(tokenizer).c_str());
    QCOMPARE((*tokenizer)->kind(), std::string("bpe"));
    QCOMPARE((*tokenizer)->bos(), std::optional<std::int32_t>(300));
    // " the" is one token (268) in the fixture's merges.
    QCOMPARE(*(*tokenizer)->encode(" the"), std::vector<std::int32_t>{268});
    // A tokenizer.model beside a byte-level tokenizer.json is not used.
    writeFile(dir, "tokenizer.model", test::unigramModel());
    const auto again = loadTokenizer(dir.path().toStdString(), 304);
    QVERIFY2(again, message(again).c_str());
    QCOMPARE((*again)->kind(), std::string("bpe"));
    // A nested Sequence holding the ByteLevel step counts as byte-level too.
    json nested = json::parse(fixtureText("llama3_tiny.json"));
    nested["pre_tokenizer"] = json{{"type", "Sequence"}, {"pretokenizers", json::array({nested["pre_tokenizer"]})}};
    writeFile(dir, "tokenizer.json", nested.dump());
    const auto nestedLoaded = loadTokenizer(dir.path().toStdString(), 304);
    QVERIFY2(nestedLoaded, message(nestedLoaded).c_str());
    QCOMPARE((*nestedLoaded)->kind(), std::string("bpe"));
    QCOMPARE(*(*nestedLoaded)->encode(" the"), std::vector<std::int32_t>{268});
    // Special tokens as text when asked.
    TokenizerOptions asText;
    asText.parseSpecialTokens = false;
    const auto plain = loadTokenizer(dir.path().toStdString(), 304, asText);
    QVERIFY(plain);
    QCOMPARE((*plain)->encode("<|x|>")->size(), std::size_t(5)); // "<|", "x", "|>"
    QCOMPARE((*again)->encode("<|x|>")->size(), std::size_t(1));
}

void TestTokenizer::bosRuleFromConfig()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.path().toStdString();
    // add_bos_token false removes the template's BOS.
    writeFile(dir, "tokenizer.json", fixtureText("llama3_tiny.json"));
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": false, "bos_token": "<|begin_of_text|>"})");
    auto tokenizer = loadTokenizer(path, 304);
    QVERIFY2(tokenizer, message(tokenizer).c_str());
    QCOMPARE((*tokenizer)->bos(), std::optional<std::int32_t>());
    // add_bos_token true with no template BOS: bos_token names it (GPT-2's <|endoftext|>, 271).
    writeFile(dir, "tokenizer.json", fixtureText("gpt2_tiny.json"));
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<|endoftext|>"})");
    tokenizer = loadTokenizer(path, 272);
    QVERIFY2(tokenizer, message(tokenizer).c_str());
    QCOMPARE((*tokenizer)->bos(), std::optional<std::int32_t>(271));
    // Absent or null: the template decides (none for GPT-2).
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": null, "bos_token": "<|endoftext|>"})");
    tokenizer = loadTokenizer(path, 272);
    QVERIFY(tokenizer);
    QCOMPARE((*tokenizer)->bos(), std::optional<std::int32_t>());
    // A bos_token that is no token, and a malformed config, are refused naming the file.
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<nope>"})");
    tokenizer = loadTokenizer(path, 272);
    QVERIFY(!tokenizer);
    QVERIFY2(message(tokenizer).find("tokenizer_config.json: bos_token '<nope>'") != std::string::npos, message(tokenizer).c_str());
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": true})");
    tokenizer = loadTokenizer(path, 272);
    QVERIFY(!tokenizer);
    QVERIFY2(message(tokenizer).find("bos_token names no token") != std::string::npos, message(tokenizer).c_str());
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": 1})");
    tokenizer = loadTokenizer(path, 272);
    QVERIFY(!tokenizer);
    QVERIFY2(message(tokenizer).find("tokenizer_config.json: add_bos_token") != std::string::npos, message(tokenizer).c_str());
}

void TestTokenizer::loadsSentencePiece()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.path().toStdString();
    writeFile(dir, "tokenizer.model", test::unigramModel());
    auto tokenizer = loadTokenizer(path, 32000);
    QVERIFY2(tokenizer, message(tokenizer).c_str());
    QCOMPARE((*tokenizer)->kind(), std::string("sentencepiece"));
    QCOMPARE((*tokenizer)->bos(), std::optional<std::int32_t>(1));
    QCOMPARE(*(*tokenizer)->encode("abc"), (std::vector<std::int32_t>{4, 9}));
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": false})");
    tokenizer = loadTokenizer(path, 32000);
    QVERIFY(tokenizer);
    QCOMPARE((*tokenizer)->bos(), std::optional<std::int32_t>());
    writeFile(dir, "tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<s>"})");
    tokenizer = loadTokenizer(path, 32000);
    QVERIFY(tokenizer);
    QCOMPARE((*tokenizer)->bos(), std::optional<std::int32_t>(1));
}

void TestTokenizer::prefersTokenizerModelOverANonByteLevelJson()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.path().toStdString();
    writeFile(dir, "tokenizer.json", llama2StyleJson());
    // Alone, that tokenizer.json is refused (Metaspace is no byte-level pre-tokenizer)...
    auto tokenizer = loadTokenizer(path, 32000);
    QVERIFY(!tokenizer);
    QVERIFY2(message(tokenizer).find("tokenizer.json: model.byte_fallback") != std::string::npos, message(tokenizer).c_str());
    // ...beside tokenizer.model, the model is used.
    writeFile(dir, "tokenizer.model", test::bpeByteFallbackModel());
    tokenizer = loadTokenizer(path, 32000);
    QVERIFY2(tokenizer, message(tokenizer).c_str());
    QCOMPARE((*tokenizer)->kind(), std::string("sentencepiece"));
    QCOMPARE(*(*tokenizer)->encode("abc"), (std::vector<std::int32_t>{265, 264}));
}

void TestTokenizer::byteModelWithoutTokenizerFiles()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const auto bytes = loadTokenizer(dir.path().toStdString(), 256);
    QVERIFY2(bytes, message(bytes).c_str());
    QCOMPARE((*bytes)->kind(), std::string("bytes"));
    const auto other = loadTokenizer(dir.path().toStdString(), 1000);
    QVERIFY(!other);
    QVERIFY2(message(other).find("neither tokenizer.json nor tokenizer.model") != std::string::npos, message(other).c_str());
    QVERIFY2(message(other).find("1000 rows, not the 256") != std::string::npos, message(other).c_str());
}

void TestTokenizer::embeddingMustHoldTheIds()
{
    // llama3_tiny's ids reach 303 (<|x|>y): 304 rows hold them, 303 do not; more rows are fine.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    writeFile(dir, "tokenizer.json", fixtureText("llama3_tiny.json"));
    QVERIFY(loadTokenizer(dir.path().toStdString(), 304));
    QVERIFY(loadTokenizer(dir.path().toStdString(), 151936));
    const auto small = loadTokenizer(dir.path().toStdString(), 303);
    QVERIFY(!small);
    QVERIFY2(message(small).find("added_tokens[3].id: token id 303 is outside [0, 303): the model's embedding has 303 rows")
                 != std::string::npos,
             message(small).c_str());
    QVERIFY(message(small).find("tokenizer.json") != std::string::npos);
}

void TestTokenizer::idsCheckedBeforeAnythingIsSized()
{
    // The class: a 5 KB tokenizer.json naming id 2^24 - 1 once. Against an embedding of 304 rows it
    // is refused at that key; on its own (KVLens's cap) it loads, its tables sized by the 272
    // entries it holds, not by the id (the old reader allocated 512 MiB here).
    const std::string text = gpt2WithId(kMaxVocabSize - 1);
    QVERIFY(text.size() < 8192);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    writeFile(dir, "tokenizer.json", text);
    const auto refused = loadTokenizer(dir.path().toStdString(), 304);
    QVERIFY(!refused);
    QVERIFY2(message(refused).find("model.vocab['zzz']: token id 16777215 is outside [0, 304)") != std::string::npos,
             message(refused).c_str());
    const std::size_t before = heapBytes();
    auto loaded = parseTokenizerJson(text, "big-id.json");
    QVERIFY2(loaded, loaded ? "" : loaded.error().text().c_str());
    const std::size_t grown = heapBytes() - std::min(before, heapBytes());
    QVERIFY2(grown < (8u << 20), std::to_string(grown).c_str()); // a few hundred KB in truth
    QCOMPARE((*loaded)->vocabSize(), kMaxVocabSize);
    QCOMPARE((*loaded)->tokenBytes(kMaxVocabSize - 1), std::string("zzz"));
    QCOMPARE((*loaded)->tokenBytes(kMaxVocabSize - 2), std::string());
    // The same for tokenizer.model: an embedding of 10 rows takes at most 10 pieces.
    writeFile(dir, "tokenizer.json", "");
    std::filesystem::remove(dir.filePath("tokenizer.json").toStdString());
    writeFile(dir, "tokenizer.model", test::unigramModel());
    const auto pieces = loadTokenizer(dir.path().toStdString(), 10);
    QVERIFY(!pieces);
    QVERIFY2(message(pieces).find("pieces: more than 10 pieces") != std::string::npos, message(pieces).c_str());
}

void TestTokenizer::encodeStreamDriver()
{
    const auto bytes = makeByteTokenizer();
    const std::string text = "hello, streamed world";
    for (const std::size_t block : {std::size_t(1), std::size_t(4), std::size_t(100)}) {
        test::BlockReader reader{text, block};
        EncodeControl control;
        control.maxTokens = 5;
        const auto ids = bytes->encodeStream(reader.reader(), control);
        QVERIFY(ids);
        QCOMPARE(*ids, (std::vector<std::int32_t>{'h', 'e', 'l', 'l', 'o'}));
        QVERIFY(reader.given < 5 + block); // read no further than the block holding the fifth byte
    }
    test::BlockReader all{text, 3};
    QCOMPARE(bytes->encodeStream(all.reader(), EncodeControl{})->size(), text.size());
    // A reader's error and a cancellation come back as they are.
    const TextReader failing = [](char*, std::size_t) -> Result<std::size_t> { return Error{"disk", "gone"}; };
    const auto failed = bytes->encodeStream(failing, EncodeControl{});
    QVERIFY(!failed);
    QCOMPARE(failed.error().text(), std::string("disk: gone"));
    EncodeControl cancel;
    cancel.cancelled = [] { return true; };
    test::BlockReader never{text, 1};
    const auto cancelled = bytes->encodeStream(never.reader(), cancel);
    QVERIFY(!cancelled && cancelled.error().cancelled());
    QCOMPARE(never.given, std::size_t(0));
    // The ids tokenizer refuses text whichever way it comes.
    test::BlockReader ids{text, 4};
    QVERIFY(!makeIdsTokenizer(10)->encodeStream(ids.reader(), EncodeControl{}));
}

void TestTokenizer::readModelInputStreams()
{
    // A 40 MB text: asking for 1000 tokens reads a few blocks of it, and they are the first 1000
    // of the whole text's ids.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    writeFile(dir, "tokenizer.json", fixtureText("gpt2_tiny.json"));
    std::string paragraph;
    for (const std::string& t : test::stressTexts(3, 50, 10, false))
        paragraph += t + "\n";
    std::string text;
    while (text.size() < (40u << 20))
        text += paragraph;
    writeFile(dir, "text.txt", text);
    const std::string model = dir.path().toStdString(), textPath = dir.filePath("text.txt").toStdString();
    const auto start = std::chrono::steady_clock::now();
    const auto first = eval::readModelInput(model, textPath, "", true, 304, 1000);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    QVERIFY2(first, first ? "" : first.error().text().c_str());
    QCOMPARE(first->tokens.size(), std::size_t(1000));
    const auto whole = first->tokenizer->encode(text.substr(0, 1u << 20));
    QVERIFY(whole && whole->size() > 1000);
    QCOMPARE(first->tokens, std::vector<std::int32_t>(whole->begin(), whole->begin() + 1000));
    QVERIFY2(seconds < 5.0, std::to_string(seconds).c_str()); // it did not tokenize 40 MB
    // Cancelled while reading: the cancellation error, not a message about the text.
    std::atomic<int> polls{0};
    const auto cancelled = eval::readModelInput(model, textPath, "", true, 304, 0, [&] { return ++polls > 2; });
    QVERIFY(!cancelled);
    QVERIFY(cancelled.error().cancelled());
    // Above the cap: refused before reading (a sparse file).
    const std::string huge = dir.filePath("huge.txt").toStdString();
    writeFile(dir, "huge.txt", "x");
    std::filesystem::resize_file(huge, eval::kMaxTextBytes + 1);
    const auto capped = eval::readModelInput(model, huge, "", true, 304);
    QVERIFY(!capped);
    QVERIFY2(capped.error().text().find("above the cap of 256 MiB") != std::string::npos, capped.error().text().c_str());
    // A .npy is cut to the tokens asked for.
    std::string npy("\x93NUMPY\x01\x00", 8);
    std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }";
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    npy += static_cast<char>(header.size());
    npy += '\0';
    npy += header;
    for (const std::int32_t id : {5, 6, 7, 8})
        npy.append(reinterpret_cast<const char*>(&id), 4);
    writeFile(dir, "ids.npy", npy);
    const auto ids = eval::readModelInput(model, "", dir.filePath("ids.npy").toStdString(), true, 304, 3);
    QVERIFY2(ids, ids ? "" : ids.error().text().c_str());
    QCOMPARE(ids->tokens, (std::vector<std::int32_t>{5, 6, 7}));
}

void TestTokenizer::refusesBadFolders()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const auto missing = loadTokenizer(dir.filePath("absent").toStdString(), 256);
    QVERIFY(!missing);
    QVERIFY(message(missing).find("is not a model folder") != std::string::npos);
    writeFile(dir, "tokenizer.json", "{\"model\": ");
    const auto broken = loadTokenizer(dir.path().toStdString(), 256);
    QVERIFY(!broken);
    QVERIFY2(message(broken).find(dir.filePath("tokenizer.json").toStdString()) == 0, message(broken).c_str());
    // tokenizer.json that is a folder, not a file.
    std::filesystem::remove(dir.filePath("tokenizer.json").toStdString());
    std::filesystem::create_directory(dir.filePath("tokenizer.json").toStdString());
    const auto folder = loadTokenizer(dir.path().toStdString(), 256);
    QVERIFY(!folder);
    QVERIFY(!loadTokenizer(dir.path().toStdString(), 0));
}

QTEST_APPLESS_MAIN(TestTokenizer)
#include "tst_tokenizer.moc"
