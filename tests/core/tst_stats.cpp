// SPDX-License-Identifier: GPL-3.0-or-later
// core/stats against SciPy 1.10 reference values, closed forms and brute-force oracles; properties.
#include "core/rng/rng.h"
#include "core/stats/bootstrap.h"
#include "core/stats/energy.h"
#include "core/stats/holm.h"
#include "core/stats/kolmogorov_smirnov.h"
#include "core/stats/mann_whitney.h"
#include "core/stats/p_value.h"
#include "core/stats/ranks.h"
#include "core/stats/spearman.h"
#include "core/stats/wilcoxon.h"
#include "common/approx.h"

#include <QTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

using namespace kvlens;
using namespace kvlens::stats;

namespace {

// Hamilton depression scale of 9 patients at two visits, Hollander & Wolfe (1973), p. 29 (the
// example of R's ?wilcox.test: paired, V = W+ = 40). Reference values below are from SciPy 1.10:
//   mannwhitneyu(x, y, method='asymptotic')  -> U = 58, p = 0.132919 (use_continuity=False: 0.121891)
//   wilcoxon(x, y, method='approx')          -> statistic 5, p = 0.0381517
//   spearmanr(x, y).correlation              -> 0.6470817
//   energy_distance(x, y)                    -> 0.5914410
const std::vector<double> kX = {1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30};
const std::vector<double> kY = {0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29};

// Two unpaired samples for the KS test (SciPy 1.10: ks_2samp(a, b) D = 0.23; method='exact'
// p = 0.5286, method='asymp' p = 0.5319).
const std::vector<double> kA = {0.61, 0.29, 0.06, 0.59, -1.73, -0.74, 0.51, -0.56, 0.39, 1.64, 0.05, -0.06, 0.64,
                                -0.82, 0.37, 1.77, 1.09, -1.28, 2.36, 1.31, 1.05, -0.32, -0.4, 1.06, -2.47};
const std::vector<double> kB = {2.2, 1.66, 1.38, 0.2, 0.36, 0, 0.96, 1.56, 0.44, 1.5,
                                -0.3, 0.66, 2.31, 3.29, -0.27, -0.37, 0.38, 0.7, 0.52, -0.71};

std::vector<double> normals(Rng& rng, std::size_t n, double mean = 0.0, double sd = 1.0)
{
    std::vector<double> v(n);
    for (double& x : v)
        x = mean + sd * rng.normal();
    return v;
}

/// Normals rounded to one decimal, so that samples have many ties.
std::vector<double> roundedNormals(Rng& rng, std::size_t n, double mean)
{
    std::vector<double> v = normals(rng, n, mean);
    for (double& x : v)
        x = std::round(10.0 * x) / 10.0;
    return v;
}

Eigen::MatrixXd normalCloud(Rng& rng, Eigen::Index n, Eigen::Index dim, double shift)
{
    Eigen::MatrixXd cloud(n, dim);
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < dim; ++j)
            cloud(i, j) = shift + rng.normal();
    return cloud;
}

Eigen::MatrixXd column(const std::vector<double>& v)
{
    return Eigen::Map<const Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(v.size()));
}

/// Exact two-sample KS p-value P(D >= d) under H0 (all C(n1+n2, n1) orderings equally likely):
/// the probability that the random lattice path from (0,0) to (n1,n2) leaves the band
/// |i/n1 - j/n2| < d, propagated as probabilities (Hodges 1958). An oracle independent of
/// the Kolmogorov series.
double exactKsPValue(std::size_t n1, std::size_t n2, double d)
{
    const double slack = 1e-9; // D values are ratios of integers; count ties as "at least d"
    std::vector<double> previous(n2 + 1, 0.0), current(n2 + 1, 0.0);
    for (std::size_t i = 0; i <= n1; ++i) {
        for (std::size_t j = 0; j <= n2; ++j) {
            current[j] = 0.0;
            const double gap = std::abs(static_cast<double>(i) / n1 - static_cast<double>(j) / n2);
            if (gap >= d - slack)
                continue;
            if (i == 0 && j == 0) {
                current[j] = 1.0;
                continue;
            }
            const double left = static_cast<double>(n1 + n2 - i - j + 1);
            if (i > 0)
                current[j] += previous[j] * static_cast<double>(n1 - i + 1) / left;
            if (j > 0)
                current[j] += current[j - 1] * static_cast<double>(n2 - j + 1) / left;
        }
        std::swap(previous, current);
    }
    return 1.0 - previous[n2];
}

} // namespace

class TestStats : public QObject {
    Q_OBJECT
private slots:
    // ---- p-values and normal tails -------------------------------------------------------

    void normalUpperTail_data()
    {
        QTest::addColumn<double>("z");
        QTest::addColumn<double>("q");
        // Q(z) = erfc(z / sqrt 2) / 2 by Python's math.erfc (Abramowitz & Stegun Table 26.1).
        QTest::newRow("0") << 0.0 << 0.5;
        QTest::newRow("1.96") << 1.959963984540054 << 0.025;
        QTest::newRow("-3") << -3.0 << 0.9986501019683699;
        QTest::newRow("5") << 5.0 << 2.866515718791946e-07;
        QTest::newRow("8") << 8.0 << 6.220960574271819e-16;
    }
    void normalUpperTail()
    {
        QFETCH(double, z);
        QFETCH(double, q);
        const PValue p = normalUpper(z);
        KVLENS_COMPARE_REL(p.p, q, 1e-13);
        KVLENS_COMPARE_ABS(p.logP, std::log(q), 1e-13);
        // Two-sided is exactly twice the upper tail of |z|, and symmetric.
        const PValue two = normalTwoSided(-z);
        KVLENS_COMPARE_REL(two.p, std::min(1.0, 2.0 * normalUpper(std::abs(z)).p), 1e-15);
        KVLENS_COMPARE_REL(two.p, normalTwoSided(z).p, 1e-15);
    }

