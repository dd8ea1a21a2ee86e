// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens codebook`: printed centroids and MSE, and argument errors.
#include "app/codebook_command.h"

#include <QTest>

#include <sstream>

using kvlens::app::runCodebookCommand;

class TestCodebookCommand : public QObject {
    Q_OBJECT
private slots:
    void gaussTwoBitsPrintsMaxValues()
    {
        std::ostringstream out, err;
        QCOMPARE(runCodebookCommand({"--law", "gauss", "--bits", "2"}, out, err), 0);
        const QString text = QString::fromStdString(out.str());
        // Max (1960): 2-bit Gaussian levels +-0.4528, +-1.5104, MSE 0.1175.
        QVERIFY2(text.contains(QStringLiteral("centroids: -1.5104 -0.4528 0.4528 1.5104")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("mse: 0.1175 per unit variance")), qPrintable(text));
        QVERIFY(err.str().empty());
    }

    void betaPrintsScaledMse()
    {
        std::ostringstream out, err;
        QCOMPARE(runCodebookCommand({"--law", "beta", "--dim", "128", "--bits", "3"}, out, err), 0);
        const QString text = QString::fromStdString(out.str());
        QVERIFY2(text.contains(QStringLiteral("dim * mse = 0.033966")), qPrintable(text));
        QVERIFY(text.contains(QStringLiteral("8 levels")));
    }

    void csvHasOneRowPerLevel()
    {
        std::ostringstream out, err;
        QCOMPARE(runCodebookCommand({"--law", "gauss", "--bits", "3", "--csv"}, out, err), 0);
        const QStringList lines = QString::fromStdString(out.str()).trimmed().split('\n');
        QCOMPARE(lines.size(), 9);
        QCOMPARE(lines.first(), QStringLiteral("index,level,lower,upper"));
        QVERIFY(lines.at(1).startsWith(QStringLiteral("0,-2.15")));
    }

    void badArgumentsNameTheOption_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("mention");
        QTest::newRow("bits 9") << QStringList{"--bits", "9"} << "--bits must be an integer in [1, 8]";
        QTest::newRow("bits text") << QStringList{"--bits", "x"} << "--bits";
        QTest::newRow("law") << QStringList{"--law", "laplace"} << "--law must be beta or gauss";
        QTest::newRow("dim for beta") << QStringList{"--law", "beta", "--dim", "2"} << "[3, 65536]";
        QTest::newRow("missing value") << QStringList{"--dim"} << "--dim needs";
        QTest::newRow("unknown") << QStringList{"--levels", "4"} << "unknown option '--levels'";
    }
    void badArgumentsNameTheOption()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, mention);
        std::vector<std::string> words;
        for (const auto& a : args)
            words.push_back(a.toStdString());
        std::ostringstream out, err;
        QCOMPARE(runCodebookCommand(words, out, err), 2);
        QVERIFY2(QString::fromStdString(err.str()).contains(mention), err.str().c_str());
        QVERIFY(out.str().empty());
    }
};

QTEST_APPLESS_MAIN(TestCodebookCommand)
#include "tst_codebook_command.moc"
