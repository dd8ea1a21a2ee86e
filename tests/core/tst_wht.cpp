// SPDX-License-Identifier: GPL-3.0-or-later
// Randomized Walsh-Hadamard rotation: orthogonality, inverse, and the explicit Sylvester matrix.
#include "core/quant/wht.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>

using namespace kvlens;

namespace {

/// Sylvester construction H_{2n} = [[H_n, H_n], [H_n, -H_n]], built independently of the butterfly.
Eigen::MatrixXd sylvester(int n)
{
    Eigen::MatrixXd h(1, 1);
    h(0, 0) = 1.0;
    while (h.rows() < n) {
        const auto m = h.rows();
        Eigen::MatrixXd next(2 * m, 2 * m);
        next << h, h, h, -h;
        h = next;
    }
    return h;
}

RowMatrixXf gaussianRows(int n, int d, std::uint64_t seed)
{
    Rng rng(EngineKind::Pcg64, seed);
    RowMatrixXf x(n, d);
    rng.fillNormal(x.data(), static_cast<std::size_t>(x.size()));
    return x;
}

} // namespace

class TestWht : public QObject {
    Q_OBJECT
private slots:
    void paddedDimension()
    {
        QCOMPARE(kvlens::paddedDimension(1), std::size_t{1});
        QCOMPARE(kvlens::paddedDimension(64), std::size_t{64});
        QCOMPARE(kvlens::paddedDimension(96), std::size_t{128});
        QCOMPARE(kvlens::paddedDimension(129), std::size_t{256});
    }

    void matchesSylvesterMatrix_data()
    {
        QTest::addColumn<int>("n");
        for (int n : {2, 4, 8, 16, 32, 64})
            QTest::newRow(QByteArray::number(n).constData()) << n;
    }
    void matchesSylvesterMatrix()
    {
        QFETCH(int, n);
        const RowMatrixXf x = gaussianRows(3, n, 7);
        const Eigen::MatrixXd h = sylvester(n);
        for (int r = 0; r < 3; ++r) {
            std::vector<float> buffer(x.row(r).data(), x.row(r).data() + n);
            fwhtInPlace(buffer.data(), static_cast<std::size_t>(n));
            const Eigen::VectorXd expected = h * x.row(r).transpose().cast<double>();
            for (int i = 0; i < n; ++i)
                KVLENS_COMPARE_ABS(buffer[static_cast<std::size_t>(i)], expected(i), 1e-4);
        }
    }

    void rotationMatchesExplicitProduct()
    {
        // x' = H D x / sqrt(n), with the diagonal D of random signs.
        const int n = 32;
        Rng rng(EngineKind::Mt19937_64, 3);
        const auto signs = randomSigns(n, rng);
        const RowMatrixXf x = gaussianRows(4, n, 8);
        RowMatrixXf rotated;
        rotateRows(x, signs, rotated);
        Eigen::VectorXd dvec(n);
        for (int i = 0; i < n; ++i)
            dvec(i) = signs[static_cast<std::size_t>(i)];
        const Eigen::MatrixXd m = sylvester(n) * dvec.asDiagonal() / std::sqrt(static_cast<double>(n));
        for (int r = 0; r < 4; ++r) {
            const Eigen::VectorXd expected = m * x.row(r).transpose().cast<double>();
            for (int i = 0; i < n; ++i)
                KVLENS_COMPARE_ABS(rotated(r, i), expected(i), 1e-5);
        }
    }

    void orthogonalAndInvertible_data()
    {
        QTest::addColumn<int>("d");
        for (int d : {64, 96, 128, 1000, 1024})
            QTest::newRow(QByteArray::number(d).constData()) << d;
    }
    void orthogonalAndInvertible()
    {
        QFETCH(int, d);
        const std::size_t dp = kvlens::paddedDimension(static_cast<std::size_t>(d));
        Rng rng(EngineKind::Pcg64, 1234);
        const auto signs = randomSigns(dp, rng);
        const RowMatrixXf x = gaussianRows(16, d, 99);
        RowMatrixXf rotated, back;
        rotateRows(x, signs, rotated);
        QCOMPARE(rotated.cols(), static_cast<Eigen::Index>(dp));
        for (int r = 0; r < 16; ++r)
            KVLENS_COMPARE_REL(rotated.row(r).norm(), x.row(r).norm(), 1e-6);
        unrotateRows(rotated, signs, static_cast<std::size_t>(d), back);
        QCOMPARE(back.cols(), static_cast<Eigen::Index>(d));
        KVLENS_COMPARE_ABS((back - x).cwiseAbs().maxCoeff(), 0.0, 1e-5);
        // Rotating queries and keys with the same signs preserves every dot product.
        const double dot = x.row(0).dot(x.row(1));
        const double rotatedDot = rotated.row(0).dot(rotated.row(1));
        KVLENS_COMPARE_ABS(rotatedDot, dot, 1e-4 * d);
    }

    void signsAreDeterministicAndBalanced()
    {
        Rng a(EngineKind::Pcg64, 5), b(EngineKind::Pcg64, 5);
        const auto s1 = randomSigns(4096, a), s2 = randomSigns(4096, b);
        QVERIFY(s1 == s2);
        double sum = 0.0;
        for (float s : s1) {
            QVERIFY(s == 1.0f || s == -1.0f);
            sum += s;
        }
        // Sum of 4096 fair signs: standard deviation 64; four of them.
        QVERIFY(std::abs(sum) < 256.0);
    }
};

QTEST_APPLESS_MAIN(TestWht)
#include "tst_wht.moc"