    void normalTailInLogSpace()
    {
        // log Q(40) = -800 - log(40 sqrt(2 pi)) + log(1 - 1/40^2 + 3/40^4 - ...) = -804.6084:
        // the value -804.608 is the ONE-sided tail; two-sided adds log 2 (-803.9153).
        const PValue upper = normalUpper(40.0);
        KVLENS_COMPARE_ABS(upper.logP, -804.608, 1e-3);
        KVLENS_COMPARE_ABS(upper.logP, -804.6084420137697, 1e-9);
        QCOMPARE(upper.p, 0.0); // exp(-804.6) underflows; the log does not
        const PValue two = normalTwoSided(-40.0);
        KVLENS_COMPARE_ABS(two.logP, -804.6084420137697 + std::log(2.0), 1e-9);
        // Asymptotic series at z = 100: -5000 - log(100 sqrt(2 pi)) + log(1 - 1e-4 + 3e-8 - 1.5e-11).
        KVLENS_COMPARE_REL(normalUpper(100.0).logP, -5005.524208694205, 1e-14);
        // The far tail is mirrored: Q(-40) = 1 - Q(40), log Q(-40) = -Q(40) ~ -1e-350 = -0.
        QCOMPARE(normalUpper(-40.0).p, 1.0);
        QVERIFY(normalUpper(-40.0).logP <= 0.0 && normalUpper(-40.0).logP > -1e-300);
    }

    void normalTailContinuousAtSwitch()
    {
        // Boost.Math below z = 10, Mills' ratio above; both must give log Q(10) = -53.23128515051246
        // (Python, log(erfc(10/sqrt 2)/2)).
        const double below = normalUpper(std::nextafter(10.0, 0.0)).logP;
        const double above = normalUpper(10.0).logP;
        KVLENS_COMPARE_REL(below, -53.23128515051246, 1e-13);
        KVLENS_COMPARE_REL(above, -53.23128515051246, 1e-13);
        KVLENS_COMPARE_REL(normalTwoSided(std::nextafter(10.0, 0.0)).logP, normalTwoSided(10.0).logP, 1e-13);
    }

    void pValueFromLog()
    {
        const PValue tiny = pFromLog(-1000.0);
        QCOMPARE(tiny.p, 0.0);
        QCOMPARE(tiny.logP, -1000.0);
        KVLENS_COMPARE_REL(pFromLog(std::log(0.05)).p, 0.05, 1e-15);
        const PValue one = normalTwoSided(0.0);
        QCOMPARE(one.p, 1.0);
        QCOMPARE(one.logP, 0.0);
    }

    void pValuesPrintAsBoundsBelowWhatADoubleHolds()
    {
        QCOMPARE(formatPValue(pFromLog(std::log(0.0032))), std::string("0.0032"));
        QCOMPARE(formatPValue(pFromLog(std::log(1.27e-24)), 3), std::string("1.27e-24"));
        QCOMPARE(formatPValue(pFromLog(std::log(2e-300))), std::string("2e-300"));
        // 10^-1337 (log p = -3078.6): never "5.9e-1337", and never an underflowed "0".
        QCOMPARE(formatPValue(pFromLog(-3078.6)), std::string("< 1e-300"));
        QCOMPARE(formatPValue(pFromLog(std::log(1e-301))), std::string("< 1e-300"));
    }

    // ---- ranks ---------------------------------------------------------------------------

    void averageRanksWithTies()
    {
        const std::vector<double> v = {3, 1, 4, 1, 5, 9, 2, 6, 5};
        const Ranks r = averageRanks(v);
        const std::vector<double> expected = {4, 1.5, 5, 1.5, 6.5, 9, 3, 8, 6.5};
        QCOMPARE(r.ranks, expected);
        QCOMPARE(r.tieSum, 12.0); // two pairs: 2 * (2^3 - 2)
        QCOMPARE(averageRanks(std::vector<double>{}).ranks.size(), std::size_t{0});
        const Ranks allTied = averageRanks(std::vector<double>(5, 2.0));
        QCOMPARE(allTied.ranks, std::vector<double>(5, 3.0));
        QCOMPARE(allTied.tieSum, 120.0);
    }

    // ---- Mann-Whitney --------------------------------------------------------------------

    void mannWhitneyMatchesScipy()
    {
        const MannWhitneyResult r = mannWhitneyU(kX, kY);
        QCOMPARE(r.n1, std::size_t{9});
        QCOMPARE(r.u1, 58.0);
        QCOMPARE(r.u, 58.0);
        QCOMPARE(r.u2, 23.0);
        KVLENS_COMPARE_ABS(r.p.p, 0.132919, 1e-6);
        KVLENS_COMPARE_ABS(r.pNoContinuity.p, 0.121891, 1e-6);
        KVLENS_COMPARE_ABS(r.p.logP, std::log(0.132919), 1e-5);
        // z = (58 - 40.5 - 0.5) / sqrt(81/12 (19 - 12/306)) (tie groups 1.06 and 1.29 in y).
        KVLENS_COMPARE_ABS(r.z, 1.502688234205555, 1e-12);
        // r = 1 - 2*58/81 = -35/81: negative, x tends to be larger than y.
        KVLENS_COMPARE_ABS(r.rankBiserial, -35.0 / 81.0, 1e-15);
    }

    void mannWhitneyProperties_data()
    {
        QTest::addColumn<int>("n1");
        QTest::addColumn<int>("n2");
        QTest::addColumn<double>("shift");
        QTest::addColumn<int>("seed");
        QTest::newRow("5 vs 7") << 5 << 7 << 0.5 << 1;
        QTest::newRow("30 vs 30") << 30 << 30 << 0.0 << 2;
        QTest::newRow("40 vs 25") << 40 << 25 << -0.8 << 3;
        QTest::newRow("200 vs 150") << 200 << 150 << 0.3 << 4;
    }
    void mannWhitneyProperties()
    {
        QFETCH(int, n1);
        QFETCH(int, n2);
        QFETCH(double, shift);
        QFETCH(int, seed);
        Rng rng(EngineKind::Pcg64, static_cast<std::uint64_t>(seed));
        const std::vector<double> x = roundedNormals(rng, static_cast<std::size_t>(n1), shift);
        const std::vector<double> y = roundedNormals(rng, static_cast<std::size_t>(n2), 0.0);
        const MannWhitneyResult r = mannWhitneyU(x, y);
        QCOMPARE(r.u1 + r.u2, static_cast<double>(n1) * n2);
        // U1 counts the pairs with x > y, ties counting one half (brute force over all pairs).
        double pairs = 0.0;
        for (double a : x)
            for (double b : y)
                pairs += a > b ? 1.0 : (a == b ? 0.5 : 0.0);
        QCOMPARE(r.u1, pairs);
        QVERIFY(r.p.p > 0.0 && r.p.p <= 1.0);
        QVERIFY(r.p.p >= r.pNoContinuity.p); // the continuity correction is conservative
        KVLENS_VERIFY_IN_RANGE(r.rankBiserial, -1.0, 1.0);

        const MannWhitneyResult swapped = mannWhitneyU(y, x);
        QCOMPARE(swapped.u1, r.u2);
        QCOMPARE(swapped.rankBiserial, -r.rankBiserial);
        QCOMPARE(swapped.z, -r.z);
        KVLENS_COMPARE_REL(swapped.p.p, r.p.p, 1e-14);
        KVLENS_COMPARE_REL(swapped.pNoContinuity.p, r.pNoContinuity.p, 1e-14);
    }

