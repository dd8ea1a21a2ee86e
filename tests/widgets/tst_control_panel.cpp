// SPDX-License-Identifier: GPL-3.0-or-later
// The control dock: widgets produce the expected spec; loading a spec is not an edit; regime widgets come from descriptions.
#include "core/experiment/spec_json.h"
#include "widgets/control_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QListWidget>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

void check(QListWidget* list, const QString& scheme, bool on)
{
    for (int row = 0; row < list->count(); ++row)
        if (list->item(row)->text().startsWith(scheme + QLatin1Char(' ')))
            list->item(row)->setCheckState(on ? Qt::Checked : Qt::Unchecked);
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

    void schemeLabelsShowExactBits()
    {
        ControlPanel panel;
        const auto items = panel.schemeList()->findItems(QStringLiteral("KQV "), Qt::MatchStartsWith);
        QCOMPARE(items.size(), 1);
        // Default d = 128, highest ticked budget n = 4: K 4.125, V 4.25 bits per coordinate.
        QVERIFY2(items.first()->text().contains(QStringLiteral("K 4.125 · V 4.250")), qPrintable(items.first()->text()));
        QVERIFY(items.first()->toolTip().contains(QStringLiteral("n = 2: 2.1250 / 2.2500")));
    }
};

QTEST_MAIN(TestControlPanel)
#include "tst_control_panel.moc"
