// SPDX-License-Identifier: GPL-3.0-or-later
// llama.cpp's KV-cache block types: hand-computed blocks, ggml's own output, and error bounds.
#include "core/common/fp16.h"
#include "core/io/ggml_types.h"
#include "core/rng/rng.h"
#include "common/approx.h"

#include <QTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace kvlens;
namespace gq = kvlens::ggml;

namespace {

using Bytes = std::vector<std::uint8_t>;

std::string hex(std::span<const std::uint8_t> bytes)
{
    static const char* digits = "0123456789ABCDEF";
    std::string s;
    for (const std::uint8_t b : bytes) {
        s += digits[b >> 4];
        s += digits[b & 15];
        s += ' ';
    }
    return s;
}

bool sameBits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// A 32-value block given by its nonzero entries.
std::vector<float> block(std::initializer_list<std::pair<int, float>> entries, float rest = 0.0f)
{
    std::vector<float> x(gq::kBlockSize, rest);
    for (const auto& [i, v] : entries)
        x[static_cast<std::size_t>(i)] = v;
    return x;
}

Bytes quantized(gq::Type type, const std::vector<float>& x)
{
    Bytes out(*gq::rowBytes(type, x.size()), 0xAB);
    const Status s = gq::quantizeRow(type, x, out);
    if (!s)
        qFatal("quantizeRow refused: %s", s.error().text().c_str());
    return out;
}

std::vector<float> dequantized(gq::Type type, const Bytes& in, std::size_t length)
{
    std::vector<float> y(length, std::numeric_limits<float>::quiet_NaN());
    const Status s = gq::dequantizeRow(type, in, y);
    if (!s)
        qFatal("dequantizeRow refused: %s", s.error().text().c_str());
    return y;
}

/// The test vectors in tests/data/ggml_blocks (format in its README).
struct VectorFile {
    std::uint32_t rows = 0, cols = 0, rowBytes = 0;
    std::vector<float> inputs;   ///< rows x cols
    Bytes expected;              ///< rows x rowBytes, ggml's quantize_row_<type>_ref
    std::vector<float> dequant;  ///< rows x cols, ggml's dequantize_row_<type> of `expected`
};

std::vector<char> readAll(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        qFatal("cannot open %s", path.c_str());
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

std::uint32_t u32At(const std::vector<char>& data, std::size_t offset)
{
    std::uint32_t v = 0;
    for (int k = 3; k >= 0; --k)
        v = (v << 8) | static_cast<std::uint8_t>(data[offset + static_cast<std::size_t>(k)]);
    return v;
}

std::vector<float> floatsAt(const std::vector<char>& data, std::size_t offset, std::size_t count)
{
    std::vector<float> v(count);
    for (std::size_t i = 0; i < count; ++i)
        v[i] = std::bit_cast<float>(u32At(data, offset + 4 * i));
    return v;
}

VectorFile loadVectors(const std::string& typeName)
{
    const std::string dir = std::string(KVLENS_TEST_DATA_DIR) + "/ggml_blocks/";
    VectorFile f;
    const std::vector<char> in = readAll(dir + "inputs.bin");
    if (in.size() < 16 || std::memcmp(in.data(), "KVGBIN01", 8) != 0)
        qFatal("inputs.bin: bad header");
    f.rows = u32At(in, 8);
    f.cols = u32At(in, 12);
    const std::size_t n = std::size_t(f.rows) * f.cols;
    if (f.rows > 4096 || f.cols > 4096 || in.size() != 16 + 4 * n)
        qFatal("inputs.bin: %u x %u does not match its %zu bytes", f.rows, f.cols, in.size());
    f.inputs = floatsAt(in, 16, n);

    const std::vector<char> t = readAll(dir + typeName + ".bin");
    if (t.size() < 20 || std::memcmp(t.data(), "KVGBIN01", 8) != 0 || u32At(t, 8) != f.rows || u32At(t, 12) != f.cols)
        qFatal("%s.bin: header does not match inputs.bin", typeName.c_str());
    f.rowBytes = u32At(t, 16);
    if (f.rowBytes > 4096 || t.size() != 20 + std::size_t(f.rows) * f.rowBytes + 4 * n)
        qFatal("%s.bin: size does not match its header", typeName.c_str());
    f.expected.assign(t.begin() + 20, t.begin() + 20 + std::ptrdiff_t(f.rows) * f.rowBytes);
    f.dequant = floatsAt(t, 20 + std::size_t(f.rows) * f.rowBytes, n);
    return f;
}

/// |d - fp16(d)| <= 2^-11 |d| in binary16's normal range (round to nearest, 11-bit significand).
constexpr double kHalfRel = 1.0 / 2048.0;

} // namespace

class TestGgmlBlocks : public QObject {
    Q_OBJECT

private slots:
    void traitsTable()
    {
        // Block sizes from the static_asserts in ggml/src/ggml-common.h: sizeof(ggml_half) plus
        // q8_0: QK8_0 = 32 int8; q4_0, iq4_nl: QK/2 = 16; q4_1: + a second half (m) = 20;
        // q5_0: + uint32 qh = 22; q5_1: + m and qh = 24.
        // Bits per weight as llama.cpp's quantize tool lists them: 8.50, 4.50, 5.00, 5.50, 6.00, 4.50.
        const struct {
            gq::Type type;
            const char* name;
            std::size_t bytes;
            double bits;
        } expected[] = {{gq::Type::Q8_0, "q8_0", 2 + 32, 8.5},   {gq::Type::Q4_0, "q4_0", 2 + 16, 4.5},
                        {gq::Type::Q4_1, "q4_1", 2 + 2 + 16, 5.0}, {gq::Type::Q5_0, "q5_0", 2 + 4 + 16, 5.5},
                        {gq::Type::Q5_1, "q5_1", 2 + 2 + 4 + 16, 6.0}, {gq::Type::IQ4_NL, "iq4_nl", 2 + 16, 4.5}};
        QCOMPARE(gq::kTypes.size(), std::size(expected));
        for (const auto& e : expected) {
            const gq::TypeTraits& t = gq::traits(e.type);
            QCOMPARE(t.type, e.type);
            QCOMPARE(std::string(t.name), std::string(e.name));
            QCOMPARE(t.blockSize, std::size_t(32));
            QCOMPARE(t.bytesPerBlock, e.bytes);
            QCOMPARE(t.bitsPerCoordinate, e.bits);
            QCOMPARE(t.bitsPerCoordinate, 8.0 * double(t.bytesPerBlock) / double(t.blockSize));
            QCOMPARE(*gq::rowBytes(e.type, 128), 4 * e.bytes);
        }
        QCOMPARE(gq::ggmlTypeNames(), std::string("q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl"));
        // The iq4_nl levels are ggml's kvalues_iq4nl: increasing, -127 .. 113.
        QVERIFY(std::is_sorted(gq::kIq4nlValues.begin(), gq::kIq4nlValues.end()));
        QCOMPARE(int(gq::kIq4nlValues.front()), -127);
        QCOMPARE(int(gq::kIq4nlValues.back()), 113);
    }

