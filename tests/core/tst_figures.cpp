// SPDX-License-Identifier: GPL-3.0-or-later
// Figure data: seed intervals, KL ECDFs and log bins, recall intervals, the theory rows.
#include "core/experiment/runner.h"
#include "core/experiment/spec_json.h"
#include "core/analysis/figures.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>
#include <numbers>

using namespace kvlens;

class TestFigures : public QObject {
    Q_OBJECT
private slots:
    void seedIntervalIsNormal()
    {
        const std::vector<double> v = {1.0, 2.0, 3.0};
        const Interval i = seedInterval(v);
        // sd = 1, half width = 1.96 / sqrt(3).
        KVLENS_COMPARE_ABS(i.mean, 2.0, 1e-12);
        KVLENS_COMPARE_ABS(i.high - i.mean, 1.959963984540054 / std::sqrt(3.0), 1e-12);
        KVLENS_COMPARE_ABS(i.mean - i.low, 1.959963984540054 / std::sqrt(3.0), 1e-12);
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
            QVERIFY(k.median <= k.p99 && k.p99 <= k.max);
        }
        for (const auto& r : f.recall) {
            QCOMPARE(r.recall.n, 4);
            QVERIFY(r.recall.low <= r.recall.mean && r.recall.mean <= r.recall.high);
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
