// SPDX-License-Identifier: GPL-3.0-or-later
// The GGUF reader and the memory map: metadata round trips, every weight type read back against formulas
// written here, and hostile headers, each refused with the field named.
#include "core/common/fp16.h"
#include "core/io/gguf.h"
#include "core/io/mapped_file.h"
#include "common/gguf_writer.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace kvlens;
using namespace kvlens::io;
using ggml::GgmlType;
using test::GgufWriter;
using Bytes = std::vector<std::uint8_t>;

Q_DECLARE_METATYPE(std::function<void(GgufWriter&)>)

namespace {

/// A row of a hand-built tensor: its stored bytes and the values a formula written here gives.
struct HandRow {
    Bytes bytes;
    std::vector<float> values;
};

void putHalf(Bytes& b, std::size_t at, std::uint16_t bits)
{
    b[at] = static_cast<std::uint8_t>(bits & 0xff);
    b[at + 1] = static_cast<std::uint8_t>(bits >> 8);
}

/// ggml-common.h's kvalues_iq4nl, copied here so the test does not read the table under test.
constexpr int kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/// The 32-value types, one block per row r: x = d * (code) [+ m], codes chosen per value.
HandRow smallBlock(GgmlType type, int r)
{
    HandRow row;
    row.values.resize(32);
    switch (type) {
    case GgmlType::Q8_0: // fp16 0x3800 = 0.5; q_j = j - 16 + r
        row.bytes.assign(34, 0);
        putHalf(row.bytes, 0, 0x3800);
        for (int j = 0; j < 32; ++j) {
            row.bytes[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(j - 16 + r));
            row.values[j] = 0.5f * float(j - 16 + r);
        }
        break;
    case GgmlType::Q4_0: // 0x4000 = 2; value j < 16: low nibble j, value j + 16: high nibble 15 - j; x = 2 (q - 8)
    case GgmlType::IQ4_NL: // 0x3C00 = 1; x = kvalues[q]
    case GgmlType::Q4_1: { // 0x3400 = 0.25, m = 0xBC00 = -1; x = 0.25 q - 1
        row.bytes.assign(type == GgmlType::Q4_1 ? 20 : 18, 0);
        const std::size_t qs = type == GgmlType::Q4_1 ? 4 : 2;
        putHalf(row.bytes, 0, type == GgmlType::Q4_0 ? 0x4000 : type == GgmlType::IQ4_NL ? 0x3C00 : 0x3400);
        if (type == GgmlType::Q4_1)
            putHalf(row.bytes, 2, 0xBC00);
        for (int j = 0; j < 16; ++j) {
            const int lo = (j + r) % 16, hi = 15 - j;
            row.bytes[qs + j] = static_cast<std::uint8_t>(lo | (hi << 4));
            for (const auto& [k, q] : {std::pair{j, lo}, std::pair{j + 16, hi}})
                row.values[k] = type == GgmlType::Q4_0 ? 2.0f * float(q - 8)
                    : type == GgmlType::IQ4_NL         ? float(kIq4nl[q])
                                                       : 0.25f * float(q) - 1.0f;
        }
        break;
    }
    case GgmlType::Q5_0: // 0x3C00 = 1; qh = 0xAAAAAAAA >> r (fifth bit of value j); x = q - 16
    case GgmlType::Q5_1: { // 0x3800 = 0.5, m = 0x4000 = 2; qh = 0x0F0F0F0F; x = 0.5 q + 2
        const bool affine = type == GgmlType::Q5_1;
        row.bytes.assign(affine ? 24 : 22, 0);
        putHalf(row.bytes, 0, affine ? 0x3800 : 0x3C00);
        if (affine)
            putHalf(row.bytes, 2, 0x4000);
        const std::uint32_t qh = affine ? 0x0F0F0F0Fu : (0xAAAAAAAAu >> r);
        const std::size_t h = affine ? 4 : 2;
        for (int k = 0; k < 4; ++k)
            row.bytes[h + k] = static_cast<std::uint8_t>(qh >> (8 * k));
        for (int j = 0; j < 16; ++j) {
            row.bytes[h + 4 + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
            for (const auto& [k, nib] : {std::pair{j, j}, std::pair{j + 16, 15 - j}}) {
                const int q = nib + 16 * int((qh >> k) & 1u);
                row.values[k] = affine ? 0.5f * float(q) + 2.0f : float(q - 16);
            }
        }
        break;
    }
    default: qFatal("smallBlock: not a 32-value type");
    }
    return row;
}

/// q4_K / q5_K super-block: d = 0.5 (0x3800), dmin = 0.25 (0x3400), 6-bit scales sc_j = 10 + 7j and
/// mins m_j = 63 - 5j (both need the high bits), codes q(i) = (5i + 3 + r) mod 16 (q5_K: (7i + 1 + r)
/// mod 32). Value i: chunk c = i / 64, w = i mod 64, sub-block j = 2c + (w >= 32), l = w mod 32; its
/// low four bits are the low (w < 32) or high nibble of qs[32c + l], its fifth bit is bit j of qh[l].
/// x_i = 0.5 sc_j q(i) - 0.25 m_j.
HandRow kBlock45(bool fifth, int r)
{
    HandRow row;
    row.bytes.assign(fifth ? 176 : 144, 0);
    putHalf(row.bytes, 0, 0x3800);
    putHalf(row.bytes, 2, 0x3400);
    int sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = 10 + 7 * j;
        m[j] = 63 - 5 * j;
    }
    std::uint8_t* scales = row.bytes.data() + 4; // the 12-byte packing, written out
    for (int j = 0; j < 4; ++j) {
        scales[j] = static_cast<std::uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = static_cast<std::uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        scales[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    std::uint8_t* qh = row.bytes.data() + 16;
    std::uint8_t* qs = row.bytes.data() + (fifth ? 48 : 16);
    row.values.resize(256);
    for (int i = 0; i < 256; ++i) {
        const int q = fifth ? (7 * i + 1 + r) % 32 : (5 * i + 3 + r) % 16;
        const int c = i / 64, w = i % 64, j = 2 * c + (w >= 32 ? 1 : 0), l = w % 32;
        qs[32 * c + l] |= static_cast<std::uint8_t>(w < 32 ? (q & 15) : (q & 15) << 4);
        if (q >= 16)
            qh[l] |= static_cast<std::uint8_t>(1u << j);
        row.values[i] = 0.5f * float(sc[j]) * float(q) - 0.25f * float(m[j]);
    }
    return row;
}

/// q6_K super-block: d = 0.125 (0x3000) at byte 208, int8 scales s_i = 9i - 70 + r at 192 + i, codes
/// q(k) = (11k + 5 + r) mod 64. Value k: half h = k / 128, run t = (k mod 128) / 32, l = k mod 32; low
/// four bits: nibble (low for t < 2) of ql[64h + l + 32 (t odd)]; bits 4, 5: bits 2t, 2t + 1 of
/// qh[128 + 32h + l]; scale s[8h + l / 16 + 2t]. x_k = 0.125 s (q(k) - 32).
HandRow kBlock6(int r)
{
    HandRow row;
    row.bytes.assign(210, 0);
    putHalf(row.bytes, 208, 0x3000);
    for (int i = 0; i < 16; ++i)
        row.bytes[192 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(9 * i - 70 + r));
    row.values.resize(256);
    for (int k = 0; k < 256; ++k) {
        const int q = (11 * k + 5 + r) % 64;
        const int h = k / 128, t = (k % 128) / 32, l = k % 32;
        row.bytes[64 * h + l + (t % 2 ? 32 : 0)] |= static_cast<std::uint8_t>(t < 2 ? (q & 15) : (q & 15) << 4);
        row.bytes[128 + 32 * h + l] |= static_cast<std::uint8_t>((q >> 4) << (2 * t));
        const int s = 9 * (8 * h + l / 16 + 2 * t) - 70 + r;
        row.values[k] = 0.125f * float(s) * float(q - 32);
    }
    return row;
}

/// f32, f16 and bf16 rows of 8 values: bit patterns with their values worked out by hand.
HandRow plainRow(GgmlType type, int r)
{
    HandRow row;
    if (type == GgmlType::F32) {
        row.values = {1.5f, -2.25f, 3e-5f, 0.0f, -0.0f, 1e30f, -7.0f, float(r)};
        row.bytes.resize(32);
        std::memcpy(row.bytes.data(), row.values.data(), 32);
        return row;
    }
    // f16: 1, -2, 1/3 rounded (0x3555 = 1 + 341/1024 times 2^-2), the smallest subnormal 2^-24, the
    // largest finite 65504, -0, 2^-14 (smallest normal), 1 + r/1024.
    // bf16: 1, -3, 0x3EAB = (1 + 43/128) 2^-2, 2^-133 (subnormal), 0x7F7F = (2 - 2^-7) 2^127, -0, 2^-126, 1 + r/128.
    const bool half = type == GgmlType::F16;
    const std::uint16_t bits[8] = {std::uint16_t(half ? 0x3C00 : 0x3F80), std::uint16_t(half ? 0xC000 : 0xC040),
                                   std::uint16_t(half ? 0x3555 : 0x3EAB), 0x0001,
                                   std::uint16_t(half ? 0x7BFF : 0x7F7F), 0x8000,
                                   std::uint16_t(half ? 0x0400 : 0x0080), std::uint16_t((half ? 0x3C00 : 0x3F80) + r)};
    const float values[8] = {1.0f, half ? -2.0f : -3.0f,
                             half ? (1.0f + 341.0f / 1024.0f) / 4.0f : (1.0f + 43.0f / 128.0f) / 4.0f,
                             half ? std::ldexp(1.0f, -24) : std::ldexp(1.0f, -133),
                             half ? 65504.0f : std::ldexp(2.0f - std::ldexp(1.0f, -7), 127), -0.0f,
                             half ? std::ldexp(1.0f, -14) : std::ldexp(1.0f, -126),
                             1.0f + float(r) / (half ? 1024.0f : 128.0f)};
    row.bytes.resize(16);
    for (int i = 0; i < 8; ++i)
        putHalf(row.bytes, 2 * std::size_t(i), bits[i]);
    row.values.assign(values, values + 8);
    return row;
}

HandRow handRow(GgmlType type, int r)
{
    switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return plainRow(type, r);
    case GgmlType::Q4_K: return kBlock45(false, r);
    case GgmlType::Q5_K: return kBlock45(true, r);
    case GgmlType::Q6_K: return kBlock6(r);
    default: return smallBlock(type, r);
    }
}

constexpr GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                     GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                     GgmlType::IQ4_NL, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

bool sameBits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// A small valid file: one key, one f32 tensor [2 x 32].
GgufWriter baseFile()
{
    GgufWriter w;
    w.string("general.architecture", "llama");
    w.tensor("w", {32, 2}, GgmlType::F32, std::vector<float>(64, 1.0f));
    return w;
}

Result<GgufFile> parse(const Bytes& bytes, std::uint64_t fileSize = 0)
{
    return parseGgufHeader(bytes, fileSize ? fileSize : bytes.size(), "test.gguf");
}

} // namespace

class TestGguf : public QObject {
    Q_OBJECT

private slots:
    void metadataRoundTrip_data()
    {
        QTest::addColumn<int>("version");
        QTest::newRow("v3") << 3;
        QTest::newRow("v2") << 2;
    }