    void parseNames()
    {
        for (const gq::TypeTraits& t : gq::kTypes) {
            const auto parsed = gq::parseGgmlType(t.name);
            QVERIFY(parsed.ok());
            QCOMPARE(*parsed, t.type);
        }
        // llama.cpp compares the name exactly (ggml_type_name), so upper case and f16 are refused.
        for (const char* bad : {"Q8_0", "q4_k", "f16", "", "iq4_xs", "q8_0 "}) {
            const auto parsed = gq::parseGgmlType(bad);
            QVERIFY2(!parsed.ok(), bad);
            QCOMPARE(parsed.error().field, std::string("ggml type"));
            QVERIFY(parsed.error().message.find("q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl") != std::string::npos);
        }
        // A name with a control character is not echoed into the one-line message.
        const auto odd = gq::parseGgmlType("q4\n0");
        QVERIFY(!odd.ok());
        QVERIFY(odd.error().message.find('\n') == std::string::npos);
    }

    void refusals()
    {
        for (const std::size_t length : {std::size_t(0), std::size_t(31), std::size_t(33), std::size_t(100)}) {
            const auto bytes = gq::rowBytes(gq::Type::Q4_0, length);
            QVERIFY(!bytes.ok());
            QVERIFY(bytes.error().message.find("row length " + std::to_string(length) + " ") != std::string::npos);
            std::vector<float> x(length, 1.0f);
            Bytes out(64);
            const Status s = gq::quantizeRow(gq::Type::Q4_0, x, out);
            QVERIFY(!s);
            QCOMPARE(s.error().field, std::string("q4_0"));
            QVERIFY(s.error().message.find(std::to_string(length)) != std::string::npos);
        }
        std::vector<float> x(64, 1.0f);
        Bytes wrong(35);
        QVERIFY(!gq::quantizeRow(gq::Type::Q8_0, x, wrong)); // 64 values need 68 bytes

        // Non-finite values are refused by index.
        x[37] = std::numeric_limits<float>::quiet_NaN();
        Bytes out(68);
        Status s = gq::quantizeRow(gq::Type::Q8_0, x, out);
        QVERIFY(!s);
        QVERIFY(s.error().message.find("x[37] is NaN") != std::string::npos);
        x[37] = -std::numeric_limits<float>::infinity();
        s = gq::quantizeRow(gq::Type::Q8_0, x, out);
        QVERIFY(!s);
        QVERIFY(s.error().message.find("x[37] is infinite") != std::string::npos);

        // Scales binary16 cannot hold. q8_0: d = 1e7 / 127 = 78740 > 65504.
        x.assign(64, 0.0f);
        x[40] = 1e7f;
        s = gq::quantizeRow(gq::Type::Q8_0, x, out);
        QVERIFY(!s);
        QVERIFY(s.error().message.find("block 1 (x[32..63])") != std::string::npos);
        QVERIFY(s.error().message.find("65520") != std::string::npos);
        // q4_0 holds up to 8 * 65504 = 524032: 5e5 passes, 6e5 (d = -75000) does not.
        x[40] = 5e5f;
        Bytes out18(36);
        QVERIFY(gq::quantizeRow(gq::Type::Q4_0, x, out18));
        x[40] = 6e5f;
        QVERIFY(!gq::quantizeRow(gq::Type::Q4_0, x, out18));
        // q4_1: a constant block of -70000 has d = 0 but m = -70000 outside binary16.
        std::vector<float> flat(32, -70000.0f);
        Bytes out20(20);
        s = gq::quantizeRow(gq::Type::Q4_1, flat, out20);
        QVERIFY(!s);
        QVERIFY(s.error().message.find("m = -70000") != std::string::npos);

        // Dequantizing a stored infinite scale is refused and leaves y untouched.
        Bytes blockBytes(34, 0);
        blockBytes[0] = 0x00;
        blockBytes[1] = 0x7c; // fp16 +inf
        std::vector<float> y(32, 42.0f);
        s = gq::dequantizeRow(gq::Type::Q8_0, blockBytes, y);
        QVERIFY(!s);
        QVERIFY(s.error().message.find("block 0") != std::string::npos);
        QVERIFY(std::all_of(y.begin(), y.end(), [](float v) { return v == 42.0f; }));
        // q4_1 with a NaN minimum (0x7e00) at bytes 2..3.
        Bytes q41(20, 0);
        q41[3] = 0x7e;
        s = gq::dequantizeRow(gq::Type::Q4_1, q41, std::span<float>(y));
        QVERIFY(!s);
        QVERIFY(s.error().message.find("stored m") != std::string::npos);
        // Size mismatches.
        QVERIFY(!gq::dequantizeRow(gq::Type::Q8_0, Bytes(33), std::span<float>(y)));
        std::vector<float> y31(31);
        QVERIFY(!gq::dequantizeRow(gq::Type::Q8_0, Bytes(34), std::span<float>(y31)));
    }

