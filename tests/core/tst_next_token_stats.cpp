// SPDX-License-Identifier: GPL-3.0-or-later
// Next-token statistics: per-token NLL, KL, Δp and top-1 against values computed independently
// here, and the llama.cpp-style summary against textbook formulas on hand-built samples.
#include "common/approx.h"
#include "core/lm/next_token_stats.h"

#include <QTest>

#include <cmath>
#include <numeric>
#include <vector>

using namespace kvlens;
using namespace kvlens::lm;

namespace {

/// softmax by the definition, in long double.
std::vector<long double> softmaxLd(const std::vector<float>& l)
{
    std::vector<long double> p(l.size());
    long double sum = 0;
    for (std::size_t i = 0; i < l.size(); ++i)
        sum += (p[i] = std::exp(static_cast<long double>(l[i])));
    for (auto& x : p)
        x /= sum;
    return p;
}

double mean(const std::vector<double>& x)
{
    return std::accumulate(x.begin(), x.end(), 0.0) / double(x.size());
}

/// Sample standard error of the mean with llama.cpp's normalisation: sqrt(var_pop / (n - 1)),
/// var_pop = sum (x - mean)^2 / n, computed in two passes.
double standardError(const std::vector<double>& x)
{
    const double m = mean(x);
    double ss = 0;
    for (double v : x)
        ss += (v - m) * (v - m);
    return std::sqrt(ss / double(x.size()) / double(x.size() - 1));
}

double covarianceOfMeans(const std::vector<double>& x, const std::vector<double>& y)
{
    const double mx = mean(x), my = mean(y);
    double s = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
        s += (x[i] - mx) * (y[i] - my);
    return s / double(x.size()) / double(x.size() - 1);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y)
{
    const double mx = mean(x), my = mean(y);
    double sxy = 0, sxx = 0, syy = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxy / std::sqrt(sxx * syy);
}

/// Twelve tokens with distinct, hand-chosen values; tokens 2, 5 and 11 disagree on top-1.
std::vector<TokenStat> sample()
{
    std::vector<TokenStat> s;
    const double nllB[12] = {1.2, 0.4, 2.5, 3.1, 0.9, 1.7, 0.2, 4.0, 2.2, 1.1, 0.6, 2.9};
    const double nllQ[12] = {1.3, 0.4, 2.9, 3.0, 1.0, 2.1, 0.25, 4.4, 2.2, 1.3, 0.65, 3.5};
    const double kld[12] = {0.010, 0.002, 0.090, 0.030, 0.005, 0.120, 0.001, 0.060, 0.004, 0.020, 0.003, 0.200};
    const double dp[12] = {-0.02, 0.0, -0.09, 0.01, -0.01, -0.05, -0.005, -0.04, 0.001, -0.03, -0.004, -0.12};
    for (int i = 0; i < 12; ++i) {
        TokenStat t;
        t.nllBase = nllB[i];
        t.nllQ = nllQ[i];
        t.kld = kld[i];
        t.deltaP = dp[i];
        t.topBase = 7;
        t.topQ = (i == 2 || i == 5 || i == 11) ? 8 : 7;
        s.push_back(t);
    }
    return s;
}

} // namespace

class TestNextTokenStats : public QObject {
    Q_OBJECT

private slots:
    void tokenAgainstDefinitions()
    {
        const std::vector<float> base = {1.0f, 2.0f, 3.0f, -1.5f, 0.25f};
        const std::vector<float> quant = {1.2f, 2.5f, 2.0f, -1.0f, 0.0f};
        const auto pb = softmaxLd(base), pq = softmaxLd(quant);
        long double kl = 0;
        for (std::size_t i = 0; i < base.size(); ++i)
            kl += pb[i] * std::log(pb[i] / pq[i]);
        auto s = scoreToken(base, quant, 1);
        QVERIFY(s);
        KVLENS_COMPARE_ABS(s->nllBase, double(-std::log(pb[1])), 1e-13);
        KVLENS_COMPARE_ABS(s->nllQ, double(-std::log(pq[1])), 1e-13);
        KVLENS_COMPARE_ABS(s->kld, double(kl), 1e-13);
        KVLENS_COMPARE_ABS(s->deltaP, double(pq[1] - pb[1]), 1e-13);
        QCOMPARE(s->topBase, 2);
        QCOMPARE(s->topQ, 1);
        QVERIFY(!s->sameTop());
    }

