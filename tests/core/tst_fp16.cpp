// SPDX-License-Identifier: GPL-3.0-or-later
// binary16 / bfloat16 rounding against IEEE 754 reference encodings.
#include "core/common/fp16.h"
#include "common/approx.h"

#include <QTest>

#include <bit>
#include <cmath>
#include <limits>

using namespace kvlens;

class TestFp16 : public QObject {
    Q_OBJECT
private slots:
    void halfEncodings_data()
    {
        QTest::addColumn<float>("value");
        QTest::addColumn<int>("bits");
        // Reference encodings from IEEE 754-2008 binary16 (e.g. numpy.float16(x).view(uint16)).
        QTest::newRow("one") << 1.0f << 0x3C00;
        QTest::newRow("minus two") << -2.0f << 0xC000;
        QTest::newRow("max finite") << 65504.0f << 0x7BFF;
        QTest::newRow("just below overflow tie") << 65519.0f << 0x7BFF;
        QTest::newRow("overflow tie goes to inf") << 65520.0f << 0x7C00;
        QTest::newRow("one third") << (1.0f / 3.0f) << 0x3555;
        QTest::newRow("one tenth") << 0.1f << 0x2E66;
        QTest::newRow("smallest normal") << std::ldexp(1.0f, -14) << 0x0400;
        QTest::newRow("smallest subnormal") << std::ldexp(1.0f, -24) << 0x0001;
        QTest::newRow("half of smallest subnormal ties to zero") << std::ldexp(1.0f, -25) << 0x0000;
        QTest::newRow("1.5 x half of smallest subnormal") << 1.5f * std::ldexp(1.0f, -25) << 0x0001;
        QTest::newRow("2049 ties to even 2048") << 2049.0f << 0x6800;
        QTest::newRow("2051 ties to even 2052") << 2051.0f << 0x6802;
        QTest::newRow("negative zero") << -0.0f << 0x8000;
        QTest::newRow("infinity") << std::numeric_limits<float>::infinity() << 0x7C00;
    }
    void halfEncodings()
    {
        QFETCH(float, value);
        QFETCH(int, bits);
        QCOMPARE(static_cast<int>(floatToHalfBits(value)), bits);
    }

    void halfRoundTripsEveryPattern()
    {
        int checked = 0;
        for (int pattern = 0; pattern < 65536; ++pattern) {
            const auto bits = static_cast<std::uint16_t>(pattern);
            const float f = halfBitsToFloat(bits);
            if (std::isnan(f))
                continue;
            QCOMPARE(static_cast<int>(floatToHalfBits(f)), pattern);
            ++checked;
        }
        QCOMPARE(checked, 65536 - 2 * 1023); // all but the NaN patterns
    }

    void halfNanStaysNan()
    {
        QVERIFY(std::isnan(roundToHalf(std::numeric_limits<float>::quiet_NaN())));
    }

    void halfRoundingErrorIsBounded()
    {
        // Relative error of round-to-nearest is at most 2^-11 for normal values.
        for (float x = 1e-4f; x < 6e4f; x *= 1.0137f)
            KVLENS_COMPARE_REL(roundToHalf(x), x, std::ldexp(1.0, -11));
    }

    void bfloat16Encodings_data()
    {
        QTest::addColumn<float>("value");
        QTest::addColumn<int>("bits");
        QTest::newRow("one") << 1.0f << 0x3F80;
        QTest::newRow("pi") << 3.14159265f << 0x4049;
        QTest::newRow("tie to even down") << (1.0f + std::ldexp(1.0f, -8)) << 0x3F80;
        QTest::newRow("tie to even up") << (1.0f + 3.0f * std::ldexp(1.0f, -8)) << 0x3F82;
        QTest::newRow("minus 65536") << -65536.0f << 0xC780;
    }
    void bfloat16Encodings()
    {
        QFETCH(float, value);
        QFETCH(int, bits);
        QCOMPARE(static_cast<int>(floatToBfloat16Bits(value)), bits);
        QCOMPARE(bfloat16BitsToFloat(static_cast<std::uint16_t>(bits)),
                 std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
    }
};

QTEST_APPLESS_MAIN(TestFp16)
#include "tst_fp16.moc"
