// SPDX-License-Identifier: GPL-3.0-or-later
// The control dock: widgets produce the expected spec; loading a spec is not an edit and round-trips exactly (seeds
// beyond int, values finer than a control); regime widgets come from descriptions.
#include "core/spec/spec_json.h"
#include "widgets/control_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QListWidget>
#include <QSignalSpy>
#include <QSpinBox>
#include <QComboBox>
#include <QPushButton>
#include <QTest>

#include <algorithm>
#include <QValidator>

#include <cstdint>
#include <limits>
#include <string>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

void check(QListWidget* list, const QString& scheme, bool on)
{
    for (int row = 0; row < list->count(); ++row)
        if (list->item(row)->text().startsWith(scheme + QLatin1Char(' ')))
            list->item(row)->setCheckState(on ? Qt::Checked : Qt::Unchecked);
}

std::vector<std::string> schemeNames(const ExperimentSpec& spec)
{
    std::vector<std::string> names;
    for (const auto& s : spec.schemes)
        names.push_back(s.name);
    return names;
}

/// Every field of `got` against `want`, so a failure names the field that changed.
void compareFieldByField(const ExperimentSpec& got, const ExperimentSpec& want)
{
    QCOMPARE(got.name, want.name);
    QCOMPARE(got.regime, want.regime);
    QVERIFY(got.regimeParams == want.regimeParams);
    QCOMPARE(got.d, want.d);
    QCOMPARE(got.tokens, want.tokens);
    QCOMPARE(got.queries, want.queries);
    QCOMPARE(got.calibrationTokens, want.calibrationTokens);
    QCOMPARE(got.scoreScale, want.scoreScale);
    QCOMPARE(schemeNames(got), schemeNames(want));
    QVERIFY(got.schemes == want.schemes);
    QCOMPARE(got.budgets, want.budgets);
    QCOMPARE(got.firstSeed, want.firstSeed);
    QCOMPARE(got.seedCount, want.seedCount);
    QVERIFY(got.engine == want.engine);
    QCOMPARE(got.backend, want.backend);
    QCOMPARE(got.device, want.device);
    QCOMPARE(got.metrics.topK, want.metrics.topK);
    QCOMPARE(got.metrics.sampleCap, want.metrics.sampleCap);
    QVERIFY(got.comparisons == want.comparisons);
    QCOMPARE(got.memoryLimitMb, want.memoryLimitMb);
    QVERIFY(got.sweep == want.sweep);
    QVERIFY(got == want);
}

} // namespace

class TestControlPanel : public QObject {
    Q_OBJECT
private slots:
    void defaultsAreTheDefaultSpec()
    {
        ControlPanel panel;
        const auto spec = normalizeSpec(panel.spec());
        QVERIFY(spec.ok());
        QVERIFY(*spec == *normalizeSpec(defaultSpec()));
    }

    void settingControlsProducesTheSpec()
    {
        ControlPanel panel;
        QSignalSpy edited(&panel, &ControlPanel::specEdited);
        panel.regimeBox()->setCurrentText(QStringLiteral("heavy_tail"));
        auto* nu = qobject_cast<QDoubleSpinBox*>(panel.paramEditor(QStringLiteral("nu")));
        QVERIFY(nu); // built from the regime's ParamDesc
        QCOMPARE(nu->minimum(), 1.05);
        nu->setValue(1.5);
        auto* mode = qobject_cast<QComboBox*>(panel.paramEditor(QStringLiteral("mode")));
        QVERIFY(mode);
        mode->setCurrentText(QStringLiteral("vector"));
        panel.dBox()->setValue(96);
        panel.tokensBox()->setValue(300);
        panel.queriesBox()->setValue(12);
        check(panel.schemeList(), QStringLiteral("KV"), false);
        check(panel.schemeList(), QStringLiteral("KIVI"), true);
        panel.budgetBox(2)->setChecked(false);
        panel.budgetBox(8)->setChecked(true);
        QVERIFY(edited.count() >= 8);
        const auto spec = normalizeSpec(panel.spec());
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        QCOMPARE(spec->regime, std::string("heavy_tail"));
        QCOMPARE(paramNumber(spec->regimeParams, "nu"), 1.5);
        QCOMPARE(paramText(spec->regimeParams, "mode"), std::string("vector"));
        QCOMPARE(spec->d, 96);
        QCOMPARE(spec->tokens, 300);
        QCOMPARE(spec->queries, 12);
        QCOMPARE(spec->budgets, (std::vector<int>{3, 4, 8}));
        std::vector<std::string> names;
        for (const auto& s : spec->schemes)
            names.push_back(s.name);
        QCOMPARE(names, (std::vector<std::string>{"KQV", "QKQV", "KIVI"}));
    }