    // Every case worked by hand from ggml's reference; expected y is the dequantized block, `rest`
    // the value of entries not listed. fp16: 1 = 0x3C00, -1 = 0xBC00, 10 = 0x4900 (1.25 * 2^3).
    void handBlocks_data()
    {
        QTest::addColumn<int>("type");
        QTest::addColumn<QByteArray>("input");    // 32 floats
        QTest::addColumn<QByteArray>("expected"); // the block's bytes
        QTest::addColumn<QByteArray>("output");   // 32 floats
        const auto floats = [](const std::vector<float>& v) {
            return QByteArray(reinterpret_cast<const char*>(v.data()), qsizetype(v.size() * sizeof(float)));
        };
        const auto bytes = [](std::initializer_list<int> b, int fill, int total) {
            QByteArray a;
            for (const int v : b)
                a.append(char(v));
            while (a.size() < total)
                a.append(char(fill));
            return a;
        };

        // q8_0, ties: amax = 127 so d = 127/127 = 1, id = 1; roundf sends halves away from zero:
        // 2.5 -> 3, -2.5 -> -3, 0.5 -> 1, -0.5 -> -1, 126.5 -> 127; -127 (same |x| as x[0]) -> -127;
        // 1.49999988 (1.5 - 2^-23) -> 1. Codes are int8: 3 = 0x03, -3 = 0xFD, -1 = 0xFF, -127 = 0x81.
        QTest::newRow("q8_0 ties round away from zero")
            << int(gq::Type::Q8_0)
            << floats(block({{0, 127.f}, {1, 2.5f}, {2, -2.5f}, {3, 0.5f}, {4, -0.5f}, {5, 126.5f}, {6, -127.f},
                             {7, 1.49999988f}}))
            << bytes({0x00, 0x3C, 0x7F, 0x03, 0xFD, 0x01, 0xFF, 0x7F, 0x81, 0x01}, 0x00, 34)
            << floats(block({{0, 127.f}, {1, 3.f}, {2, -3.f}, {3, 1.f}, {4, -1.f}, {5, 127.f}, {6, -127.f}, {7, 1.f}}));

        // q4_0, the largest |x| is negative: max = -8 (the later +8 has the same |x| and does not
        // replace it), d = max / -8 = 1, id = 1, code = min(15, trunc(x + 8.5)), y = (code - 8) d.
        //   -8 -> 0.5 -> 0 (y -8);   8 -> 16.5 -> 16 -> 15 (y 7: the one value that is clamped)
        //   7 -> 15; 2.5 -> 11 (y 3) and -2.5 -> 6 (y -2): ties go up, not away from zero
        //   7.5 -> 16 -> 15 (y 7); -7.5 -> 1 (y -7); 0 -> 8 (y 0); x[16] 3.5 -> 12; x[17] -0.5 -> 8
        // qs[j] = code[j] | code[j + 16] << 4: 0xC0, 0x8F, 0x8F, 0x8B, 0x86, 0x88, 0x8F, 0x81, 0x88...
        QTest::newRow("q4_0 negative max")
            << int(gq::Type::Q4_0)
            << floats(block({{0, -8.f}, {1, 8.f}, {2, 7.f}, {3, 2.5f}, {4, -2.5f}, {6, 7.5f}, {7, -7.5f}, {16, 3.5f},
                             {17, -0.5f}}))
            << bytes({0x00, 0x3C, 0xC0, 0x8F, 0x8F, 0x8B, 0x86, 0x88, 0x8F, 0x81}, 0x88, 18)
            << floats(block({{0, -8.f}, {1, 7.f}, {2, 7.f}, {3, 3.f}, {4, -2.f}, {6, 7.f}, {7, -7.f}, {16, 4.f}}));
        // q4_0, positive max: d = 8 / -8 = -1, id = -1: 8 -> -8 + 8.5 -> 0 (y = -8 * -1 = 8),
        // -8 -> 16.5 -> 15 (y = 7 * -1 = -7); 0 -> -0 -> 8 (y = 0 * -1 = -0). The grid follows max's sign.
        QTest::newRow("q4_0 positive max")
            << int(gq::Type::Q4_0) << floats(block({{0, 8.f}, {1, -8.f}}))
            << bytes({0x00, 0xBC, 0x80, 0x8F}, 0x88, 18) << floats(block({{0, 8.f}, {1, -7.f}}, -0.0f));
        // q4_0, one outlier: x[5] = -80 sets d = 10 (fp16 0x4900), id = 0.1f; the rest are rounded to
        // multiples of 10: 4.9 -> 0.49 + 8.5 -> 8 (y 0); 5 -> 0.5 -> 9 (y 10); -5 -> -0.5 -> 8 (y 0);
        // -5.1 -> -0.51 -> 7 (y -10); 15 -> 1.5 -> 10 (y 20); -80 -> -8 -> 0 (y -80).
        QTest::newRow("q4_0 one outlier")
            << int(gq::Type::Q4_0)
            << floats(block({{0, 4.9f}, {1, 5.f}, {2, -5.f}, {3, -5.1f}, {4, 15.f}, {5, -80.f}}))
            << bytes({0x00, 0x49, 0x88, 0x89, 0x88, 0x87, 0x8A, 0x80}, 0x88, 18)
            << floats(block({{1, 10.f}, {3, -10.f}, {4, 20.f}, {5, -80.f}}));
        // q4_1: min = -1, max = 14, d = 15/15 = 1, m = -1 (0xBC00); code = trunc((x + 1) + 0.5):
        // -1 -> 0; 14 -> 15; 0.5 -> 2 (tie up, y 1); 6.5 -> 8 (y 7); -0.5 -> 1 (y 0); 0 -> 1 (y 0).
        QTest::newRow("q4_1 min and ties")
            << int(gq::Type::Q4_1) << floats(block({{0, -1.f}, {1, 14.f}, {2, 0.5f}, {3, 6.5f}, {4, -0.5f}}))
            << bytes({0x00, 0x3C, 0x00, 0xBC, 0x10, 0x1F, 0x12, 0x18}, 0x11, 20)
            << floats(block({{0, -1.f}, {1, 14.f}, {2, 1.f}, {3, 7.f}}));
        // q5_0: max = -16, d = 1; code = min(31, trunc(x + 16.5)):
        //   j<16: -16 -> 0; 15.5 -> 32 -> 31 (y 15); -0.5 -> 16 (y 0); -1 -> 15; 0 -> 16
        //   j>=16: 3 -> 19; -16 -> 0; 0 -> 16; x[31] -7.5 -> 9 (y -7)
        // qh bit j = bit 4 of code j: j<16 -> 0,1,1,0,1...1 = 0xFFF6; j>=16 -> 1,0,1...1,0 = 0x7FFD;
        // qh = 0x7FFDFFF6, stored little-endian F6 FF FD 7F. qs: 0|3<<4 = 0x30, 15|0 = 0x0F,
        // 0x00, 0x0F, 0x00 x 11, 0|9<<4 = 0x90.
        QTest::newRow("q5_0 fifth bits")
            << int(gq::Type::Q5_0)
            << floats(block({{0, -16.f}, {1, 15.5f}, {2, -0.5f}, {3, -1.f}, {16, 3.f}, {17, -16.f}, {31, -7.5f}}))
            << bytes({0x00, 0x3C, 0xF6, 0xFF, 0xFD, 0x7F, 0x30, 0x0F, 0x00, 0x0F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                      0x00, 0x00, 0x00, 0x00, 0x00, 0x90},
                     0x00, 22)
            << floats(block({{0, -16.f}, {1, 15.f}, {3, -1.f}, {16, 3.f}, {17, -16.f}, {31, -7.f}}));
        // q5_1: min = 0, max = 31, d = 1, m = 0; code = trunc(x + 0.5): 31 -> 31; 16.5 -> 17 (tie up);
        // 15.49 -> 15; x[16] 0.5 -> 1; x[17] 20 -> 20. Fifth bits: codes 31 (j1), 17 (j2), 20 (j17)
        // -> qh = bits 1, 2, 17 = 0x00020006. qs: 0|1<<4 = 0x10, 15|4<<4 = 0x4F, 0x01, 0x0F, 0x00...
        QTest::newRow("q5_1 fifth bits")
            << int(gq::Type::Q5_1) << floats(block({{1, 31.f}, {2, 16.5f}, {3, 15.49f}, {16, 0.5f}, {17, 20.f}}))
            << bytes({0x00, 0x3C, 0x00, 0x00, 0x06, 0x00, 0x02, 0x00, 0x10, 0x4F, 0x01, 0x0F}, 0x00, 24)
            << floats(block({{1, 31.f}, {2, 17.f}, {3, 15.f}, {16, 1.f}, {17, 20.f}}));
        // iq4_nl, every value on a level: max = -127, d0 = -127 / -127 = 1, codes = the level indices.
        // The least-squares scale sum(x^2 q x) / sum(x^2 q q) has q = x, so both sums are the same
        // float sequence and d = 1 exactly. qs[j] = j | j << 4 = 0x00, 0x11, ... 0xFF.
        std::vector<float> levels(32);
        for (std::size_t j = 0; j < 16; ++j)
            levels[j] = levels[j + 16] = gq::kIq4nlValues[j];
        QTest::newRow("iq4_nl on the levels")
            << int(gq::Type::IQ4_NL) << floats(levels)
            << bytes({0x00, 0x3C, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD,
                      0xEE, 0xFF},
                     0, 18)
            << floats(levels);
        // iq4_nl, ties: d0 = 1; -115.5 (midpoint of -127 and -104) -> code 1; 7 (midpoint of 1 and
        // 13) -> code 9; -4.5 (midpoint of -10 and 1) -> code 8: a tie goes to the upper level. 0 -> 8
        // (level 1 is nearer than -10). With weights x^2, in exact arithmetic:
        //   sum w q x = 16129*127*127 + 13340.25*104*115.5 + 49*13*7 - 20.25*4.5 = 420392091.875
        //   sum w q q = 16129*127*127 + 13340.25*104*104 + 49*13*13 + 20.25      = 404441086.25
        //   d = 1.0394396..., 1064.39 units of 2^-10 -> fp16 1064/1024 = 1.0390625 = 0x3C28
        // (0.11 of a unit from the rounding midpoint: float sums cannot move it there).
        // qs: 0|8<<4 = 0x80, 1|0x80 = 0x81, 9|0x80 = 0x89, then 0x88. y = 1.0390625 * level.
        QTest::newRow("iq4_nl ties go up")
            << int(gq::Type::IQ4_NL) << floats(block({{0, -127.f}, {1, -115.5f}, {2, 7.f}, {3, -4.5f}}))
            << bytes({0x28, 0x3C, 0x80, 0x81, 0x89}, 0x88, 18)
            << floats(block({{0, -127.f * 1.0390625f}, {1, -104.f * 1.0390625f}, {2, 13.f * 1.0390625f}},
                            1.0390625f));

        // All-zero blocks: d = 0 everywhere, never NaN. q4_0 and q5_0 divide max = +0 by -8 / -16, so
        // d = -0 (0x8000) and y = 0 * -0 = -0; their codes are trunc(0 + 8.5) = 8 (qs 0x88) and
        // trunc(0 + 16.5) = 16 (qs 0x00, every fifth bit set: qh = 0xFFFFFFFF). q4_1/q5_1: min = max
        // = 0, d = m = 0, codes 0. iq4_nl: max |x| < 1e-15, d = 0 and codes 0 (ggml-org/ggml d99724f2's
        // reference leaves these codes unset; llama.cpp 01243c58 clears them), so y = 0 * -127 = -0.
        const std::vector<float> zeros(32, 0.0f);
        QTest::newRow("q8_0 zero") << int(gq::Type::Q8_0) << floats(zeros) << bytes({}, 0, 34) << floats(zeros);
        QTest::newRow("q4_0 zero") << int(gq::Type::Q4_0) << floats(zeros) << bytes({0x00, 0x80}, 0x88, 18)
                                   << floats(block({}, -0.0f));
        QTest::newRow("q4_1 zero") << int(gq::Type::Q4_1) << floats(zeros) << bytes({}, 0, 20) << floats(zeros);
        QTest::newRow("q5_0 zero") << int(gq::Type::Q5_0) << floats(zeros)
                                   << bytes({0x00, 0x80, 0xFF, 0xFF, 0xFF, 0xFF}, 0x00, 22) << floats(block({}, -0.0f));
        QTest::newRow("q5_1 zero") << int(gq::Type::Q5_1) << floats(zeros) << bytes({}, 0, 24) << floats(zeros);
        QTest::newRow("iq4_nl zero") << int(gq::Type::IQ4_NL) << floats(zeros) << bytes({}, 0, 18)
                                     << floats(block({}, -0.0f));
    }
    void handBlocks()
    {
        QFETCH(int, type);
        QFETCH(QByteArray, input);
        QFETCH(QByteArray, expected);
        QFETCH(QByteArray, output);
        const auto t = static_cast<gq::Type>(type);
        std::vector<float> x(32), want(32);
        std::memcpy(x.data(), input.constData(), 32 * sizeof(float));
        std::memcpy(want.data(), output.constData(), 32 * sizeof(float));
        const Bytes expectedBytes(expected.begin(), expected.end());
        const Bytes got = quantized(t, x);
        QVERIFY2(got == expectedBytes, ("got " + hex(got) + "\nexpected " + hex(expectedBytes)).c_str());
        const std::vector<float> y = dequantized(t, got, 32);
        for (std::size_t j = 0; j < 32; ++j)
            QVERIFY2(sameBits(y[j], want[j]), qPrintable(QStringLiteral("y[%1] = %2, expected %3")
                                                             .arg(j).arg(double(y[j])).arg(double(want[j]))));
    }

