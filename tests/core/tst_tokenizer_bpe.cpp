// SPDX-License-Identifier: GPL-3.0-or-later
// Byte-level BPE from tokenizer.json: the byte table, merges by rank, pre-tokenizers, added tokens, NFC, refusals, on hand-built vocabularies.
#include "core/lm/tokenizer_bpe.h"
#include "core/lm/tokenizer_unicode.h"

#include "common/tokenizer_texts.h"

#include <QTest>

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <thread>

using namespace kvlens;
using namespace kvlens::lm;
using nlohmann::json;

namespace {

// Fixtures (scripts/make_tokenizer_fixtures.py): the 256 byte symbols in GPT-2's order, so a byte's
// id is its position in that order ('!' 0 ... '~' 93, 0xA1 94 ... 0xAC 105, 0xAE 106 ... 0xFF 187,
// then bytes 0..32 as 188..220, 127..160 as 221..254, 0xAD as 255), then one token per merge, rank r
// giving id 256 + r:
//   0 "b c" bc 256    1 "a b" ab 257     2 "l l" ll 258       3 "h e" he 259      4 "he ll" hell 260
//   5 "e l" el 261    6 "Ġ w" Ġw 262     7 "o r" or 263       8 "Ġw or" Ġwor 264  9 "Ġwor l" Ġworl 265
//  10 "Ġworl d" 266  11 "Ġ t" Ġt 267    12 "Ġt he" Ġthe 268  13 "1 2" 12 269     14 "' s" 's 270
constexpr int kA = 'a' - 33, kB = 'b' - 33, kE = 'e' - 33, kO = 'o' - 33, kT = 't' - 33;
constexpr int kSpace = 220, kNewline = 198;
constexpr int kBc = 256, kHell = 260, kHe = 259, kGworld = 266, kGthe = 268, k12 = 269, kApostropheS = 270;

std::string fixturePath(const std::string& name)
{
    return std::string(KVLENS_TEST_DATA_DIR) + "/tokenizers/" + name;
}

std::string readText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

json fixture(const std::string& name)
{
    return json::parse(readText(fixturePath(name)));
}

std::unique_ptr<BpeTokenizer> build(const json& root, const TokenizerOptions& options = {})
{
    auto tokenizer = bpeFromJson(root, "test.json", options);
    if (!tokenizer) {
        qWarning("%s", tokenizer.error().text().c_str());
        return nullptr;
    }
    return std::move(*tokenizer);
}

QList<int> toList(const std::vector<std::int32_t>& ids)
{
    return QList<int>(ids.begin(), ids.end());
}

QList<int> encoded(const BpeTokenizer& tokenizer, const std::string& text)
{
    auto ids = tokenizer.encode(text);
    if (!ids) {
        qWarning("%s", ids.error().text().c_str());
        return {-1};
    }
    return toList(*ids);
}

QStringList pieces(const BpeTokenizer& tokenizer, const std::string& text)
{
    auto words = tokenizer.preTokenize(text);
    if (!words)
        return {QString::fromStdString("error: " + words.error().text())};
    QStringList out;
    for (const auto& w : *words)
        out << QString::fromUtf8(w.data(), static_cast<qsizetype>(w.size()));
    return out;
}

std::string concatenated(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids)
{
    std::string out;
    for (const auto id : ids)
        out += tokenizer.tokenBytes(id);
    return out;
}

json splitStep(const json& pattern, const std::string& behavior, bool invert)
{
    return json{{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

/// The GPT-2 merge loop written out directly (Sennrich et al. 2016; Hugging Face's Word::merge_all
/// semantics): repeatedly merge the adjacent pair of lowest rank, the leftmost among equals, until
/// no pair has a rank. O(m^2) per word: an independent reference for the heap in the code under test.
std::vector<std::string> referenceMerge(const std::string& word, const std::map<std::pair<std::string, std::string>, int>& ranks)
{
    std::vector<std::string> symbols;
    for (const char c : word)
        symbols.emplace_back(1, c);
    for (;;) {
        int best = -1;
        std::size_t at = 0;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
            const auto it = ranks.find({symbols[i], symbols[i + 1]});
            if (it != ranks.end() && (best < 0 || it->second < best)) {
                best = it->second;
                at = i;
            }
        }
        if (best < 0)
            return symbols;
        symbols[at] += symbols[at + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
}

} // namespace

class TestTokenizerBpe : public QObject {
    Q_OBJECT

private slots:
    void byteLevelTable_data();
    void byteLevelTable();
    void byteLevelTableIsABijection();
    void gpt2Merges_data();
    void gpt2Merges();
    void mergesMatchAReferenceLoop();
    void gpt2PreSplit_data();
    void gpt2PreSplit();
    void llama3PreSplit();
    void qwen2SingleDigits();
    void digitsPreTokenizer();
    void splitBehaviors_data();
    void splitBehaviors();
    void splitInvert();
    void specialTokens();
    void longestAddedTokenWins();
    void lstripAbsorbsWhiteSpace();
    void nfcNormalizer();
    void ignoreMerges();
    void addPrefixSpaceOnEveryPiece();
    void bosFromTemplate();
    void tokenBytes();
    void roundTrip_data();
    void roundTrip();
    void invalidUtf8Refused();
    void encodeFromSeveralThreads();
    void refusals();
    void sizeCaps();
    void hostileTextsFinish();
    void catastrophicPatternGivesUp();
    void realGpt2Vocabulary_data();
    void realGpt2Vocabulary();
    void streamingEqualsWholeText_data();
    void streamingEqualsWholeText();
    void streamingRefusesInvalidUtf8();
    void streamingReadsOnlyWhatItNeeds();
    void cancellationIsPolledOften();
};

void TestTokenizerBpe::byteLevelTable_data()
{
    QTest::addColumn<int>("byte");
    QTest::addColumn<uint>("codePoint");
    QTest::addColumn<int>("gpt2Id");
    // The published table (GPT-2's encoder.py): ' ' is 'Ġ', '\n' 'Ċ', '\t' 'ĉ', '\r' 'č', printable
    // ASCII stands for itself; GPT-2's ids of the single-byte tokens: '!' 0, 'A' 32, '\n' 198, ' ' 220.
    QTest::newRow("space") << 32 << 0x120u << 220;
    QTest::newRow("newline") << 10 << 0x10Au << 198;
    QTest::newRow("tab") << 9 << 0x109u << 197;
    QTest::newRow("carriage return") << 13 << 0x10Du << 201;
    QTest::newRow("A") << int('A') << uint('A') << 32;
    QTest::newRow("!") << int('!') << uint('!') << 0;
    QTest::newRow("~") << int('~') << uint('~') << 93;
    QTest::newRow("NUL") << 0 << 0x100u << 188;
    QTest::newRow("DEL") << 127 << 0x121u << 221;
    QTest::newRow("0xA0 (no-break space)") << 0xA0 << 0x142u << 254;
    QTest::newRow("0xAD (soft hyphen)") << 0xAD << 0x143u << 255;
    QTest::newRow("0xA1") << 0xA1 << 0xA1u << 94;
    QTest::newRow("0xFF") << 0xFF << 0xFFu << 187;
}

void TestTokenizerBpe::byteLevelTable()
{
    QFETCH(int, byte);
    QFETCH(uint, codePoint);
    QFETCH(int, gpt2Id);
    QCOMPARE(uint(byteLevelChar(static_cast<std::uint8_t>(byte))), codePoint);
    QCOMPARE(byteLevelByte(codePoint), byte);
    QCOMPARE(byteLevelRank(static_cast<std::uint8_t>(byte)), gpt2Id);
}

void TestTokenizerBpe::byteLevelTableIsABijection()
{
    std::vector<int> seenRank(256, 0);
    for (int b = 0; b < 256; ++b) {
        const char32_t c = byteLevelChar(static_cast<std::uint8_t>(b));
        QCOMPARE(byteLevelByte(c), b);
        ++seenRank[static_cast<std::size_t>(byteLevelRank(static_cast<std::uint8_t>(b)))];
        // Every character is printable and not white space: the point of the table.
        QVERIFY(!isWhiteSpaceChar(c));
        QVERIFY(c > 0x20 && c < 0x144);
    }
    QCOMPARE(std::count(seenRank.begin(), seenRank.end(), 1), 256);
    QCOMPARE(byteLevelByte(0x144), -1);
    QCOMPARE(byteLevelByte(' '), -1);
}

void TestTokenizerBpe::gpt2Merges_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QList<int>>("ids");
    // a b c: ranks (b,c) 0 < (a,b) 1, so bc merges first and ab never can: [a, bc]. A left-to-right
    // pass would give [ab, c].
    QTest::newRow("abc: rank beats position") << "abc" << QList<int>{kA, kBc};
    // h e l l o: (l,l) 0... rank 2 first -> h e ll o; (h,e) rank 3 -> he ll o; (he,ll) rank 4 ->
    // hell o; "e l" (rank 5) never applies since l was consumed. No merge takes hell+o.
    QTest::newRow("hello") << "hello" << QList<int>{kHell, kO};
    // " world" is Ġ w o r l d: Ġw (6), or (7), Ġwor (8), Ġworl (9), Ġworld (10).
    QTest::newRow("hello world") << "hello world" << QList<int>{kHell, kO, kGworld};
    QTest::newRow("the") << "the" << QList<int>{kT, kHe};
    // Ġ t h e: (h,e) rank 3 goes before (Ġ,t) rank 11; then (Ġt,he) rank 12: one token.
    QTest::newRow(" the") << " the" << QList<int>{kGthe};
    // GPT-2's regex keeps 123 one pre-token; (1,2) rank 13 -> 12 3.
    QTest::newRow("123") << "123" << QList<int>{k12, '3' - 33};
    // it's -> "it" + "'s"; (',s) rank 14.
    QTest::newRow("it's") << "it's" << QList<int>{'i' - 33, kT, kApostropheS};
    QTest::newRow("newline") << "\n" << QList<int>{kNewline};
    QTest::newRow("space") << " " << QList<int>{kSpace};
    QTest::newRow("a repeated word (cache)") << "hello hello" << QList<int>{kHell, kO, kSpace, kHell, kO};
}

void TestTokenizerBpe::gpt2Merges()
{
    QFETCH(QString, text);
    QFETCH(QList<int>, ids);
    const auto tokenizer = build(fixture("gpt2_tiny.json"));
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, text.toStdString()), ids);
}

void TestTokenizerBpe::mergesMatchAReferenceLoop()
{
    // Random merge tables over {a, b, c} and random words, fixed seed: the heap must agree with
    // the direct O(m^2) loop on every word, ties between equal ranks included (a pair listed twice
    // keeps its later rank, so ranks are unique; ties arise between occurrences of one pair).
    std::mt19937 rng(20240607);
    json root = fixture("gpt2_tiny.json");
    json& vocab = root["model"]["vocab"];
    for (int trial = 0; trial < 20; ++trial) {
        json base = json::object();
        std::vector<std::string> tokens = {"a", "b", "c"};
        for (auto it = vocab.begin(); it != vocab.end(); ++it)
            if (it.value().get<int>() < 256)
                base[it.key()] = it.value();
        std::map<std::pair<std::string, std::string>, int> ranks;
        json merges = json::array();
        for (int r = 0; r < 30; ++r) {
            const auto& x = tokens[rng() % tokens.size()];
            const auto& y = tokens[rng() % tokens.size()];
            if (ranks.count({x, y}) || x.size() + y.size() > 8)
                continue;
            ranks[{x, y}] = static_cast<int>(merges.size());
            merges.push_back(x + " " + y);
            if (!base.contains(x + y)) {
                base[x + y] = static_cast<int>(base.size());
                tokens.push_back(x + y);
            }
        }
        json copy = root;
        copy["model"]["vocab"] = base;
        copy["model"]["merges"] = merges;
        copy["added_tokens"] = json::array();
        const auto tokenizer = build(copy);
        QVERIFY(tokenizer);
        for (int w = 0; w < 50; ++w) {
            std::string word;
            const int length = 1 + static_cast<int>(rng() % 40);
            for (int i = 0; i < length; ++i)
                word += static_cast<char>('a' + rng() % 3);
            QList<int> expected;
            for (const auto& symbol : referenceMerge(word, ranks))
                expected << base[symbol].get<int>();
            QCOMPARE(encoded(*tokenizer, word), expected);
        }
    }
}

void TestTokenizerBpe::gpt2PreSplit_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("expected");
    // Worked from the regex 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    // (alternatives tried in order at each position): three spaces before a letter give "  " (\s+
    // backs off one so that (?!\S) holds) and " here"; "  \n\n" before "ok" gives "  \n" then "\n".
    QTest::newRow("sentence") << "I'm   here... it's 42x  \n\nok"
                              << QStringList{"I", "'m", "  ", " here", "...", " it", "'s", " 42", "x", "  \n", "\n", "ok"};
    // Contractions are case-sensitive in GPT-2's pattern: 'S is punctuation then a letter.
    QTest::newRow("upper-case contraction") << "IT'S" << QStringList{"IT", "'", "S"};
    QTest::newRow("letters and digits") << "abc123def" << QStringList{"abc", "123", "def"};
    QTest::newRow("tab") << "a\tb" << QStringList{"a", "\t", "b"};
    QTest::newRow("trailing spaces") << "end  " << QStringList{"end", "  "};
    QTest::newRow("non-ASCII letters") << QString::fromUtf8("naïve café") << QStringList{QString::fromUtf8("naïve"), QString::fromUtf8(" café")};
}

