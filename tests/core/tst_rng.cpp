// SPDX-License-Identifier: GPL-3.0-or-later
// Engines against published test vectors; samplers against their laws at fixed seeds.
#include "core/rng/rng.h"
#include "common/approx.h"

#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/gamma.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <QTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

using namespace kvlens;

namespace {

/// One-sample Kolmogorov-Smirnov statistic sup |F_n - F|.
double ksStatistic(std::vector<double> x, const std::function<double(double)>& cdf)
{
    std::sort(x.begin(), x.end());
    const double n = static_cast<double>(x.size());
    double d = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double f = cdf(x[i]);
        d = std::max({d, (i + 1) / n - f, f - i / n});
    }
    return d;
}

/// Critical value of the KS statistic at alpha = 0.001 (asymptotic: 1.949 / sqrt(n)).
double ksCritical(std::size_t n) { return 1.949 / std::sqrt(static_cast<double>(n)); }

std::vector<double> draw(EngineKind engine, std::uint64_t seed, std::size_t n, const std::function<double(Rng&)>& f)
{
    Rng rng(engine, seed);
    std::vector<double> x(n);
    for (auto& v : x)
        v = f(rng);
    return x;
}

} // namespace

Q_DECLARE_METATYPE(kvlens::EngineKind)

class TestRng : public QObject {
    Q_OBJECT
private slots:
    void pcg64MatchesNumpyTestVector()
    {
        // Issue #2 test vector (NumPy PCG64: step, then XSL-RR of the new state).
        const Pcg64::uint128 state = (static_cast<Pcg64::uint128>(0x0123456789abcdefULL) << 64) | 0x0fedcba987654321ULL;
        Pcg64 pcg(state, 0x370e6b27);
        QCOMPARE(pcg(), 0xe284cb1cbd211c75ULL);
        QCOMPARE(pcg(), 0x23ded1011686219eULL);
        QCOMPARE(pcg(), 0xcbba26fb4995d9c0ULL);
    }

    void mt19937_64MatchesTheStandard()
    {
        // C++ standard [rand.predef]: the 10000th output of a default-constructed mt19937_64.
        Rng rng(EngineKind::Mt19937_64, 5489u);
        std::uint64_t v = 0;
        for (int i = 0; i < 10000; ++i)
            v = rng.nextU64();
        QCOMPARE(v, 9981545732273789042ULL);
    }

    void engineNamesRoundTrip()
    {
        for (auto kind : {EngineKind::Mt19937_64, EngineKind::Pcg64})
            QCOMPARE(engineFromName(engineName(kind)).value(), kind);
        QVERIFY(!engineFromName("minstd").has_value());
    }

    void streamsAreReproducibleAndDistinct()
    {
        Rng a(EngineKind::Pcg64, 42, Stream::Keys), b(EngineKind::Pcg64, 42, Stream::Keys);
        Rng c(EngineKind::Pcg64, 42, Stream::Values), d(EngineKind::Pcg64, 43, Stream::Keys);
        bool allEqualAb = true, anyEqualAc = false, anyEqualAd = false;
        for (int i = 0; i < 100; ++i) {
            const auto va = a.nextU64(), vb = b.nextU64(), vc = c.nextU64(), vd = d.nextU64();
            allEqualAb = allEqualAb && va == vb;
            anyEqualAc = anyEqualAc || va == vc;
            anyEqualAd = anyEqualAd || va == vd;
        }
        QVERIFY(allEqualAb);
        QVERIFY(!anyEqualAc);
        QVERIFY(!anyEqualAd);
        QVERIFY(deriveSeed(7, Stream::Keys, 0) != deriveSeed(7, Stream::Keys, 1));
    }

    void engines_data()
    {
        QTest::addColumn<EngineKind>("engine");
        QTest::newRow("mt19937_64") << EngineKind::Mt19937_64;
        QTest::newRow("pcg64") << EngineKind::Pcg64;
    }

    void uniformIsUniform_data() { engines_data(); }
    void uniformIsUniform()
    {
        QFETCH(EngineKind, engine);
        const auto x = draw(engine, 11, 100000, [](Rng& r) { return r.uniform(); });
        QVERIFY(*std::min_element(x.begin(), x.end()) >= 0.0);
        QVERIFY(*std::max_element(x.begin(), x.end()) < 1.0);
        QVERIFY(ksStatistic(x, [](double v) { return v; }) < ksCritical(x.size()));
    }