    void metadataRoundTrip()
    {
        QFETCH(int, version);
        GgufWriter w;
        w.version = std::uint32_t(version);
        w.u8("t.u8", 200).i8("t.i8", -100).u16("t.u16", 60000).i16("t.i16", -30000).u32("t.u32", 4000000000u);
        w.i32("t.i32", -2000000000).f32("t.f32", 1.5f).boolean("t.bool", true).string("t.string", "h\xc3\xa9llo");
        w.u64("t.u64", (1ull << 63) + 5).i64("t.i64", -(1ll << 62)).f64("t.f64", 0.1);
        w.array<std::uint8_t>("a.u8", 0, {1, 2, 255}).array<std::int32_t>("a.i32", 5, {-1, 7});
        w.array<float>("a.f32", 6, {0.5f, -2.0f}).array<std::uint8_t>("a.bool", 7, {1, 0});
        w.array<double>("a.f64", 12, {0.25}).array<std::uint64_t>("a.u64", 10, {1ull << 40});
        w.array<std::uint32_t>("a.empty", 4, {});
        w.strings("a.string", {"a", "", "\xc3\xbc"});
        const QTemporaryDir dir;
        const std::string path = dir.filePath("m.gguf").toStdString();
        w.write(path);
        const auto fromFile = readGgufHeader(path);
        QVERIFY2(fromFile.ok(), fromFile.ok() ? "" : fromFile.error().text().c_str());
        const auto fromBytes = parse(w.bytes());
        QVERIFY(fromBytes.ok());
        for (const GgufFile* f : {&*fromFile, &*fromBytes}) {
            QCOMPARE(f->version, std::uint32_t(version));
            QCOMPARE(f->metadata.size(), std::size_t(20));
            QCOMPARE(*f->getU32("t.u8"), 200u);
            QCOMPARE(*f->getI32("t.i8"), -100);
            QCOMPARE(*f->getU32("t.u16"), 60000u);
            QCOMPARE(*f->getI32("t.i16"), -30000);
            QCOMPARE(*f->getU32("t.u32"), 4000000000u);
            QCOMPARE(*f->getI32("t.i32"), -2000000000);
            QCOMPARE(*f->getF32("t.f32"), 1.5f);
            QCOMPARE(*f->getBool("t.bool"), true);
            QCOMPARE(*f->getString("t.string"), std::string("h\xc3\xa9llo"));
            QCOMPARE(*f->getU64("t.u64"), (1ull << 63) + 5);
            QCOMPARE(f->find("t.i64")->type, GgufValueType::I64);
            QCOMPARE(static_cast<std::int64_t>(f->find("t.i64")->bits), -(1ll << 62));
            QCOMPARE(*f->getF32("t.f64"), float(0.1)); // f64 rounded to float
            QCOMPARE(*f->getArray<std::int32_t>("a.u8"), (std::vector<std::int32_t>{1, 2, 255}));
            QCOMPARE(*f->getArray<std::int32_t>("a.i32"), (std::vector<std::int32_t>{-1, 7}));
            QCOMPARE(*f->getArray<float>("a.f32"), (std::vector<float>{0.5f, -2.0f}));
            QCOMPARE(*f->getArray<float>("a.f64"), (std::vector<float>{0.25f}));
            QCOMPARE(*f->getArray<std::string>("a.string"), (std::vector<std::string>{"a", "", "\xc3\xbc"}));
            QCOMPARE(f->find("a.bool")->raw, (Bytes{1, 0}));
            QCOMPARE(f->find("a.u64")->count, std::uint64_t(1));
            QCOMPARE(f->find("a.empty")->count, std::uint64_t(0));
            QCOMPARE(f->find("a.empty")->elementType, GgufValueType::U32);
            QVERIFY(f->getArray<float>("a.empty")->empty());
            QCOMPARE(f->tensors.size(), std::size_t(0));
        }
    }

