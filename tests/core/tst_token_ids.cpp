// SPDX-License-Identifier: GPL-3.0-or-later
// Token ids from .npy files: the int32/int64 shapes accepted, and every refusal.
#include "core/lm/token_ids.h"

#include <QTemporaryDir>
#include <QTest>

#include <cstring>
#include <fstream>

using namespace kvlens;
using namespace kvlens::lm;

namespace {

/// A version 1.0 .npy file: the dict as given (NumPy's spelling), padded to a 64-byte boundary as
/// NumPy pads it, then `payload` as it is.
std::vector<std::uint8_t> npy(const std::string& dict, const std::vector<std::uint8_t>& payload)
{
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0)
        header += ' ';
    header += '\n';
    std::string file = "\x93NUMPY";
    file += {'\x01', '\x00', static_cast<char>(header.size() & 0xFF), static_cast<char>(header.size() >> 8)};
    file += header;
    std::vector<std::uint8_t> out(file.begin(), file.end());
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

template <class T>
std::vector<std::uint8_t> littleEndian(const std::vector<T>& values)
{
    std::vector<std::uint8_t> out(values.size() * sizeof(T));
    std::memcpy(out.data(), values.data(), out.size()); // this machine is little-endian (token_ids.cpp asserts it)
    return out;
}

Result<std::vector<std::int32_t>> parse(const std::vector<std::uint8_t>& bytes)
{
    return parseTokenIdsNpy(bytes, "ids.npy");
}

bool refusedWith(const Result<std::vector<std::int32_t>>& result, const std::string& part)
{
    if (result) {
        qWarning("accepted, expected a refusal with '%s'", part.c_str());
        return false;
    }
    const std::string text = result.error().text();
    if (text.rfind("ids.npy: ", 0) != 0 || text.find(part) == std::string::npos) {
        qWarning("'%s' lacks '%s'", text.c_str(), part.c_str());
        return false;
    }
    return true;
}

} // namespace

class TestTokenIds : public QObject {
    Q_OBJECT

private slots:
    void accepted_data();
    void accepted();
    void refused();
    void readFromFile();
    void checkAgainstVocabulary();
};

void TestTokenIds::accepted_data()
{
    QTest::addColumn<QByteArray>("file");
    const std::vector<std::int32_t> ids32 = {0, 15496, 995, 50256, (1 << 24) - 1};
    const std::vector<std::int64_t> ids64 = {0, 15496, 995, 50256, (1 << 24) - 1};
    const auto bytes = [](const std::vector<std::uint8_t>& v) { return QByteArray(reinterpret_cast<const char*>(v.data()), static_cast<qsizetype>(v.size())); };
    QTest::newRow("<i4 (5,)") << bytes(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", littleEndian(ids32)));
    QTest::newRow("<i8 (5,)") << bytes(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }", littleEndian(ids64)));
    QTest::newRow("<i8 (1, 5)") << bytes(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1, 5), }", littleEndian(ids64)));
    QTest::newRow("=i4 (5,)") << bytes(npy("{'descr': '=i4', 'fortran_order': False, 'shape': (5,), }", littleEndian(ids32)));
}

void TestTokenIds::accepted()
{
    QFETCH(QByteArray, file);
    const std::vector<std::uint8_t> bytes(file.begin(), file.end());
    const auto ids = parse(bytes);
    QVERIFY2(ids, ids ? "" : ids.error().text().c_str());
    QCOMPARE(*ids, (std::vector<std::int32_t>{0, 15496, 995, 50256, (1 << 24) - 1}));
}

void TestTokenIds::refused()
{
    const std::vector<std::int32_t> three = {1, 2, 3};
    const std::vector<std::int64_t> three64 = {1, 2, 3};
    const auto p32 = littleEndian(three);
    QVERIFY(refusedWith(parse(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", p32)), "dtype '<f4'"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<u4', 'fortran_order': False, 'shape': (3,), }", p32)), "dtype '<u4'"));
    QVERIFY(refusedWith(parse(npy("{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }", p32)), "dtype '>i4'"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i2', 'fortran_order': False, 'shape': (6,), }", p32)), "dtype '<i2'"));
    QVERIFY(refusedWith(parse(npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (3,), }", p32)),
                        "token ids are '<i4' or '<i8'"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }", p32)), "fortran_order"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 1), }", p32)), "shape (3, 1)"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 3), }", p32)), "shape (1, 1, 3)"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (), }", littleEndian(std::vector<std::int32_t>{1}))),
                        "shape ()"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (0,), }", {})), "holds no token ids"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", p32)), "the payload is 12 bytes"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", p32)), "the payload is 12 bytes"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (9223372036854775807,), }", p32)),
                        "needs more"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", littleEndian(std::vector<std::int32_t>{1, -5, 3}))),
                        "id -5 at index 1"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                                  littleEndian(std::vector<std::int64_t>{1, 2, std::int64_t(1) << 40}))),
                        "id 1099511627776 at index 2"));
    QVERIFY(refusedWith(parse(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                                  littleEndian(std::vector<std::int64_t>{1 << 24, 2, 3}))),
                        "id 16777216 at index 0 is outside [0, 16777216)"));
    QVERIFY(refusedWith(parse({'n', 'o', 't'}), "file too short"));
    std::vector<std::uint8_t> badMagic = npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", littleEndian(three64));
    badMagic[1] = 'X';
    QVERIFY(refusedWith(parse(badMagic), "not a .npy file"));
}

void TestTokenIds::readFromFile()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("ids.npy").toStdString();
    const auto bytes = npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", littleEndian(std::vector<std::int64_t>{7, 8, 9}));
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    const auto ids = readTokenIds(path);
    QVERIFY2(ids, ids ? "" : ids.error().text().c_str());
    QCOMPARE(*ids, (std::vector<std::int32_t>{7, 8, 9}));
    // The size cap is checked before reading.
    const auto capped = readTokenIds(path, bytes.size() - 1);
    QVERIFY(!capped);
    QVERIFY2(capped.error().text().find("above the cap") != std::string::npos, capped.error().text().c_str());
    QVERIFY(!readTokenIds(dir.filePath("missing.npy").toStdString()));
    QVERIFY(!readTokenIds(dir.path().toStdString()));
}

void TestTokenIds::checkAgainstVocabulary()
{
    const std::vector<std::int32_t> ids = {0, 5, 99, 100};
    QVERIFY(checkTokenIds(std::span(ids).first(3), 100, "x"));
    const Status s = checkTokenIds(ids, 100, "x");
    QVERIFY(!s);
    QCOMPARE(s.error().text(), std::string("x: token id 100 at index 3 is outside the vocabulary [0, 100)"));
}

QTEST_APPLESS_MAIN(TestTokenIds)
#include "tst_token_ids.moc"