void TestTokenizerBpe::gpt2PreSplit()
{
    QFETCH(QString, text);
    QFETCH(QStringList, expected);
    const auto tokenizer = build(fixture("gpt2_tiny.json"));
    QVERIFY(tokenizer);
    QCOMPARE(pieces(*tokenizer, text.toStdString()), expected);
}

void TestTokenizerBpe::llama3PreSplit()
{
    // Llama 3's Split pattern: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+. Contractions ignore case; digits go in
    // threes; a space before digits stands alone (no alternative takes " 1"); "!!" takes the
    // newlines after it; of "  x", \s+(?!\S) takes one space and [^\r\n\p{L}\p{N}]?\p{L}+ " x".
    const auto tokenizer = build(fixture("llama3_tiny.json"));
    QVERIFY(tokenizer);
    QCOMPARE(pieces(*tokenizer, "IT'S 12345 ok!!\n\n  x"),
             (QStringList{"IT", "'S", " ", "123", "45", " ok", "!!\n\n", " ", " x"}));
}

void TestTokenizerBpe::qwen2SingleDigits()
{
    // Qwen2's pattern has \p{N} where Llama 3's has \p{N}{1,3}: every digit alone.
    const auto tokenizer = build(fixture("qwen2_tiny.json"));
    QVERIFY(tokenizer);
    QCOMPARE(pieces(*tokenizer, "12345"), (QStringList{"1", "2", "3", "4", "5"}));
    QCOMPARE(pieces(*tokenizer, "x2024y"), (QStringList{"x", "2", "0", "2", "4", "y"}));
    // So the merge "1 2" never applies.
    QCOMPARE(encoded(*tokenizer, "123"), (QList<int>{'1' - 33, '2' - 33, '3' - 33}));
}