    void accessorRefusals()
    {
        GgufWriter w;
        w.i8("t.neg", -1).u32("t.big", 4000000000u).string("t.s", "x").array<std::uint8_t>("a.u8", 0, {1});
        const auto f = parse(w.bytes());
        QVERIFY(f.ok());
        const auto expectRefusal = [](const Error& e, const char* key, const char* what) {
            QCOMPARE(e.field, std::string("test.gguf"));
            QVERIFY2(e.message.find(std::string("key '") + key + "'") != std::string::npos, e.message.c_str());
            QVERIFY2(e.message.find(what) != std::string::npos, e.message.c_str());
        };
        expectRefusal(f->getU32("t.neg").error(), "t.neg", "u32");    // -1 does not fit u32
        expectRefusal(f->getI32("t.big").error(), "t.big", "i32");    // 4e9 does not fit i32
        expectRefusal(f->getString("t.big").error(), "t.big", "is u32; string");
        expectRefusal(f->getF32("t.s").error(), "t.s", "is string");
        expectRefusal(f->getBool("t.big").error(), "t.big", "bool");
        expectRefusal(f->getArray<float>("a.u8").error(), "a.u8", "an array of 1 u8");
        expectRefusal(f->getU32("a.u8").error(), "a.u8", "array");
        expectRefusal(f->getU32("no.such").error(), "no.such", "is missing");
        QVERIFY(f->getOptional<std::uint32_t>("no.such").ok());
        QVERIFY(!f->getOptional<std::uint32_t>("no.such")->has_value());
        QCOMPARE(**f->getOptional<std::uint32_t>("t.big"), 4000000000u);
        expectRefusal(f->getOptional<std::string>("t.big").error(), "t.big", "string");
    }