    void mannWhitneyTinyPValues_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<double>("normalLogP");
        // Complete separation, no ties: U1 = 0. The normal tail (z = (n^2/2 - 1/2) / sqrt(n^2 (2n+1)/12),
        // log(2 Q(z)) evaluated in Python with Laplace's continued fraction) is what this used to
        // report; the exact tail 2 / C(2n, n) is far smaller.
        QTest::newRow("200") << 200 << -152.698177472153;
        QTest::newRow("2000") << 2000 << -1503.85352695558;
    }
    void mannWhitneyTinyPValues()
    {
        QFETCH(int, n);
        QFETCH(double, normalLogP);
        std::vector<double> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
        std::iota(x.begin(), x.end(), 0.0);
        std::iota(y.begin(), y.end(), 10000.0);
        const MannWhitneyResult r = mannWhitneyU(x, y);
        QCOMPARE(r.u1, 0.0);
        QCOMPARE(r.rankBiserial, 1.0);
        QVERIFY(std::isfinite(r.p.logP));
        // log C(2n, n) as a sum of log((n + k) / k), independent of lgamma.
        double logChoose = 0.0;
        for (int k = 1; k <= n; ++k)
            logChoose += std::log(double(n + k) / k);
        KVLENS_COMPARE_REL(r.p.logP, std::log(2.0) - logChoose, 1e-10);
        QCOMPARE(r.p.method, PMethod::Exact);
        QVERIFY(r.p.logP < normalLogP - 100.0); // the approximation was off by > 100 nats
        QVERIFY(r.p.p == 0.0 || r.p.p < 1e-60);
    }

    void exactTailsAgainstClosedForms()
    {
        auto logChoose = [](int n, int k) {
            double v = 0.0;
            for (int i = 1; i <= k; ++i)
                v += std::log(double(n - k + i) / i);
            return v;
        };
        std::vector<double> a5 = {1, 2, 3, 4, 5}, b5 = {6, 7, 8, 9, 10};
        // Mann-Whitney, n1 = n2 = 5, separated: 2 / C(10, 5) = 2/252 (either order).
        for (const auto& [x, y] : {std::pair{a5, b5}, std::pair{b5, a5}}) {
            const MannWhitneyResult mw = mannWhitneyU(x, y);
            KVLENS_COMPARE_REL(mw.p.p, 2.0 / 252.0, 1e-12);
            KVLENS_COMPARE_REL(mw.pNoContinuity.p, 2.0 / 252.0, 1e-12);
            QCOMPARE(mw.p.method, PMethod::Exact);
        }
        // Ties inside a sample do not change the tail at separation.
        const MannWhitneyResult tied = mannWhitneyU(std::vector<double>{1, 1, 2, 3, 3}, b5);
        KVLENS_COMPARE_REL(tied.p.p, 2.0 / 252.0, 1e-12);
        // Two-sample KS at D = 1: the same 2 / C(10, 5).
        const KsResult ks = ksTwoSample(a5, b5);
        QCOMPARE(ks.d, 1.0);
        KVLENS_COMPARE_REL(ks.p.p, 2.0 / 252.0, 1e-12);
        QCOMPARE(ks.p.method, PMethod::Exact);
        // Mann-Whitney near separation, 30 vs 30 with U1 = 2: the arrangements with U <= 2 are
        // the partitions of 0, 1 and 2 (1 + 1 + 2), so p = 2 x 4 / C(60, 30).
        std::vector<double> x30(30), y30(30);
        std::iota(x30.begin(), x30.end(), 0.0);
        std::iota(y30.begin(), y30.end(), 100.0);
        x30.back() = 101.5; // above the two smallest y: U1 = 2
        const MannWhitneyResult near = mannWhitneyU(x30, y30);
        QCOMPARE(near.u1, 2.0);
        QCOMPARE(near.p.method, PMethod::Exact);
        KVLENS_COMPARE_REL(near.p.logP, std::log(8.0) - logChoose(60, 30), 1e-10);
        // Wilcoxon, 10 positive differences: 2 / 2^10. One negative at rank 1 of 40: W- = 1,
        // the subsets with sum <= 1 are {} and {1}, p = 2 x 2 / 2^40.
        std::vector<double> zeros(10, 0.0), d10(10);
        std::iota(d10.begin(), d10.end(), 1.0);
        const WilcoxonResult all = wilcoxonSignedRank(d10, zeros);
        KVLENS_COMPARE_REL(all.p.p, 2.0 / 1024.0, 1e-12);
        QCOMPARE(all.p.method, PMethod::Exact);
        std::vector<double> d40(40), zeros40(40, 0.0);
        std::iota(d40.begin(), d40.end(), 1.0);
        d40.front() = -1.0;
        const WilcoxonResult one = wilcoxonSignedRank(d40, zeros40);
        QCOMPARE(one.statistic, 1.0);
        QCOMPARE(one.p.method, PMethod::Exact);
        KVLENS_COMPARE_REL(one.p.logP, std::log(4.0) - 40.0 * std::log(2.0), 1e-12);
        // A moderate p stays the asymptotic one (what scipy's 'asymptotic' methods report).
        const MannWhitneyResult overlap = mannWhitneyU(std::vector<double>{1, 3, 5, 7, 9}, std::vector<double>{2, 4, 6, 8, 10});
        QCOMPARE(overlap.p.method, PMethod::Asymptotic);
        // The floor: an approximation below the smallest p a test can produce is replaced by it.
        const PValue floored = atLeast(pFromLog(std::log(1e-20)), std::log(1e-10));
        KVLENS_COMPARE_REL(floored.p, 1e-10, 1e-12);
        QCOMPARE(floored.method, PMethod::Floor);
        QCOMPARE(atLeast(pFromLog(std::log(1e-5)), std::log(1e-10)).method, PMethod::Asymptotic);
        QCOMPARE(std::string(pMethodName(PMethod::Floor)), std::string("floor"));
    }

    void mannWhitneyDegenerate()
    {
        const std::vector<double> empty;
        const MannWhitneyResult none = mannWhitneyU(kX, empty);
        QCOMPARE(none.p.p, 1.0);
        QCOMPARE(none.p.logP, 0.0);
        QCOMPARE(none.u1, 0.0);
        QCOMPARE(none.rankBiserial, 0.0);
        const std::vector<double> same(6, 1.5);
        const MannWhitneyResult tied = mannWhitneyU(same, std::vector<double>(4, 1.5));
        QCOMPARE(tied.u1, 12.0);
        QCOMPARE(tied.z, 0.0);
        QCOMPARE(tied.p.p, 1.0);
        QCOMPARE(tied.p.logP, 0.0);
        QVERIFY(!std::isnan(tied.rankBiserial));
    }

    // ---- Wilcoxon signed rank ------------------------------------------------------------

    void wilcoxonMatchesScipy()
    {
        const WilcoxonResult r = wilcoxonSignedRank(kX, kY);
        QCOMPARE(r.nPairs, std::size_t{9});
        QCOMPARE(r.nUsed, std::size_t{9});
        QCOMPARE(r.wPlus, 40.0);
        QCOMPARE(r.wMinus, 5.0);
        QCOMPARE(r.statistic, 5.0);
        KVLENS_COMPARE_ABS(r.p.p, 0.0381517, 1e-7);
        // z = (40 - 22.5) / sqrt(9*10*19/24), no ties among |x - y|.
        KVLENS_COMPARE_ABS(r.z, 2.073221072156823, 1e-12);
        KVLENS_COMPARE_ABS(r.rankBiserial, 35.0 / 45.0, 1e-15);
    }

    void wilcoxonProperties_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<double>("shift");
        QTest::addColumn<int>("seed");
        QTest::newRow("12") << 12 << 0.4 << 11;
        QTest::newRow("50") << 50 << 0.0 << 12;
        QTest::newRow("300") << 300 << -0.1 << 13;
    }
    void wilcoxonProperties()
    {
        QFETCH(int, n);
        QFETCH(double, shift);
        QFETCH(int, seed);
        Rng rng(EngineKind::Pcg64, static_cast<std::uint64_t>(seed));
        const std::vector<double> x = normals(rng, static_cast<std::size_t>(n), shift);
        const std::vector<double> y = normals(rng, static_cast<std::size_t>(n));
        const WilcoxonResult r = wilcoxonSignedRank(x, y);
        const double m = n;
        QCOMPARE(r.wPlus + r.wMinus, m * (m + 1.0) / 2.0);
        // Without ties or zeros, W+ = number of Walsh averages (d_i + d_j)/2, i <= j, above 0
        // (Tukey 1949): an oracle independent of ranking.
        double walsh = 0.0;
        for (int i = 0; i < n; ++i)
            for (int j = i; j < n; ++j)
                walsh += (x[i] - y[i]) + (x[j] - y[j]) > 0.0 ? 1.0 : 0.0;
        QCOMPARE(r.wPlus, walsh);

        const WilcoxonResult swapped = wilcoxonSignedRank(y, x);
        QCOMPARE(swapped.wPlus, r.wMinus);
        QCOMPARE(swapped.statistic, r.statistic);
        QCOMPARE(swapped.rankBiserial, -r.rankBiserial);
        QCOMPARE(swapped.z, -r.z);
        KVLENS_COMPARE_REL(swapped.p.p, r.p.p, 1e-14);
    }

    void wilcoxonZerosAndTies()
    {
        // d = x - y = {0, 0, 1, -1, 2, 2, -3}: zeros dropped, |d| ranks {1.5, 1.5, 3.5, 3.5, 5},
        // W+ = 1.5 + 3.5 + 3.5 = 8.5, W- = 1.5 + 5 = 6.5; sigma^2 = 5*6*11/24 - (6 + 6)/48 = 13.5.
        const std::vector<double> x = {1, 2, 4, 3, 7, 8, 0};
        const std::vector<double> y = {1, 2, 3, 4, 5, 6, 3};
        const WilcoxonResult r = wilcoxonSignedRank(x, y);
        QCOMPARE(r.zerosDropped, std::size_t{2});
        QCOMPARE(r.nUsed, std::size_t{5});
        QCOMPARE(r.wPlus, 8.5);
        QCOMPARE(r.wMinus, 6.5);
        QCOMPARE(r.statistic, 6.5);
        KVLENS_COMPARE_ABS(r.z, (8.5 - 7.5) / std::sqrt(13.5), 1e-15);
        KVLENS_COMPARE_REL(r.p.p, std::erfc(std::abs(r.z) / std::sqrt(2.0)), 1e-14);

        const WilcoxonResult none = wilcoxonSignedRank(kX, kX);
        QCOMPARE(none.nUsed, std::size_t{0});
        QCOMPARE(none.zerosDropped, std::size_t{9});
        QCOMPARE(none.p.p, 1.0);
        QCOMPARE(none.p.logP, 0.0);
        QCOMPARE(none.rankBiserial, 0.0);
    }

    // ---- Spearman ------------------------------------------------------------------------

    void spearmanMatchesScipy()
    {
        KVLENS_COMPARE_ABS(spearman(kX, kY), 0.6470817, 1e-7);
        KVLENS_COMPARE_ABS(spearman(kY, kX), 0.6470817, 1e-7);
    }

    void spearmanProperties()
    {
        Rng rng(EngineKind::Pcg64, 21);
        const std::vector<double> x = normals(rng, 101);
        std::vector<double> up(x.size()), down(x.size());
        std::transform(x.begin(), x.end(), up.begin(), [](double v) { return std::exp(v); });
        std::transform(x.begin(), x.end(), down.begin(), [](double v) { return -v * v * v; });
        QCOMPARE(spearman(x, up), 1.0);
        QCOMPARE(spearman(x, down), -1.0);

        // Without ties rho = 1 - 6 sum d^2 / (n (n^2 - 1)) (Spearman 1904).
        const std::vector<double> y = normals(rng, 101);
        const Ranks rx = averageRanks(x), ry = averageRanks(y);
        double d2 = 0.0;
        for (std::size_t i = 0; i < x.size(); ++i)
            d2 += (rx.ranks[i] - ry.ranks[i]) * (rx.ranks[i] - ry.ranks[i]);
        const double n = 101.0;
        KVLENS_COMPARE_ABS(spearman(x, y), 1.0 - 6.0 * d2 / (n * (n * n - 1.0)), 1e-14);

        // Undefined (a constant sample, or one pair): NaN, never a number that reads as measured.
        QVERIFY(std::isnan(spearman(x, std::vector<double>(x.size(), 3.0))));
        QVERIFY(std::isnan(spearman(std::vector<double>{1.0}, std::vector<double>{2.0})));
    }

    // ---- Kolmogorov-Smirnov --------------------------------------------------------------

    void kolmogorovSurvivalValues_data()
    {
        QTest::addColumn<double>("lambda");
        QTest::addColumn<double>("q");
        QTest::addColumn<double>("tolerance");
        // Six-figure values of the brief (Smirnov 1948 table: Q(1) = 0.270000), to half a unit
        // of their last digit; the others from both series summed to 200 terms in Python
        // (they agree to 1e-16).
        QTest::newRow("0.3") << 0.3 << 0.9999906941986655 << 1e-15;
        QTest::newRow("0.5") << 0.5 << 0.963945 << 5e-7;
        QTest::newRow("0.8") << 0.8 << 0.544142411574198 << 1e-15;
        QTest::newRow("1.0") << 1.0 << 0.270000 << 5e-7;
        QTest::newRow("1.0, 16 digits") << 1.0 << 0.2699996716773546 << 1e-15;
        QTest::newRow("2.0") << 2.0 << 0.000670925 << 5e-10;
    }
    void kolmogorovSurvivalValues()
    {
        QFETCH(double, lambda);
        QFETCH(double, q);
        QFETCH(double, tolerance);
        KVLENS_COMPARE_ABS(kolmogorovSurvival(lambda), q, tolerance);
        KVLENS_COMPARE_ABS(kolmogorovLogSurvival(lambda), std::log(kolmogorovSurvival(lambda)), 1e-14);
    }

    void kolmogorovSurvivalLimits()
    {
        QCOMPARE(kolmogorovSurvival(0.0), 1.0);
        QCOMPARE(kolmogorovLogSurvival(0.0), 0.0);
        KVLENS_COMPARE_ABS(kolmogorovSurvival(0.05), 1.0, 1e-15);
        // Both series meet at lambda = 1.18.
        KVLENS_COMPARE_REL(kolmogorovSurvival(std::nextafter(1.18, 0.0)), kolmogorovSurvival(1.18), 1e-14);
        // Far tail: log Q = log 2 - 2 lambda^2 + log(1 - e^{-6 lambda^2}) where Q underflows.
        KVLENS_COMPARE_REL(kolmogorovLogSurvival(30.0), std::log(2.0) - 1800.0, 1e-15);
        QCOMPARE(kolmogorovSurvival(30.0), 0.0);
    }

    void ksMatchesReferences()
    {
        const KsResult r = ksTwoSample(kA, kB);
        QCOMPARE(r.n1, std::size_t{25});
        QCOMPARE(r.n2, std::size_t{20});
        KVLENS_COMPARE_ABS(r.d, 0.23, 1e-15);
        KVLENS_COMPARE_ABS(r.effectiveN, 500.0 / 45.0, 1e-13);
        // Stephens-corrected Kolmogorov p = Q_KS((sqrt(ne) + 0.12 + 0.11/sqrt(ne)) 0.23)
        // = 0.5411246 (Python). Exact permutation p (SciPy 'exact', and the oracle below) is
        // 0.5286; SciPy's 'asymp' (kstwo with n = round(ne) = 11) is 0.5319. Documented
        // tolerance for these sizes: within 0.025 of the exact value.
        KVLENS_COMPARE_ABS(r.p.p, 0.5411245537216745, 1e-9);
        KVLENS_COMPARE_ABS(r.p.p, 0.5286, 0.025);
        KVLENS_COMPARE_ABS(r.p.p, 0.5319, 0.025);
        KVLENS_COMPARE_ABS(exactKsPValue(25, 20, r.d), 0.5286364448145011, 1e-12);
        KVLENS_COMPARE_ABS(r.p.logP, std::log(r.p.p), 1e-14);
    }

    void ksAgainstExactPermutation_data()
    {
        QTest::addColumn<int>("n1");
        QTest::addColumn<int>("n2");
        QTest::addColumn<double>("shift");
        QTest::addColumn<int>("seed");
        QTest::newRow("20 vs 25, null") << 20 << 25 << 0.0 << 31;
        QTest::newRow("30 vs 30, shift 0.5") << 30 << 30 << 0.5 << 32;
        QTest::newRow("50 vs 50, shift 0.3") << 50 << 50 << 0.3 << 33;
        QTest::newRow("40 vs 60, shift 0.6") << 40 << 60 << 0.6 << 34;
        QTest::newRow("100 vs 100, shift 0.2") << 100 << 100 << 0.2 << 35;
    }
    void ksAgainstExactPermutation()
    {
        QFETCH(int, n1);
        QFETCH(int, n2);
        QFETCH(double, shift);
        QFETCH(int, seed);
        Rng rng(EngineKind::Pcg64, static_cast<std::uint64_t>(seed));
        const std::vector<double> x = normals(rng, static_cast<std::size_t>(n1), shift);
        const std::vector<double> y = normals(rng, static_cast<std::size_t>(n2));
        const KsResult r = ksTwoSample(x, y);
        // Brute-force D over every pooled value.
        double d = 0.0;
        std::vector<double> pooled(x);
        pooled.insert(pooled.end(), y.begin(), y.end());
        for (double t : pooled) {
            const auto f1 = static_cast<double>(std::count_if(x.begin(), x.end(), [&](double v) { return v <= t; }));
            const auto f2 = static_cast<double>(std::count_if(y.begin(), y.end(), [&](double v) { return v <= t; }));
            d = std::max(d, std::abs(f1 / n1 - f2 / n2));
        }
        KVLENS_COMPARE_ABS(r.d, d, 1e-15);
        // Documented band of the asymptotic p for sizes 20..100.
        KVLENS_COMPARE_ABS(r.p.p, exactKsPValue(static_cast<std::size_t>(n1), static_cast<std::size_t>(n2), r.d), 0.06);
    }

    void ksTiesAndDegenerate()
    {
        // Equal values are taken from both samples before F1 - F2 is looked at: after t = 2,
        // F1 = 3/4 and F2 = 3/4, so D = 1/4 (a tie-blind merge would report 3/4).
        const std::vector<double> x = {1, 2, 2, 3};
        const std::vector<double> y = {2, 2, 2, 4};
        QCOMPARE(ksTwoSample(x, y).d, 0.25);
        const KsResult self = ksTwoSample(kA, kA);
        QCOMPARE(self.d, 0.0);
        QCOMPARE(self.p.p, 1.0);
        QCOMPARE(self.p.logP, 0.0);
        const KsResult none = ksTwoSample(kA, std::vector<double>{});
        QCOMPARE(none.d, 0.0);
        QCOMPARE(none.p.p, 1.0);
        // Disjoint samples of 1000: D = 1 and a p-value only the log can hold. The exact tail is
        // 2 / C(2000, 1000) (log -1381.57); the asymptotic law said log 2 - 2 lambda^2 (-1010.5),
        // 10^161 times too large, and is no longer used there.
        std::vector<double> low(1000), high(1000);
        std::iota(low.begin(), low.end(), 0.0);
        std::iota(high.begin(), high.end(), 5000.0);
        const KsResult apart = ksTwoSample(low, high);
        QCOMPARE(apart.d, 1.0);
        double logChoose = 0.0;
        for (int k = 1; k <= 1000; ++k)
            logChoose += std::log((1000.0 + k) / k);
        KVLENS_COMPARE_REL(apart.p.logP, std::log(2.0) - logChoose, 1e-10);
        QCOMPARE(apart.p.method, PMethod::Exact);
        const double lambda = std::sqrt(500.0) + 0.12 + 0.11 / std::sqrt(500.0);
        QVERIFY(apart.p.logP < std::log(2.0) - 2.0 * lambda * lambda - 300.0);
        QCOMPARE(apart.p.p, 0.0);
    }

    // ---- energy distance -----------------------------------------------------------------

    void energyMatchesReferences()
    {
        // X = {(0,0), (1,0), (0,1)}, Y = {(2,2), (3,1)}: E = 3.7671487 (pairwise sums by hand,
        // checked in Python). 1-D: sqrt(E(x, y)) = scipy.stats.energy_distance = 0.5914410.
        Eigen::MatrixXd x(3, 2), y(2, 2);
        x << 0, 0, 1, 0, 0, 1;
        y << 2, 2, 3, 1;
        KVLENS_COMPARE_ABS(energyDistance(x, y), 3.7671487, 1e-7);
        KVLENS_COMPARE_ABS(energyDistance(y, x), 3.7671487, 1e-7);
        KVLENS_COMPARE_ABS(std::sqrt(energyDistance(column(kX), column(kY))), 0.5914410, 1e-7);
        KVLENS_COMPARE_ABS(energyTest(x, y, 0, 1).statistic, 3.7671486663129667, 1e-13);
    }

    void energyProperties()
    {
        Rng rng(EngineKind::Pcg64, 41);
        const Eigen::MatrixXd a = normalCloud(rng, 40, 6, 0.0);
        const Eigen::MatrixXd b = normalCloud(rng, 30, 6, 0.2);
        KVLENS_COMPARE_ABS(energyDistance(a, a), 0.0, 1e-13);
        const double e = energyDistance(a, b);
        QVERIFY(e > 0.0);
        KVLENS_COMPARE_REL(energyDistance(b, a), e, 1e-13);
        // Row-major input (as token-major buffers are) binds to the same Ref.
        const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rowMajor = a;
        KVLENS_COMPARE_REL(energyDistance(rowMajor, b), e, 1e-13);
        // The permutation test's algebra (sXY = sX - sXX, sYY = T - 2 sX + sXX) gives the same E.
        KVLENS_COMPARE_REL(energyTest(a, b, 0, 7).statistic, e, 1e-12);
        QCOMPARE(energyDistance(a, Eigen::MatrixXd(0, 6)), 0.0);
        QCOMPARE(energyTest(a, Eigen::MatrixXd(0, 6), 99, 7).pValue, 1.0);
    }

    void energyPermutationTest_data()
    {
        QTest::addColumn<int>("dim");
        QTest::addColumn<double>("shift");
        QTest::addColumn<bool>("different");
        QTest::newRow("1-D, N(0,1) vs N(1,1)") << 1 << 1.0 << true;
        QTest::newRow("1-D, N(0,1) vs N(0,1)") << 1 << 0.0 << false;
        QTest::newRow("6-D, shift 1 per axis") << 6 << 1.0 << true;
        QTest::newRow("6-D, same law") << 6 << 0.0 << false;
    }
    void energyPermutationTest()
    {
        QFETCH(int, dim);
        QFETCH(double, shift);
        QFETCH(bool, different);
        Rng rng(EngineKind::Pcg64, 2024);
        const Eigen::MatrixXd x = normalCloud(rng, 60, dim, 0.0);
        const Eigen::MatrixXd y = normalCloud(rng, 60, dim, shift);
        const EnergyTestResult r = energyTest(x, y, 999, 12345);
        QCOMPARE(r.permutations, 999);
        QCOMPARE(r.seed, std::uint64_t{12345});
        if (different)
            QVERIFY2(r.pValue < 0.01, qPrintable(QString::number(r.pValue)));
        else
            QVERIFY2(r.pValue > 0.01, qPrintable(QString::number(r.pValue)));
        // p = (count + 1) / (B + 1) lies on that grid and is reproducible for a fixed seed.
        const double count = r.pValue * 1000.0 - 1.0;
        KVLENS_COMPARE_ABS(count, std::round(count), 1e-9);
        QCOMPARE(energyTest(x, y, 999, 12345).pValue, r.pValue);
    }

    void energyPermutationConvergesToExact()
    {
        // With 5 points there are C(5,3) = 10 splits; the permutation p tends to the exact
        // fraction of splits whose E is >= the observed one (enumerated here).
        Eigen::MatrixXd x(3, 2), y(2, 2);
        x << 0, 0, 1, 0, 0, 1;
        y << 2, 2, 3, 1;
        Eigen::MatrixXd pooled(5, 2);
        pooled << x, y;
        const double observed = energyDistance(x, y);
        int atLeast = 0, splits = 0;
        for (int mask = 0; mask < 32; ++mask) {
            if (std::popcount(static_cast<unsigned>(mask)) != 3)
                continue;
            Eigen::MatrixXd a(3, 2), b(2, 2);
            int ia = 0, ib = 0;
            for (int k = 0; k < 5; ++k) {
                if (mask & (1 << k))
                    a.row(ia++) = pooled.row(k);
                else
                    b.row(ib++) = pooled.row(k);
            }
            ++splits;
            atLeast += energyDistance(a, b) >= observed - 1e-12 ? 1 : 0;
        }
        QCOMPARE(splits, 10);
        const double exact = static_cast<double>(atLeast) / splits;
        const EnergyTestResult r = energyTest(x, y, 20000, 99);
        // Binomial standard error sqrt(0.1 * 0.9 / 20000) = 0.0021.
        KVLENS_COMPARE_ABS(r.pValue, exact, 0.01);
    }

    // ---- bootstrap -----------------------------------------------------------------------

    void locations()
    {
        QCOMPARE(location(std::vector<double>{3, 1, 2}, Location::Median), 2.0);
        QCOMPARE(location(std::vector<double>{4, 1, 3, 2}, Location::Median), 2.5);
        QCOMPARE(location(std::vector<double>{4, 1, 3, 2}, Location::Mean), 2.5);
        QCOMPARE(location(std::vector<double>{7, 1, 100}, Location::Median), 7.0);
        QCOMPARE(location(std::vector<double>{}, Location::Mean), 0.0);
    }

    void bootstrapRatioOfMeans()
    {
        Rng rng(EngineKind::Pcg64, 51);
        const std::vector<double> x = normals(rng, 400, 10.0);
        const std::vector<double> y = normals(rng, 400, 10.0);
        const BootstrapCi ci = bootstrapRatio(x, y, Location::Mean, 0.95, 2000, 7);
        QCOMPARE(ci.resamples, 2000);
        QCOMPARE(ci.level, 0.95);
        KVLENS_COMPARE_REL(ci.estimate, location(x, Location::Mean) / location(y, Location::Mean), 1e-15);
        KVLENS_VERIFY_IN_RANGE(ci.estimate, ci.lower, ci.upper);
        KVLENS_VERIFY_IN_RANGE(1.0, ci.lower, ci.upper);
        // Standard error of the ratio ~ sqrt(2) * 0.05 / 10: the 95% interval is ~0.028 wide.
        KVLENS_VERIFY_IN_RANGE(ci.upper - ci.lower, 0.015, 0.05);
        const BootstrapCi again = bootstrapRatio(x, y, Location::Mean, 0.95, 2000, 7);
        QCOMPARE(again.lower, ci.lower);
        QCOMPARE(again.upper, ci.upper);
        const BootstrapCi narrower = bootstrapRatio(x, y, Location::Mean, 0.5, 2000, 7);
        QVERIFY(narrower.lower > ci.lower && narrower.upper < ci.upper);
    }

    void bootstrapLocationCoverage_data()
    {
        QTest::addColumn<int>("loc");
        QTest::newRow("mean") << static_cast<int>(Location::Mean);
        QTest::newRow("median") << static_cast<int>(Location::Median);
    }
    void bootstrapLocationCoverage()
    {
        QFETCH(int, loc);
        const auto where = static_cast<Location>(loc);
        // 200 samples of 60 from N(3, 1): the 90% interval should cover 3 about 90% of the
        // time (percentile intervals under-cover slightly at this n); binomial sd is 0.021.
        Rng rng(EngineKind::Pcg64, 61);
        int covered = 0;
        for (int rep = 0; rep < 200; ++rep) {
            const std::vector<double> x = normals(rng, 60, 3.0);
            const BootstrapCi ci = bootstrapLocation(x, where, 0.90, 500, static_cast<std::uint64_t>(rep));
            QVERIFY(ci.lower <= ci.estimate && ci.estimate <= ci.upper);
            covered += (ci.lower <= 3.0 && 3.0 <= ci.upper) ? 1 : 0;
        }
        KVLENS_VERIFY_IN_RANGE(covered / 200.0, 0.82, 0.97);
    }

    void bootstrapPairedKeepsPairing_data()
    {
        QTest::addColumn<int>("loc");
        QTest::addColumn<double>("maxWidth");
        // y = x / 2 + e, sd(e) = 0.01: the mean ratio moves only with mean(e*) (~0.001 / 5),
        // the median ratio also with which pair holds the median (~0.015 observed).
        QTest::newRow("mean") << static_cast<int>(Location::Mean) << 0.005;
        QTest::newRow("median") << static_cast<int>(Location::Median) << 0.03;
    }
    void bootstrapPairedKeepsPairing()
    {
        QFETCH(int, loc);
        QFETCH(double, maxWidth);
        const auto where = static_cast<Location>(loc);
        // x widely spread and y following it: resampling pairs keeps the ratio pinned near 2,
        // resampling the samples independently inherits the spread of x (~0.4 wide).
        Rng rng(EngineKind::Pcg64, 71);
        std::vector<double> x = normals(rng, 200, 10.0, 3.0);
        std::vector<double> y(x.size());
        for (std::size_t i = 0; i < x.size(); ++i)
            y[i] = 0.5 * x[i] + 0.01 * rng.normal();
        const BootstrapCi paired = bootstrapPairedRatio(x, y, where, 0.95, 1000, 3);
        const BootstrapCi unpaired = bootstrapRatio(x, y, where, 0.95, 1000, 3);
        QCOMPARE(paired.resamples, 1000);
        KVLENS_VERIFY_IN_RANGE(paired.estimate, paired.lower, paired.upper);
        KVLENS_VERIFY_IN_RANGE(2.0, paired.lower, paired.upper);
        KVLENS_VERIFY_IN_RANGE(paired.upper - paired.lower, 0.0, maxWidth);
        KVLENS_VERIFY_IN_RANGE(unpaired.upper - unpaired.lower, 0.2, 0.6);
    }

    void bootstrapMediansFromCountsEqualSelection_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<bool>("ties");
        QTest::newRow("odd") << 101 << false;
        QTest::newRow("even") << 512 << false;
        QTest::newRow("even, ties") << 200 << true;
    }
    void bootstrapMediansFromCountsEqualSelection()
    {
        // The medians are read from counts over the sorted sample; the reference here copies
        // each resample and selects with nth_element, from the same draws: equal bit for bit.
        QFETCH(int, n);
        QFETCH(bool, ties);
        Rng data(EngineKind::Pcg64, 77);
        std::vector<double> x = normals(data, static_cast<std::size_t>(n), 0.0), y = normals(data, static_cast<std::size_t>(n), 1.0);
        for (double& v : x)
            v = ties ? std::round(v * 4.0) : std::exp(v);
        for (double& v : y)
            v = ties ? std::round(v * 4.0) + 10.0 : std::exp(v);
        auto selectMedian = [](std::vector<double> v) {
            const std::size_t half = v.size() / 2;
            std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(half), v.end());
            const double upper = v[half];
            if (v.size() % 2)
                return upper;
            return 0.5 * (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(half)) + upper);
        };
        auto interval = [](std::vector<double> stats, double level) {
            std::sort(stats.begin(), stats.end());
            auto q = [&](double p) {
                const double h = p * static_cast<double>(stats.size() - 1);
                const auto lo = static_cast<std::size_t>(std::floor(h));
                const std::size_t hi = std::min(lo + 1, stats.size() - 1);
                return stats[lo] + (h - static_cast<double>(lo)) * (stats[hi] - stats[lo]);
            };
            return std::pair{q(0.5 * (1.0 - level)), q(0.5 * (1.0 + level))};
        };
        const int resamples = 300;
        const std::uint64_t seed = 123;
        // One sample.
        {
            Rng rng(EngineKind::Pcg64, seed);
            std::vector<double> stats, r(x.size());
            for (int b = 0; b < resamples; ++b) {
                for (double& v : r)
                    v = x[static_cast<std::size_t>(rng.below(x.size()))];
                stats.push_back(selectMedian(r));
            }
            const auto [lo, hi] = interval(stats, 0.95);
            const BootstrapCi ci = bootstrapLocation(x, Location::Median, 0.95, resamples, seed);
            QCOMPARE(ci.lower, lo);
            QCOMPARE(ci.upper, hi);
        }
        // Two independent samples, then paired.
        for (const bool paired : {false, true}) {
            Rng rng(EngineKind::Pcg64, seed);
            std::vector<double> stats, rx(x.size()), ry(y.size());
            for (int b = 0; b < resamples; ++b) {
                if (paired) {
                    for (std::size_t k = 0; k < x.size(); ++k) {
                        const auto i = static_cast<std::size_t>(rng.below(x.size()));
                        rx[k] = x[i];
                        ry[k] = y[i];
                    }
                } else {
                    for (double& v : rx)
                        v = x[static_cast<std::size_t>(rng.below(x.size()))];
                    for (double& v : ry)
                        v = y[static_cast<std::size_t>(rng.below(y.size()))];
                }
                const double bottom = selectMedian(ry);
                if (bottom != 0.0)
                    stats.push_back(selectMedian(rx) / bottom);
            }
            const auto [lo, hi] = interval(stats, 0.95);
            const BootstrapCi ci = paired ? bootstrapPairedRatio(x, y, Location::Median, 0.95, resamples, seed)
                                          : bootstrapRatio(x, y, Location::Median, 0.95, resamples, seed);
            QCOMPARE(ci.lower, lo);
            QCOMPARE(ci.upper, hi);
        }
    }

    void bootstrapDegenerate()
    {
        const std::vector<double> empty;
        const BootstrapCi none = bootstrapLocation(empty, Location::Mean, 0.95, 100, 1);
        QCOMPARE(none.resamples, 0);
        QCOMPARE(none.lower, 0.0);
        const std::vector<double> zeros(10, 0.0);
        const BootstrapCi byZero = bootstrapRatio(kX, zeros, Location::Mean, 0.95, 100, 1);
        QCOMPARE(byZero.resamples, 0);
        QCOMPARE(byZero.estimate, 0.0);
        QVERIFY(std::isfinite(byZero.lower) && std::isfinite(byZero.upper));
        const BootstrapCi constant = bootstrapLocation(std::vector<double>(20, 4.0), Location::Median, 0.95, 100, 1);
        QCOMPARE(constant.lower, 4.0);
        QCOMPARE(constant.upper, 4.0);
    }

    // ---- Holm ----------------------------------------------------------------------------

    void holmReference()
    {
        // Holm (1979) by hand: sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(0.06, 0.04).
        const std::vector<double> p = {0.01, 0.04, 0.03, 0.005};
        const std::vector<double> adjusted = holmAdjust(p);
        const std::vector<double> expected = {0.03, 0.06, 0.06, 0.02};
        QCOMPARE(adjusted.size(), expected.size());
        for (std::size_t i = 0; i < expected.size(); ++i)
            KVLENS_COMPARE_ABS(adjusted[i], expected[i], 1e-15);
        QCOMPARE(holmAdjust(std::vector<double>{0.3, 0.6}), (std::vector<double>{0.6, 0.6}));
        QCOMPARE(holmAdjust(std::vector<double>{0.7, 0.9}), (std::vector<double>{1.0, 1.0}));
        QVERIFY(holmAdjust(std::vector<double>{}).empty());
    }

    void holmProperties()
    {
        Rng rng(EngineKind::Pcg64, 81);
        std::vector<double> p(40);
        for (double& v : p)
            v = std::pow(rng.uniform(), 3.0); // many small p-values
        p[7] = p[3];                          // a tie
        const std::vector<double> adjusted = holmAdjust(p);
        std::vector<std::size_t> order(p.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] < p[b]; });
        for (std::size_t k = 0; k < p.size(); ++k) {
            QVERIFY(adjusted[k] >= p[k] && adjusted[k] <= 1.0);
            KVLENS_VERIFY_IN_RANGE(adjusted[k], std::min(1.0, p[k]), std::min(1.0, 40.0 * p[k]));
            if (k > 0)
                QVERIFY(adjusted[order[k]] >= adjusted[order[k - 1]]);
        }
        // The smallest p is multiplied by m.
        KVLENS_COMPARE_REL(adjusted[order[0]], std::min(1.0, 40.0 * p[order[0]]), 1e-15);

        std::vector<double> logP(p.size());
        std::transform(p.begin(), p.end(), logP.begin(), [](double v) { return std::log(v); });
        const std::vector<double> adjustedLog = holmAdjustLog(logP);
        for (std::size_t k = 0; k < p.size(); ++k)
            KVLENS_COMPARE_ABS(adjustedLog[k], std::log(adjusted[k]), 1e-12);
    }

    void holmInLogSpace()
    {
        // m = 3, sorted -3000 < -2000 < -1000: -3000 + log 3, -2000 + log 2, -1000.
        const std::vector<double> logP = {-2000.0, -1000.0, -3000.0};
        const std::vector<double> adjusted = holmAdjustLog(logP);
        KVLENS_COMPARE_REL(adjusted[0], -2000.0 + std::log(2.0), 1e-15);
        KVLENS_COMPARE_REL(adjusted[1], -1000.0, 1e-15);
        KVLENS_COMPARE_REL(adjusted[2], -3000.0 + std::log(3.0), 1e-15);
        // The running maximum: log(2 * 0.5) caps at 0, and so must the larger one after it.
        const std::vector<double> capped = holmAdjustLog(std::vector<double>{std::log(0.5), std::log(0.6), -5000.0});
        QCOMPARE(capped[0], 0.0);
        QCOMPARE(capped[1], 0.0);
        KVLENS_COMPARE_REL(capped[2], -5000.0 + std::log(3.0), 1e-15);
    }
};

QTEST_APPLESS_MAIN(TestStats)
#include "tst_stats.moc"
