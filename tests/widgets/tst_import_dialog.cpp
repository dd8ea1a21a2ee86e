// SPDX-License-Identifier: GPL-3.0-or-later
// File → Import tensors…: header preview, K/V/Q picked by name, refusals shown with OK disabled, the spec it builds.
#include "core/spec/spec.h"
#include "core/regimes/regime.h"
#include "widgets/import_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFile>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace kvlens;
using kvlens::widgets::ImportDialog;

namespace {

QString example()
{
    return QStringLiteral(KVLENS_SOURCE_DIR "/resources/examples/kv_example.safetensors");
}

bool okEnabled(const ImportDialog& dialog)
{
    return dialog.findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->isEnabled();
}

} // namespace

class TestImportDialog : public QObject {
    Q_OBJECT
private slots:
    void previewsTheShippedExampleAndBuildsItsSpec()
    {
        ExperimentSpec base = defaultSpec();
        base.schemes = {*findScheme("KV"), *findScheme("KQV")};
        ImportDialog dialog(base);
        QVERIFY(!dialog.valid());
        QVERIFY(!okEnabled(dialog));
        dialog.setFile(example());
        QCOMPARE(dialog.table()->rowCount(), 3);
        QCOMPARE(dialog.table()->item(0, 0)->text(), QStringLiteral("k"));
        QCOMPARE(dialog.table()->item(0, 1)->text(), QStringLiteral("F16"));
        QCOMPARE(dialog.table()->item(0, 2)->text(), QStringLiteral("[1, 4, 256, 64]"));
        QCOMPARE(dialog.tensorBox(0)->currentText(), QStringLiteral("k"));
        QCOMPARE(dialog.tensorBox(1)->currentText(), QStringLiteral("v"));
        QCOMPARE(dialog.tensorBox(2)->currentText(), QStringLiteral("q"));
        // Defaults: the last 64 query rows attend to the 192 keys before them, as in resources/examples/imported.json.
        QVERIFY2(dialog.valid(), qPrintable(dialog.message()));
        QVERIFY(okEnabled(dialog));
        const ExperimentSpec s = dialog.spec();
        QCOMPARE(s.regime, std::string("imported"));
        QCOMPARE(s.d, 64);
        QCOMPARE(s.tokens, 192);
        QCOMPARE(s.queries, 64);
        QCOMPARE(paramNumber(s.regimeParams, "query_start"), 192.0);
        QCOMPARE(paramText(s.regimeParams, "file"), example().toStdString());
        QCOMPARE(s.schemes.size(), std::size_t(2)); // the rest of the spec is kept
        QVERIFY(dialog.message().contains(QStringLiteral("tokens 0..191, queries 192..255")));
    }

    void refusalsDisableOkAndNameTheField()
    {
        ImportDialog dialog(defaultSpec());
        dialog.setFile(example());
        dialog.headBox()->setValue(4); // 4 heads: 0..3
        QVERIFY(!dialog.valid());
        QVERIFY(!okEnabled(dialog));
        QVERIFY2(dialog.message().contains(QStringLiteral("regime.head")), qPrintable(dialog.message()));
        QVERIFY2(dialog.message().contains(QStringLiteral("[0, 3]")), qPrintable(dialog.message()));
        dialog.headBox()->setValue(3);
        QVERIFY(dialog.valid());
        // K and V must have the same tokens... and the same file's q has the same shape, so pick V = K: valid;
        // the head dimension must agree across K, V, Q, which a malformed selection cannot break here.
        dialog.tensorBox(1)->setCurrentIndex(0);
        QVERIFY(dialog.valid());
        QCOMPARE(paramText(dialog.spec().regimeParams, "v"), std::string("k"));
    }

    void aMalformedFileIsReportedByName()
    {
        ImportDialog dialog(defaultSpec());
        dialog.setFile(QStringLiteral(KVLENS_SOURCE_DIR "/tests/data/st_offsets_overlap.safetensors"));
        QCOMPARE(dialog.table()->rowCount(), 0);
        QVERIFY(!okEnabled(dialog));
        QVERIFY2(dialog.message().contains(QStringLiteral("overlap")), qPrintable(dialog.message()));
    }

    void npyFilesOfAFolderAreTheTensors()
    {
        // A .npy holds one array: the folder's .npy files are offered, K/V/Q picked by file name.
        QTemporaryDir dir;
        for (const char* name : {"keys.npy", "values.npy", "queries.npy"})
            QVERIFY(QFile::copy(QStringLiteral(KVLENS_SOURCE_DIR "/tests/data/npy_v1_f4_c.npy"), dir.filePath(QLatin1String(name))));
        ImportDialog dialog(defaultSpec());
        dialog.setFile(dir.filePath(QStringLiteral("values.npy")));
        QCOMPARE(dialog.table()->rowCount(), 3);
        QCOMPARE(dialog.tensorBox(0)->currentText(), QStringLiteral("keys.npy"));
        QCOMPARE(dialog.tensorBox(1)->currentText(), QStringLiteral("values.npy"));
        QCOMPARE(dialog.tensorBox(2)->currentText(), QStringLiteral("queries.npy"));
        const ExperimentSpec s = dialog.spec();
        QCOMPARE(paramText(s.regimeParams, "k"), dir.filePath(QStringLiteral("keys.npy")).toStdString());
        QCOMPARE(paramText(s.regimeParams, "file"), std::string());
        // (3, 4) arrays: d = 4 is the head dimension; 3 rows leave 1 query after 2 keys.
        QVERIFY2(dialog.valid(), qPrintable(dialog.message()));
        QCOMPARE(s.d, 4);
        QCOMPARE(s.queries + s.tokens, 3);
    }
};

QTEST_MAIN(TestImportDialog)
#include "tst_import_dialog.moc"
