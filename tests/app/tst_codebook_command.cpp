// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens codebook`: printed centroids and MSE, and argument errors.
#include "app/commands.h"

#include <QTest>

#include <sstream>

namespace {

/// `kvlens codebook ARGS...` as main reads and runs it (the command table's row, no QApplication).
int runCodebookCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)
{
    return kvlens::app::runCommandLine("codebook", args, out, err);
}

} // namespace

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
        QTest::newRow("bits 9") << QStringList{"--bits", "9"} << "kvlens codebook: --bits: must be an integer in [1, 8], got '9'";
        QTest::newRow("bits text") << QStringList{"--bits", "x"} << "--bits: must be an integer in [1, 8], got 'x'";
        QTest::newRow("law") << QStringList{"--law", "laplace"} << "--law: must be beta or gauss, got 'laplace'";
        QTest::newRow("dim for beta") << QStringList{"--law", "beta", "--dim", "2"} << "--dim: must be in [3, 65536] for the beta law";
        QTest::newRow("missing value") << QStringList{"--dim"} << "--dim: needs a value (D)";
        QTest::newRow("unknown") << QStringList{"--levels", "4"} << "--levels: unknown option (see kvlens codebook --help)";
        QTest::newRow("given twice") << QStringList{"--bits", "2", "--bits", "3"} << "--bits: is given twice; give it once";
        QTest::newRow("stray word") << QStringList{"gauss"} << "unexpected argument 'gauss'";
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
        QCOMPARE(QString::fromStdString(err.str()).count(QLatin1Char('\n')), 1); // one line
        QVERIFY(out.str().empty());
    }
};

QTEST_APPLESS_MAIN(TestCodebookCommand)
#include "tst_codebook_command.moc"
