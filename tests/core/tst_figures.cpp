// SPDX-License-Identifier: GPL-3.0-or-later
// Figure data: seed intervals, KL ECDFs and log bins, recall intervals, the theory rows.
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/analysis/figures.h"
#include "common/approx.h"

#include <QTest>

#include <algorithm>
#include <numeric>

#include <cmath>
#include <numbers>

using namespace kvlens;

class TestFigures : public QObject {
    Q_OBJECT
private slots:
    void seedIntervalIsStudentT()
    {
        const std::vector<double> v = {1.0, 2.0, 3.0};
        const Interval i = seedInterval(v);
        // sd = 1, half width = t(0.975, 2) / sqrt(3); t(0.975, 2) = 4.302652729911275 (R: qt(0.975, 2)).
        KVLENS_COMPARE_ABS(i.mean, 2.0, 1e-12);
        KVLENS_COMPARE_ABS(i.high - i.mean, 4.302652729911275 / std::sqrt(3.0), 1e-9);
        KVLENS_COMPARE_ABS(i.mean - i.low, 4.302652729911275 / std::sqrt(3.0), 1e-9);
        const Interval one = seedInterval(std::vector<double>{5.0});
        QCOMPARE(one.low, 5.0);
        QCOMPARE(one.high, 5.0);
    }

    void figuresOfARun()
    {
        const auto spec = specFromJson(R"({"d": 128, "tokens": 512, "queries": 32, "budgets": [3, 4],
                                          "seeds": {"count": 4}, "schemes": ["KQV", "QKQV", "KIVI"]})");
        QVERIFY(spec.ok());
        CpuBackend backend(2);
        const auto results = runExperiment(*spec, backend);
        QVERIFY(results.ok());
        const FigureData f = buildFigureData(*results);
        QCOMPARE(f.summary.size(), std::size_t{6});
        QCOMPARE(f.kl.size(), std::size_t{6});
        QCOMPARE(f.recall.size(), std::size_t{6});
        QCOMPARE(f.theory.size(), std::size_t{6});
        QCOMPARE(f.klBinEdges.size(), std::size_t{41});
        for (const auto& k : f.kl) {
            QCOMPARE(k.ecdfX.size(), std::size_t{128}); // 4 seeds x 32 queries
            QCOMPARE(k.ecdfY.back(), 1.0);
            QVERIFY(std::is_sorted(k.ecdfX.begin(), k.ecdfX.end()));
            double mass = 0.0;
            for (double d : k.density)
                mass += d;
            KVLENS_COMPARE_ABS(mass + static_cast<double>(k.zeros) / 128.0, 1.0, 1e-9);
            // The cell's pooled KL, recomputed here: median and p99 by linear interpolation
            // between order statistics (type 7), found with nth_element rather than a sort.
            std::vector<double> pooled;
            for (const TrialResult& t : results->trials)
                if (t.key.point == k.point && t.key.scheme == k.scheme && t.key.budget == k.budget)
                    pooled.insert(pooled.end(), t.kl.begin(), t.kl.end());
            QCOMPARE(pooled.size(), std::size_t{128});
            auto order = [&](std::size_t i) {
                std::vector<double> v = pooled;
                std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
                return v[i];
            };
            KVLENS_COMPARE_ABS(k.median, 0.5 * (order(63) + order(64)), 1e-15);
            KVLENS_COMPARE_ABS(k.p99, order(125) + 0.73 * (order(126) - order(125)), 1e-12); // h = 127 x 0.99
            QCOMPARE(k.max, *std::max_element(pooled.begin(), pooled.end()));
            KVLENS_COMPARE_REL(k.mean, std::accumulate(pooled.begin(), pooled.end(), 0.0) / 128.0, 1e-12);
        }
        for (const auto& r : f.recall) {
            QCOMPARE(r.recall.n, 4);
            // Mean over seeds of each trial's mean recall, and the normal 95% interval of that mean.
            std::vector<double> perSeed;
            for (const TrialResult& t : results->trials)
                if (t.key.point == r.point && t.key.scheme == r.scheme && t.key.budget == r.budget)
                    perSeed.push_back(std::accumulate(t.recall.begin(), t.recall.end(), 0.0) / double(t.recall.size()));
            QCOMPARE(perSeed.size(), std::size_t{4});
            const double mean = std::accumulate(perSeed.begin(), perSeed.end(), 0.0) / 4.0;
            double ss = 0.0;
            for (double v : perSeed)
                ss += (v - mean) * (v - mean);
            const double half = 3.182446305284263 * std::sqrt(ss / 3.0) / 2.0; // t(0.975, 3), R: qt(0.975, 3)
            KVLENS_COMPARE_ABS(r.recall.mean, mean, 1e-12);
            KVLENS_COMPARE_ABS(r.recall.low, mean - half, 1e-9);
            KVLENS_COMPARE_ABS(r.recall.high, mean + half, 1e-9);
            QVERIFY(r.recall.mean > 0.0 && r.recall.mean <= 1.0);
        }
        for (const auto& t : f.theory) {
            const std::string& name = results->schemes[static_cast<std::size_t>(t.scheme)].name;
            if (name == "QKQV") {
                QVERIFY(t.qjlOnKeys);
                QCOMPARE(results->schemes[static_cast<std::size_t>(t.scalarPartner)].name, std::string("KQV"));
                KVLENS_COMPARE_REL(t.overScalar, 2.0 * std::numbers::pi, 0.25);
                KVLENS_COMPARE_REL(t.qjlOverBase, std::numbers::pi / 2.0, 0.15);
            } else {
                QVERIFY(!t.qjlOnKeys);
                QVERIFY(std::isnan(t.overScalar));
            }
            if (name == "KIVI")
                QVERIFY(std::isnan(t.predicted));
            // Small zero-mean score noise: log E[exp(ds)] is close to Jensen's sigma^2 / 2.
            KVLENS_COMPARE_REL(t.jensenMeasured, t.jensenPredicted, 0.2);
        }
        QVERIFY(f.meanEntropy > 0.0 && f.meanEntropy < std::log(512.0));
    }
};

QTEST_APPLESS_MAIN(TestFigures)
#include "tst_figures.moc"
