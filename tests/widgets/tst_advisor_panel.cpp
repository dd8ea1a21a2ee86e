// SPDX-License-Identifier: GPL-3.0-or-later
// The advisor panel on the shipped tiny model's map (K-only and V-only at 2, 3, 4 bits): the advice
// at each target is the exact optimum found by enumerating every per-layer choice here; the slider
// changes the advice, the objective changes the front; the verdict's figure is the gain over the best
// uniform split, also enumerated here.
#include "common/approx.h"
#include "common/trials.h"
#include "core/analysis/eval_analysis.h"
#include "core/eval/evaluator.h"
#include "core/report/claims_output.h"
#include "widgets/advisor_panel.h"

#include <QPushButton>

#include <QSlider>
#include <QTableWidget>
#include <QTest>

#include <cmath>
#include <limits>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

std::shared_ptr<const ResultSet> shippedMapRun()
{
    static std::shared_ptr<const ResultSet> run = [] {
        const std::string dump = std::string(KVLENS_EXAMPLES_DIR) + "/tiny_lm_kv.safetensors";
        const std::string json = R"({"regime": {"name": "model", "file": ")" + dump + R"(", "layers": "all",
            "heads": "all", "query_start": 448}, "d": 32, "tokens": 512, "queries": 16,
            "schemes": ["K-only", "V-only"], "budgets": [2, 3, 4], "seeds": {"count": 1}})";
        return std::make_shared<const ResultSet>(test::runSpec(test::makeSpec(json.c_str())));
    }();
    return run;
}

/// The exact optimum within `budget` over every per-layer (k, v) choice; `uniformOnly`: the same
/// choice in every layer.
BitAllocation bruteForce(const std::vector<LayerCurves>& curves, double budget, bool uniformOnly)
{
    const int L = static_cast<int>(curves.size());
    const int nk = static_cast<int>(curves.front().kBits.size()), nv = static_cast<int>(curves.front().vBits.size());
    const int options = nk * nv;
    BitAllocation best;
    best.loss = std::numeric_limits<double>::infinity();
    long long combos = 1;
    for (int l = 0; l < (uniformOnly ? 1 : L); ++l)
        combos *= options;
    for (long long c = 0; c < combos; ++c) {
        std::vector<int> k(static_cast<std::size_t>(L)), v(static_cast<std::size_t>(L));
        long long rest = c;
        for (int l = 0; l < L; ++l) {
            const int choice = static_cast<int>(uniformOnly ? c : rest % options);
            if (!uniformOnly)
                rest /= options;
            k[static_cast<std::size_t>(l)] = choice / nv;
            v[static_cast<std::size_t>(l)] = choice % nv;
        }
        const BitAllocation a = evaluateAllocation(curves, k, v);
        if (a.bits <= budget + 1e-9 && a.loss < best.loss)
            best = a;
    }
    return best;
}

} // namespace

class TestAdvisorPanel : public QObject {
    Q_OBJECT
private slots:
    void theAdviceIsTheExactOptimumAndFollowsTheSlider();
    void theObjectiveChangesTheFront();
    void withoutSinglePathRunsItSaysWhatToAdd();
    void theAdviceIsMeasuredEndToEndOnDemand();
};

