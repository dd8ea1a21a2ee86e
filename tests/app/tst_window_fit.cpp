// SPDX-License-Identifier: GPL-3.0-or-later
// The window on a 1366 x 768 laptop screen (an offscreen screen of that size, see CMakeLists.txt):
// it opens inside the screen, the status bar stays in view, and visiting tabs, running and
// loading the preset with the longest scheme list never grow it.
#include "app/main_window.h"
#include "app/resources.h"
#include "core/spec/spec_json.h"
#include "widgets/control_panel.h"
#include "widgets/output_view.h"

#include <QDoubleSpinBox>
#include <QFile>
#include <QLineEdit>
#include <QListWidget>

#include <QApplication>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScreen>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QTest>

using namespace kvlens::app;

namespace {

/// A compiled-in preset, parsed (the test stops if it does not parse).
kvlens::ExperimentSpec presetSpec(const char* name)
{
    initKvlensResources();
    QFile f(QStringLiteral(":/presets/") + QLatin1String(name));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("missing preset %s", name);
    const auto spec = kvlens::specFromJson(f.readAll().toStdString());
    if (!spec)
        qFatal("preset %s: %s", name, spec.error().text().c_str());
    return *spec;
}

} // namespace

class TestWindowFit : public QObject {
    Q_OBJECT
private slots:
    void theScreenIsALaptops()
    {
        const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
        QCOMPARE(screen.size(), QSize(1366, 768));
    }

    void theWindowFitsAndNeverGrowsByItself()
    {
        initKvlensResources();
        const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
        MainWindow window(false);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        auto inside = [&](const char* when) {
            const QRect frame = window.frameGeometry();
            QVERIFY2(screen.contains(frame), qPrintable(QStringLiteral("%1: window %2x%3+%4+%5 outside the screen")
                                                          .arg(QLatin1String(when))
                                                          .arg(frame.width())
                                                          .arg(frame.height())
                                                          .arg(frame.x())
                                                          .arg(frame.y())));
            QStatusBar* bar = window.statusBar();
            QVERIFY(bar->isVisible());
            const QRect barRect(bar->mapTo(&window, QPoint(0, 0)), bar->size());
            QVERIFY2(window.rect().contains(barRect), when);
            auto* progress = bar->findChild<QProgressBar*>();
            QVERIFY(progress);
            const QRect progressRect(progress->mapTo(&window, QPoint(0, 0)), progress->size());
            QVERIFY2(window.rect().contains(progressRect) && progress->width() > 40, when);
            // Run and Cancel: outside the dock's scroll area, so inside the window means in view.
            for (const QString& text : {QStringLiteral("Run"), QStringLiteral("Cancel")}) {
                QPushButton* button = nullptr;
                for (QPushButton* b : window.findChildren<QPushButton*>())
                    if (b->text() == text && !window.outputView()->isAncestorOf(b)) // the dock's, not the Output tab's
                        button = b;
                QVERIFY2(button && button->isVisible(), qPrintable(text));
                QVERIFY2(!qobject_cast<QScrollArea*>(button->parentWidget()->parentWidget()), qPrintable(text));
                const QRect r(button->mapTo(&window, QPoint(0, 0)), button->size());
                QVERIFY2(window.rect().contains(r), qPrintable(QStringLiteral("%1: %2").arg(QLatin1String(when), text)));
            }
        };
        inside("opened");
        const QSize opened = window.size();
        // Every tab in view at once: no scrolling the tab bar to find the last views.
        {
            auto* tabWidget = window.findChild<QTabWidget*>();
            QVERIFY(tabWidget);
            QTabBar* bar = tabWidget->tabBar();
            int needed = 0;
            for (int i = 0; i < bar->count(); ++i)
                needed += bar->tabRect(i).width();
            QVERIFY2(needed <= tabWidget->width(), qPrintable(QStringLiteral("tabs need %1 px, the tab widget is %2 px wide")
                                                                   .arg(needed)
                                                                   .arg(tabWidget->width())));
        }

        // A run, then every tab visited.
        QSignalSpy done(&window, &MainWindow::runFinished);
        window.startRun();
        QVERIFY(done.wait(60000));
        auto* tabs = window.findChild<QTabWidget*>();
        QVERIFY(tabs);
        for (int i = 0; i < tabs->count(); ++i) {
            tabs->setCurrentIndex(i);
            QTest::qWait(20);
        }
        inside("after a run and every tab");
        QVERIFY2(window.width() <= opened.width() && window.height() <= opened.height(),
                 qPrintable(QStringLiteral("grew to %1x%2").arg(window.width()).arg(window.height())));
    }

