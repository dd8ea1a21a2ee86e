// SPDX-License-Identifier: GPL-3.0-or-later
// Attention and metric functions on hand-made cases with known answers.
#include "core/attention/attention.h"
#include "core/common/simd.h"
#include "core/metrics/query_metrics.h"
#include "core/analysis/summary.h"
#include "core/metrics/vector_metrics.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>
#include <limits>
#include <numbers>

using namespace kvlens;

namespace {

/// Runs queryMetrics on one query given its exact and estimated scores.
QueryMetrics metricsFor(const std::vector<float>& s, const std::vector<float>& sHat,
                        const std::vector<float>& valueError2, int k)
{
    const auto n = static_cast<Eigen::Index>(s.size());
    RowMatrixXf scores = Eigen::Map<const RowMatrixXf>(s.data(), 1, n);
    RowMatrixXf scoresHat = Eigen::Map<const RowMatrixXf>(sHat.data(), 1, n);
    RowMatrixXf p, pHat;
    std::vector<double> lse, lseHat;
    softmaxRows(scores, p, &lse);
    softmaxRows(scoresHat, pHat, &lseHat);
    AttentionPair pair{&scores, &p, &lse, &scoresHat, &pHat, &lseHat};
    return queryMetrics(pair, valueError2, k);
}

} // namespace

class TestAttentionMetrics : public QObject {
    Q_OBJECT
private slots:
    void vectorExpIsWithinTwoUlpOfTheCorrectlyRoundedValue()
    {
        // Every float in [-87.33, 88] on a grid of 2^20 steps, against exp in double.
        double worstUlp = 0.0;
        const double lo = -87.3365478515625, hi = 88.0;
        for (int k = 0; k <= (1 << 20); k += 8) {
            simd::Float8 x;
            for (int l = 0; l < 8; ++l)
                x[l] = static_cast<float>(lo + (hi - lo) * std::min(k + l, 1 << 20) / double(1 << 20));
            const simd::Float8 e = simd::exp(x);
            for (int l = 0; l < 8; ++l) {
                const double exact = std::exp(static_cast<double>(x[l]));
                const double ulp = std::nextafter(static_cast<float>(exact), INFINITY) - static_cast<float>(exact);
                worstUlp = std::max(worstUlp, std::abs(e[l] - exact) / ulp);
            }
        }
        QVERIFY2(worstUlp <= 2.0, qPrintable(QString::number(worstUlp)));
        // The ends: exact zero below, +inf above, NaN through, e^0 = 1 exactly.
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const simd::Float8 edge = simd::exp(simd::Float8{-INFINITY, -200.0f, 0.0f, 100.0f, INFINITY, nan, -1.0f, 1.0f});
        QCOMPARE(edge[0], 0.0f);
        QCOMPARE(edge[1], 0.0f);
        QCOMPARE(edge[2], 1.0f);
        QVERIFY(std::isinf(edge[3]) && std::isinf(edge[4]));
        QVERIFY(std::isnan(edge[5]));
        QVERIFY(std::abs(edge[6] - std::exp(-1.0)) < 1e-7 && std::abs(edge[7] - std::exp(1.0)) < 3e-7);
    }

