// SPDX-License-Identifier: GPL-3.0-or-later
// ggml's type table, the SIMD dequantizers against the scalar code bit for bit, and the query conversion
// and score product of llama.cpp's x86 attention on hand-computed blocks.
#include "core/common/fp16.h"
#include "core/io/ggml_dot.h"
#include "core/io/ggml_types.h"
#include "common/approx.h"

#include <QElapsedTimer>
#include <QTest>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace kvlens;
using namespace kvlens::ggml;
using Bytes = std::vector<std::uint8_t>;

namespace {

constexpr GgmlType kDequantizable[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                       GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                       GgmlType::IQ4_NL, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
constexpr SimdLevel kVectorLevels[] = {SimdLevel::Avx2, SimdLevel::Avx512};

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

/// One query block converted: the codes ggml stores, read back as out / d.
std::vector<float> converted(GgmlType type, const std::vector<float>& q, std::vector<float>* sums = nullptr)
{
    std::vector<float> out(q.size(), std::nanf(""));
    std::vector<float> s(q.size() / 32, std::nanf(""));
    if (!convertQueryRow(type, q.data(), out.data(), std::int64_t(q.size()), s.data()))
        qFatal("convertQueryRow refused");
    if (sums)
        *sums = s;
    return out;
}

} // namespace

class TestGgmlTypes : public QObject {
    Q_OBJECT

private slots:
    void table()
    {
        // Ids from enum ggml_type (ggml/include/ggml.h); bytes per block from the static_asserts in
        // ggml-common.h: q8_1 2 + 2 + 32; q2_K 16 + 64 + 2 + 2; q3_K 32 + 64 + 12 + 2; q4_K 2 + 2 + 12 + 128;
        // q5_K 2 + 2 + 12 + 32 + 128; q6_K 128 + 64 + 16 + 2; q8_K 4 + 256 + 2 * 16.
        const struct {
            std::uint32_t id;
            const char* name;
            std::uint32_t block, bytes;
        } expected[] = {{0, "f32", 1, 4},        {1, "f16", 1, 2},        {2, "q4_0", 32, 18},    {3, "q4_1", 32, 20},
                        {6, "q5_0", 32, 22},     {7, "q5_1", 32, 24},     {8, "q8_0", 32, 34},    {9, "q8_1", 32, 36},
                        {10, "q2_K", 256, 84},   {11, "q3_K", 256, 110},  {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176},
                        {14, "q6_K", 256, 210},  {15, "q8_K", 256, 292},  {20, "iq4_nl", 32, 18}, {30, "bf16", 1, 2}};
        QCOMPARE(kGgmlTypes.size(), std::size(expected));
        for (const auto& e : expected) {
            const GgmlTypeTraits* t = findGgmlType(e.id);
            QVERIFY(t);
            QCOMPARE(std::string(t->name), std::string(e.name));
            QCOMPARE(t->blockSize, e.block);
            QCOMPARE(t->bytesPerBlock, e.bytes);
        }
        for (const std::uint32_t unknown : {4u, 5u, 16u, 19u, 21u, 29u, 31u, 39u, 0xffffffffu})
            QVERIFY(findGgmlType(unknown) == nullptr);
        // llama.cpp's cache types (common/arg.cpp kv_cache_types) and the KV block table agree.
        for (const TypeTraits& kv : kTypes) {
            QVERIFY(ggmlTraits(ggmlType(kv.type)).kvCacheType);
            QCOMPARE(std::size_t(ggmlTraits(ggmlType(kv.type)).bytesPerBlock), kv.bytesPerBlock);
        }
        QCOMPARE(*rowBytes(GgmlType::Q4_K, 4096), std::uint64_t(16 * 144));
        QCOMPARE(*rowBytes(GgmlType::BF16, 3), std::uint64_t(6));
        QCOMPARE(*rowBytes(GgmlType::Q8_0, 0), std::uint64_t(0));
        QVERIFY(!rowBytes(GgmlType::Q4_K, 255).ok());
        QVERIFY(!rowBytes(GgmlType::Q8_0, -32).ok());
        // 2^63 - 256 values of q8_K would take (2^55 - 1) * 292 bytes, past 2^63 - 1.
        const auto huge = rowBytes(GgmlType::Q8_K, std::numeric_limits<std::int64_t>::max() - 255);
        QVERIFY(!huge.ok());
        QVERIFY(huge.error().message.find("2^63") != std::string::npos);
    }

