// SPDX-License-Identifier: GPL-3.0-or-later
// The window on a 1920 x 1080 screen (an offscreen screen of that size, see CMakeLists.txt): it uses
// the room (it used to open at 1280 x 820 whatever the screen), stays inside it, and every tab is
// one --view names.
#include "app/main_window.h"
#include "app/resources.h"
#include "widgets/views.h"

#include <QGuiApplication>
#include <QScreen>
#include <QTest>

using namespace kvlens::app;

class TestWindowLargeScreen : public QObject {
    Q_OBJECT
private slots:
    void theWindowUsesALargeScreen();
    void everyTabIsAViewId();
};

void TestWindowLargeScreen::theWindowUsesALargeScreen()
{
    initKvlensResources();
    const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
    QCOMPARE(screen.size(), QSize(1920, 1080));
    MainWindow window(false);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    // 85 % of each side (1632 x 918), inside the screen with its frame.
    QCOMPARE(window.width(), 1632);
    QCOMPARE(window.height(), 918);
    QVERIFY(screen.contains(window.frameGeometry()));
}

void TestWindowLargeScreen::everyTabIsAViewId()
{
    initKvlensResources();
    MainWindow window(false);
    QStringList ids;
    for (const kvlens::widgets::ResultView* v : window.views())
        ids << v->viewId();
    // Every tab but Output (a model run, not a ResultView) is a view; --view names each tab.
    QStringList expected = kvlens::widgets::viewIds();
    QVERIFY(expected.removeOne(QStringLiteral("output")));
    QCOMPARE(ids, expected);
    for (const QString& id : kvlens::widgets::viewIds())
        QVERIFY2(window.showView(id), qPrintable(id));
    QVERIFY(!window.showView(QStringLiteral("no_such_view")));
}

QTEST_MAIN(TestWindowLargeScreen)
#include "tst_window_large_screen.moc"