    /// The iq4_nl tie row's d from its least-squares formula in double, and the margin that makes
    /// its fp16 rounding safe from float summation order.
    void iq4nlScaleIsTheWeightedLeastSquaresOne()
    {
        const double x[4] = {-127, -115.5, 7, -4.5};
        const double q[4] = {-127, -104, 13, 1};
        double sqx = 0, sqq = 0;
        for (int j = 0; j < 4; ++j) {
            sqx += x[j] * x[j] * q[j] * x[j];
            sqq += x[j] * x[j] * q[j] * q[j];
        }
        QCOMPARE(sqx, 420392091.875);
        QCOMPARE(sqq, 404441086.25);
        const double units = sqx / sqq * 1024.0; // fp16 spacing in [1, 2) is 2^-10
        QVERIFY(std::abs(units - std::floor(units) - 0.5) > 0.1);
        QCOMPARE(int(floatToHalfBits(float(sqx / sqq))), 0x3C28);
    }

    /// A block so small that 1/d overflows float: ggml converts inf to int8 (undefined); KVLens clamps.
    /// Either way fp16(d) = 0 and the block dequantizes to zeros.
    void tinyBlockHasZeroScale()
    {
        for (const gq::TypeTraits& t : gq::kTypes) {
            std::vector<float> x = block({{3, 1e-38f}, {9, -5e-39f}});
            const Bytes got = quantized(t.type, x);
            QCOMPARE(int(got[0] | (got[1] << 8)) & 0x7fff, 0); // d = +-0
            const std::vector<float> y = dequantized(t.type, got, 32);
            for (std::size_t j = 0; j < 32; ++j)
                QVERIFY2(std::abs(y[j]) < 1e-37f, t.name.data()); // q4_1 keeps m = fp16(-5e-39) = -0
            if (t.type == gq::Type::Q8_0) {
                QCOMPARE(int(std::int8_t(got[2 + 3])), 127);   // +inf clamped
                QCOMPARE(int(std::int8_t(got[2 + 9])), -127);  // -inf clamped
                QCOMPARE(int(std::int8_t(got[2 + 0])), 0);     // 0 * inf = NaN -> 0
            }
        }
    }

