// SPDX-License-Identifier: GPL-3.0-or-later
// Norm + codebook, uniform (KIVI) and QJL quantizers: error laws at fixed seeds, storage accounting.
#include "core/common/fp16.h"
#include "core/quant/norm_quantizer.h"
#include "core/quant/qjl.h"
#include "core/quant/uniform_quantizer.h"
#include "core/quant/wht.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>
#include <numbers>

using namespace kvlens;

namespace {

RowMatrixXf gaussianRows(int n, int d, std::uint64_t seed, float scale = 1.0f)
{
    Rng rng(EngineKind::Pcg64, seed);
    RowMatrixXf x(n, d);
    rng.fillNormal(x.data(), static_cast<std::size_t>(x.size()), scale);
    return x;
}

} // namespace

class TestQuantizers : public QObject {
    Q_OBJECT
private slots:
    void normQuantizerRelativeMseMatchesCodebook_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<bool>("rotate");
        for (int bits = 1; bits <= 4; ++bits) {
            QTest::newRow(qPrintable(QStringLiteral("%1 bits").arg(bits))) << bits << false;
            QTest::newRow(qPrintable(QStringLiteral("%1 bits rotated").arg(bits))) << bits << true;
        }
    }
    void normQuantizerRelativeMseMatchesCodebook()
    {
        QFETCH(int, bits);
        QFETCH(bool, rotate);
        const int d = 128, n = 4000;
        RowMatrixXf x = gaussianRows(n, d, 21, 3.0f);
        if (rotate) {
            Rng rng(EngineKind::Pcg64, 4);
            const RowMatrixXf raw = x;
            rotateRows(raw, randomSigns(d, rng), x);
        }
        const NormQuantizer q(cachedCodebook(CodebookLaw::Beta, d, bits));
        NormCodes codes;
        q.encode(x, codes);
        RowMatrixXf xHat;
        q.decode(codes, xHat);
        double rel = 0.0;
        for (int r = 0; r < n; ++r)
            rel += (x.row(r) - xHat.row(r)).squaredNorm() / x.row(r).squaredNorm();
        rel /= n;
        // For unit vectors the relative MSE is d times the per-coordinate codebook MSE (issue: within 5%).
        KVLENS_COMPARE_REL(rel, d * q.codebook().mse, 0.05);
        QCOMPARE(codes.saturatedNorms, 0);
        KVLENS_COMPARE_ABS(q.bitsPerVector(d), bits * d + 16.0, 0.0);
    }

    void normsAreStoredAsHalfAndSaturate()
    {
        RowMatrixXf x(2, 4);
        x << 3.0f, 4.0f, 0.0f, 0.0f,     // norm 5
            1e5f, 0.0f, 0.0f, 0.0f;      // norm beyond the fp16 range
        const NormQuantizer q(cachedCodebook(CodebookLaw::Beta, 4, 3));
        NormCodes codes;
        q.encode(x, codes);
        QCOMPARE(codes.norms[0], 5.0f);
        QCOMPARE(codes.norms[1], kHalfMax);
        QCOMPARE(codes.saturatedNorms, 1);
        const NormQuantizer exact(cachedCodebook(CodebookLaw::Beta, 4, 3), ScalarFormat::Fp32);
        exact.encode(x, codes);
        QCOMPARE(codes.norms[1], 1e5f);
        QCOMPARE(codes.saturatedNorms, 0);
    }

    void zeroVectorDecodesToZero()
    {
        const RowMatrixXf x = RowMatrixXf::Zero(1, 8);
        const NormQuantizer q(cachedCodebook(CodebookLaw::Beta, 8, 2));
        NormCodes codes;
        q.encode(x, codes);
        RowMatrixXf xHat;
        q.decode(codes, xHat);
        QCOMPARE(xHat.cwiseAbs().maxCoeff(), 0.0f);
    }

    void uniformErrorWithinHalfStep_data()
    {
        QTest::addColumn<int>("axis");
        QTest::addColumn<int>("bits");
        QTest::addColumn<int>("group");
        QTest::newRow("per-channel 2 bits g32") << 0 << 2 << 32;
        QTest::newRow("per-token 2 bits g32") << 1 << 2 << 32;
        QTest::newRow("per-channel 4 bits g7 (ragged)") << 0 << 4 << 7;
        QTest::newRow("per-token 8 bits g128") << 1 << 8 << 128;
    }
    void uniformErrorWithinHalfStep()
    {
        QFETCH(int, axis);
        QFETCH(int, bits);
        QFETCH(int, group);
        UniformOptions opt;
        opt.bits = bits;
        opt.groupSize = group;
        opt.axis = axis == 0 ? UniformAxis::PerChannel : UniformAxis::PerToken;
        const UniformQuantizer q(opt);
        const RowMatrixXf x = gaussianRows(100, 64, 5);
        UniformCodes codes;
        q.encode(x, codes);
        RowMatrixXf xHat;
        q.decode(codes, xHat);
        const Eigen::Index g = group;
        for (Eigen::Index r = 0; r < x.rows(); ++r)
            for (Eigen::Index c = 0; c < x.cols(); ++c) {
                const Eigen::Index gr = axis == 0 ? r / g : r;
                const Eigen::Index gc = axis == 0 ? c : c / g;
                const float scale = codes.scales[static_cast<std::size_t>(gr * codes.groupCols + gc)];
                // Half a step, plus the fp16 rounding of min and scale (relative 2^-11 each,
                // amplified by up to 2^b - 1 steps for the scale).
                const float slack = 0.5f * scale + std::ldexp(1.0f, -10) * (std::abs(x(r, c)) + 4.0f);
                QVERIFY2(std::abs(x(r, c) - xHat(r, c)) <= slack,
                         qPrintable(QStringLiteral("(%1,%2): %3 vs %4").arg(r).arg(c).arg(x(r, c)).arg(xHat(r, c))));
            }
    }

    void uniformConstantGroupIsExact()
    {
        UniformOptions opt;
        opt.bits = 2;
        opt.groupSize = 4;
        opt.axis = UniformAxis::PerToken;
        RowMatrixXf x = RowMatrixXf::Constant(3, 8, 0.5f);
        const UniformQuantizer q(opt);
        UniformCodes codes;
        q.encode(x, codes);
        RowMatrixXf xHat;
        q.decode(codes, xHat);
        QCOMPARE((x - xHat).cwiseAbs().maxCoeff(), 0.0f);
    }

    void uniformWindowAndAccounting()
    {
        UniformOptions opt;
        opt.bits = 2;
        opt.groupSize = 32;
        opt.axis = UniformAxis::PerChannel;
        opt.fullPrecisionWindow = 4;
        const UniformQuantizer q(opt);
        const RowMatrixXf x = gaussianRows(100, 64, 6);
        UniformCodes codes;
        q.encode(x, codes);
        RowMatrixXf xHat;
        q.decode(codes, xHat);
        // The last four tokens are kept at fp16.
        for (int r = 96; r < 100; ++r)
            for (int c = 0; c < 64; ++c)
                QCOMPARE(xHat(r, c), roundToHalf(x(r, c)));
        QCOMPARE(codes.groupRows, 3); // ceil(96 / 32)
        QCOMPARE(codes.groupCols, 64);
        // 96 x 64 two-bit codes + 3 x 64 groups x (fp16 min + fp16 scale) + 4 x 64 fp16 values.
        KVLENS_COMPARE_ABS(q.totalBits(100, 64), 96.0 * 64 * 2 + 192.0 * 32 + 4.0 * 64 * 16, 0.0);
    }

    void qjlSignsMatchTheSketch()
    {
        const int d = 64, m = 80; // m not a multiple of 32 exercises the last word
        Rng rng(EngineKind::Pcg64, 12);
        const QjlSketch sketch(QjlSketch::drawMatrix(m, d, rng));
        const RowMatrixXf r = gaussianRows(10, d, 13);
        QjlCodes codes;
        sketch.encode(r, codes);
        QCOMPARE(codes.wordsPerRow, 3);
        const RowMatrixXf projected = r * sketch.matrix().transpose();
        for (int i = 0; i < 10; ++i) {
            for (int j = 0; j < m; ++j)
                QCOMPARE(codes.sign(i, j), projected(i, j) < 0.0f ? -1.0f : 1.0f);
            QCOMPARE(codes.norms[static_cast<std::size_t>(i)], roundToHalf(r.row(i).norm()));
        }
        KVLENS_COMPARE_ABS(sketch.bitsPerVector(), 80.0 + 16.0, 0.0);
    }

    void qjlInnerProductIsUnbiasedWithPredictedVariance()
    {
        // Over independent sketch matrices S, the estimator of <q, r> has mean <q, r> and
        // variance (1/m)[(pi/2)||q||^2||r||^2 - <q, r>^2] (design section 4).
        const int d = 128, m = 128, draws = 3000;
        const RowMatrixXf q = gaussianRows(1, d, 31);
        RowMatrixXf r = gaussianRows(1, d, 32, 0.2f);
        r.row(0) += 0.05f * q.row(0); // give <q, r> a sizeable value
        const double qr = q.row(0).dot(r.row(0));
        const double q2 = q.row(0).squaredNorm(), r2 = r.row(0).squaredNorm();
        Rng rng(EngineKind::Mt19937_64, 33);
        std::vector<double> estimates(draws);
        double reconstructionError = 0.0;
        Eigen::VectorXd meanReconstruction = Eigen::VectorXd::Zero(d);
        for (int k = 0; k < draws; ++k) {
            const QjlSketch sketch(QjlSketch::drawMatrix(m, d, rng), ScalarFormat::Fp32);
            QjlCodes codes;
            sketch.encode(r, codes);
            RowMatrixXf est, rHat;
            sketch.estimateInnerProducts(q, codes, est);
            estimates[static_cast<std::size_t>(k)] = est(0, 0);
            sketch.reconstruct(codes, rHat);
            reconstructionError += (rHat.row(0) - r.row(0)).squaredNorm() / r2;
            meanReconstruction += rHat.row(0).transpose().cast<double>();
        }
        double mean = 0.0, var = 0.0;
        for (double e : estimates)
            mean += e;
        mean /= draws;
        for (double e : estimates)
            var += (e - mean) * (e - mean);
        var /= draws - 1;
        const double predictedVar = ((std::numbers::pi / 2.0) * q2 * r2 - qr * qr) / m;
        const double standardError = std::sqrt(predictedVar / draws);
        KVLENS_COMPARE_ABS(mean, qr, 3.0 * standardError);
        KVLENS_COMPARE_REL(var, predictedVar, 0.10);
        // E||r^ - r||^2 / ||r||^2 = (pi/2) d/m - 1/m (independent rows of S; derivation in qjl.h).
        KVLENS_COMPARE_REL(reconstructionError / draws, (std::numbers::pi / 2.0) * d / m - 1.0 / m, 0.05);
        meanReconstruction /= draws;
        QVERIFY((meanReconstruction - r.row(0).transpose().cast<double>()).norm() < 0.05 * std::sqrt(r2));
    }

    void scalarFormatNames()
    {
        for (auto f : {ScalarFormat::Fp16, ScalarFormat::Bf16, ScalarFormat::Fp32})
            QCOMPARE(scalarFormatFromName(scalarFormatName(f)).value(), f);
        QCOMPARE(scalarFormatBits(ScalarFormat::Fp32), 32);
        QCOMPARE(uniformAxisFromName("per_channel").value(), UniformAxis::PerChannel);
        QVERIFY(!uniformAxisFromName("per_head").has_value());
    }
};

QTEST_APPLESS_MAIN(TestQuantizers)
#include "tst_quantizers.moc"