    void aPresetsTickedSchemesAreInViewAndTheListFilters()
    {
        initKvlensResources();
        MainWindow window(false);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        const kvlens::ExperimentSpec loaded = presetSpec("paper_c_headq.json");
        const kvlens::ExperimentSpec* spec = &loaded;
        window.loadSpec(loaded, false);
        auto* panel = window.findChild<kvlens::widgets::ControlPanel*>();
        QVERIFY(panel);
        QListWidget* list = panel->schemeList();
        QTest::qWait(20);
        int ticked = 0, inView = 0;
        for (int row = 0; row < list->count(); ++row)
            if (list->item(row)->checkState() == Qt::Checked) {
                ++ticked;
                inView += list->viewport()->rect().intersects(list->visualItemRect(list->item(row))) ? 1 : 0;
            }
        QCOMPARE(ticked, static_cast<int>(spec->schemes.size()));
        QVERIFY2(inView >= 1, "no ticked scheme in view");
        // Filtering hides unticked schemes that do not match; ticked ones stay.
        panel->schemeFilter()->setText(QStringLiteral("TQ-"));
        for (int row = 0; row < list->count(); ++row) {
            QListWidgetItem* item = list->item(row);
            const bool keep = item->checkState() == Qt::Checked || item->text().contains(QStringLiteral("TQ-"))
                              || item->toolTip().contains(QStringLiteral("TQ-"));
            QCOMPARE(item->isHidden(), !keep);
        }
        panel->schemeFilter()->clear();
        for (int row = 0; row < list->count(); ++row)
            QVERIFY(!list->item(row)->isHidden());
    }

    void aSweptParameterReadsSweptInTheDock()
    {
        initKvlensResources();
        MainWindow window(false);
        const kvlens::ExperimentSpec loaded = presetSpec("heavy_tail_sweep.json");
        const kvlens::ExperimentSpec* spec = &loaded;
        window.loadSpec(loaded, false);
        auto* panel = window.findChild<kvlens::widgets::ControlPanel*>();
        auto* nu = qobject_cast<QDoubleSpinBox*>(panel->paramEditor(QStringLiteral("nu")));
        QVERIFY(nu);
        QVERIFY(!nu->isEnabled());
        QVERIFY(nu->suffix().contains(QStringLiteral("swept")));
        QVERIFY(nu->toolTip().contains(QStringLiteral("5, 3, 2, 1.5, 1.05")));
        // The spec read back from the dock still sweeps nu.
        QCOMPARE(panel->spec().sweep, spec->sweep);
        window.loadSpec(kvlens::defaultSpec(), false);
        for (QDoubleSpinBox* box : panel->findChildren<QDoubleSpinBox*>())
            QVERIFY2(!box->suffix().contains(QStringLiteral("swept")), qPrintable(box->objectName()));
    }

    void theEtaAndTheLastRunsNumbersGoWhenTheyNoLongerHold()
    {
        initKvlensResources();
        MainWindow window(false);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QSignalSpy done(&window, &MainWindow::runFinished);
        window.loadSpec(kvlens::defaultSpec(), true);
        QVERIFY(done.wait(60000));
        QVERIFY(!window.statusText().isEmpty()); // the finished run's numbers
        // A run long enough to show an ETA (it appears after a second and a finished trial).
        const auto slow = kvlens::specFromJson(R"({"regime": {"name": "gaussian"}, "d": 256, "tokens": 4096,
            "queries": 256, "schemes": ["KV", "KQV", "QKQV"], "budgets": [2, 3, 4], "seeds": {"count": 64}})");
        QVERIFY2(slow.ok(), slow.ok() ? "" : slow.error().text().c_str());
        window.loadSpec(*slow, true);
        // The status line no longer shows the previous run's numbers.
        QCOMPARE(window.statusText(), QString());
        QTRY_VERIFY_WITH_TIMEOUT(window.progressText().contains(QStringLiteral("ETA")), 30000);
        QVERIFY(!window.progressText().contains(QLatin1Char('\n')));
        window.cancelRun();
        QVERIFY2(!window.progressText().contains(QStringLiteral("ETA")), qPrintable(window.progressText()));
        // The worker's last reports before it notices the cancel must not bring it back.
        QVERIFY(done.wait(60000));
        QTest::qWait(200);
        QVERIFY2(!window.progressText().contains(QStringLiteral("ETA")), qPrintable(window.progressText()));
    }

    void aSavedGeometryThatNoLongerFitsIsNotRestored()
    {
        MainWindow window(false);
        window.setGeometry(0, 0, 1900, 1100); // saved on a large monitor
        QVERIFY(!window.fitsScreen());
        window.fitToScreen();
        QVERIFY(window.fitsScreen());
        QVERIFY(window.width() <= 1366 && window.height() <= 768);
    }
};

QTEST_MAIN(TestWindowFit)
#include "tst_window_fit.moc"