void TestTokenizerBpe::digitsPreTokenizer()
{
    // SmolLM-style Sequence[Digits(individual_digits), ByteLevel(use_regex)]: digits are cut out
    // first, then GPT-2's regex splits what is left ("ab " -> "ab", " ").
    const auto smol = build(fixture("smollm_tiny.json"));
    QVERIFY(smol);
    QCOMPARE(pieces(*smol, "ab 123"), (QStringList{"ab", " ", "1", "2", "3"}));
    QCOMPARE(encoded(*smol, "123"), (QList<int>{'1' - 33, '2' - 33, '3' - 33}));
    // individual_digits false: runs of digits (Contiguous).
    json root = fixture("smollm_tiny.json");
    root["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false;
    root["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = false;
    const auto runs = build(root);
    QVERIFY(runs);
    QCOMPARE(pieces(*runs, "a123b45"), (QStringList{"a", "123", "b", "45"}));
    // Digits are Unicode N (char::is_numeric): Arabic-Indic digits and '½' count.
    QCOMPARE(pieces(*runs, QString::fromUtf8("x٣٤½y").toStdString()),
             (QStringList{"x", QString::fromUtf8("٣٤½"), "y"}));
}

void TestTokenizerBpe::splitBehaviors_data()
{
    QTest::addColumn<QString>("behavior");
    QTest::addColumn<QStringList>("expected");
    // Hugging Face's documented example (SplitDelimiterBehavior): "the-final--countdown" split on '-'.
    QTest::newRow("Removed") << "Removed" << QStringList{"the", "final", "countdown"};
    QTest::newRow("Isolated") << "Isolated" << QStringList{"the", "-", "final", "-", "-", "countdown"};
    QTest::newRow("MergedWithPrevious") << "MergedWithPrevious" << QStringList{"the-", "final-", "-", "countdown"};
    QTest::newRow("MergedWithNext") << "MergedWithNext" << QStringList{"the", "-final", "-", "-countdown"};
    QTest::newRow("Contiguous") << "Contiguous" << QStringList{"the", "-", "final", "--", "countdown"};
}

void TestTokenizerBpe::splitBehaviors()
{
    QFETCH(QString, behavior);
    QFETCH(QStringList, expected);
    json root = fixture("llama3_tiny.json");
    root["pre_tokenizer"]["pretokenizers"][0] = splitStep(json{{"String", "-"}}, behavior.toStdString(), false);
    const auto tokenizer = build(root);
    QVERIFY(tokenizer);
    QCOMPARE(pieces(*tokenizer, "the-final--countdown"), expected);
}

void TestTokenizerBpe::splitInvert()
{
    // invert flips which parts are matches: with Removed, the text between matches goes instead.
    json root = fixture("llama3_tiny.json");
    root["pre_tokenizer"]["pretokenizers"][0] = splitStep(json{{"Regex", "[a-z]+"}}, "Removed", false);
    const auto plain = build(root);
    QVERIFY(plain);
    QCOMPARE(pieces(*plain, "ab, cd"), (QStringList{", "}));
    root["pre_tokenizer"]["pretokenizers"][0]["invert"] = true;
    const auto inverted = build(root);
    QVERIFY(inverted);
    QCOMPARE(pieces(*inverted, "ab, cd"), (QStringList{"ab", "cd"}));
}

void TestTokenizerBpe::specialTokens()
{
    const auto tokenizer = build(fixture("gpt2_tiny.json"));
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, "a<|endoftext|>b"), (QList<int>{kA, 271, kB}));
    // As text (split_special_tokens): "a", "<|", "endoftext", "|>", "b", no merge among e n d o f t e x t.
    TokenizerOptions asText;
    asText.parseSpecialTokens = false;
    const auto plain = build(fixture("gpt2_tiny.json"), asText);
    QVERIFY(plain);
    QCOMPARE(encoded(*plain, "a<|endoftext|>b"),
             (QList<int>{kA, '<' - 33, '|' - 33, kE, 'n' - 33, 'd' - 33, kO, 'f' - 33, kT, kE, 'x' - 33, kT, '|' - 33,
                         '>' - 33, kB}));
    QCOMPARE(tokenizer->tokenId("<|endoftext|>"), std::optional<std::int32_t>(271));
    QCOMPARE(tokenizer->tokenId(" world"), std::optional<std::int32_t>(kGworld));
    QCOMPARE(tokenizer->tokenId("nothing"), std::optional<std::int32_t>());
}

void TestTokenizerBpe::longestAddedTokenWins()
{
    // <|x|> (302) and <|x|>y (303): leftmost-longest, as Hugging Face's Aho-Corasick matcher.
    const auto tokenizer = build(fixture("llama3_tiny.json"));
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, "<|x|>y"), (QList<int>{303}));
    QCOMPARE(encoded(*tokenizer, "<|x|>z"), (QList<int>{302, 'z' - 33}));
    QCOMPARE(encoded(*tokenizer, "<|x|"), (QList<int>{'<' - 33, '|' - 33, 'x' - 33, '|' - 33}));
}

