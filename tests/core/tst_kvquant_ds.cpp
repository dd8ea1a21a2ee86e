// SPDX-License-Identifier: GPL-3.0-or-later
// KVQuant-DS, the kvquant quantizer part: its bit accounting, its sparse outliers on the
// outlier_channels regime (their fraction an option), and that the whole pipeline runs it.
#include "core/common/fp16.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/quant/codec_parts.h"
#include "core/quant/path.h"
#include "core/quant/scheme.h"
#include "core/regimes/regime.h"
#include "common/approx.h"

#include <QTest>

#include <algorithm>
#include <cmath>

using namespace kvlens;

namespace {

Dataset outlierData(int d, int tokens, int calibration, std::uint64_t seed)
{
    const Regime* regime = findRegime("outlier_channels");
    if (!regime)
        qFatal("no outlier_channels regime");
    RegimeParams params = regime->defaults(); // 4 channels scaled by gamma = 20, keys only
    DataShape shape{d, tokens, 16, calibration};
    auto data = regime->generate(params, shape, EngineKind::Pcg64, seed);
    if (!data)
        qFatal("%s", data.error().text().c_str());
    return std::move(data).value();
}

/// KVQuant-DS's storage worked by hand: codes, 1% outliers at 32 bits, a 32-bit CSR row
/// pointer per token, fp16 mean and scale per channel.
double handBits(int bits, int d, int tokens, double fraction = 0.01)
{
    const double outliers = std::ceil(fraction * tokens * d - 1e-9);
    return (static_cast<double>(bits) * tokens * d + outliers * 32 + 32.0 * tokens + 32.0 * d) / (double(tokens) * d);
}

} // namespace

class TestKvquantDs : public QObject {
    Q_OBJECT

private slots:
    void isRegisteredAndNamed()
    {
        const auto s = findScheme("KVQuant-DS");
        QVERIFY(s.has_value());
        QCOMPARE(QString::fromStdString(s->key.quantizer.kind), QString("kvquant"));
        QVERIFY(findPart("kvquant", PartRole::Quantizer) != nullptr);
        QCOMPARE(s->key.quantizer.number("outlier_fraction"), 0.01);
        QVERIFY(needsCalibration(*s));
        QVERIFY(validateScheme(*s, {2, 3, 4}, 64, "schemes[0]"));
        // An unknown quantizer is refused by name, with the known ones.
        SchemeConfig bad = *s;
        bad.builtin = false;
        bad.key.quantizer = CodecPart("no_such_codec");
        const Status st = validateScheme(bad, {3}, 64, "schemes[0]");
        QVERIFY(!st);
        QCOMPARE(QString::fromStdString(st.error().field), QString("schemes[0].k.quantizer"));
        QVERIFY(st.error().message.find("kvquant") != std::string::npos);
    }

    void theOutlierFractionIsAnOption()
    {
        // 2.5% instead of 1%: that many more entries stored as their fp16 value, and counted.
        const int d = 64, tokens = 256, bits = 3;
        const Dataset data = outlierData(d, tokens, 512, 9);
        SchemeConfig s = *findScheme("KVQuant-DS");
        s.key.quantizer.options["outlier_fraction"] = 0.025;
        QVERIFY(validateScheme(s, {3}, d, "s"));
        const PathPlan plan = planPath(s.key, bits, d, PathSite::Keys, &data.calibrationKeys, EngineKind::Pcg64, 9);
        KVLENS_COMPARE_ABS(pathBitsPerCoordinate(plan, tokens), handBits(bits, d, tokens, 0.025), 1e-12);
        const PathResult r = encodePathCpu(plan, data.keys, nullptr);
        long long exact = 0;
        for (int i = 0; i < tokens; ++i)
            for (int j = 0; j < d; ++j)
                exact += r.reconstruction(i, j) == roundToHalf(data.keys(i, j)) ? 1 : 0;
        QCOMPARE(exact, static_cast<long long>(std::ceil(0.025 * tokens * d)));
        s.key.quantizer.options["outlier_fraction"] = 0.6;
        const Status st = validateScheme(s, {3}, d, "s");
        QVERIFY(!st);
        QCOMPARE(QString::fromStdString(st.error().field), QString("s.k.quantizer.outlier_fraction"));
    }