    /// Every vector kernel this CPU runs against the scalar code, bit for bit, on random bytes (NaN and
    /// infinite scales included), unaligned pointers and every f16 pattern.
    void simdLevelsAgree()
    {
        bool ranVector = false;
        std::mt19937 rng(20240611u);
        for (const SimdLevel level : kVectorLevels) {
            if (!simdLevelSupported(level))
                continue;
            ranVector = true;
            for (const GgmlType type : kDequantizable) {
                const std::int64_t n = type == GgmlType::F16 ? 65536 + 7 : 512 + (ggmlTraits(type).blockSize == 1 ? 5 : 0);
                Bytes src(1 + *rowBytes(type, n));
                if (type == GgmlType::F16)
                    for (std::int64_t i = 0; i < 65536; ++i) {
                        src[1 + 2 * i] = std::uint8_t(i & 0xff);
                        src[2 + 2 * i] = std::uint8_t(i >> 8);
                    }
                else
                    for (std::uint8_t& b : src)
                        b = std::uint8_t(rng());
                std::vector<float> scalar(std::size_t(n) + 1), vector(std::size_t(n) + 1);
                dequantizeRowAt(SimdLevel::Scalar, type, src.data() + 1, scalar.data() + 1, n);
                dequantizeRowAt(level, type, src.data() + 1, vector.data() + 1, n);
                for (std::int64_t i = 1; i <= n; ++i)
                    if (bits(scalar[std::size_t(i)]) != bits(vector[std::size_t(i)]))
                        QFAIL(qPrintable(QString("%1 at %2, value %3: scalar %4 vector %5")
                                             .arg(ggmlName(type).data()).arg(simdLevelName(level).data()).arg(i - 1)
                                             .arg(bits(scalar[std::size_t(i)]), 8, 16).arg(bits(vector[std::size_t(i)]), 8, 16)));
            }
        }
        if (!simdLevelSupported(SimdLevel::Avx512))
            qInfo("AVX-512 kernels not compared: this CPU does not run AVX-512F");
        if (!ranVector)
            QSKIP("no vector level on this CPU: only the scalar code ran");
    }

    /// A signalling f16 NaN comes out quiet with its payload (F16C's conversion), an f16 subnormal exact.
    void f16Specials()
    {
        const Bytes src{0x01, 0x7c, 0x01, 0x00, 0x00, 0xfc};
        float y[3];
        dequantizeRowAt(SimdLevel::Scalar, GgmlType::F16, src.data(), y, 3);
        QCOMPARE(bits(y[0]), 0x7f802000u | 0x00400000u);
        QCOMPARE(y[1], std::ldexp(1.0f, -24));
        QCOMPARE(y[2], -std::numeric_limits<float>::infinity());
    }

    void vecDotTypes()
    {
        QCOMPARE(*vecDotType(GgmlType::Q8_0), GgmlType::Q8_0);
        QCOMPARE(*vecDotType(GgmlType::Q4_0), GgmlType::Q8_0);
        QCOMPARE(*vecDotType(GgmlType::Q5_0), GgmlType::Q8_0);
        QCOMPARE(*vecDotType(GgmlType::IQ4_NL), GgmlType::Q8_0);
        QCOMPARE(*vecDotType(GgmlType::Q4_1), GgmlType::Q8_1);
        QCOMPARE(*vecDotType(GgmlType::Q5_1), GgmlType::Q8_1);
        QCOMPARE(*vecDotType(GgmlType::F16), GgmlType::F16);
        QVERIFY(!vecDotType(GgmlType::Q4_K).ok());
    }