    /// Every weight type as a [2 x row] tensor of hand-built blocks: the header's shape, type, offset
    /// and size, then each row dequantized from the mapped file, at every SIMD level this CPU runs,
    /// equal bit for bit to the formula written above (every value there is exact in float).
    void weightTypesReadBack()
    {
        GgufWriter w;
        w.u32("general.alignment", 64);
        w.alignment = 64;
        for (const GgmlType type : kWeightTypes) {
            const HandRow r0 = handRow(type, 0), r1 = handRow(type, 1);
            Bytes data = r0.bytes;
            data.insert(data.end(), r1.bytes.begin(), r1.bytes.end());
            w.rawTensor("t." + std::string(ggml::ggmlName(type)), {r0.values.size(), 2}, std::uint32_t(type), data);
        }
        const QTemporaryDir dir;
        const std::string path = dir.filePath("w.gguf").toStdString();
        w.write(path);
        const auto file = readGgufHeader(path);
        QVERIFY2(file.ok(), file.ok() ? "" : file.error().text().c_str());
        QCOMPARE(file->alignment, std::uint64_t(64));
        QCOMPARE(file->dataOffset % 64, std::uint64_t(0));
        const auto map = MappedFile::open(path);
        QVERIFY(map.ok());
        QCOMPARE(map->size(), file->fileSize);
        for (const GgmlType type : kWeightTypes) {
            const GgufTensor* t = file->findTensor("t." + std::string(ggml::ggmlName(type)));
            QVERIFY(t);
            const HandRow rows[2] = {handRow(type, 0), handRow(type, 1)};
            QCOMPARE(t->type, type);
            QCOMPARE(t->dims, (std::vector<std::uint64_t>{rows[0].values.size(), 2}));
            QCOMPARE(t->bytes, std::uint64_t(2 * rows[0].bytes.size()));
            QCOMPARE(t->offset % 64, std::uint64_t(0));
            for (const ggml::SimdLevel level : {ggml::SimdLevel::Scalar, ggml::SimdLevel::Avx2, ggml::SimdLevel::Avx512}) {
                if (!ggml::simdLevelSupported(level))
                    continue;
                for (int r = 0; r < 2; ++r) {
                    std::vector<float> y(rows[r].values.size(), std::nanf(""));
                    ggml::dequantizeRowAt(level, type, map->data() + t->offset + std::size_t(r) * rows[0].bytes.size(), y.data(),
                                          std::int64_t(y.size()));
                    for (std::size_t i = 0; i < y.size(); ++i)
                        if (!sameBits(y[i], rows[r].values[i]))
                            QFAIL(qPrintable(QString("%1 row %2 value %3 (%4): %5, expected %6")
                                                 .arg(ggml::ggmlName(type).data()).arg(r).arg(i)
                                                 .arg(ggml::simdLevelName(level).data()).arg(double(y[i]))
                                                 .arg(double(rows[r].values[i]))));
                }
            }
        }
    }