void TestAdvisorPanel::theAdviceIsTheExactOptimumAndFollowsTheSlider()
{
    AdvisorPanel panel;
    panel.resize(400, 600);
    panel.show();
    panel.setResults(shippedMapRun());
    QVERIFY(panel.waitUntilComputed(30000));
    QCOMPARE(panel.curves().size(), std::size_t{4});
    QVERIFY(!panel.front().empty());
    for (std::size_t i = 1; i < panel.front().size(); ++i)
        QVERIFY(panel.front()[i].bits >= panel.front()[i - 1].bits);
    // The slider spans the front, in 0.05-bit steps.
    QVERIFY(panel.minimumTarget() >= panel.front().front().bits - 1e-9);
    QVERIFY(panel.minimumTarget() < panel.front().front().bits + 0.05);
    QVERIFY(panel.maximumTarget() <= panel.front().back().bits + 1e-9);

    double previousLoss = std::numeric_limits<double>::infinity();
    int changes = 0;
    for (const double target : {panel.minimumTarget() + 0.3, 3.0, 3.5, panel.maximumTarget()}) {
        panel.setTarget(target);
        QVERIFY(panel.advice().has_value());
        const BitAllocation exact = bruteForce(panel.curves(), panel.target(), false);
        KVLENS_COMPARE_REL(panel.advice()->loss, exact.loss, 1e-12);
        QVERIFY(panel.advice()->bits <= panel.target() + 1e-9);
        QCOMPARE(panel.table()->rowCount(), 4);
        for (int l = 0; l < 4; ++l) {
            QCOMPARE(panel.table()->item(l, 1)->text().toInt(), panel.advice()->kBits[static_cast<std::size_t>(l)]);
            QCOMPARE(panel.table()->item(l, 2)->text().toInt(), panel.advice()->vBits[static_cast<std::size_t>(l)]);
        }
        if (panel.advice()->loss < previousLoss)
            ++changes;
        QVERIFY(panel.advice()->loss <= previousLoss);
        previousLoss = panel.advice()->loss;
        // The verdict's percentage is the gain over the best uniform split of <= target bits.
        const BitAllocation uniform = bruteForce(panel.curves(), panel.target(), true);
        if (std::isfinite(uniform.loss)) {
            QVERIFY(panel.uniform().has_value());
            KVLENS_COMPARE_REL(panel.uniform()->loss, uniform.loss, 1e-12);
            const double gain = 100.0 * (uniform.loss - exact.loss) / uniform.loss;
            if (gain >= 0.05)
                QVERIFY2(panel.verdictText().contains(QStringLiteral("%1 % less loss").arg(gain, 0, 'f', 0)),
                         qPrintable(panel.verdictText()));
            else
                QVERIFY2(panel.verdictText().contains(QStringLiteral("as good as any")), qPrintable(panel.verdictText()));
        }
    }
    QVERIFY2(changes >= 3, "a wider target buys less loss");
}

void TestAdvisorPanel::theObjectiveChangesTheFront()
{
    AdvisorPanel panel;
    panel.setResults(shippedMapRun());
    QVERIFY(panel.waitUntilComputed(30000));
    const auto outputFront = panel.front();
    // KL is blind to V (V-only's KL is 0): under it every layer's advice takes the narrowest V.
    panel.setObjective(AdvisorStatistic::Mean, AdvisorLoss::Kl);
    QVERIFY(panel.waitUntilComputed(30000));
    panel.setTarget(3.0);
    QVERIFY(panel.advice().has_value());
    for (const int v : panel.advice()->vBits)
        QCOMPARE(v, 2);
    bool differs = outputFront.size() != panel.front().size();
    for (std::size_t i = 0; !differs && i < outputFront.size(); ++i)
        differs = outputFront[i].loss != panel.front()[i].loss;
    QVERIFY(differs);
    // p99 of the output error: the exact optimum of its own curves.
    panel.setObjective(AdvisorStatistic::P99, AdvisorLoss::RelMseT);
    QVERIFY(panel.waitUntilComputed(30000));
    panel.setTarget(3.0);
    KVLENS_COMPARE_REL(panel.advice()->loss, bruteForce(panel.curves(), panel.target(), false).loss, 1e-12);
}

void TestAdvisorPanel::withoutSinglePathRunsItSaysWhatToAdd()
{
    const std::string dump = std::string(KVLENS_EXAMPLES_DIR) + "/tiny_lm_kv.safetensors";
    const std::string json = R"({"regime": {"name": "model", "file": ")" + dump + R"(", "layers": "all",
        "heads": [0], "query_start": 448}, "d": 32, "tokens": 256, "queries": 8,
        "schemes": ["KV"], "budgets": [2], "seeds": {"count": 1}})";
    AdvisorPanel panel;
    panel.setResults(std::make_shared<const ResultSet>(test::runSpec(test::makeSpec(json.c_str()))));
    QVERIFY(panel.waitUntilComputed(30000));
    QVERIFY(!panel.advice().has_value());
    QVERIFY2(panel.verdictText().contains(QStringLiteral("K-only and V-only")), qPrintable(panel.verdictText()));
}