    /// amax = 127: d = 127 / 127 = 1 (fp16 exact), id = 127 / 127 = 1, so q_j = x_j rounded half to even.
    /// x_0 = 127, x_j = (j - 16) / 2 for j = 1 .. 31: -7.5 -7 -6.5 ... 7.5. Ties go to the even integer:
    /// -7.5 -> -8, -6.5 -> -6, -5.5 -> -6, ..., -0.5 -> 0, 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, ... 7.5 -> 8 (the
    /// reference quantizer's roundf would give 1 for 0.5 and 3 for 2.5). The codes are odd-symmetric
    /// around j = 16, so sum q = 127 and q8_1's s = fp16(1 * 127) = 127.
    void queryTiesToEven()
    {
        std::vector<float> x(32);
        x[0] = 127.0f;
        for (int j = 1; j < 32; ++j)
            x[j] = float(j - 16) / 2.0f;
        const std::vector<float> expected{127, -8, -7, -6, -6, -6, -5, -4, -4, -4, -3, -2, -2, -2, -1, 0,
                                          0,   0,  1,  2,  2,  2,  3,  4,  4,  4,  5,  6,  6,  6,  7, 8};
        std::vector<float> sums;
        for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q8_1}) {
            const std::vector<float> out = converted(type, x, &sums);
            for (int j = 0; j < 32; ++j)
                QCOMPARE(out[j], expected[j]);
        }
        QCOMPARE(sums[0], 127.0f);
    }

    /// amax = 63.5 (x_0 = -63.5): d = 0.5 (fp16 exact), id = 127 / 63.5 = 2 exactly; x_j = 0.25 + (j - 16)
    /// / 2, so x_j id = (j - 16) + 0.5: every value is a tie, k + 0.5 -> k for even k, k + 1 for odd k.
    /// Codes: -127, then for k = -15 .. 15: -14 -14 -12 -12 ... 0 0 2 2 ... 14 14 16; values code / 2.
    /// sum = -127 + 16 (each odd k adds one) = -111, s = fp16(0.5 * -111) = -55.5.
    void queryTiesScaled()
    {
        std::vector<float> x(32);
        x[0] = -63.5f;
        for (int j = 1; j < 32; ++j)
            x[j] = 0.25f + float(j - 16) / 2.0f;
        std::vector<float> sums;
        const std::vector<float> out = converted(GgmlType::Q8_1, x, &sums);
        QCOMPARE(out[0], -63.5f);
        for (int j = 1; j < 32; ++j) {
            const int k = j - 16;
            const int code = k % 2 == 0 ? k : k + 1;
            QCOMPARE(out[j], float(code) * 0.5f);
        }
        QCOMPARE(sums[0], -55.5f);
    }

    /// amax = 0: d = 0, id = 0, every code 0 and s = 0. amax = 1e-38: 127 / amax overflows to inf, every
    /// product is +-inf or NaN (0 * inf), _mm256_cvtps_epi32 gives INT_MIN, the packs saturate to -128,
    /// and d = 1e-38 / 127 is 0 in fp16: every value is -128 * 0 = -0.
    void queryDegenerateBlocks()
    {
        std::vector<float> sums;
        const std::vector<float> zero = converted(GgmlType::Q8_1, std::vector<float>(32, 0.0f), &sums);
        for (const float v : zero)
            QCOMPARE(bits(v), 0u);
        QCOMPARE(bits(sums[0]), 0u);
        std::vector<float> tiny(32, 0.0f);
        tiny[3] = 1e-38f;
        tiny[4] = -1e-38f;
        for (const float v : converted(GgmlType::Q8_0, tiny))
            QCOMPARE(bits(v), 0x80000000u);
    }

    /// f16: 1/3 -> 0x3555 = 0.333251953125; 1 + 2^-11 (half-way) -> 1 (even); 1 + 3 * 2^-11 -> 1 + 2^-9.
    /// bf16: 1/3 -> 0x3EAB = 0.333984375.
    void queryHalfTypes()
    {
        const std::vector<float> h = converted(GgmlType::F16, {1.0f / 3.0f, 1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), 2.0f});
        QCOMPARE(h[0], 0.333251953125f);
        QCOMPARE(h[1], 1.0f);
        QCOMPARE(h[2], 1.0f + std::ldexp(1.0f, -9));
        QCOMPARE(converted(GgmlType::BF16, {1.0f / 3.0f})[0], 0.333984375f);
        float out[3];
        QVERIFY(!convertQueryRow(GgmlType::Q8_0, h.data(), out, 3));
        QVERIFY(!convertQueryRow(GgmlType::Q4_K, h.data(), out, 3));
    }

    /// Scores whose every product and sum is exact in float (d = 1 keys with small codes against the
    /// query of queryTiesScaled), so any summation order gives the value written here: per key type,
    /// sum_j key_j * query_j with the key's values worked out from the codes chosen below.
    void keyDotExact()
    {
        std::vector<float> x(64);
        for (int b = 0; b < 2; ++b) {
            x[32 * b] = -63.5f;
            for (int j = 1; j < 32; ++j)
                x[32 * b + j] = 0.25f + float(j - 16) / 2.0f;
        }
        std::vector<float> qv(64); // the converted query, by hand: -63.5, then round-half-even(k + .5) / 2
        for (int b = 0; b < 2; ++b) {
            qv[32 * b] = -63.5f;
            for (int j = 1; j < 32; ++j) {
                const int k = j - 16;
                qv[32 * b + j] = float(k % 2 == 0 ? k : k + 1) * 0.5f;
            }
        }
        for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::IQ4_NL, GgmlType::F16}) {
            Bytes key;
            std::vector<float> kv(64);
            for (int b = 0; b < 2; ++b) {
                // q8_0: fp16 d = 1 (0x3C00), q_j = (j % 7) - 3. q4_0: d = 1, nibble (j + b) % 16, value q - 8.
                // q4_1: d = 1, m = -8 (0xC800): the same values as q4_0. iq4_nl: d = 1, nibble j % 16 -> kvalues.
                if (type == GgmlType::F16) {
                    for (int j = 0; j < 32; ++j) {
                        const float v = float((j * 5 + b) % 9) - 4.0f;
                        const std::uint16_t h = floatToHalfBits(v);
                        key.push_back(std::uint8_t(h & 0xff));
                        key.push_back(std::uint8_t(h >> 8));
                        kv[32 * b + j] = v;
                    }
                    continue;
                }
                key.push_back(0x00);
                key.push_back(0x3C);
                if (type == GgmlType::Q4_1) {
                    key.push_back(0x00);
                    key.push_back(0xC8);
                }
                if (type == GgmlType::Q8_0) {
                    for (int j = 0; j < 32; ++j) {
                        key.push_back(std::uint8_t(std::int8_t(j % 7 - 3)));
                        kv[32 * b + j] = float(j % 7 - 3);
                    }
                    continue;
                }
                static const int kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
                for (int j = 0; j < 16; ++j) {
                    const int lo = (j + b) % 16, hi = (j * 3) % 16;
                    key.push_back(std::uint8_t(lo | hi << 4));
                    kv[32 * b + j] = type == GgmlType::IQ4_NL ? float(kIq4nl[lo]) : float(lo - 8);
                    kv[32 * b + j + 16] = type == GgmlType::IQ4_NL ? float(kIq4nl[hi]) : float(hi - 8);
                }
            }
            double expected = 0.0;
            for (int j = 0; j < 64; ++j)
                expected += double(kv[j]) * double(type == GgmlType::F16 ? roundToHalf(x[j]) : qv[j]);
            for (const GgmlBuild build : {GgmlBuild::Avx2, GgmlBuild::Avx512})
                QCOMPARE(ggmlKeyDot(type, key.data(), x.data(), 64, build), expected);
            if (type == GgmlType::IQ4_NL) { // one block: the scalar tail alone
                double one = 0.0;
                for (int j = 0; j < 32; ++j)
                    one += double(kv[j]) * double(qv[j]);
                QCOMPARE(ggmlKeyDot(type, key.data(), x.data(), 32), one);
            }
        }
    }

    /// Random keys and queries (fixed seed): ggml's float score within float accumulation error of the
    /// exact dot of the dequantized key and the converted query (plus, for q4_1 / q5_1, the minimum times
    /// s - d sum q, the fp16 rounding of s that ggml uses instead of the exact sum): |diff| <= 1e-5 sum |terms|.
    void keyDotMatchesConvertedProduct()
    {
        std::mt19937 rng(7u);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (const Type kv : {Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::IQ4_NL}) {
            const GgmlType type = ggmlType(kv);
            for (int trial = 0; trial < 20; ++trial) {
                const int n = 32 * (1 + trial % 5);
                std::vector<float> k(static_cast<std::size_t>(n)), q(static_cast<std::size_t>(n));
                for (int i = 0; i < n; ++i) {
                    k[i] = normal(rng);
                    q[i] = normal(rng) * 3.0f;
                }
                Bytes key(*rowBytes(kv, std::size_t(n)));
                QVERIFY(quantizeRow(kv, k, key));
                std::vector<float> kd(static_cast<std::size_t>(n));
                QVERIFY(dequantizeRow(kv, key, kd));
                std::vector<float> sums;
                const std::vector<float> qc = converted(*vecDotType(type), q, &sums);
                double exact = 0.0, scale = 0.0;
                for (int i = 0; i < n; ++i) {
                    exact += double(kd[i]) * double(qc[i]);
                    scale += std::abs(double(kd[i]) * double(qc[i]));
                }
                if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1)
                    for (int b = 0; b < n / 32; ++b) {
                        double sumQ = 0.0; // sum of the converted values = fp16(d) sum q
                        for (int j = 0; j < 32; ++j)
                            sumQ += double(qc[32 * b + j]);
                        const std::size_t at = std::size_t(b) * (kv == Type::Q4_1 ? 20 : 24) + 2; // fp16 m
                        const double m = double(halfBitsToFloat(std::uint16_t(key[at] | key[at + 1] << 8)));
                        exact += m * (double(sums[b]) - sumQ);
                        scale += std::abs(m * double(sums[b]));
                    }
                KVLENS_COMPARE_ABS(ggmlKeyDot(type, key.data(), q.data(), n), exact, 1e-5 * scale + 1e-30);
            }
        }
    }

    /// Throughput of the dequantizers (values per second) at each level; runs only with
    /// KVLENS_GGML_BENCH=1 (a measurement, not a check).
    void throughput()
    {
        if (!std::getenv("KVLENS_GGML_BENCH"))
            QSKIP("set KVLENS_GGML_BENCH=1 to measure");
        const std::int64_t n = 4096;
        std::vector<float> y(static_cast<std::size_t>(n));
        for (const GgmlType type : kDequantizable) {
            Bytes src(*rowBytes(type, n) * 256);
            std::mt19937 rng(1u);
            for (std::size_t i = 0; i < src.size(); i += 2) { // finite fp16 scales: small exponents
                src[i] = std::uint8_t(rng());
                src[i + 1] = std::uint8_t(rng() & 0x3b);
            }
            for (const SimdLevel level : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512}) {
                if (!simdLevelSupported(level))
                    continue;
                QElapsedTimer timer;
                timer.start();
                std::int64_t rows = 0;
                while (timer.elapsed() < 200)
                    for (int r = 0; r < 256; ++r, ++rows)
                        dequantizeRowAt(level, type, src.data() + std::size_t(r) * *rowBytes(type, n), y.data(), n);
                const double seconds = double(timer.nsecsElapsed()) * 1e-9;
                qInfo("%-6s %-6s %8.0f Mvalues/s", ggmlName(type).data(), simdLevelName(level).data(),
                      double(rows * n) / seconds * 1e-6);
            }
        }
    }
};

QTEST_APPLESS_MAIN(TestGgmlTypes)
#include "tst_ggml_types.moc"