    void softmaxIsStableAndNormalized()
    {
        RowMatrixXf s(2, 3);
        s << 1000.0f, 999.0f, 0.0f, -3.0f, 0.0f, 3.0f;
        RowMatrixXf p;
        std::vector<double> lse;
        softmaxRows(s, p, &lse);
        QVERIFY(p.allFinite());
        KVLENS_COMPARE_ABS(p.row(0).sum(), 1.0, 1e-6);
        // Softmax of (1000, 999, 0): logistic(1) and its complement, the third weight ~ e^-1000 = 0.
        KVLENS_COMPARE_ABS(p(0, 0), 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
        KVLENS_COMPARE_ABS(lse[0], 1000.0 + std::log(1.0 + std::exp(-1.0)), 1e-7); // float exp: ~1 ulp
        KVLENS_COMPARE_ABS(lse[1], std::log(std::exp(-3.0) + 1.0 + std::exp(3.0)), 1e-6);
    }

    void outputIsTheWeightedSum()
    {
        RowMatrixXf p(1, 2), v(2, 2), t;
        p << 0.25f, 0.75f;
        v << 1.0f, 2.0f, 3.0f, 4.0f;
        attentionOutput(p, v, t);
        KVLENS_COMPARE_ABS(t(0, 0), 2.5, 1e-6);
        KVLENS_COMPARE_ABS(t(0, 1), 3.5, 1e-6);
    }

    void identicalAttentionHasNoDamage()
    {
        const std::vector<float> s = {0.3f, -1.2f, 2.0f, 0.7f, 0.1f, -0.4f};
        const auto m = metricsFor(s, s, std::vector<float>(6, 0.0f), 3);
        QCOMPARE(m.kl[0], 0.0f);
        QCOMPARE(m.recall[0], 1.0f);
        QCOMPARE(m.argmaxShift[0], std::uint8_t{0});
        QCOMPARE(m.fisher[0], 0.0f);
        QCOMPARE(m.a2[0], 0.0f);
    }

    void twoPointKl()
    {
        // p = (1/2, 1/2), p^ = (3/4, 1/4): KL = 0.5 ln(2/3) + 0.5 ln 2 = 0.5 ln(4/3).
        const auto m = metricsFor({0.0f, 0.0f}, {static_cast<float>(std::log(3.0)), 0.0f}, {4.0f, 0.0f}, 1);
        KVLENS_COMPARE_ABS(m.kl[0], 0.5 * std::log(4.0 / 3.0), 1e-6);
        // delta s = (ln 3, 0): Var_p = (ln 3)^2 / 4.
        KVLENS_COMPARE_ABS(m.fisher[0], std::log(3.0) * std::log(3.0) / 4.0, 1e-6);
        // A^2: p_1^2 * 4 = 1.
        KVLENS_COMPARE_ABS(m.a2[0], 1.0, 1e-6);
        KVLENS_COMPARE_ABS(m.entropy[0], std::log(2.0), 1e-6);
        // The argmax of p is token 0 (tie: lower index), of p^ also token 0.
        QCOMPARE(m.argmaxShift[0], std::uint8_t{0});
    }

    void constantShiftIsSoftmaxNull()
    {
        // Adding the same constant to every estimated score changes nothing (paper C's null direction).
        const std::vector<float> s = {0.3f, -1.2f, 2.0f, 0.7f};
        std::vector<float> shifted = {0.5f, -1.0f, 2.1f, 0.6f};
        const auto base = metricsFor(s, shifted, std::vector<float>(4, 0.0f), 2);
        for (auto& x : shifted)
            x += 5.0f;
        const auto moved = metricsFor(s, shifted, std::vector<float>(4, 0.0f), 2);
        KVLENS_COMPARE_ABS(moved.kl[0], base.kl[0], 1e-6);
        KVLENS_COMPARE_ABS(moved.fisher[0], base.fisher[0], 1e-5);
        QVERIFY(base.kl[0] > 0.0f);
    }

    void recallOfAPermutedTopK()
    {
        // Ten tokens with distinct scores; the estimate swaps ranks 4,5 (inside top-5) with 6,7.
        std::vector<float> s(10), sHat(10);
        for (int i = 0; i < 10; ++i)
            s[static_cast<std::size_t>(i)] = static_cast<float>(10 - i); // token 0 is the largest
        sHat = s;
        std::swap(sHat[3], sHat[5]);
        std::swap(sHat[4], sHat[6]);
        const auto m = metricsFor(s, sHat, std::vector<float>(10, 0.0f), 5);
        KVLENS_COMPARE_ABS(m.recall[0], 3.0 / 5.0, 1e-7);
        QCOMPARE(m.argmaxShift[0], std::uint8_t{0});
        std::swap(sHat[0], sHat[9]);
        const auto shifted = metricsFor(s, sHat, std::vector<float>(10, 0.0f), 5);
        QCOMPARE(shifted.argmaxShift[0], std::uint8_t{1});
        KVLENS_COMPARE_ABS(shifted.recall[0], 2.0 / 5.0, 1e-7);
    }

    void topKBreaksTiesByIndex()
    {
        const std::vector<float> row = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
        QCOMPARE(topKIndices(row, 2), (std::vector<int>{1, 2}));
        QCOMPARE(topKIndices(row, 4), (std::vector<int>{1, 2, 3, 4}));
        QCOMPARE(topKIndices(row, 9).size(), std::size_t{5});
    }

    void uniformAttentionEntropy()
    {
        const auto m = metricsFor(std::vector<float>(64, 0.25f), std::vector<float>(64, 0.25f),
                                  std::vector<float>(64, 0.0f), 5);
        KVLENS_COMPARE_ABS(m.entropy[0], std::log(64.0), 1e-5);
    }

    void vectorErrorGeometry()
    {
        const float x[3] = {3.0f, 4.0f, 0.0f};
        const float same[3] = {3.0f, 4.0f, 0.0f};
        const float doubled[3] = {6.0f, 8.0f, 0.0f};
        const float tilted[3] = {3.0f, 4.0f, 0.05f};
        const float orthogonal[3] = {-4.0f, 3.0f, 0.0f};
        const VectorError exact = vectorError(x, same, 3);
        QCOMPARE(exact.snrDb, kSnrCapDb);
        QCOMPARE(exact.phi, 0.0);
        // x^ = 2x: error norm = ||x||, so SNR = 0 dB, and the direction is exact.
        const VectorError scaled = vectorError(x, doubled, 3);
        KVLENS_COMPARE_ABS(scaled.snrDb, 0.0, 1e-9);
        KVLENS_COMPARE_ABS(scaled.phi, 0.0, 1e-9);
        // A small orthogonal offset of 0.05 on a vector of norm 5: phi = atan(0.01), SNR = 10 log10(25/0.0025).
        const VectorError tilt = vectorError(x, tilted, 3);
        KVLENS_COMPARE_REL(tilt.phi, std::atan(0.01), 1e-6);
        KVLENS_COMPARE_ABS(tilt.snrDb, 40.0, 1e-4);
        KVLENS_COMPARE_ABS(vectorError(x, orthogonal, 3).phi, std::numbers::pi / 2, 1e-9);
    }

    void quantileIsType7()
    {
        // numpy.quantile([1, 2, 3, 4], [0.5, 0.99]) = [2.5, 3.97].
        const std::vector<float> v = {4.0f, 1.0f, 3.0f, 2.0f};
        KVLENS_COMPARE_ABS(quantile(v, 0.5), 2.5, 1e-12);
        KVLENS_COMPARE_ABS(quantile(v, 0.99), 3.97, 1e-6);
        KVLENS_COMPARE_ABS(quantile(v, 1.0), 4.0, 0.0);
        QVERIFY(std::isnan(quantile(std::vector<float>{}, 0.5)));
    }
};

QTEST_APPLESS_MAIN(TestAttentionMetrics)
#include "tst_attention_metrics.moc"
