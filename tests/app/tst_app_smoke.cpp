// SPDX-License-Identifier: GPL-3.0-or-later
// The kvlens executable: starts and exits cleanly offscreen, prints a codebook without a display.
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>

class TestAppSmoke : public QObject {
    Q_OBJECT
private slots:
    void startsAndQuitsOffscreen()
    {
        // The window saves its settings on close: keep them out of the user's configuration.
        QTemporaryDir config;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), config.path());
        QProcess p;
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(KVLENS_EXE), {QStringLiteral("-platform"), QStringLiteral("offscreen"),
                                             QStringLiteral("--quit-after"), QStringLiteral("300")});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 0);
    }

    void codebookNeedsNoDisplay()
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.remove(QStringLiteral("DISPLAY"));
        env.remove(QStringLiteral("QT_QPA_PLATFORM"));
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(KVLENS_EXE), {QStringLiteral("codebook"), QStringLiteral("--law"), QStringLiteral("gauss"),
                                             QStringLiteral("--bits"), QStringLiteral("2")});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 0);
        const QByteArray out = p.readAllStandardOutput();
        QVERIFY2(out.contains("-1.5104 -0.4528 0.4528 1.5104"), out.constData());
        QVERIFY2(out.contains("mse: 0.1175"), out.constData());
    }

    void helpDescribesTheCodebookCommand()
    {
        QProcess p;
        p.start(QStringLiteral(KVLENS_EXE), {QStringLiteral("--help"), QStringLiteral("-platform"),
                                             QStringLiteral("offscreen")});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY(p.readAllStandardOutput().contains("kvlens codebook"));
    }
};

QTEST_GUILESS_MAIN(TestAppSmoke)
#include "tst_app_smoke.moc"