void TestTokenizerBpe::lstripAbsorbsWhiteSpace()
{
    // qwen2_tiny: <|endoftext|> 271, <mask> 272 (lstrip, not special), café 273 (normalized).
    const auto tokenizer = build(fixture("qwen2_tiny.json"));
    QVERIFY(tokenizer);
    // The two spaces before <mask> belong to it; " b" is one pre-token.
    QCOMPARE(encoded(*tokenizer, "a  <mask> b"), (QList<int>{kA, 272, kSpace, kB}));
    json root = fixture("qwen2_tiny.json");
    root["added_tokens"][1]["lstrip"] = false;
    const auto kept = build(root);
    QVERIFY(kept);
    QCOMPARE(encoded(*kept, "a  <mask> b"), (QList<int>{kA, kSpace, kSpace, 272, kSpace, kB}));
    // Not special: matched even when special tokens are not.
    TokenizerOptions asText;
    asText.parseSpecialTokens = false;
    const auto plain = build(fixture("qwen2_tiny.json"), asText);
    QVERIFY(plain);
    QCOMPARE(encoded(*plain, "a<mask>"), (QList<int>{kA, 272}));
}

void TestTokenizerBpe::nfcNormalizer()
{
    // "e" + U+0301 (combining acute) is "é" U+00E9 in NFC, bytes C3 A9, ids 127 and 102 in GPT-2's
    // order (0xC3: 106 + 0xC3 - 0xAE; 0xA9: 94 + 0xA9 - 0xA1). Without the normalizer the combining
    // mark stays: "e", then U+0301 (bytes CC 81: 136 and 221 + 0x81 - 0x7F) as punctuation.
    const std::string decomposed = "e\xCC\x81";
    const auto qwen = build(fixture("qwen2_tiny.json"));
    const auto gpt2 = build(fixture("gpt2_tiny.json"));
    QVERIFY(qwen && gpt2);
    QCOMPARE(encoded(*qwen, decomposed), (QList<int>{127, 102}));
    QCOMPARE(encoded(*gpt2, decomposed), (QList<int>{kE, 136, 223}));
    // A normalized added token matches the NFC form of the text.
    QCOMPARE(encoded(*qwen, "cafe\xCC\x81!"), (QList<int>{273, 0}));
    QCOMPARE(encoded(*qwen, "caf\xC3\xA9!"), (QList<int>{273, 0}));
}

void TestTokenizerBpe::ignoreMerges()
{
    // llama3_tiny has "xyz" (id 271) that no merge builds: ignore_merges emits it whole.
    const auto tokenizer = build(fixture("llama3_tiny.json"));
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, "xyz"), (QList<int>{271}));
    QCOMPARE(encoded(*tokenizer, "hello"), (QList<int>{kHell, kO}));
    json root = fixture("llama3_tiny.json");
    root["model"]["ignore_merges"] = false;
    const auto merging = build(root);
    QVERIFY(merging);
    QCOMPARE(encoded(*merging, "xyz"), (QList<int>{'x' - 33, 'y' - 33, 'z' - 33}));
}

void TestTokenizerBpe::addPrefixSpaceOnEveryPiece()
{
    // ByteLevel(add_prefix_space) prepends a space to every piece that lacks one, each side of an
    // added token included (Hugging Face applies it per split).
    json root = fixture("gpt2_tiny.json");
    root["pre_tokenizer"]["add_prefix_space"] = true;
    const auto tokenizer = build(root);
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, "hello"), (QList<int>{kSpace, kHell, kO}));
    QCOMPARE(encoded(*tokenizer, " the"), (QList<int>{kGthe}));
    QCOMPARE(encoded(*tokenizer, "a<|endoftext|>b"), (QList<int>{kSpace, kA, 271, kSpace, kB}));
}

void TestTokenizerBpe::bosFromTemplate()
{
    const auto llama = build(fixture("llama3_tiny.json"));
    const auto gpt2 = build(fixture("gpt2_tiny.json"));
    QVERIFY(llama && gpt2);
    QCOMPARE(llama->bos(), std::optional<std::int32_t>(300));
    QCOMPARE(gpt2->bos(), std::optional<std::int32_t>());
    // encode never adds it: the runner places it.
    QCOMPARE(encoded(*llama, "the"), (QList<int>{kT, kHe}));
    QCOMPARE(llama->vocabSize(), 304);
    QCOMPARE(gpt2->vocabSize(), 272);
}

void TestTokenizerBpe::tokenBytes()
{
    const auto gpt2 = build(fixture("gpt2_tiny.json"));
    QVERIFY(gpt2);
    QCOMPARE(gpt2->tokenBytes(kSpace), std::string(" "));
    QCOMPARE(gpt2->tokenBytes(kNewline), std::string("\n"));
    QCOMPARE(gpt2->tokenBytes(kGworld), std::string(" world"));
    QCOMPARE(gpt2->tokenBytes(271), std::string("<|endoftext|>"));
    QCOMPARE(gpt2->tokenBytes(127), std::string("\xC3"));
    QCOMPARE(gpt2->tokenBytes(-1), std::string());
    QCOMPARE(gpt2->tokenBytes(272), std::string());
    const auto llama = build(fixture("llama3_tiny.json"));
    QVERIFY(llama);
    QCOMPARE(llama->tokenBytes(280), std::string()); // a gap between the vocabulary and the added tokens
    // A vocabulary token with a character outside the byte table decodes to its own UTF-8, as
    // Hugging Face's ByteLevel decoder does.
    json root = fixture("gpt2_tiny.json");
    root["model"]["vocab"]["日本"] = 400;
    const auto odd = build(root);
    QVERIFY(odd);
    QCOMPARE(odd->tokenBytes(400), std::string("日本"));
}

void TestTokenizerBpe::roundTrip_data()
{
    QTest::addColumn<QString>("fixture");
    QTest::addColumn<QString>("text");
    const QString ascii = "Hello, world! It's 2024.\n\tTabs  and   spaces  ... 12345 x<y>z  ";
    const QString other = QString::fromUtf8("naïve café — 日本語のテキスト 🙂 Ünïcödé\r\n ½ ٣٤ \u00A0nbsp");
    for (const char* name : {"gpt2_tiny.json", "llama3_tiny.json", "qwen2_tiny.json", "smollm_tiny.json", "gpt2_subset.json"}) {
        QTest::newRow((QString(name) + " ASCII").toUtf8()) << name << ascii;
        QTest::newRow((QString(name) + " non-ASCII").toUtf8()) << name << other;
        QTest::newRow((QString(name) + " special token").toUtf8()) << name << QString("a<|endoftext|>b <|x|>y");
    }
}