    // Rows quantized by ggml itself (tests/data/ggml_blocks/README.md): bytes and floats bit for bit.
    void ggmlVectors_data()
    {
        QTest::addColumn<int>("type");
        for (const gq::TypeTraits& t : gq::kTypes)
            QTest::newRow(t.name.data()) << int(t.type);
    }
    void ggmlVectors()
    {
        QFETCH(int, type);
        const auto t = static_cast<gq::Type>(type);
        const gq::TypeTraits& traits = gq::traits(t);
        const VectorFile f = loadVectors(std::string(traits.name));
        QCOMPARE(f.cols, 128u);
        QCOMPARE(f.rows, 38u);
        QCOMPARE(std::size_t(f.rowBytes), *gq::rowBytes(t, f.cols));
        int skippedBlocks = 0;
        for (std::uint32_t r = 0; r < f.rows; ++r) {
            const std::span<const float> x(f.inputs.data() + std::size_t(r) * f.cols, f.cols);
            const Bytes want(f.expected.begin() + std::ptrdiff_t(r) * f.rowBytes,
                             f.expected.begin() + std::ptrdiff_t(r + 1) * f.rowBytes);
            Bytes got(f.rowBytes);
            const Status s = gq::quantizeRow(t, x, got);
            QVERIFY2(s.ok(), s.ok() ? "" : s.error().text().c_str());
            for (std::size_t b = 0; b < f.cols / 32; ++b) {
                const std::size_t at = b * traits.bytesPerBlock;
                std::size_t compared = traits.bytesPerBlock;
                if (t == gq::Type::IQ4_NL) {
                    // ggml d99724f2 leaves the codes of a block with max |x| < 1e-15 unset (the
                    // generator stored zeros there): compare its d only; handBlocks covers the codes.
                    float amax = 0.0f;
                    for (std::size_t j = 0; j < 32; ++j)
                        amax = std::max(amax, std::abs(x[b * 32 + j]));
                    if (amax < 1e-15f) {
                        compared = 2;
                        ++skippedBlocks;
                    }
                }
                QVERIFY2(std::equal(got.begin() + std::ptrdiff_t(at), got.begin() + std::ptrdiff_t(at + compared),
                                    want.begin() + std::ptrdiff_t(at)),
                         qPrintable(QStringLiteral("row %1 block %2\n got %3\nggml %4")
                                        .arg(r)
                                        .arg(b)
                                        .arg(QString::fromStdString(hex(std::span(got).subspan(at, traits.bytesPerBlock))))
                                        .arg(QString::fromStdString(hex(std::span(want).subspan(at, traits.bytesPerBlock))))));
            }
            // Our dequantizer on ggml's bytes gives ggml's floats, bit for bit (signed zeros included).
            const std::vector<float> y = dequantized(t, want, f.cols);
            for (std::size_t j = 0; j < f.cols; ++j)
                QVERIFY2(sameBits(y[j], f.dequant[std::size_t(r) * f.cols + j]),
                         qPrintable(QStringLiteral("row %1, y[%2] = %3, ggml %4")
                                        .arg(r)
                                        .arg(j)
                                        .arg(double(y[j]))
                                        .arg(double(f.dequant[std::size_t(r) * f.cols + j]))));
        }
        // inputs.bin: row 32 is all zero (4 blocks), row 33 has one zero block and row 34 one block of -0,
        // so iq4_nl skips the codes of exactly 6 blocks.
        QCOMPARE(skippedBlocks, t == gq::Type::IQ4_NL ? 6 : 0);
    }

