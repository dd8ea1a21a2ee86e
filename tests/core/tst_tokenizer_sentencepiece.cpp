// SPDX-License-Identifier: GPL-3.0-or-later
// SentencePiece tokenizer.model through libsentencepiece, on hand-built models whose segmentations are worked out by hand.
#include "core/lm/tokenizer_sentencepiece.h"

#include "common/sentencepiece_proto.h"

#include <QTemporaryDir>
#include <QTest>

#include <fstream>

using namespace kvlens;
using namespace kvlens::lm;

namespace {

std::unique_ptr<SentencePieceTokenizer> build(const std::string& bytes)
{
    auto tokenizer = parseSentencePieceModel(bytes, "test.model");
    if (!tokenizer) {
        qWarning("%s", tokenizer.error().text().c_str());
        return nullptr;
    }
    return std::move(*tokenizer);
}

QList<int> encoded(const Tokenizer& tokenizer, const std::string& text)
{
    auto ids = tokenizer.encode(text);
    if (!ids) {
        qWarning("%s", ids.error().text().c_str());
        return {-1};
    }
    return QList<int>(ids->begin(), ids->end());
}

std::string concatenated(const Tokenizer& tokenizer, const QList<int>& ids)
{
    std::string out;
    for (const int id : ids)
        out += tokenizer.tokenBytes(id);
    return out;
}

} // namespace

class TestTokenizerSentencePiece : public QObject {
    Q_OBJECT

private slots:
    void unigram_data();
    void unigram();
    void bpeWithByteFallback_data();
    void bpeWithByteFallback();
    void tokenBytesAndBos();
    void controlSymbolsAreText();
    void refusals();
    void loadFromFile();
};

void TestTokenizerSentencePiece::unigram_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QList<int>>("ids");
    // The dummy prefix makes "abc" "▁abc"; the best-scoring segmentation (Viterbi over piece log
    // probabilities, Kudo 2018): ▁a + bc = -1 - 2 = -3 beats ▁ab + c = -4, ▁abc = -10,
    // ▁a + b + c = -5.5 and ▁ + a + bc = -7.
    QTest::newRow("abc") << "abc" << QList<int>{4, 9};
    // "▁ab": ▁ab -1.5 beats ▁a + b -3.
    QTest::newRow("ab") << "ab" << QList<int>{6};
    // A space becomes ▁ and starts the next word's pieces.
    QTest::newRow("ab abc") << "ab abc" << QList<int>{6, 4, 9};
}

void TestTokenizerSentencePiece::unigram()
{
    QFETCH(QString, text);
    QFETCH(QList<int>, ids);
    const auto tokenizer = build(test::unigramModel());
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, text.toStdString()), ids);
    // tokenBytes gives the pieces back, the dummy prefix as a leading space.
    QCOMPARE(concatenated(*tokenizer, ids), " " + text.toStdString());
}

void TestTokenizerSentencePiece::bpeWithByteFallback_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QList<int>>("ids");
    // "▁abc" from the symbols ▁ a b c: the highest-scoring pair merges first (SentencePiece BPE):
    // bc -0.5 beats ab -1 and ▁a -2; then ▁a; "abc" and "▁abc" are no pieces: [▁a, bc].
    QTest::newRow("abc") << "abc" << QList<int>{265, 264};
    // "▁ab": ab (-1) before ▁a (-2): [▁, ab].
    QTest::newRow("ab") << "ab" << QList<int>{259, 263};
    // é is no piece: its UTF-8 bytes C3 A9 fall back to <0xC3> <0xA9> (ids 3 + byte).
    QTest::newRow("é") << QString::fromUtf8("é") << QList<int>{259, 3 + 0xC3, 3 + 0xA9};
    QTest::newRow("newline") << "a\nb" << QList<int>{265, 3 + 0x0A, 261};
}

void TestTokenizerSentencePiece::bpeWithByteFallback()
{
    QFETCH(QString, text);
    QFETCH(QList<int>, ids);
    const auto tokenizer = build(test::bpeByteFallbackModel());
    QVERIFY(tokenizer);
    QCOMPARE(encoded(*tokenizer, text.toStdString()), ids);
    QCOMPARE(concatenated(*tokenizer, ids), " " + text.toStdString());
}