    void belowIsUnbiased_data() { engines_data(); }
    void belowIsUnbiased()
    {
        QFETCH(EngineKind, engine);
        Rng rng(engine, 5);
        std::vector<int> counts(10, 0);
        const int n = 100000;
        for (int i = 0; i < n; ++i)
            ++counts[static_cast<std::size_t>(rng.below(10))];
        double chi2 = 0.0;
        for (int c : counts)
            chi2 += (c - n / 10.0) * (c - n / 10.0) / (n / 10.0);
        // chi-square with 9 degrees of freedom: 27.88 is its 0.999 quantile.
        QVERIFY2(chi2 < 27.88, QByteArray::number(chi2).constData());
    }

    void normalFollowsItsLaw_data() { engines_data(); }
    void normalFollowsItsLaw()
    {
        QFETCH(EngineKind, engine);
        const std::size_t n = 200000;
        const auto x = draw(engine, 2024, n, [](Rng& r) { return r.normal(); });
        double mean = 0.0, m2 = 0.0;
        for (double v : x)
            mean += v;
        mean /= static_cast<double>(n);
        for (double v : x)
            m2 += (v - mean) * (v - mean);
        const double var = m2 / static_cast<double>(n - 1);
        // Four standard errors: SE(mean) = 1/sqrt(n), SE(var) = sqrt(2/n).
        KVLENS_COMPARE_ABS(mean, 0.0, 4.0 / std::sqrt(static_cast<double>(n)));
        KVLENS_COMPARE_ABS(var, 1.0, 4.0 * std::sqrt(2.0 / static_cast<double>(n)));
        const boost::math::normal_distribution<> law;
        QVERIFY(ksStatistic(x, [&](double v) { return boost::math::cdf(law, v); }) < ksCritical(n));
    }

    void gammaFollowsItsLaw_data()
    {
        QTest::addColumn<EngineKind>("engine");
        QTest::addColumn<double>("shape");
        QTest::newRow("mt shape 0.5") << EngineKind::Mt19937_64 << 0.5;
        QTest::newRow("pcg shape 0.525 (t, nu = 1.05)") << EngineKind::Pcg64 << 0.525;
        QTest::newRow("pcg shape 3.7") << EngineKind::Pcg64 << 3.7;
    }
    void gammaFollowsItsLaw()
    {
        QFETCH(EngineKind, engine);
        QFETCH(double, shape);
        const auto x = draw(engine, 99, 100000, [&](Rng& r) { return r.gamma(shape); });
        const boost::math::gamma_distribution<> law(shape);
        QVERIFY(ksStatistic(x, [&](double v) { return boost::math::cdf(law, v); }) < ksCritical(x.size()));
    }

    void chiSquareFollowsItsLaw()
    {
        const auto x = draw(EngineKind::Pcg64, 3, 100000, [](Rng& r) { return r.chiSquare(3.0); });
        const boost::math::chi_squared_distribution<> law(3.0);
        QVERIFY(ksStatistic(x, [&](double v) { return boost::math::cdf(law, v); }) < ksCritical(x.size()));
    }

    void studentTFollowsItsLaw_data()
    {
        QTest::addColumn<EngineKind>("engine");
        QTest::addColumn<double>("nu");
        QTest::newRow("mt nu 1.05") << EngineKind::Mt19937_64 << 1.05;
        QTest::newRow("pcg nu 1.5") << EngineKind::Pcg64 << 1.5;
        QTest::newRow("mt nu 5") << EngineKind::Mt19937_64 << 5.0;
    }
    void studentTFollowsItsLaw()
    {
        QFETCH(EngineKind, engine);
        QFETCH(double, nu);
        const auto x = draw(engine, 17, 100000, [&](Rng& r) { return r.studentT(nu); });
        const boost::math::students_t_distribution<> law(nu);
        QVERIFY(ksStatistic(x, [&](double v) { return boost::math::cdf(law, v); }) < ksCritical(x.size()));
    }
};

QTEST_APPLESS_MAIN(TestRng)
#include "tst_rng.moc"