    /// Tensors written from floats in every weight type (the quantizers tests and scripts use) read
    /// back within each type's error: fixed seed, values in [-1, 1].
    void quantizedTensorsReadBack()
    {
        std::vector<float> values(512 * 3);
        std::uint32_t state = 12345u;
        for (float& v : values) {
            state = state * 1664525u + 1013904223u;
            v = float(state >> 8) / float(1u << 24) * 2.0f - 1.0f;
        }
        GgufWriter w;
        for (const GgmlType type : kWeightTypes)
            w.tensor(std::string(ggml::ggmlName(type)), {512, 3}, type, values);
        const auto file = parse(w.bytes());
        QVERIFY(file.ok());
        const Bytes bytes = w.bytes();
        for (const GgmlType type : kWeightTypes) {
            const GgufTensor* t = file->findTensor(ggml::ggmlName(type));
            std::vector<float> y(values.size());
            for (int r = 0; r < 3; ++r)
                ggml::dequantizeRow(type, bytes.data() + t->offset + r * (t->bytes / 3), y.data() + 512 * r, 512);
            // Largest error per value: f16 2^-11 relative, bf16 2^-8; q8_0 half a step of 1/127 plus d's
            // fp16 rounding; 4-bit types one step of 2/15 (q4_0: the range [-1, 1] over 16 codes; q4_1,
            // q4_K: [min, max] over 15; iq4_nl: its widest gap, 24/127 of the block maximum); 5-bit and
            // 6-bit types half that or better.
            double bound = 0.0;
            switch (type) {
            case GgmlType::F32: bound = 0.0; break;
            case GgmlType::F16: bound = 1.0 / 2048.0; break;
            case GgmlType::BF16: bound = 1.0 / 256.0; break;
            case GgmlType::Q8_0: bound = 0.5 / 127.0 + 1e-3; break;
            case GgmlType::Q5_0:
            case GgmlType::Q5_1:
            case GgmlType::Q5_K:
            case GgmlType::Q6_K: bound = 1.0 / 15.0; break;
            default: bound = 24.0 / 127.0; break;
            }
            double worst = 0.0;
            for (std::size_t i = 0; i < values.size(); ++i)
                worst = std::max(worst, std::abs(double(y[i]) - double(values[i])));
            QVERIFY2(worst <= bound, qPrintable(QString("%1: max error %2 > %3").arg(ggml::ggmlName(type).data()).arg(worst).arg(bound)));
        }
    }

