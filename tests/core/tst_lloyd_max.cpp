// SPDX-License-Identifier: GPL-3.0-or-later
// Lloyd-Max codebooks against Max (1960) and the Beta-law values of issue #2; optimality properties.
#include "core/quant/lloyd_max.h"
#include "core/rng/rng.h"
#include "common/approx.h"

#include <QTest>

#include <algorithm>
#include <cmath>

using namespace kvlens;

class TestLloydMax : public QObject {
    Q_OBJECT
private slots:
    void gaussianMatchesMax1960_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<double>("mse");
        // Max (1960), Table I: minimum mean-squared error per unit variance.
        QTest::newRow("1 bit") << 1 << 0.3634;
        QTest::newRow("2 bits") << 2 << 0.1175;
        QTest::newRow("3 bits") << 3 << 0.03454;
        QTest::newRow("4 bits") << 4 << 0.009497;
    }
    void gaussianMatchesMax1960()
    {
        QFETCH(int, bits);
        QFETCH(double, mse);
        const Codebook cb = designGaussianCodebook(0, bits);
        QVERIFY(cb.converged);
        // Three significant figures (the table's last digit is rounded).
        KVLENS_COMPARE_REL(cb.mse, mse, 1e-3);
    }

    void gaussianCentroids()
    {
        const Codebook one = designGaussianCodebook(0, 1);
        KVLENS_COMPARE_ABS(one.levels[1], 0.7979, 1e-4); // sqrt(2/pi)
        KVLENS_COMPARE_ABS(one.levels[0], -0.7979, 1e-4);
        const Codebook two = designGaussianCodebook(0, 2);
        KVLENS_COMPARE_ABS(two.levels[2], 0.4528, 1e-4);
        KVLENS_COMPARE_ABS(two.levels[3], 1.5104, 1e-4);
        KVLENS_COMPARE_ABS(two.levels[0], -1.5104, 1e-4);
        KVLENS_COMPARE_ABS(two.thresholds[2], 0.9816, 1e-4);
    }

    void betaMatchesIssueValues_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<double>("dMse");
        // d * MSE of the Beta((d-1)/2, (d-1)/2) sphere-coordinate law at d = 128 (issue #2).
        QTest::newRow("1 bit") << 1 << 0.36089;
        QTest::newRow("2 bits") << 2 << 0.11600;
        QTest::newRow("3 bits") << 3 << 0.033966;
        QTest::newRow("4 bits") << 4 << 0.009315;
    }
    void betaMatchesIssueValues()
    {
        QFETCH(int, bits);
        QFETCH(double, dMse);
        const Codebook cb = designBetaCodebook(128, bits);
        QVERIFY(cb.converged);
        KVLENS_COMPARE_REL(128.0 * cb.mse, dMse, 1e-3);
        KVLENS_COMPARE_REL(cb.variance, 1.0 / 128.0, 1e-12);
    }

    void optimalityConditions_data()
    {
        QTest::addColumn<int>("law");
        QTest::addColumn<int>("dim");
        QTest::addColumn<int>("bits");
        for (int bits : {1, 3, 5, 8}) {
            QTest::newRow(qPrintable(QStringLiteral("beta d=16 b=%1").arg(bits))) << 0 << 16 << bits;
            QTest::newRow(qPrintable(QStringLiteral("beta d=1024 b=%1").arg(bits))) << 0 << 1024 << bits;
            QTest::newRow(qPrintable(QStringLiteral("gauss b=%1").arg(bits))) << 1 << 0 << bits;
        }
    }
    void optimalityConditions()
    {
        QFETCH(int, law);
        QFETCH(int, dim);
        QFETCH(int, bits);
        const Codebook cb = law == 0 ? designBetaCodebook(dim, bits) : designGaussianCodebook(dim, bits);
        QVERIFY(cb.converged);
        QCOMPARE(cb.levelCount(), 1 << bits);
        QCOMPARE(static_cast<int>(cb.thresholds.size()), (1 << bits) - 1);
        for (std::size_t i = 0; i + 1 < cb.levels.size(); ++i)
            QVERIFY(cb.levels[i] < cb.levels[i + 1]);
        // Nearest-neighbour condition, checked against a brute-force argmin rather than against
        // the midpoint rule the designer writes: the encoder's cell holds the nearest level.
        const double spread = law == 0 ? std::min(1.0, 4.0 / std::sqrt(double(std::max(dim, 1)))) : 4.0 / std::sqrt(double(std::max(dim, 1)));
        for (int k = 0; k <= 20000; ++k) {
            const auto x = static_cast<float>(-spread + 2.0 * spread * k / 20000.0);
            const int code = cb.encode(x);
            double best = 1e300;
            for (float level : cb.levelsF)
                best = std::min(best, std::abs(double(x) - level));
            const double chosen = std::abs(double(x) - cb.levelsF[static_cast<std::size_t>(code)]);
            if (chosen > best + 1e-6)
                QFAIL(qPrintable(QStringLiteral("x = %1 coded to level %2, not the nearest").arg(x).arg(code)));
        }
        for (std::size_t i = 0; i < cb.levels.size(); ++i)
            KVLENS_COMPARE_ABS(cb.levels[i], -cb.levels[cb.levels.size() - 1 - i], 1e-15);
        QVERIFY(cb.mse > 0.0 && cb.mse < cb.variance);
    }

    void levelsAreConditionalMeans()
    {
        // Independent check by quadrature: integrate t f(t) and f(t) over each cell of the
        // d = 16 Beta law with Simpson's rule (f known up to a constant that cancels).
        const int d = 16, bits = 3;
        const Codebook cb = designBetaCodebook(d, bits);
        auto f = [&](double t) { return std::pow(1.0 - t * t, 0.5 * (d - 3)); };
        for (int i = 0; i < cb.levelCount(); ++i) {
            const double a = i == 0 ? -1.0 : cb.thresholds[static_cast<std::size_t>(i - 1)];
            const double b = i + 1 == cb.levelCount() ? 1.0 : cb.thresholds[static_cast<std::size_t>(i)];
            const int steps = 20000;
            const double h = (b - a) / steps;
            double mass = 0.0, moment = 0.0;
            for (int k = 0; k <= steps; ++k) {
                const double t = a + k * h;
                const double w = (k == 0 || k == steps) ? 1.0 : (k % 2 ? 4.0 : 2.0);
                mass += w * f(t);
                moment += w * t * f(t);
            }
            KVLENS_COMPARE_ABS(cb.levels[static_cast<std::size_t>(i)], moment / mass, 1e-9);
        }
    }

    void betaTendsToGaussian()
    {
        // As d grows the sphere coordinate tends to N(0, 1/d): sqrt(d) * levels -> Gaussian levels.
        const int d = 16384;
        const Codebook beta = designBetaCodebook(d, 3);
        const Codebook gauss = designGaussianCodebook(0, 3);
        for (std::size_t i = 0; i < beta.levels.size(); ++i)
            KVLENS_COMPARE_ABS(std::sqrt(static_cast<double>(d)) * beta.levels[i], gauss.levels[i], 2e-3);
        KVLENS_COMPARE_REL(d * beta.mse, gauss.mse, 2e-3);
    }

    void msesMatchMonteCarlo()
    {
        // Quantize coordinates of random unit vectors in R^128: mean squared error = codebook mse.
        const int d = 128;
        Rng rng(EngineKind::Pcg64, 77);
        std::vector<float> coords;
        for (int v = 0; v < 4000; ++v) {
            std::vector<double> x(d);
            double norm2 = 0.0;
            for (auto& c : x) {
                c = rng.normal();
                norm2 += c * c;
            }
            for (double c : x)
                coords.push_back(static_cast<float>(c / std::sqrt(norm2)));
        }
        for (int bits = 1; bits <= 4; ++bits) {
            const Codebook cb = designBetaCodebook(d, bits);
            double sse = 0.0;
            for (float t : coords) {
                const double e = t - cb.decode(cb.encode(t));
                sse += e * e;
            }
            // 512000 coordinates: the relative standard error of the mean is well below 1%.
            KVLENS_COMPARE_REL(sse / static_cast<double>(coords.size()), cb.mse, 0.02);
        }
    }

    void encodeCountsThresholdsBelow()
    {
        Rng rng(EngineKind::Mt19937_64, 5);
        for (int bits = 1; bits <= 8; ++bits) {
            const Codebook cb = designGaussianCodebook(0, bits);
            for (int k = 0; k < 2000; ++k) {
                const auto x = static_cast<float>(3.0 * rng.normal());
                const auto expected = std::lower_bound(cb.thresholdsF.begin(), cb.thresholdsF.end(), x)
                                      - cb.thresholdsF.begin();
                QCOMPARE(cb.encode(x), static_cast<int>(expected));
            }
            // A value exactly on a threshold goes to the lower cell.
            for (std::size_t i = 0; i < cb.thresholdsF.size(); ++i)
                QCOMPARE(cb.encode(cb.thresholdsF[i]), static_cast<int>(i));
        }
    }

    void empiricalFitsGaussianSamples()
    {
        Rng rng(EngineKind::Pcg64, 8);
        std::vector<float> samples(200000);
        for (auto& s : samples)
            s = static_cast<float>(rng.normal());
        const Codebook fitted = designEmpiricalCodebook(samples, 2);
        const Codebook exact = designGaussianCodebook(0, 2);
        QVERIFY(fitted.converged);
        for (std::size_t i = 0; i < exact.levels.size(); ++i)
            KVLENS_COMPARE_ABS(fitted.levels[i], exact.levels[i], 0.02);
        KVLENS_COMPARE_REL(fitted.mse, exact.mse, 0.03);
    }

    void cacheSharesDesigns()
    {
        const auto a = cachedCodebook(CodebookLaw::Beta, 128, 4);
        const auto b = cachedCodebook(CodebookLaw::Beta, 128, 4);
        const auto c = cachedCodebook(CodebookLaw::Beta, 64, 4);
        QCOMPARE(a.get(), b.get());
        QVERIFY(a.get() != c.get());
        QCOMPARE(a->dim, 128);
    }

    void lawNames()
    {
        QCOMPARE(codebookLawFromName("gauss").value(), CodebookLaw::Gaussian);
        QCOMPARE(codebookLawFromName("gaussian").value(), CodebookLaw::Gaussian);
        QCOMPARE(codebookLawFromName(codebookLawName(CodebookLaw::Beta)).value(), CodebookLaw::Beta);
        QVERIFY(!codebookLawFromName("laplace").has_value());
    }
};

QTEST_APPLESS_MAIN(TestLloydMax)
#include "tst_lloyd_max.moc"