void TestAdvisorPanel::theAdviceIsMeasuredEndToEndOnDemand()
{
    AdvisorPanel panel;
    panel.setResults(shippedMapRun());
    QVERIFY(panel.waitUntilComputed(30000));
    panel.setTarget(3.0);
    QVERIFY(panel.advice().has_value() && panel.uniform().has_value());
    QVERIFY(!panel.measureButton()->isEnabled()); // no model to run yet
    const QString model = QStringLiteral(KVLENS_MODELS_DIR "/tiny-llama");
    const QString text = model + QStringLiteral("/heldout.txt");
    panel.setModelSource(model, text);
    QVERIFY(panel.measureButton()->isEnabled());
    panel.measure(2);
    QVERIFY(panel.measuring());
    QCOMPARE(panel.measureButton()->text(), QStringLiteral("Cancel the measurement"));
    QVERIFY(panel.waitUntilMeasured(180000));
    QVERIFY2(panel.measurement().has_value(), qPrintable(panel.measuredText()));
    const AdviceMeasurement& m = *panel.measurement();
    QCOMPARE(m.chunks, 2);
    QCOMPARE(m.advice.kBits, panel.advice()->kBits);
    QCOMPARE(m.advice.vBits, panel.advice()->vBits);
    QStringList names;
    for (const auto& row : m.rows)
        names << row.name;
    QCOMPARE(names, (QStringList{QStringLiteral("advice"), QStringLiteral("best uniform split"), QStringLiteral("TQ-KV n = 2"),
                                 QStringLiteral("TQ-KV n = 3"), QStringLiteral("K=q8_0,V=q8_0"), QStringLiteral("K=q8_0,V=q4_0"),
                                 QStringLiteral("K=q4_0,V=q4_0")}));
    // The advice's mean KLD is that of an evaluation of the advice alone over the same two chunks.
    EvalSpec alone = claims::adviceCheckSpec(model.toStdString(), text.toStdString(), *panel.advice(), panel.uniform());
    alone.schemes.resize(1);
    alone.chunks = 2;
    auto direct = eval::runEval(alone);
    QVERIFY2(direct.ok(), direct.ok() ? "" : direct.error().text().c_str());
    QCOMPARE(m.rows[static_cast<std::size_t>(m.adviceRow)].kld, direct->configurations[0].summary.kld.mean);
    QVERIFY(m.rows[static_cast<std::size_t>(m.adviceRow)].low <= m.rows[static_cast<std::size_t>(m.adviceRow)].kld);
    // The ratio pairs the same tokens: on all chunks it is the ratio of the two means.
    KVLENS_COMPARE_REL(m.ratio, m.rows[static_cast<std::size_t>(m.uniformRow)].kld / m.rows[static_cast<std::size_t>(m.adviceRow)].kld,
                       1e-9);
    const QString line = panel.measuredText();
    QVERIFY2(line.contains(QStringLiteral("does %1 [").arg(m.ratio, 0, 'g', 3)), qPrintable(line));
    QVERIFY(panel.measuredDetails().contains(QStringLiteral("TQ-KV n = 2: 2.50 bits, mean KLD ")));
    QVERIFY2(line.contains(QStringLiteral("the advice wins")) || line.contains(QStringLiteral("the uniform split wins"))
                 || line.contains(QStringLiteral("cannot separate")),
             qPrintable(line));

    // The same advice computed again (the objective set again) keeps its measurement, also while it runs.
    panel.setObjective(AdvisorStatistic::Mean, AdvisorLoss::RelMseT);
    QVERIFY(panel.waitUntilComputed(30000));
    QVERIFY(panel.measurement().has_value());
    panel.measure(1);
    panel.setObjective(AdvisorStatistic::Mean, AdvisorLoss::RelMseT);
    QVERIFY(panel.waitUntilComputed(30000));
    QVERIFY(panel.waitUntilMeasured(180000));
    QVERIFY2(panel.measurement().has_value(), qPrintable(panel.measuredText()));
    QCOMPARE(panel.measurement()->chunks, 1);

    // Another advice discards the measurement; a cancelled one shows nothing; a bad folder is named.
    panel.setTarget(panel.minimumTarget());
    QVERIFY(!panel.measurement().has_value());
    panel.measure();
    panel.cancelMeasurement();
    QVERIFY(panel.waitUntilMeasured(60000));
    QVERIFY(!panel.measurement().has_value());
    QVERIFY2(panel.measuredText().contains(QStringLiteral("cancelled")), qPrintable(panel.measuredText()));
    panel.setModelSource(QStringLiteral("/nonexistent-model"), text);
    panel.measure(2);
    QVERIFY(panel.waitUntilMeasured(60000));
    QVERIFY(!panel.measurement().has_value());
    QVERIFY2(panel.measuredText().contains(QStringLiteral("/nonexistent-model")), qPrintable(panel.measuredText()));
}

QTEST_MAIN(TestAdvisorPanel)
#include "tst_advisor_panel.moc"