void TestTokenizerBpe::roundTrip()
{
    // bytes(encode(text)) == text: every byte lands in exactly one token (the NFC text is already NFC).
    QFETCH(QString, fixture);
    QFETCH(QString, text);
    const auto tokenizer = build(::fixture(fixture.toStdString()));
    QVERIFY(tokenizer);
    const std::string utf8 = text.toStdString();
    const auto ids = tokenizer->encode(utf8);
    QVERIFY2(ids, ids ? "" : ids.error().text().c_str());
    for (const auto id : *ids)
        QVERIFY(id >= 0 && id < tokenizer->vocabSize());
    QCOMPARE(concatenated(*tokenizer, *ids), utf8);
}

void TestTokenizerBpe::invalidUtf8Refused()
{
    const auto tokenizer = build(fixture("gpt2_tiny.json"));
    QVERIFY(tokenizer);
    for (const std::string bad : {"a\xFF" "b", "ab\xC3", "a\xED\xA0\x80", "\xC0\xAF"}) {
        const auto ids = tokenizer->encode(bad);
        QVERIFY(!ids);
        QVERIFY2(ids.error().text().find("not valid UTF-8") != std::string::npos, ids.error().text().c_str());
    }
    const auto ids = tokenizer->encode("a\xFF" "b");
    QVERIFY(!ids);
    QVERIFY2(ids.error().text().find("at byte 1") != std::string::npos, ids.error().text().c_str());
}

void TestTokenizerBpe::encodeFromSeveralThreads()
{
    // encode is const and keeps its scratch (regex state, cache) per call: four threads on one
    // tokenizer get what one thread gets.
    const auto tokenizer = build(fixture("llama3_tiny.json"));
    QVERIFY(tokenizer);
    std::string text;
    for (int i = 0; i < 2000; ++i)
        text += "hello world, the 12345 xyz <|x|>y it's naïve " + std::to_string(i) + "\n";
    const auto expected = tokenizer->encode(text);
    QVERIFY(expected);
    std::vector<std::vector<std::int32_t>> results(4);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < results.size(); ++t)
        threads.emplace_back([&, t] {
            for (int repeat = 0; repeat < 3; ++repeat) {
                auto ids = tokenizer->encode(text);
                results[t] = ids ? *ids : std::vector<std::int32_t>{-1};
            }
        });
    for (auto& thread : threads)
        thread.join();
    for (const auto& r : results)
        QVERIFY(r == *expected);
}