    // |x - x^| within each type's rounding bound, on seeded Gaussian and Student-t rows, with the scale
    // recomputed here in double from the block (so the stored fp16 scale is checked too).
    void errorBound_data()
    {
        QTest::addColumn<int>("type");
        for (const gq::TypeTraits& t : gq::kTypes)
            QTest::newRow(t.name.data()) << int(t.type);
    }
    void errorBound()
    {
        QFETCH(int, type);
        const auto t = static_cast<gq::Type>(type);
        Rng rng(EngineKind::Pcg64, 20240531);
        const std::size_t n = 256;
        double worstRatio = 0.0;
        for (int row = 0; row < 300; ++row) {
            std::vector<float> x(n);
            const double scale = std::array{0.05, 1.0, 30.0}[std::size_t(row % 3)];
            for (float& v : x)
                v = float(scale * (row % 2 ? rng.studentT(3.0) : rng.normal()));
            const Bytes q = quantized(t, x);
            const std::vector<float> y = dequantized(t, q, n);
            for (std::size_t b = 0; b < n / 32; ++b) {
                const float* xb = x.data() + b * 32;
                double amax = 0, signedMax = 0, lo = xb[0], hi = xb[0];
                for (std::size_t j = 0; j < 32; ++j) {
                    if (std::abs(xb[j]) > amax) {
                        amax = std::abs(xb[j]);
                        signedMax = xb[j];
                    }
                    lo = std::min(lo, double(xb[j]));
                    hi = std::max(hi, double(xb[j]));
                }
                const float dStored = halfBitsToFloat(std::uint16_t(q[b * gq::traits(t).bytesPerBlock]
                                                                    | (q[b * gq::traits(t).bytesPerBlock + 1] << 8)));
                for (std::size_t j = 0; j < 32; ++j) {
                    const double v = xb[j];
                    const double err = std::abs(v - double(y[b * 32 + j]));
                    double bound = 0;
                    switch (t) {
                    case gq::Type::Q8_0: { // d = amax/127; rounding d/2, fp16(d) moves 127 d by 127 d 2^-11
                        const double d = amax / 127;
                        bound = d / 2 + 127 * d * kHalfRel;
                        break;
                    }
                    case gq::Type::Q4_0:
                    case gq::Type::Q5_0: { // d = max/-2^(b-1); x/d above 2^(b-1) - 1/2 is clamped: error <= |d|
                        const double half = t == gq::Type::Q4_0 ? 8 : 16;
                        const double d = signedMax / -half;
                        bound = (v / d > half - 0.5 ? 1.0 : 0.5) * std::abs(d) + half * std::abs(d) * kHalfRel;
                        break;
                    }
                    case gq::Type::Q4_1:
                    case gq::Type::Q5_1: { // d = (max - min)/(2^b - 1); fp16 rounding of d and of m = min
                        const double top = t == gq::Type::Q4_1 ? 15 : 31;
                        const double d = (hi - lo) / top;
                        bound = d / 2 + top * d * kHalfRel + std::abs(lo) * kHalfRel;
                        break;
                    }
                    case gq::Type::IQ4_NL: {
                        // Codes are the nearest levels to x / d0, d0 = max / -127: within half the widest
                        // gap (24 / 2) or, above the top level 113, within 127 - 113 = 14 units of d0. The
                        // stored d replaces d0: |level| <= 127 times the change.
                        const double d0 = signedMax / -127;
                        bound = 14 * std::abs(d0) + 127 * std::abs(double(dStored) - d0);
                        break;
                    }
                    }
                    bound += 1e-6 * amax + 1e-6 * std::abs(lo); // float rounding of x * id and x - min
                    QVERIFY2(err <= bound, qPrintable(QStringLiteral("%1 row %2 x[%3] = %4: |x - y| = %5 > %6")
                                                          .arg(gq::traits(t).name.data())
                                                          .arg(row)
                                                          .arg(b * 32 + j)
                                                          .arg(v)
                                                          .arg(err)
                                                          .arg(bound)));
                    worstRatio = std::max(worstRatio, err / bound);
                }
                if (t == gq::Type::IQ4_NL) {
                    // The stored d is fp16 of the x^2-weighted least-squares scale for the stored codes.
                    double sqx = 0, sqq = 0;
                    for (std::size_t j = 0; j < 32; ++j) {
                        const std::uint8_t byte = q[b * 18 + 2 + (j % 16)];
                        const double level = gq::kIq4nlValues[j < 16 ? byte & 15 : byte >> 4];
                        sqx += double(xb[j]) * xb[j] * level * xb[j];
                        sqq += double(xb[j]) * xb[j] * level * level;
                    }
                    const double dLsq = sqx / sqq;
                    QVERIFY(std::abs(double(dStored) - dLsq) <= kHalfRel * std::abs(dLsq) + 1e-5 * std::abs(dLsq));
                }
            }
        }
        // The bounds are tight: on these rows some value comes within 10% of its bound (0.97-0.997 seen).
        QVERIFY2(worstRatio > 0.9, qPrintable(QString::number(worstRatio)));
    }
};

QTEST_APPLESS_MAIN(TestGgmlBlocks)
#include "tst_ggml_blocks.moc"