    void identicalRowsAndShifts()
    {
        std::vector<float> base(1000);
        for (std::size_t i = 0; i < base.size(); ++i)
            base[i] = float(std::round(std::sin(0.37 * double(i)) * 6.0 * 1024.0) / 1024.0); // 1/1024 steps
        auto same = scoreToken(base, base, 17);
        QVERIFY(same);
        QCOMPARE(same->kld, 0.0);
        QCOMPARE(same->deltaP, 0.0);
        QCOMPARE(same->nllBase, same->nllQ);
        QVERIFY(same->sameTop());
        // Adding a constant to every logit changes no probability.
        std::vector<float> shifted = base;
        for (float& x : shifted)
            x += 40.0f; // exact: multiples of 1/1024 below 46 need at most 16 significant bits
        auto s = scoreToken(base, shifted, 17);
        QVERIFY(s);
        KVLENS_VERIFY_IN_RANGE(s->kld, 0.0, 1e-12);
        KVLENS_COMPARE_ABS(s->nllQ, s->nllBase, 1e-12);
    }

    void tiesPickTheFirst()
    {
        auto s = scoreToken(std::vector<float>{0.0f, 5.0f, 5.0f}, std::vector<float>{5.0f, 1.0f, 5.0f}, 0);
        QVERIFY(s);
        QCOMPARE(s->topBase, 1);
        QCOMPARE(s->topQ, 0);
    }

    void tokenRefusals()
    {
        const std::vector<float> a = {1, 2, 3}, b = {1, 2};
        QVERIFY(!scoreToken(a, b, 0));
        QVERIFY(!scoreToken(std::vector<float>{}, std::vector<float>{}, 0));
        auto out = scoreToken(a, a, 3);
        QVERIFY(!out);
        QCOMPARE(out.error().field, std::string("correct"));
        const std::vector<float> bad = {1, NAN, 3};
        auto nan = scoreToken(a, bad, 0);
        QVERIFY(!nan);
        QVERIFY(QString::fromStdString(nan.error().text()).contains("quantized logit 1 is not finite"));
    }