void TestTokenizerBpe::refusals()
{
    struct Case {
        const char* name;
        const char* fixture;
        std::function<void(json&)> mutate;
        std::vector<std::string> expected; // substrings of the message
    };
    const std::vector<Case> cases = {
        {"model type", "gpt2_tiny.json", [](json& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "'WordPiece'"}},
        {"byte fallback", "gpt2_tiny.json", [](json& j) { j["model"]["byte_fallback"] = true; }, {"model.byte_fallback"}},
        {"dropout", "gpt2_tiny.json", [](json& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout"}},
        {"subword prefix", "gpt2_tiny.json", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
         {"model.continuing_subword_prefix"}},
        {"merge names an unknown token", "gpt2_tiny.json", [](json& j) { j["model"]["merges"].push_back("a zz"); },
         {"model.merges[15]", "'a zz'", "'zz' is not in model.vocab"}},
        {"merge of three parts", "gpt2_tiny.json", [](json& j) { j["model"]["merges"].push_back("a b c"); },
         {"model.merges[15]", "two tokens"}},
        {"merged token missing", "gpt2_tiny.json", [](json& j) { j["model"]["merges"].push_back("x y"); },
         {"model.merges[15]", "merged token 'xy'"}},
        {"merge pair unknown (pairs)", "llama3_tiny.json", [](json& j) { j["model"]["merges"].push_back(json{"q", "qq"}); },
         {"model.merges[15]", "'qq' is not in model.vocab"}},
        {"merge not a string", "gpt2_tiny.json", [](json& j) { j["model"]["merges"].push_back(42); },
         {"model.merges[15]", "the number 42"}},
        {"duplicate id", "gpt2_tiny.json", [](json& j) { j["model"]["vocab"]["dup"] = 5; }, {"id 5 is given to both"}},
        {"id 2^24", "gpt2_tiny.json", [](json& j) { j["model"]["vocab"]["big"] = 1 << 24; },
         {"model.vocab['big']", "outside [0, 16777216)"}},
        {"negative id", "gpt2_tiny.json", [](json& j) { j["model"]["vocab"]["neg"] = -1; },
         {"model.vocab['neg']", "outside [0, 16777216)"}},
        {"fractional id", "gpt2_tiny.json", [](json& j) { j["model"]["vocab"]["half"] = 1.5; },
         {"model.vocab['half']", "expected an integer"}},
        {"empty vocabulary", "gpt2_tiny.json", [](json& j) { j["model"]["vocab"] = json::object(); }, {"model.vocab", "is empty"}},
        {"missing byte symbol", "gpt2_tiny.json", [](json& j) { j["model"]["vocab"].erase("Ċ"); },
         {"model.vocab", "lacks the byte symbol", "U+010A", "byte 0x0A"}},
        {"unknown pre-tokenizer", "gpt2_tiny.json", [](json& j) { j["pre_tokenizer"] = json{{"type", "Whitespace"}}; },
         {"pre_tokenizer.type", "'Whitespace'"}},
        {"no pre-tokenizer", "gpt2_tiny.json", [](json& j) { j["pre_tokenizer"] = nullptr; }, {"pre_tokenizer", "ByteLevel"}},
        {"bad regex", "llama3_tiny.json",
         [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = json{{"Regex", "(ab"}}; },
         {"pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile"}},
        {"bad behavior", "llama3_tiny.json", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; },
         {"pre_tokenizer.pretokenizers[0].behavior", "'Sideways'"}},
        {"ByteLevel not last", "smollm_tiny.json",
         [](json& j) { std::swap(j["pre_tokenizer"]["pretokenizers"][0], j["pre_tokenizer"]["pretokenizers"][1]); },
         {"pre_tokenizer", "must end with exactly one ByteLevel"}},
        {"unknown normalizer", "qwen2_tiny.json", [](json& j) { j["normalizer"] = json{{"type", "NFKC"}}; },
         {"normalizer.type", "'NFKC'"}},
        {"unknown decoder", "gpt2_tiny.json", [](json& j) { j["decoder"] = json{{"type", "WordPiece"}}; },
         {"decoder.type", "'WordPiece'"}},
        {"template adding EOS", "llama3_tiny.json",
         [](json& j) {
             j["post_processor"]["processors"][1]["single"].push_back(json{{"SpecialToken", {{"id", "<|end_of_text|>"}, {"type_id", 0}}}});
         },
         {"post_processor.processors[1].single", "only [$A] and [special token, $A]"}},
        {"unknown post-processor", "gpt2_tiny.json", [](json& j) { j["post_processor"] = json{{"type", "RobertaProcessing"}}; },
         {"post_processor.type", "'RobertaProcessing'"}},
        {"BOS id unknown", "llama3_tiny.json",
         [](json& j) { j["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"] = json{290}; },
         {"post_processor", "BOS id 290 is no token"}},
        {"added id negative", "gpt2_tiny.json", [](json& j) { j["added_tokens"][0]["id"] = -3; }, {"added_tokens[0].id", "outside"}},
        {"added content twice", "llama3_tiny.json", [](json& j) { j["added_tokens"][1]["content"] = "<|x|>"; },
         {"added_tokens[2].content", "added twice"}},
        {"added id twice", "llama3_tiny.json", [](json& j) { j["added_tokens"][1]["id"] = 300; }, {"added_tokens[1].id", "300"}},
        {"added content empty", "gpt2_tiny.json", [](json& j) { j["added_tokens"][0]["content"] = ""; },
         {"added_tokens[0].content", "is empty"}},
        {"added flag not boolean", "gpt2_tiny.json", [](json& j) { j["added_tokens"][0]["lstrip"] = "yes"; },
         {"added_tokens[0].lstrip", "expected true or false"}},
        {"no model", "gpt2_tiny.json", [](json& j) { j.erase("model"); }, {"model: missing"}},
        {"top level not an object", "gpt2_tiny.json", [](json& j) { j = json::array(); }, {"the top level"}},
    };
    for (const Case& c : cases) {
        json root = fixture(c.fixture);
        c.mutate(root);
        const auto result = parseTokenizerJson(root.dump(), "case.json");
        QVERIFY2(!result, c.name);
        const std::string text = result.error().text();
        QVERIFY2(text.rfind("case.json: ", 0) == 0, (std::string(c.name) + ": " + text).c_str());
        for (const auto& part : c.expected)
            QVERIFY2(text.find(part) != std::string::npos, (std::string(c.name) + ": '" + part + "' not in: " + text).c_str());
    }
    // JSON that does not parse, and a key given twice.
    const auto broken = parseTokenizerJson("{\"model\": [", "broken.json");
    QVERIFY(!broken);
    QVERIFY(broken.error().text().rfind("broken.json: ", 0) == 0);
    const auto twice = parseTokenizerJson(R"({"model": {}, "model": {}})", "twice.json");
    QVERIFY(!twice);
    QVERIFY2(twice.error().text().find("'model'") != std::string::npos, twice.error().text().c_str());
}

void TestTokenizerBpe::sizeCaps()
{
    // Checked before parsing: a text one byte over the size cap, and one of more values than the cap.
    const std::string tooBig(kMaxTokenizerJsonBytes + 1, ' ');
    const auto big = parseTokenizerJson(tooBig, "big.json");
    QVERIFY(!big);
    QVERIFY2(big.error().text().find("above the cap of 64 MiB") != std::string::npos, big.error().text().c_str());
    // Commas count as values wherever they stand outside strings; the text need not parse for the
    // count to refuse it, and at exactly the cap it goes on to the parser (which fails at byte 0).
    const std::string over(kMaxTokenizerJsonValues + 1, ',');
    const auto values = parseTokenizerJson(over, "many.json");
    QVERIFY(!values);
    QVERIFY2(values.error().text().find("more than 8388608 JSON values") != std::string::npos, values.error().text().c_str());
    const std::string atCap = "x" + std::string(kMaxTokenizerJsonValues, ',');
    const auto fewer = parseTokenizerJson(atCap, "fewer.json");
    QVERIFY(!fewer);
    QVERIFY2(fewer.error().text().find("JSON values") == std::string::npos, fewer.error().text().c_str());
    // Commas inside strings do not count: a string of them is one value.
    QCOMPARE(jsonValueCount("[\"" + std::string(1000, ',') + "\", 1, {\"a\": [2]}]"), std::uint64_t(6)); // [ , , { : [
}

void TestTokenizerBpe::hostileTextsFinish()
{
    // Long runs a backtracking pattern could turn quadratic, and a megabyte-long pre-token for the
    // merge heap: each must finish (the test's timeout is the bound) and round-trip.
    const auto llama = build(fixture("llama3_tiny.json"));
    const auto gpt2 = build(fixture("gpt2_tiny.json"));
    QVERIFY(llama && gpt2);
    std::mt19937 rng(7);
    std::string randomText;
    while (randomText.size() < (256u << 10)) {
        char32_t c = rng() % 0x3000;
        if (c >= 0xD800 && c < 0xE000)
            continue;
        appendUtf8(randomText, c);
    }
    const std::vector<std::string> texts = {std::string(1 << 20, ' '), std::string(1 << 20, 'a'),
                                            std::string(1 << 20, '1'), std::string(1 << 20, '\n'),
                                            std::string(1 << 19, ' ') + "x" + std::string(1 << 19, ' '), randomText};
    for (const auto* tokenizer : {llama.get(), gpt2.get()})
        for (const auto& text : texts) {
            const auto ids = tokenizer->encode(text);
            QVERIFY2(ids, ids ? "" : ids.error().text().c_str());
            QCOMPARE(concatenated(*tokenizer, *ids), text);
        }
    // 1 MiB of 'l': the merge "l l" pairs them up, leftmost first: 2^19 tokens "ll".
    const auto ids = gpt2->encode(std::string(1 << 20, 'l'));
    QVERIFY(ids);
    QCOMPARE(ids->size(), std::size_t(1) << 19);
    QCOMPARE(std::count(ids->begin(), ids->end(), 258), std::ptrdiff_t(1) << 19);
}

void TestTokenizerBpe::catastrophicPatternGivesUp()
{
    // (a+)+$ against a's then b backtracks exponentially: PCRE2's match limit stops it with an error.
    json root = fixture("llama3_tiny.json");
    root["pre_tokenizer"]["pretokenizers"][0]["pattern"] = json{{"Regex", "(a+)+$"}};
    const auto tokenizer = build(root);
    QVERIFY(tokenizer);
    const auto ids = tokenizer->encode(std::string(64, 'a') + "b");
    QVERIFY(!ids);
    QVERIFY2(ids.error().text().find("gave up") != std::string::npos, ids.error().text().c_str());
    QVERIFY2(ids.error().text().find("pre_tokenizer.pretokenizers[0].pattern.Regex") != std::string::npos,
             ids.error().text().c_str());
    QVERIFY2(ids.error().text().find("'(a+)+$'") != std::string::npos, ids.error().text().c_str());
}

void TestTokenizerBpe::realGpt2Vocabulary_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QList<int>>("ids");
    // GPT-2's published ids (OpenAI's vocabulary): "Hello world" [15496, 995], "The" 464, " the" 262,
    // "." 13, "\n" 198, <|endoftext|> 50256.
    QTest::newRow("Hello world") << "Hello world" << QList<int>{15496, 995};
    QTest::newRow("Hello world.\\n") << "Hello world.\n" << QList<int>{15496, 995, 13, 198};
    QTest::newRow("The") << "The" << QList<int>{464};
    QTest::newRow(" the") << " the" << QList<int>{262};
    QTest::newRow("<|endoftext|>") << "<|endoftext|>" << QList<int>{50256};
}

