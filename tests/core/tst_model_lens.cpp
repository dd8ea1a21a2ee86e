// SPDX-License-Identifier: GPL-3.0-or-later
// The allocation advisor on a hand-built two-layer case whose optimum and front are known.
#include "core/analysis/model_lens.h"

#include <QTest>

#include <cmath>

using namespace kvlens;

namespace {

/// Two layers, widths 2, 3, 4 on each path costing exactly their bits. Loss saved per bit:
/// layer 0 K 0.5 then 0.2, V 0.1 then 0.05; layer 1 K 0.2 then 0.12, V 0.06 then 0.02 (every
/// curve convex, so the optimum at each total is the largest savings taken first).
std::vector<LayerCurves> twoLayers()
{
    LayerCurves a{0, {2, 3, 4}, {2, 3, 4}, {0.8, 0.3, 0.1}, {0.2, 0.1, 0.05}, {2, 3, 4}, {2, 3, 4}};
    LayerCurves b{1, {2, 3, 4}, {2, 3, 4}, {0.4, 0.2, 0.08}, {0.1, 0.04, 0.02}, {2, 3, 4}, {2, 3, 4}};
    return {a, b};
}

} // namespace

class TestModelLens : public QObject {
    Q_OBJECT
private slots:
    void theAdvisorFindsTheKnownOptimum()
    {
        // B = 3 bits per coordinate: four widths summing to 12. From all-2 (loss 1.5) the four
        // largest savings are 0.5, 0.2, 0.2, 0.12: K at 4 bits in both layers, V at 2.
        const auto best = allocate(twoLayers(), 3.0);
        QVERIFY(best);
        QCOMPARE(best->kBits, (std::vector<int>{4, 4}));
        QCOMPARE(best->vBits, (std::vector<int>{2, 2}));
        QCOMPARE(best->layers, (std::vector<int>{0, 1}));
        QVERIFY(std::abs(best->loss - 0.48) < 1e-12);
        QVERIFY(std::abs(best->bits - 3.0) < 1e-12);
        // Uniform 3/3 at the same total costs 0.64: the advice beats it.
        const BitAllocation uniform = evaluateAllocation(twoLayers(), {1, 1}, {1, 1});
        QVERIFY(std::abs(uniform.loss - 0.64) < 1e-12);
        QVERIFY(std::abs(uniform.bits - 3.0) < 1e-12);
        // Nothing fits under the smallest widths.
        QVERIFY(!allocate(twoLayers(), 1.9));
    }

    void theFrontIsExactAndTheLagrangianAgreesOnConvexCurves()
    {
        // Savings in order 0.5, 0.2, 0.2, 0.12, 0.1, 0.06, 0.05, 0.02 from loss 1.5 at 2 bits,
        // one width (1/4 bit of the average) each.
        const double losses[] = {1.5, 1.0, 0.8, 0.6, 0.48, 0.38, 0.32, 0.27, 0.25};
        for (const long long limit : {2000000LL, 0LL}) { // exact enumeration, then the Lagrangian hull
            const auto front = paretoFront(twoLayers(), limit);
            QCOMPARE(front.size(), std::size_t{9});
            for (std::size_t i = 0; i < front.size(); ++i) {
                QVERIFY2(std::abs(front[i].bits - (2.0 + 0.25 * static_cast<double>(i))) < 1e-12, qPrintable(QString::number(limit)));
                QVERIFY2(std::abs(front[i].loss - losses[i]) < 1e-12,
                         qPrintable(QStringLiteral("limit %1, point %2: %3").arg(limit).arg(i).arg(front[i].loss)));
            }
        }
    }

    void theExactFrontSeesWhatTheHullCannot()
    {
        // A non-convex curve: 3 bits saves nothing over 2, 4 bits saves a lot. The exact front
        // keeps (2.5 bits, 1.0); the hull jumps from 2 to 3 bits average in one segment.
        LayerCurves c{0, {2, 3, 4}, {2}, {1.0, 1.0, 0.0}, {0.0}, {2, 3, 4}, {2}};
        const auto exact = paretoFront({c});
        QCOMPARE(exact.size(), std::size_t{2}); // (2, 1.0) and (3, 0.0): 3 bits dominated
        QVERIFY(std::abs(exact[1].bits - 3.0) < 1e-12 && exact[1].loss == 0.0);
        const auto hull = paretoFront({c}, 0);
        QCOMPARE(hull.size(), std::size_t{2});
        QCOMPARE(hull[1].kBits, (std::vector<int>{4}));
    }
};

QTEST_APPLESS_MAIN(TestModelLens)
#include "tst_model_lens.moc"
