// SPDX-License-Identifier: GPL-3.0-or-later
// The allocation advisor on a hand-built two-layer case whose optimum and front are known.
#include "core/analysis/model_lens.h"

#include <QTest>

#include <cmath>
#include <sstream>

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

    void theObjectiveStatisticsAreTheClosedForms()
    {
        // Per-query losses 1, 2, ..., 100 in one layer (no model cells: all of it is one layer).
        ResultSet r;
        TrialResult t;
        for (int i = 1; i <= 100; ++i) {
            t.relMseT.push_back(static_cast<float>(i));
            t.kl.push_back(static_cast<float>(2 * i));
        }
        r.trials.push_back(t);
        // Mean 50.5, sd sqrt(100 * 101 / 12) = 29.0115, half-width 1.959964 * 2.90115 = 5.68615.
        const AllocationCheck mean = measuredLoss(r, "m", 0.0);
        QVERIFY(std::abs(mean.measured - 50.5) < 1e-12);
        QVERIFY2(std::abs(mean.high - mean.measured - 5.68615) < 1e-4, qPrintable(QString::number(mean.high)));
        // Median (type 7): 50.5; distribution-free ranks 50 -+ 1.96 * 5 = [40.2, 59.8] -> x(40), x(60).
        AdvisorOptions median;
        median.objective = AdvisorStatistic::Median;
        const AllocationCheck med = measuredLoss(r, "m", 0.0, median);
        QCOMPARE(med.measured, 50.5);
        QCOMPARE(med.low, 40.0);
        QCOMPARE(med.high, 60.0);
        // p99: h = 99 * 0.99 = 98.01 -> 99 + 0.01 * (100 - 99) = 99.01; ranks 99 -+ 1.95 -> x(97), x(100).
        AdvisorOptions p99;
        p99.objective = AdvisorStatistic::P99;
        const AllocationCheck high = measuredLoss(r, "m", 0.0, p99);
        QVERIFY(std::abs(high.measured - 99.01) < 1e-9);
        QCOMPARE(high.low, 97.0);
        QCOMPARE(high.high, 100.0);
        // The KL reads the other per-query loss: twice the values here.
        p99.loss = AdvisorLoss::Kl;
        QVERIFY(std::abs(measuredLoss(r, "m", 0.0, p99).measured - 198.02) < 1e-9);
        QCOMPARE(advisorObjectiveText(p99), std::string("p99 of the KL"));
        QCOMPARE(advisorObjectiveText(median), std::string("median output relative error"));
    }

    void anAllocationRoundTripsAndItsCsvIsItsEntries()
    {
        // The advisor's widths: k_bits / v_bits, each layer's measured bits, no llama.cpp type.
        const BitAllocation best = *allocate(twoLayers(), 3.0);
        QCOMPARE(best.layerBits, (std::vector<double>{3.0, 3.0}));
        const AllocationFile file = allocationFile(best, 3.0, 0xabcdef, "rel_mse_t", "median");
        const std::string json = allocationToJson(file);
        const auto back = allocationFromJson(json);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().text().c_str());
        QVERIFY(*back == file);
        QCOMPARE(back->objective, std::string("median"));
        QVERIFY2(json.find("\"k_type\"") == std::string::npos, json.c_str());
        QVERIFY2(json.find("TurboQuant's widths") != std::string::npos, json.c_str());
        QCOMPARE(allocationLayersCsv(file), std::string("layer,head,k_type,v_type,k_bits,v_bits,bits\n"
                                                         "0,,,,4,2,3\n"
                                                         "1,,,,4,2,3\n"));
        QVERIFY(llamaCppTypes(file.entries).ctk.empty());

        // llama.cpp's types: one K type and one V type everywhere give -ctk / -ctv ...
        AllocationFile types;
        types.targetBits = 6.5;
        types.entries = {AllocationEntry{0, -1, 0, 0, "q8_0", "q4_0", 6.5}, AllocationEntry{1, 2, 0, 0, "q8_0", "q4_0", 0.0}};
        const LlamaCppTypes same = llamaCppTypes(types.entries);
        QCOMPARE(same.args(), std::string("-ctk q8_0 -ctv q4_0"));
        const std::string typesJson = allocationToJson(types);
        QVERIFY2(typesJson.find("\"args\": \"-ctk q8_0 -ctv q4_0\"") != std::string::npos, typesJson.c_str());
        const auto typesBack = allocationFromJson(typesJson);
        QVERIFY2(typesBack.ok(), typesBack.ok() ? "" : typesBack.error().text().c_str());
        QVERIFY(*typesBack == types);
        QCOMPARE(allocationLayersCsv(types), std::string("layer,head,k_type,v_type,k_bits,v_bits,bits\n"
                                                          "0,,q8_0,q4_0,,,6.5\n"
                                                          "1,2,q8_0,q4_0,,,\n"));
        // ... layers that differ give none, and say why; so does a mix of widths and types.
        types.entries[1].vType = "f16";
        QVERIFY(llamaCppTypes(types.entries).ctk.empty());
        QCOMPARE(llamaCppTypes(types.entries).note.substr(0, 35), std::string("no single -ctk/-ctv: layers differ "));
        const auto differ = allocationFromJson(allocationToJson(types));
        QVERIFY(differ.ok() && *differ == types);
        types.entries[1] = AllocationEntry{1, -1, 3, 0, "", "q4_0", 0.0};
        QVERIFY(llamaCppTypes(types.entries).note.find("TurboQuant") != std::string::npos);
        const auto mixed = allocationFromJson(allocationToJson(types));
        QVERIFY(mixed.ok() && *mixed == types);
        // The reader stays strict about what it now accepts.
        const auto badBits = allocationFromJson(R"({"format": "kvlens-allocation", "layers": [{"layer": 0, "k_bits": 3,
            "v_bits": 2, "bits": -1}]})");
        QVERIFY(!badBits.ok());
        QCOMPARE(badBits.error().field, std::string("layers[0].bits"));
        const auto badLlama = allocationFromJson(R"({"format": "kvlens-allocation", "llama_cpp": {"ctk": 8},
            "layers": [{"layer": 0, "k_bits": 3, "v_bits": 2}]})");
        QVERIFY(!badLlama.ok());
        QCOMPARE(badLlama.error().field, std::string("llama_cpp.ctk"));
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