    void hostileHeaders_data()
    {
        QTest::addColumn<std::function<void(GgufWriter&)>>("breakIt");
        QTest::addColumn<QByteArray>("rawEdit"); // "cut:N" truncates, "byte:N:V" sets a byte, "size:N" claims a file size
        QTest::addColumn<QString>("expected");
        using F = std::function<void(GgufWriter&)>;
        const F none = [](GgufWriter&) {};
        const auto row = [&](const char* name, F f, const char* expected, const char* raw = "") {
            QTest::newRow(name) << f << QByteArray(raw) << QString(expected);
        };
        row("bad magic", none, "magic 'GGUF'", "byte:0:88");
        row("version 1", [](GgufWriter& w) { w.version = 1; }, "version 1 (the 2023 format");
        row("version 4", [](GgufWriter& w) { w.version = 4; }, "version 4 is not supported (2 or 3)");
        row("big-endian", [](GgufWriter& w) { w.version = 0x03000000; }, "big-endian");
        row("truncated preamble", none, "tensor count: runs past the end of the file", "cut:12");
        row("tensor count", [](GgufWriter& w) { w.tensorCount = 1ull << 40; }, "tensor count 1099511627776 cannot fit");
        row("key count", [](GgufWriter& w) { w.keyCount = 1ull << 50; }, "key count 1125899906842624 cannot fit");
        row("array of 2^60", [](GgufWriter& w) { arrayHeader(w, "big", 0, 1ull << 60); }, "key 'big': 1152921504606846976 elements of u8 cannot fit");
        row("string array count", [](GgufWriter& w) { arrayHeader(w, "names", 8, 1ull << 58); }, "elements of string cannot fit");
        row("string past end", [](GgufWriter& w) { rawKv(w, "s", 8, lengthThen(1000, "abc")); }, "key 's' (1000 bytes) runs past the end of the file");
        row("string over cap", [](GgufWriter& w) { rawKv(w, "s", 8, lengthThen(20u << 20, "")); }, "key 's' is 20971520 bytes long; at most 16777216", "size:1073741824");
        row("duplicate key", [](GgufWriter& w) { w.u32("general.architecture", 1); }, "key 'general.architecture' is given twice");
        row("empty key", [](GgufWriter& w) { w.u32("", 1); }, "key 1 is empty");
        row("key not UTF-8", [](GgufWriter& w) { w.u32("a\xff", 1); }, "key 1 ('a\\xff') is not valid UTF-8");
        row("value type 13", [](GgufWriter& w) { rawKv(w, "odd", 13, {0}); }, "key 'odd' has value type 13");
        row("nested array", [](GgufWriter& w) { arrayHeader(w, "nest", 9, 1); }, "key 'nest' is an array of arrays");
        row("bool 2", [](GgufWriter& w) { rawKv(w, "flag", 7, {2}); }, "key 'flag' is a bool of value 2 (0 or 1)");
        row("alignment 48", [](GgufWriter& w) { w.u32("general.alignment", 48); }, "key 'general.alignment' = 48 is not a power of two");
        row("alignment 0", [](GgufWriter& w) { w.u32("general.alignment", 0); }, "key 'general.alignment' = 0 is not a power of two");
        row("alignment 2^21", [](GgufWriter& w) { w.u32("general.alignment", 1u << 21); }, "= 2097152 is not a power of two in 1 .. 1048576");
        row("alignment string", [](GgufWriter& w) { w.string("general.alignment", "32"); }, "key 'general.alignment' is string");
        row("duplicate tensor", [](GgufWriter& w) { w.tensor("w", {32}, GgmlType::F32, std::vector<float>(32)); }, "tensor 'w' is given twice");
        row("empty tensor name", [](GgufWriter& w) { w.tensors[0].name.clear(); }, "tensor 0's name is empty");
        row("tensor name not UTF-8", [](GgufWriter& w) { w.tensors[0].name = "w\xc3"; }, "tensor 0's name 'w\\xc3' is not valid UTF-8");
        row("tensor name 64 bytes", [](GgufWriter& w) { w.tensors[0].name = std::string(64, 'n'); }, "tensor 0's name is 64 bytes long; at most 63");
        row("n_dims 0", [](GgufWriter& w) { w.tensors[0].dims.clear(); }, "tensor 'w': n_dims = 0; 1 .. 4");
        row("n_dims 5", [](GgufWriter& w) { w.tensors[0].dims = {32, 1, 1, 1, 2}; }, "tensor 'w': n_dims = 5; 1 .. 4");
        row("dim 0", [](GgufWriter& w) { w.tensors[0].dims = {32, 0}; }, "tensor 'w': dims[1] = 0");
        row("2^41 elements", [](GgufWriter& w) { w.tensors[0].dims = {1ull << 20, 1ull << 21}; }, "tensor 'w': dims[1] = 2097152 makes more than 2^40");
        row("dims overflow", [](GgufWriter& w) { w.tensors[0].dims = {1ull << 63, 4}; }, "tensor 'w': dims[0] = 9223372036854775808 makes more than 2^40");
        row("type 16", [](GgufWriter& w) { w.tensors[0].type = 16; }, "tensor 'w': ggml type id 16 is not one KVLens knows (f32 (0), f16 (1)");
        row("row not a block multiple", [](GgufWriter& w) { w.tensors[0].type = 2; w.tensors[0].dims = {48, 1}; }, "tensor 'w': row length dims[0] = 48 is not a multiple of q4_0's block of 32");
        row("offset unaligned", [](GgufWriter& w) { w.tensors[0].offset = 16; }, "tensor 'w': offset 16 is not a multiple of the alignment 32");
        row("overlap", [](GgufWriter& w) { w.tensor("v", {32}, GgmlType::F32, std::vector<float>(32)); w.tensors[1].offset = 128; }, "tensors 'w' [");
        row("past the end", [](GgufWriter& w) { w.tensors[0].dims = {32, 1000}; }, "tensor 'w': bytes [");
        row("offset overflow", [](GgufWriter& w) { w.tensors[0].offset = ~std::uint64_t(31); }, "tensor 'w': offset 18446744073709551584 overflows");
    }