void TestTokenizerBpe::realGpt2Vocabulary()
{
    // gpt2_subset.json: GPT-2's real vocabulary and merges, cut to those that act on these texts
    // (scripts/make_tokenizer_fixtures.py; tests/data/tokenizers/README.md gives the source and licence).
    QFETCH(QString, text);
    QFETCH(QList<int>, ids);
    const auto tokenizer = build(fixture("gpt2_subset.json"));
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, text.toStdString()), ids);
}


namespace {

/// A pre_tokenizer Sequence of one Split on `pattern` with `behavior` (and `invert`), then ByteLevel.
json splitThenByteLevel(const std::string& pattern, const std::string& behavior, bool invert, bool prefixSpace, bool regex)
{
    return json{{"type", "Sequence"},
                {"pretokenizers",
                 json::array({splitStep(json{{"Regex", pattern}}, behavior, invert),
                              json{{"type", "ByteLevel"}, {"add_prefix_space", prefixSpace}, {"use_regex", regex}}})}};
}

json addedToken(int id, const std::string& content, bool special, bool lstrip, bool rstrip, bool singleWord, bool normalized)
{
    return json{{"id", id},         {"content", content}, {"special", special},      {"lstrip", lstrip},
                {"rstrip", rstrip}, {"single_word", singleWord}, {"normalized", normalized}};
}

/// `root` with merges, ranked before its own, that chain every pre-token of `texts` (as `tokenizer`
/// pre-tokenizes them) from its first byte on: with them nearly every pre-token boundary shows in
/// the ids (the tiny fixtures' 15 merges leave most boundaries invisible: "'" "ll" and "'ll" give
/// the same ids there).
json withChainMerges(json root, const BpeTokenizer& tokenizer, const std::vector<std::string>& texts)
{
    std::int32_t next = 0;
    for (const auto& [token, id] : root["model"]["vocab"].items())
        next = std::max(next, id.get<std::int32_t>() + 1);
    for (const json& added : root["added_tokens"])
        next = std::max(next, added["id"].get<std::int32_t>() + 1);
    const bool pairs = root["model"]["merges"].size() > 0 && root["model"]["merges"][0].is_array();
    json chains = json::array();
    for (const std::string& text : texts) {
        const auto words = tokenizer.preTokenize(text);
        if (!words)
            continue;
        for (const std::string& word : *words) {
            std::string prefix;
            for (std::size_t i = 0; i < word.size(); ++i) {
                std::string symbol;
                appendUtf8(symbol, byteLevelChar(static_cast<std::uint8_t>(word[i])));
                if (i > 0 && !root["model"]["vocab"].contains(prefix + symbol)) {
                    root["model"]["vocab"][prefix + symbol] = next++;
                    chains.push_back(pairs ? json::array({prefix, symbol}) : json(prefix + " " + symbol));
                }
                prefix += symbol;
            }
        }
    }
    for (const json& merge : root["model"]["merges"])
        chains.push_back(merge);
    root["model"]["merges"] = chains;
    return root;
}

} // namespace

void TestTokenizerBpe::streamingEqualsWholeText_data()
{
    QTest::addColumn<std::string>("root");
    QTest::addColumn<bool>("special");
    const std::string llama3Pattern = fixture("llama3_tiny.json")["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"];
    for (const char* name : {"gpt2_tiny.json", "llama3_tiny.json", "qwen2_tiny.json", "smollm_tiny.json", "gpt2_subset.json"})
        for (const bool special : {true, false})
            QTest::newRow((std::string(name) + (special ? " special" : " plain")).c_str()) << fixture(name).dump() << special;
    for (const char* behavior : {"Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"})
        for (const bool invert : {false, true}) {
            json root = fixture("llama3_tiny.json");
            root["pre_tokenizer"] = splitThenByteLevel(llama3Pattern, behavior, invert, false, false);
            QTest::newRow((std::string("llama3 ") + behavior + (invert ? " inverted" : "")).c_str()) << root.dump() << true;
        }
    json prefixed = fixture("gpt2_tiny.json");
    prefixed["pre_tokenizer"]["add_prefix_space"] = true;
    QTest::newRow("gpt2 prefix space") << prefixed.dump() << true;
    json splitPrefixed = fixture("llama3_tiny.json");
    splitPrefixed["pre_tokenizer"] = splitThenByteLevel(R"(\p{N}+|[.,!?]+)", "Isolated", false, true, true);
    QTest::newRow("split then prefixed GPT-2 regex") << splitPrefixed.dump() << true;
    json digits = fixture("smollm_tiny.json");
    digits["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false;
    QTest::newRow("smollm contiguous digits") << digits.dump() << true;
    json lookbehind = fixture("llama3_tiny.json");
    lookbehind["pre_tokenizer"] = splitThenByteLevel(R"((?<=a)b|\s+|[^\s]+)", "Isolated", false, false, false);
    QTest::newRow("a lookbehind (not cut)") << lookbehind.dump() << true;
    json flags = fixture("qwen2_tiny.json");
    flags["added_tokens"].push_back(addedToken(274, "<r>", false, false, true, false, false));
    flags["added_tokens"].push_back(addedToken(275, "ab", false, false, false, true, false));
    flags["added_tokens"].push_back(addedToken(276, " x ", true, true, true, false, true));
    QTest::newRow("qwen2 rstrip, single-word, normalized") << flags.dump() << true;
    QTest::newRow("qwen2 rstrip, single-word, normalized (plain)") << flags.dump() << false;
}

void TestTokenizerBpe::streamingEqualsWholeText()
{
    // The ids of a text read in blocks of 1 byte to more than the text, stopped after k of them,
    // equal the first k of the whole text's: for every fixture, split behavior and added-token
    // flag, with texts that put block ends inside merges, white-space runs, added tokens,
    // multi-byte characters and NFC compositions.
    QFETCH(std::string, root);
    QFETCH(bool, special);
    TokenizerOptions options;
    options.parseSpecialTokens = special;
    const auto reference = build(json::parse(root), options);
    QVERIFY(reference);
    auto texts = test::stressTexts(51, 60, 40, false,
                                   {"<|endoftext|>", "<|begin_of_text|>", "<|x|>", "<|x|>y", "<mask>", " <mask> ", "café",
                                    "<r>", "<r>   ", "ab", " x ", "hello", "world", "hell", "'s", "12", "\u00E9"});
    texts.push_back(std::string(700, ' ') + "a" + std::string(300, '\n'));
    texts.push_back("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb  12121212");
    const auto tokenizer = build(withChainMerges(json::parse(root), *reference, texts), options);
    QVERIFY(tokenizer);
    // Progress: 100 ids of a long text need its first blocks only (the pattern with a lookbehind
    // is cut at added tokens only; Removed leaves too few ids to say).
    std::string longText;
    for (const std::string& t : texts)
        longText += t + " ";
    const auto all = tokenizer->encode(longText);
    QVERIFY(all);
    test::BlockReader progress{longText, 512};
    EncodeControl hundred;
    hundred.maxTokens = 100;
    QVERIFY(tokenizer->encodeStream(progress.reader(), hundred));
    if (!QString(QTest::currentDataTag()).startsWith("a lookbehind") && all->size() > 2000)
        QVERIFY2(progress.given <= 4 * 512, std::to_string(progress.given).c_str());
    for (const std::string& text : texts) {
        const auto whole = tokenizer->encode(text);
        QVERIFY2(whole, whole ? "" : whole.error().text().c_str());
        const std::size_t n = whole->size();
        for (const std::size_t block : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(7), std::size_t(64), text.size() + 1}) {
            for (const std::size_t k : {std::size_t(0), std::size_t(1), n / 2, n > 1 ? n - 1 : n}) {
                test::BlockReader reader{text, block};
                EncodeControl control;
                control.maxTokens = k;
                const auto streamed = tokenizer->encodeStream(reader.reader(), control);
                QVERIFY2(streamed, streamed ? "" : streamed.error().text().c_str());
                const std::size_t expected = k == 0 ? n : std::min(k, n);
                if (*streamed != std::vector<std::int32_t>(whole->begin(), whole->begin() + static_cast<std::ptrdiff_t>(expected))) {
                    qWarning("block %zu k %zu text %s", block, k, QByteArray::fromStdString(text).toPercentEncoding().constData());
                    QCOMPARE(toList(*streamed), toList(std::vector<std::int32_t>(
                                                    whole->begin(), whole->begin() + static_cast<std::ptrdiff_t>(expected))));
                }
            }
        }
    }
}

