// SPDX-License-Identifier: GPL-3.0-or-later
// CSV quoting and number formatting; atomic writes that never leave a partial file.
#include "core/io/atomic_file.h"
#include "core/io/csv.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace kvlens;

namespace {

std::string readAll(const std::string& path)
{
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

class TestIo : public QObject {
    Q_OBJECT
private slots:
    void csvQuotesAndFormats()
    {
        CsvWriter csv({"name", "x", "n"});
        csv.add("plain").add(0.1).add(3);
        csv.endRow();
        csv.add("a, \"quoted\" name").add(std::nan("")).add(-7LL);
        csv.endRow();
        csv.add("f").add(0.1f).add(0ULL);
        csv.endRow();
        QCOMPARE(csv.rows(), std::size_t{3});
        QCOMPARE(csv.text(), std::string("name,x,n\nplain,0.1,3\n\"a, \"\"quoted\"\" name\",nan,-7\nf,0.1,0\n"));
    }

    void numbersRoundTrip()
    {
        for (double v : {1.0 / 3.0, 6.02e23, -1e-300, 123456789.125, 0.0}) {
            const std::string s = formatNumber(v);
            QCOMPARE(std::strtod(s.c_str(), nullptr), v);
        }
        QCOMPARE(formatNumber(0.6f), std::string("0.6"));
        QCOMPARE(formatNumber(std::numeric_limits<double>::infinity()), std::string("inf"));
    }

    void atomicWriteReplaces()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("out.csv")).toStdString();
        QVERIFY(writeFileAtomic(path, "first\n").ok());
        QVERIFY(writeFileAtomic(path, "second\n").ok());
        QCOMPARE(readAll(path), std::string("second\n"));
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 1); // no temporaries left
    }

    void failedWriteLeavesTheOldIntactAndNamesThePath()
    {
        QTemporaryDir dir;
        // A directory in the way cannot be replaced by a file.
        const std::string blocked = dir.filePath(QStringLiteral("blocked")).toStdString();
        QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("blocked/inner")));
        const auto status = writeFileAtomic(blocked, "data");
        QVERIFY(!status.ok());
        QCOMPARE(status.error().field, blocked);
        QVERIFY(QFileInfo(QString::fromStdString(blocked)).isDir());
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 0);
        const auto missing = writeFileAtomic("/nonexistent-kvlens/x.csv", "data");
        QVERIFY(!missing.ok());
        QVERIFY(missing.error().text().find("/nonexistent-kvlens/x.csv") != std::string::npos);
    }

    void makeDirectoriesNamesTheDirectory()
    {
        QTemporaryDir dir;
        const std::string file = dir.filePath(QStringLiteral("file")).toStdString();
        QVERIFY(writeFileAtomic(file, "x").ok());
        const auto status = makeDirectories(file + "/sub");
        QVERIFY(!status.ok());
        QVERIFY(status.error().text().find(file) != std::string::npos);
        QVERIFY(makeDirectories(dir.filePath(QStringLiteral("a/b/c")).toStdString()).ok());
    }
};

QTEST_APPLESS_MAIN(TestIo)
#include "tst_io.moc"