void TestTokenizerSentencePiece::tokenBytesAndBos()
{
    const auto unigram = build(test::unigramModel());
    const auto bpe = build(test::bpeByteFallbackModel());
    QVERIFY(unigram && bpe);
    QCOMPARE(unigram->vocabSize(), 11);
    QCOMPARE(bpe->vocabSize(), 266);
    QCOMPARE(unigram->tokenBytes(4), std::string(" a"));
    QCOMPARE(unigram->tokenBytes(0), std::string("<unk>"));
    QCOMPARE(unigram->tokenBytes(1), std::string("<s>"));
    QCOMPARE(unigram->tokenBytes(11), std::string());
    QCOMPARE(bpe->tokenBytes(3 + 0x0A), std::string("\n"));
    QCOMPARE(bpe->tokenBytes(3 + 0xFF), std::string("\xFF"));
    QCOMPARE(bpe->tokenBytes(3), std::string(1, '\0'));
    // bos_id 1 in the trainer spec: added, as Llama's tokenizers do.
    QCOMPARE(unigram->bos(), std::optional<std::int32_t>(1));
    QCOMPARE(unigram->kind(), std::string("sentencepiece"));
    QCOMPARE(unigram->pieceId("<s>"), std::optional<std::int32_t>(1));
    QCOMPARE(unigram->pieceId("\xE2\x96\x81" "ab"), std::optional<std::int32_t>(6));
    QCOMPARE(unigram->pieceId("zzz"), std::optional<std::int32_t>());
    QCOMPARE(unigram->pieceId("<unk>"), std::optional<std::int32_t>(0));
}

void TestTokenizerSentencePiece::controlSymbolsAreText()
{
    // "<s>" in the text is three characters, not BOS: ▁ then the bytes of '<', 's', '>'.
    const auto bpe = build(test::bpeByteFallbackModel());
    QVERIFY(bpe);
    QCOMPARE(encoded(*bpe, "<s>"), (QList<int>{259, 3 + '<', 3 + 's', 3 + '>'}));
    // Unknown characters without byte fallback: unk (0), never a control id.
    const auto unigram = build(test::unigramModel());
    QVERIFY(unigram);
    const QList<int> ids = encoded(*unigram, "<s>");
    QVERIFY(!ids.contains(1) && !ids.contains(-1));
    QVERIFY(ids.contains(0));
}

void TestTokenizerSentencePiece::refusals()
{
    for (const std::string& bad : {std::string("not a protobuf at all \xFF\xFF\xFF"), std::string()}) {
        const auto result = parseSentencePieceModel(bad, "bad.model");
        QVERIFY(!result);
        QVERIFY2(result.error().text().rfind("bad.model: ", 0) == 0, result.error().text().c_str());
    }
    const std::string big(kMaxSentencePieceModelBytes + 1, '\0');
    const auto tooBig = parseSentencePieceModel(big, "big.model");
    QVERIFY(!tooBig);
    QVERIFY2(tooBig.error().text().find("above the cap of 64 MiB") != std::string::npos, tooBig.error().text().c_str());
    // A model whose pieces repeat is refused by the library.
    const auto twice = parseSentencePieceModel(
        test::sentencePieceModel({{"<unk>", 0, test::PieceType::Unknown}, {"a", -1}, {"a", -2}}, 1, false), "twice.model");
    QVERIFY(!twice);
    QVERIFY2(twice.error().text().rfind("twice.model: ", 0) == 0, twice.error().text().c_str());
}

void TestTokenizerSentencePiece::loadFromFile()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("tokenizer.model").toStdString();
    {
        std::ofstream out(path, std::ios::binary);
        out << test::unigramModel();
    }
    const auto tokenizer = loadSentencePieceModel(path);
    QVERIFY2(tokenizer, tokenizer ? "" : tokenizer.error().text().c_str());
    QCOMPARE(encoded(**tokenizer, "abc"), (QList<int>{4, 9}));
    const auto missing = loadSentencePieceModel(dir.filePath("none.model").toStdString());
    QVERIFY(!missing);
    QVERIFY(missing.error().text().find("none.model") != std::string::npos);
    const auto folder = loadSentencePieceModel(dir.path().toStdString());
    QVERIFY(!folder);
}

QTEST_APPLESS_MAIN(TestTokenizerSentencePiece)
#include "tst_tokenizer_sentencepiece.moc"