    void summaryAgainstTextbookFormulas()
    {
        const std::vector<TokenStat> s = sample();
        std::vector<double> nllB, nllQ, kld, dp, dp2;
        for (const TokenStat& t : s) {
            nllB.push_back(t.nllBase);
            nllQ.push_back(t.nllQ);
            kld.push_back(t.kld);
            dp.push_back(t.deltaP);
            dp2.push_back(t.deltaP * t.deltaP);
        }
        auto r = summarizeNextTokens(s);
        QVERIFY(r);
        QCOMPARE(r->count, std::size_t(12));
        const double seQ = standardError(nllQ), seB = standardError(nllB);
        KVLENS_COMPARE_REL(r->pplQ.mean, std::exp(mean(nllQ)), 1e-13);
        KVLENS_COMPARE_REL(r->pplQ.error, std::exp(mean(nllQ)) * seQ, 1e-11);
        KVLENS_COMPARE_REL(r->pplBase.mean, std::exp(mean(nllB)), 1e-13);
        KVLENS_COMPARE_REL(r->pplBase.error, std::exp(mean(nllB)) * seB, 1e-11);
        KVLENS_COMPARE_ABS(r->nllCorrelation, pearson(nllQ, nllB), 1e-11);
        const double cov = covarianceOfMeans(nllQ, nllB);
        KVLENS_COMPARE_ABS(r->logPplRatio.mean, mean(nllQ) - mean(nllB), 1e-13);
        KVLENS_COMPARE_REL(r->logPplRatio.error, std::sqrt(seQ * seQ + seB * seB - 2 * cov), 1e-9);
        KVLENS_COMPARE_REL(r->pplRatio.mean, std::exp(mean(nllQ) - mean(nllB)), 1e-13);
        KVLENS_COMPARE_REL(r->pplRatio.error, r->pplRatio.mean * r->logPplRatio.error, 1e-12);
        const double pq = std::exp(mean(nllQ)), pb = std::exp(mean(nllB));
        KVLENS_COMPARE_ABS(r->pplDifference.mean, pq - pb, 1e-12);
        KVLENS_COMPARE_REL(r->pplDifference.error,
                           std::sqrt(pq * seQ * pq * seQ + pb * seB * pb * seB - 2 * pq * pb * cov), 1e-9);
        KVLENS_COMPARE_ABS(r->kld.mean, mean(kld), 1e-15);
        KVLENS_COMPARE_REL(r->kld.error, standardError(kld), 1e-10);
        // Sorted KLDs: .001 .002 .003 .004 .005 .010 .020 .030 .060 .090 .120 .200; position f (n - 1) = 11 f.
        KVLENS_COMPARE_ABS(r->kldPercentiles.maximum, 0.200, 1e-15);
        KVLENS_COMPARE_ABS(r->kldPercentiles.minimum, 0.001, 1e-15);
        KVLENS_COMPARE_ABS(r->kldPercentiles.median, (0.010 + 0.020) / 2, 1e-15);  // position 5.5
        KVLENS_COMPARE_ABS(r->kldPercentiles.p90, 0.1 * 0.090 + 0.9 * 0.120, 1e-15); // position 9.9
        KVLENS_COMPARE_ABS(r->kldPercentiles.p99, 0.89 * 0.200 + 0.11 * 0.120, 1e-15); // position 10.89
        KVLENS_COMPARE_ABS(r->kldPercentiles.p10, 0.9 * 0.002 + 0.1 * 0.003, 1e-15);  // position 1.1
        KVLENS_COMPARE_ABS(r->kldPercentiles.p01, 0.001 + 0.011 * 0.001, 1e-15);      // position 0.011
        KVLENS_COMPARE_ABS(r->deltaP.mean, mean(dp), 1e-15);
        KVLENS_COMPARE_REL(r->deltaP.error, standardError(dp), 1e-10);
        // Sorted Δp: -.12 -.09 -.05 -.04 -.03 -.02 -.01 -.005 -.004 0 .001 .01.
        KVLENS_COMPARE_ABS(r->deltaPPercentiles.p75, 0.75 * -0.004 + 0.25 * 0.0, 1e-15);  // position 8.25
        KVLENS_COMPARE_ABS(r->deltaPPercentiles.p25, 0.25 * -0.05 + 0.75 * -0.04, 1e-15); // position 2.75
        KVLENS_COMPARE_ABS(r->deltaPPercentiles.maximum, 0.01, 1e-15);
        const double rms = std::sqrt(mean(dp2));
        KVLENS_COMPARE_REL(r->deltaPRms.mean, rms, 1e-13);
        KVLENS_COMPARE_REL(r->deltaPRms.error, 0.5 / rms * standardError(dp2), 1e-9);
        KVLENS_COMPARE_ABS(r->sameTop.mean, 9.0 / 12.0, 1e-15);
        KVLENS_COMPARE_ABS(r->sameTop.error, std::sqrt(0.75 * 0.25 / 11.0), 1e-15);
    }

    void fewTokens()
    {
        std::vector<TokenStat> s = sample();
        s.resize(10); // llama.cpp gives no standard error at n <= 10, and no covariance below 10
        auto r = summarizeNextTokens(s);
        QVERIFY(r);
        QCOMPARE(r->pplQ.error, 0.0);
        QCOMPARE(r->kld.error, 0.0);
        QVERIFY(std::isnan(r->nllCorrelation)); // documented: undefined without standard errors
        s.resize(1);
        QVERIFY(!summarizeNextTokens(s));
    }

    void meanErrorAndPercentileHelpers()
    {
        const MeanError e = meanAndError(30.0, 100.0, 11); // mean 30/11, var 100/11 - (30/11)^2
        const double m = 30.0 / 11, var = 100.0 / 11 - m * m;
        KVLENS_COMPARE_ABS(e.mean, m, 1e-15);
        KVLENS_COMPARE_ABS(e.error, std::sqrt(var / 10), 1e-15);
        const std::vector<double> v = {1, 2, 4};
        QCOMPARE(percentileOfSorted(v, 0.0), 1.0);
        QCOMPARE(percentileOfSorted(v, 1.0), 4.0);
        QCOMPARE(percentileOfSorted(v, 0.75), 3.0); // position 1.5
    }
};

QTEST_APPLESS_MAIN(TestNextTokenStats)
#include "tst_next_token_stats.moc"