    void hostileHeaders()
    {
        QFETCH(std::function<void(GgufWriter&)>, breakIt);
        QFETCH(QByteArray, rawEdit);
        QFETCH(QString, expected);
        GgufWriter w = baseFile();
        breakIt(w);
        Bytes bytes = w.bytes();
        std::uint64_t fileSize = 0;
        const QList<QByteArray> edit = rawEdit.split(':');
        if (edit[0] == "cut")
            bytes.resize(edit[1].toULongLong());
        else if (edit[0] == "byte")
            bytes[edit[1].toULongLong()] = std::uint8_t(edit[2].toUInt());
        else if (edit[0] == "size")
            fileSize = edit[1].toULongLong();
        QElapsedTimer timer;
        timer.start();
        const auto f = parse(bytes, fileSize);
        QVERIFY2(timer.elapsed() < 1000, "a hostile header must be refused at once");
        QVERIFY2(!f.ok(), "accepted a hostile header");
        QCOMPARE(f.error().field, std::string("test.gguf"));
        QVERIFY2(f.error().message.find(expected.toStdString()) != std::string::npos, f.error().message.c_str());
        QVERIFY(f.error().message.find('\n') == std::string::npos);
    }

    /// The fuzz seeds scripts/make_gguf.py writes (tests/data/gguf): its numpy quantizers read back here
    /// within each type's error of the f32 copy of the same values (N(0, 1), |x| < 4.5), and the hostile
    /// seeds are refused.
    void seedCorpus()
    {
        const std::string dir = std::string(KVLENS_TEST_DATA_DIR) + "/gguf/";
        for (const char* name : {"types_v3.gguf", "types_v2.gguf"}) {
            const auto file = readGgufHeader(dir + name);
            QVERIFY2(file.ok(), file.ok() ? "" : file.error().text().c_str());
            QCOMPARE(*file->getString("general.architecture"), std::string("llama"));
            QCOMPARE(*file->getArray<float>("seed.floats"), (std::vector<float>{0.5f, -1.0f}));
            const auto map = MappedFile::open(dir + name);
            QVERIFY(map.ok());
            const GgufTensor* ref = file->findTensor("t.f32");
            QVERIFY(ref && ref->dims == (std::vector<std::uint64_t>{256, 2}));
            std::vector<float> x(512), y(512);
            std::memcpy(x.data(), map->data() + ref->offset, 2048);
            const struct {
                const char* tensor;
                GgmlType type;
                double bound; // of |y - x|: f16 2^-11 |x|, bf16 2^-8 |x|; q8_0 half a step of 4.5/127;
                              // q4_K a step of 9/15 plus rounding; q6_K a step of 4.5/31
            } rows[] = {{"t.f16", GgmlType::F16, 4.5 / 2048}, {"t.bf16", GgmlType::BF16, 4.5 / 256},
                        {"t.q8_0", GgmlType::Q8_0, 4.5 / 127}, {"t.q4_k", GgmlType::Q4_K, 0.7}, {"t.q6_k", GgmlType::Q6_K, 4.5 / 31}};
            for (const auto& r : rows) {
                const GgufTensor* t = file->findTensor(r.tensor);
                QVERIFY(t && t->type == r.type);
                ggml::dequantizeRow(r.type, map->data() + t->offset, y.data(), 256);
                ggml::dequantizeRow(r.type, map->data() + t->offset + t->bytes / 2, y.data() + 256, 256);
                for (std::size_t i = 0; i < 512; ++i)
                    QVERIFY2(std::abs(double(y[i]) - double(x[i])) <= r.bound, r.tensor);
            }
        }
        const struct {
            const char* file;
            const char* expected;
        } hostile[] = {{"version1.gguf", "version 1"}, {"truncated.gguf", "tensor count 6 cannot fit"},
                       {"array_2p60.gguf", "key 'huge': 1152921504606846976 elements of u8 cannot fit"},
                       {"duplicate_key.gguf", "key 'a' is given twice"}, {"unknown_type.gguf", "ggml type id 16"}};
        for (const auto& h : hostile) {
            const auto file = readGgufHeader(dir + h.file);
            QVERIFY2(!file.ok(), h.file);
            QVERIFY2(file.error().message.find(h.expected) != std::string::npos, file.error().message.c_str());
        }
    }