    void bitsAreCountedInFull_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<int>("d");
        QTest::addColumn<int>("tokens");
        QTest::newRow("3 bits, d 64, 200 tokens") << 3 << 64 << 200;   // 128 outliers: 3.98 bits
        QTest::newRow("2 bits, d 128, 1000 tokens") << 2 << 128 << 1000;
        QTest::newRow("4 bits, d 96, 37 tokens") << 4 << 96 << 37;      // 1% of 3552 rounds up to 36
    }
    void bitsAreCountedInFull()
    {
        QFETCH(int, bits);
        QFETCH(int, d);
        QFETCH(int, tokens);
        const SchemeConfig s = *findScheme("KVQuant-DS");
        const Dataset data = outlierData(d, tokens, 256, 5);
        const int budget = bits; // keys at "n"
        const PathPlan plan = planPath(s.key, budget, d, PathSite::Keys, &data.calibrationKeys, EngineKind::Pcg64, 5);
        KVLENS_COMPARE_ABS(pathBitsPerCoordinate(plan, tokens), handBits(bits, d, tokens), 1e-12);
        // The preview (no calibration) agrees with the plan.
        KVLENS_COMPARE_ABS(pathBitsPerCoordinate(s.key, budget, d, tokens), handBits(bits, d, tokens), 1e-12);
        QVERIFY(handBits(bits, d, tokens) > bits + 0.32); // the sparse part is never free
    }

    void theLargestOnePercentIsKeptExactly()
    {
        const int d = 64, tokens = 512, bits = 3;
        const Dataset data = outlierData(d, tokens, 1024, 7);
        const SchemeConfig s = *findScheme("KVQuant-DS");
        const PathPlan plan = planPath(s.key, bits, d, PathSite::Keys, &data.calibrationKeys, EngineKind::Pcg64, 7);
        const PathResult r = encodePathCpu(plan, data.keys, &data.queries);
        // Independent per-channel statistics of the calibration keys.
        Eigen::RowVectorXd mean = data.calibrationKeys.cast<double>().colwise().mean();
        Eigen::RowVectorXd sd(d);
        for (int j = 0; j < d; ++j)
            sd(j) = std::sqrt((data.calibrationKeys.col(j).cast<double>().array() - mean(j)).square().mean());
        std::vector<double> magnitude;
        long long exact = 0;
        double minExact = 1e300;
        double denseError = 0.0;
        long long dense = 0;
        for (int i = 0; i < tokens; ++i)
            for (int j = 0; j < d; ++j) {
                const double x = data.keys(i, j), xh = r.reconstruction(i, j);
                const double u = std::abs((x - mean(j)) / sd(j));
                magnitude.push_back(u);
                if (xh == static_cast<double>(roundToHalf(data.keys(i, j)))) { // stored as its fp16 value
                    ++exact;
                    minExact = std::min(minExact, u);
                } else {
                    denseError += std::pow((xh - x) / sd(j), 2);
                    ++dense;
                }
            }
        const long long expected = static_cast<long long>(std::ceil(0.01 * tokens * d));
        // Every outlier is stored as its fp16 value; a dense code equal to it bit for bit would be a fluke.
        QVERIFY2(exact == expected,
                 qPrintable(QString("exact entries %1, 1% is %2").arg(exact).arg(expected)));
        // The exact ones are the large ones: all above the 97th percentile of |u| (the 99th
        // with a margin for the fp16 statistics and the calibration-vs-data spread)...
        std::nth_element(magnitude.begin(), magnitude.begin() + magnitude.size() * 97 / 100, magnitude.end());
        QVERIFY2(minExact >= magnitude[magnitude.size() * 97 / 100],
                 qPrintable(QString("smallest exact |u| %1").arg(minExact)));
        // ...and the dense part, normalized to N(0, 1) per channel, sits at or below the 3-bit
        // Lloyd-Max distortion of the Gaussian (0.03454, Max 1960): its tails went sparse.
        const double normalizedMse = denseError / static_cast<double>(dense);
        QVERIFY2(normalizedMse < 0.03454 * 1.05 && normalizedMse > 0.015, qPrintable(QString::number(normalizedMse)));
    }

    void beatsNormBasedKeysOnOutlierChannels()
    {
        // Per-channel normalization is what outlier channels need: KV's norm + sphere codebook
        // spends its levels on four giant coordinates, KVQuant-DS does not.
        auto spec = specFromJson(R"({"regime": {"name": "outlier_channels"}, "d": 64, "tokens": 256, "queries": 16,
                                     "budgets": [3], "seeds": {"count": 2}, "schemes": ["KV", "KVQuant-DS"]})");
        QVERIFY2(bool(spec), spec ? "" : spec.error().text().c_str());
        CpuBackend backend(2);
        auto result = runExperiment(*spec, backend);
        QVERIFY2(bool(result), result ? "" : result.error().text().c_str());
        double mseK[2] = {0, 0};
        for (const TrialResult& t : result->trials) {
            mseK[t.key.scheme] += t.relMseK;
            if (t.key.scheme == 1)
                KVLENS_COMPARE_ABS(t.bits.key, handBits(3, 64, 256), 1e-12);
        }
        QVERIFY2(mseK[1] < 0.25 * mseK[0], qPrintable(QString("KV %1, KVQuant-DS %2").arg(mseK[0]).arg(mseK[1])));
    }
};

QTEST_GUILESS_MAIN(TestKvquantDs)
#include "tst_kvquant_ds.moc"
