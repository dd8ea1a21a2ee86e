// SPDX-License-Identifier: GPL-3.0-or-later
// Every number the named schemes produced before the one-codec-path refactor, reproduced after it:
// tests/data/codec_baseline holds the summaries and trials of 24 schemes on three regimes (d 128,
// N 512, Q 32, n 2-4, seeds 1-2) written by the code before; this reruns the specs and compares every
// numeric column, relative tolerance 1e-5, absolute 1e-7 near zero. Unit of replication: the trial.
// On the machine that wrote the baseline the numbers matched bit for bit (max relative difference 0).
// The build uses -march=native, and on a CPU without AVX-512 Eigen's float reductions run in another
// order: there 180 of the values differ by more than 1e-5 relative, all of them near zero (the
// FP16 scheme's phi_t of 3e-4 to 8e-4 rad, SpectralQuant's mean score errors of 3e-4 to 7e-4, a
// V-only KL maximum of 4e-8), none by more than 1.5e-8 absolute. The 1e-7 floor, below float's
// resolution of a value of order one, keeps a 7x margin over that and still catches any change
// of a scheme's arithmetic, which moves these numbers by orders of magnitude more.
#include "core/analysis/result_tables.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"

#include <QTest>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

using namespace kvlens;

namespace {

using Row = std::map<std::string, std::string>;

std::vector<std::string> splitCsvLine(const std::string& line)
{
    std::vector<std::string> out;
    std::string cell;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
                cell += '"', ++i;
            else if (c == '"')
                quoted = false;
            else
                cell += c;
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            out.push_back(cell);
            cell.clear();
        } else {
            cell += c;
        }
    }
    out.push_back(cell);
    return out;
}

std::vector<Row> parseCsv(const std::string& text)
{
    std::istringstream in(text);
    std::string line;
    std::vector<std::string> header;
    std::vector<Row> rows;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#')
            continue;
        const auto cells = splitCsvLine(line);
        if (header.empty()) {
            header = cells;
            continue;
        }
        Row r;
        for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i)
            r[header[i]] = cells[i];
        rows.push_back(std::move(r));
    }
    return rows;
}

std::string readText(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        qFatal("cannot open %s", path.c_str());
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string keyOf(const Row& r, const std::vector<std::string>& columns)
{
    std::string k;
    for (const auto& c : columns)
        k += (r.count(c) ? r.at(c) : std::string("?")) + "|";
    return k;
}

} // namespace

class TestCodecBaseline : public QObject {
    Q_OBJECT

private slots:
    void namedSchemesReproduceTheirNumbers_data()
    {
        QTest::addColumn<QString>("regime");
        for (const char* r : {"gaussian", "heavy_tail", "outlier_channels"})
            QTest::newRow(r) << QString(r);
    }
    void namedSchemesReproduceTheirNumbers()
    {
        QFETCH(QString, regime);
        const std::string dir = std::string(KVLENS_TEST_DATA_DIR) + "/codec_baseline/" + regime.toStdString();
        auto spec = specFromJson(readText(dir + ".json"));
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().text().c_str());
        QCOMPARE(spec->schemes.size(), std::size_t{24});
        CpuBackend cpu(2);
        auto run = runExperiment(*spec, cpu);
        QVERIFY2(run.ok(), run.ok() ? "" : run.error().text().c_str());
        int values = 0;
        for (const auto& [table, keyColumns] :
             {std::pair<std::string, std::vector<std::string>>{"summary", {"point", "scheme", "budget"}},
              {"trials", {"point", "scheme", "budget", "seed"}}}) {
            const std::vector<Row> before = parseCsv(readText(dir + "_" + table + ".csv"));
            const std::vector<Row> after = parseCsv(table == "summary" ? summaryCsv(*run) : trialsCsv(*run));
            QCOMPARE(after.size(), before.size());
            std::map<std::string, const Row*> byKey;
            for (const Row& r : after)
                byKey[keyOf(r, keyColumns)] = &r;
            for (const Row& b : before) {
                const auto it = byKey.find(keyOf(b, keyColumns));
                QVERIFY2(it != byKey.end(), qPrintable(QString::fromStdString(table + ": no row " + keyOf(b, keyColumns))));
                for (const auto& [column, text] : b) {
                    const auto a = it->second->find(column);
                    QVERIFY2(a != it->second->end(), qPrintable(QString::fromStdString(table + ": no column " + column)));
                    char* end = nullptr;
                    const double x = std::strtod(text.c_str(), &end);
                    if (end == text.c_str() || *end != '\0') { // a word: equal text
                        QCOMPARE(QString::fromStdString(a->second), QString::fromStdString(text));
                        continue;
                    }
                    const double y = std::strtod(a->second.c_str(), nullptr);
                    if (std::isnan(x) && std::isnan(y))
                        continue;
                    const double tolerance = std::max(1e-7, 1e-5 * std::max(std::abs(x), std::abs(y)));
                    QVERIFY2(std::abs(x - y) <= tolerance,
                             qPrintable(QString::fromStdString(table + " " + keyOf(b, keyColumns) + " " + column + ": before "
                                                               + text + ", after " + a->second)));
                    ++values;
                }
            }
        }
        QVERIFY(values > 4000);
    }
};

QTEST_GUILESS_MAIN(TestCodecBaseline)
#include "tst_codec_baseline.moc"