    void loadingASpecIsNotAnEditAndRoundTrips()
    {
        const auto spec = specFromJson(R"({"regime": {"name": "kv_subspace", "rank": 4, "overlap": 0.25},
            "d": 64, "tokens": 512, "queries": 32, "score_scale": 2.5, "budgets": [2, 5],
            "seeds": {"first": 7, "count": 3}, "rng": "pcg64", "metrics": {"top_k": 3},
            "schemes": ["TQ-QKV", {"name": "uniform-wht", "k": {"rotation": "wht", "quantizer": "uniform"},
                                   "v": {"quantizer": "uniform", "axis": "per_token", "group_size": 16}}]})");
        QVERIFY(spec.ok());
        ControlPanel panel;
        QSignalSpy edited(&panel, &ControlPanel::specEdited);
        panel.setSpec(*spec);
        QCOMPARE(edited.count(), 0);
        const auto back = normalizeSpec(panel.spec());
        QVERIFY(back.ok());
        QVERIFY(*back == *spec);
        // The custom scheme joined the list, labelled with its exact bits.
        QVERIFY(panel.schemeList()->findItems(QStringLiteral("uniform-wht"), Qt::MatchStartsWith).size() == 1);
    }

    void largeSeedsSurviveEditsElsewhere_data()
    {
        QTest::addColumn<quint64>("seed");
        QTest::newRow("2^31") << (quint64{1} << 31);
        QTest::newRow("2^40 + 7") << (quint64{1} << 40) + 7;
        // The largest first seed whose five seeds (the count set below) do not wrap past 2^64 - 1.
        QTest::newRow("2^64 - 5") << std::numeric_limits<quint64>::max() - 4;
    }
    void largeSeedsSurviveEditsElsewhere()
    {
        QFETCH(quint64, seed);
        // The spec format takes any uint64 seed; a spin box (int) used to clamp it to 2^31 - 1.
        const auto spec = specFromJson(R"({"seeds": {"first": )" + std::to_string(seed) + R"(, "count": 3}})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        QCOMPARE(quint64{spec->firstSeed}, seed);
        ControlPanel panel;
        panel.setSpec(*spec);
        QCOMPARE(panel.firstSeedBox()->text(), QString::number(seed));
        QSignalSpy edited(&panel, &ControlPanel::specEdited);
        panel.seedCountBox()->setValue(5); // an unrelated control
        QCOMPARE(edited.count(), 1);
        QCOMPARE(quint64{panel.spec().firstSeed}, seed);
        QCOMPARE(panel.spec().seedCount, 5);
        panel.budgetBox(8)->setChecked(true);
        const auto back = normalizeSpec(panel.spec());
        QVERIFY(back.ok());
        QCOMPARE(quint64{back->firstSeed}, seed);
        const auto reread = specFromJson(specToJson(*back)); // and through the JSON a save writes
        QVERIFY(reread.ok());
        QCOMPARE(quint64{reread->firstSeed}, seed);
    }

    void seedBoxTakesEveryUint64AndNoMore()
    {
        ControlPanel panel;
        QSignalSpy edited(&panel, &ControlPanel::specEdited);
        QLineEdit* box = panel.firstSeedBox();
        box->selectAll();
        QTest::keyClicks(box, QStringLiteral("18446744073709551615"));
        QTest::keyClick(box, Qt::Key_Return);
        QCOMPARE(quint64{panel.spec().firstSeed}, std::numeric_limits<quint64>::max());
        QCOMPARE(edited.count(), 1);
        // One more would overflow: refused as typed, never wrapped or clamped.
        int pos = 0;
        for (const char* bad : {"18446744073709551616", "99999999999999999999999", "-1", "1e3", " 7", "+7"}) {
            QString text = QString::fromLatin1(bad);
            QVERIFY2(box->validator()->validate(text, pos) == QValidator::Invalid, bad);
        }
        QString empty;
        QCOMPARE(box->validator()->validate(empty, pos), QValidator::Intermediate);
        // An emptied box falls back to the current seed: no edit, no change.
        box->clear();
        QTest::keyClick(box, Qt::Key_Return);
        QCOMPARE(box->text(), QStringLiteral("18446744073709551615"));
        QCOMPARE(edited.count(), 1);
        // Leading zeros read back as the number they are.
        box->setText(QStringLiteral("0042"));
        QTest::keyClick(box, Qt::Key_Return);
        QCOMPARE(quint64{panel.spec().firstSeed}, quint64{42});
        QCOMPARE(box->text(), QStringLiteral("42"));
        QCOMPARE(edited.count(), 2);
    }

    void valuesTheControlsCannotShowSurviveUntilEdited()
    {
        // Every field set, several finer or wider than their controls: a score scale below the
        // box's minimum, parameters with more decimals than their boxes, "auto", an order of
        // budgets and schemes the lists do not have, a seed beyond int.
        const auto spec = specFromJson(R"({"name": "hostile", "regime": {"name": "kv_subspace", "rank": 3,
            "overlap": 0.2345, "noise": 0.00123}, "d": 72, "tokens": 700, "queries": 9, "calibration_tokens": 300,
            "score_scale": 0.005, "budgets": [4, 2], "schemes": ["QKQV", "KV"], "backend": "auto",
            "seeds": {"first": 1099511627783, "count": 5}, "rng": "pcg64",
            "metrics": {"top_k": 7, "sample_cap": 33}, "memory_limit_mb": 123.5,
            "comparisons": {"pairs": [["QKQV", "KV"]], "bootstrap": 10, "permutations": 19}})");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        ControlPanel panel;
        panel.setSpec(*spec);
        QCOMPARE(panel.scoreScaleBox()->value(), 0.01); // the box shows what it can...
        compareFieldByField(panel.spec(), *spec);      // ...and the spec keeps what was loaded
        if (QTest::currentTestFailed())
            return;
        // Touching unrelated controls changes only what they show.
        panel.seedCountBox()->setValue(6);
        panel.topKBox()->setValue(4);
        ExperimentSpec want = *spec;
        want.seedCount = 6;
        want.metrics.topK = 4;
        compareFieldByField(panel.spec(), want);
        if (QTest::currentTestFailed())
            return;
        const auto normalized = normalizeSpec(panel.spec());
        QVERIFY(normalized.ok());
        compareFieldByField(*normalized, want);
        if (QTest::currentTestFailed())
            return;
        // An edited control gives its own value; a newly ticked budget or scheme follows the loaded order.
        panel.scoreScaleBox()->setValue(3.0);
        auto* overlap = qobject_cast<QDoubleSpinBox*>(panel.paramEditor(QStringLiteral("overlap")));
        QVERIFY(overlap);
        overlap->setValue(0.75);
        panel.budgetBox(8)->setChecked(true);
        check(panel.schemeList(), QStringLiteral("KIVI"), true);
        const ExperimentSpec edited = panel.spec();
        QCOMPARE(edited.scoreScale, 3.0);
        QCOMPARE(paramNumber(edited.regimeParams, "overlap"), 0.75);
        QCOMPARE(paramNumber(edited.regimeParams, "noise"), 0.00123); // not touched: still exact
        QCOMPARE(edited.budgets, (std::vector<int>{4, 2, 8}));
        QCOMPARE(schemeNames(edited), (std::vector<std::string>{"QKQV", "KV", "KIVI"}));
        QCOMPARE(edited.backend, BackendKind::Auto);
        QCOMPARE(quint64{edited.firstSeed}, quint64{1099511627783});
    }

    void backendsTheListCannotNameSurvive()
    {
        ControlPanel panel;
        const QStringList labels{QStringLiteral("CPU"), QStringLiteral("OpenCL 0: a"), QStringLiteral("OpenCL 1: b")};
        const QStringList values{QStringLiteral("cpu"), QStringLiteral("0"), QStringLiteral("1")};
        // A device named by a substring shows as the first device, and stays as named.
        auto spec = *normalizeSpec(defaultSpec());
        spec.backend = BackendKind::OpenCl;
        spec.device = "pthread";
        panel.setBackends(labels, values);
        panel.setSpec(spec);
        QCOMPARE(panel.backendBox()->currentIndex(), 1);
        panel.seedCountBox()->setValue(3);
        QCOMPARE(panel.spec().backend, BackendKind::OpenCl);
        QCOMPARE(panel.spec().device, std::string("pthread"));
        panel.backendBox()->setCurrentIndex(2); // chosen: the box's value
        QCOMPARE(panel.spec().device, std::string("1"));
        panel.backendBox()->setCurrentIndex(0);
        QCOMPARE(panel.spec().backend, BackendKind::Cpu);
        QCOMPARE(panel.spec().device, std::string());
        // Devices listed after loading: the loaded one is selected once it is there.
        ControlPanel late;
        spec.device = "1";
        late.setSpec(spec);
        QCOMPARE(late.spec().device, std::string("1")); // only "CPU" listed yet
        late.setBackends(labels, values);
        QCOMPARE(late.backendBox()->currentIndex(), 2);
        QCOMPARE(late.spec().device, std::string("1"));
    }

    void schemeLabelsShowExactBits()
    {
        ControlPanel panel;
        const auto items = panel.schemeList()->findItems(QStringLiteral("KQV "), Qt::MatchStartsWith);
        QCOMPARE(items.size(), 1);
        // Default d = 128, highest ticked budget n = 4: K 4.125, V 4.25 bits per coordinate.
        QVERIFY2(items.first()->text().contains(QStringLiteral("K 4.125 · V 4.250")), qPrintable(items.first()->text()));
        QVERIFY(items.first()->toolTip().contains(QStringLiteral("n = 2: 2.1250 / 2.2500")));
    }

    void llamaCacheTypesPerPath()
    {
        // -ctk q8_0 -ctv q4_1 from the panel: the scheme K=q8_0,V=q4_1 is added ticked, once, with
        // its exact bits (8.5 / 5.0 whatever n), and a spec holding it loads back into the list.
        ControlPanel panel;
        const int before = panel.schemeList()->count();
        panel.llamaKeyTypeBox()->setCurrentText(QStringLiteral("q8_0"));
        panel.llamaValueTypeBox()->setCurrentText(QStringLiteral("q4_1"));
        panel.addLlamaTypesButton()->click();
        panel.addLlamaTypesButton()->click(); // a second click ticks the same row
        QCOMPARE(panel.schemeList()->count(), before + 1);
        const auto items = panel.schemeList()->findItems(QStringLiteral("K=q8_0,V=q4_1 "), Qt::MatchStartsWith);
        QCOMPARE(items.size(), 1);
        QCOMPARE(items.first()->checkState(), Qt::Checked);
        QVERIFY2(items.first()->text().contains(QStringLiteral("K 8.500 · V 5.000")), qPrintable(items.first()->text()));
        const ExperimentSpec spec = panel.spec();
        const auto it = std::find_if(spec.schemes.begin(), spec.schemes.end(),
                                     [](const SchemeConfig& c) { return c.name == "K=q8_0,V=q4_1"; });
        QVERIFY(it != spec.schemes.end());
        QCOMPARE(it->key.quantizer.text("type"), std::string("q8_0"));
        QCOMPARE(it->value.quantizer.text("type"), std::string("q4_1"));
        ControlPanel other;
        other.setSpec(spec);
        QCOMPARE(other.schemeList()->findItems(QStringLiteral("K=q8_0,V=q4_1 "), Qt::MatchStartsWith).size(), 1);
    }
};

QTEST_MAIN(TestControlPanel)
#include "tst_control_panel.moc"