void TestTokenizerBpe::streamingRefusesInvalidUtf8()
{
    // A character cut by a block end is completed by the next block; a byte that starts none is
    // refused with its offset in the whole text, whichever block it is in.
    const auto tokenizer = build(fixture("gpt2_tiny.json"));
    QVERIFY(tokenizer);
    const std::string good = "na\u00EFve caf\u00E9 \U0001F600 \u65E5\u672C";
    for (const std::size_t block : {std::size_t(1), std::size_t(2), std::size_t(3)}) {
        test::BlockReader reader{good, block};
        QCOMPARE(*tokenizer->encodeStream(reader.reader(), EncodeControl{}), *tokenizer->encode(good));
        const std::string bad = good + " and then \xC3(";
        test::BlockReader badReader{bad, block};
        const auto refused = tokenizer->encodeStream(badReader.reader(), EncodeControl{});
        QVERIFY(!refused);
        QVERIFY2(refused.error().text().find("not valid UTF-8 at byte " + std::to_string(good.size() + 10)) != std::string::npos,
                 refused.error().text().c_str());
        const std::string cut = good + "\xE2\x82";
        test::BlockReader cutReader{cut, block};
        QVERIFY(!tokenizer->encodeStream(cutReader.reader(), EncodeControl{}));
    }
}

void TestTokenizerBpe::streamingReadsOnlyWhatItNeeds()
{
    // 64 MB of text from a generator: the first 2000 ids need the first few blocks only, whatever
    // the text's size (the run keeps the ids and one block).
    const auto tokenizer = build(fixture("llama3_tiny.json"));
    QVERIFY(tokenizer);
    std::string paragraph;
    for (const std::string& t : test::stressTexts(61, 40, 12, false))
        paragraph += t + "\n";
    const std::uint64_t total = 64ull << 20;
    std::uint64_t given = 0;
    const TextReader generator = [&](char* buffer, std::size_t capacity) -> Result<std::size_t> {
        std::size_t n = 0;
        for (; n < capacity && given < total; ++n, ++given)
            buffer[n] = paragraph[given % paragraph.size()];
        return n;
    };
    EncodeControl control;
    control.maxTokens = 2000;
    control.blockBytes = 64 << 10;
    const auto ids = tokenizer->encodeStream(generator, control);
    QVERIFY(ids);
    QCOMPARE(ids->size(), std::size_t(2000));
    QVERIFY2(given <= 4 * control.blockBytes, std::to_string(given).c_str());
    std::string prefix;
    while (prefix.size() < 2 * given)
        prefix += paragraph;
    const auto whole = tokenizer->encode(prefix);
    QCOMPARE(*ids, std::vector<std::int32_t>(whole->begin(), whole->begin() + 2000));
}

void TestTokenizerBpe::cancellationIsPolledOften()
{
    // 8 MB of mixed text: the time between two polls of the cancellation stays small (each regex
    // search is bounded by the match limit, and polls come every few hundred searches and
    // pre-tokens), and a cancel ends the encoding with Error::cancellation().
    const auto tokenizer = build(fixture("llama3_tiny.json"));
    QVERIFY(tokenizer);
    std::string paragraph;
    for (const std::string& t : test::stressTexts(71, 60, 12, false))
        paragraph += t + "\n" + std::string(300, ' ');
    std::string text;
    while (text.size() < (8u << 20))
        text += paragraph;
    using Clock = std::chrono::steady_clock;
    auto last = Clock::now();
    double longest = 0;
    int polls = 0;
    EncodeControl control;
    control.cancelled = [&] {
        const auto now = Clock::now();
        longest = std::max(longest, std::chrono::duration<double>(now - last).count());
        last = now;
        return ++polls >= 200;
    };
    test::BlockReader reader{text, 1 << 20};
    const auto result = tokenizer->encodeStream(reader.reader(), control);
    QVERIFY(!result);
    QVERIFY(result.error().cancelled());
    QCOMPARE(polls, 200);
    QVERIFY2(longest < 0.5, std::to_string(longest).c_str());
    QVERIFY(reader.given < text.size());
}

QTEST_APPLESS_MAIN(TestTokenizerBpe)
#include "tst_tokenizer_bpe.moc"