    void fileRefusals()
    {
        const auto folder = readGgufHeader("/tmp");
        QVERIFY(!folder.ok());
        QCOMPARE(folder.error().field, std::string("/tmp"));
        QVERIFY(folder.error().message.find("folder") != std::string::npos);
        const auto device = readGgufHeader("/dev/zero");
        QVERIFY(!device.ok());
        QVERIFY(device.error().message.find("not a regular file") != std::string::npos);
        const auto missing = readGgufHeader("/nonexistent/m.gguf");
        QVERIFY(!missing.ok());
        QCOMPARE(missing.error().field, std::string("/nonexistent/m.gguf"));
        // A file cut inside its header: the reader stops at the file's end.
        const QTemporaryDir dir;
        const std::string path = dir.filePath("cut.gguf").toStdString();
        GgufWriter keysOnly; // no tensor, so the counts fit in 40 bytes and the key's name is what runs out
        keysOnly.string("general.architecture", "llama");
        Bytes bytes = keysOnly.bytes();
        bytes.resize(40);
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 40);
        const auto cut = readGgufHeader(path);
        QVERIFY(!cut.ok());
        QVERIFY2(cut.error().message.find("runs past the end of the file") != std::string::npos, cut.error().message.c_str());
    }

    void mappedFile()
    {
        const QTemporaryDir dir;
        const std::string path = dir.filePath("m.bin").toStdString();
        const Bytes bytes = baseFile().bytes();
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        auto map = MappedFile::open(path, MapAdvice::Sequential);
        QVERIFY(map.ok());
        QCOMPARE(map->path(), path);
        QCOMPARE(map->size(), std::uint64_t(bytes.size()));
        QVERIFY(std::equal(bytes.begin(), bytes.end(), map->data()));
        MappedFile moved = std::move(*map);
        QCOMPARE(moved.size(), std::uint64_t(bytes.size()));
        QVERIFY(map->data() == nullptr && map->size() == 0);
        QCOMPARE(parseGgufHeader(moved.bytes(), moved.size(), path)->tensors.size(), std::size_t(1));
        const std::string empty = dir.filePath("empty").toStdString();
        std::ofstream(empty, std::ios::binary).flush();
        const auto none = MappedFile::open(empty);
        QVERIFY(none.ok() && none->size() == 0 && none->data() == nullptr);
        for (const std::string& bad : {std::string("/nonexistent/x"), std::string("/tmp"), std::string("/dev/zero")}) {
            const auto refused = MappedFile::open(bad);
            QVERIFY2(!refused.ok(), bad.c_str());
            QCOMPARE(refused.error().field, bad);
        }
    }

private:
    static void rawKv(GgufWriter& w, const std::string& key, std::uint32_t type, Bytes value) { w.kvs.push_back({key, type, std::move(value)}); }
    static void arrayHeader(GgufWriter& w, const std::string& key, std::uint32_t element, std::uint64_t count)
    {
        Bytes b;
        GgufWriter::put<std::uint32_t>(b, element);
        GgufWriter::put<std::uint64_t>(b, count);
        rawKv(w, key, 9, b);
    }
    static Bytes lengthThen(std::uint64_t length, const std::string& text)
    {
        Bytes b;
        GgufWriter::put<std::uint64_t>(b, length);
        b.insert(b.end(), text.begin(), text.end());
        return b;
    }
};

QTEST_APPLESS_MAIN(TestGguf)
#include "tst_gguf.moc"
