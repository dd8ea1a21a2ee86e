// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluator against its own past: tests/data/eval_baseline holds the files the evaluator of
// commit 5c4a7e6 wrote (one function, weights widened to float32, queries float32) for a spec of 7
// configurations with per-layer attribution; today's evaluator, in phases, with weights as stored and
// the query conversion off, must write the same numbers, column by column.
#include "core/analysis/eval_analysis.h"
#include "core/eval/eval_files.h"
#include "core/eval/evaluator.h"
#include "core/spec/eval_spec.h"

#include <QTest>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace kvlens;

namespace {

const std::string kDir = std::string(KVLENS_TEST_DATA_DIR) + "/eval_baseline";

/// The Release build of the machine that wrote the baseline reproduces it bit for bit. Another
/// compiler, optimisation level or SIMD width sums in another order: measured under Clang -O1 (the
/// ASan tree), differences reach 2.6e-3 relative on dp_mean (a mean of signed values, so relative
/// error is amplified by cancellation) and 1.6e-3 on a KLD interval's lower end. 1e-2 keeps a margin
/// and still catches what a refactor breaks (ggml's query conversion alone moves q8_0's KLD by 17 %).
constexpr double kRelative = 1e-2;

/// A CSV's data rows as column name -> cell, comment lines ('#') skipped.
struct Table {
    std::vector<std::string> header;
    std::vector<std::map<std::string, std::string>> rows;
};

std::vector<std::string> splitCells(const std::string& line)
{
    std::vector<std::string> cells;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');)
        cells.push_back(cell);
    return cells;
}

Table parseCsv(const std::string& text)
{
    Table t;
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#')
            continue;
        const auto cells = splitCells(line);
        if (t.header.empty()) {
            t.header = cells;
            continue;
        }
        std::map<std::string, std::string> row;
        for (std::size_t i = 0; i < cells.size() && i < t.header.size(); ++i)
            row[t.header[i]] = cells[i];
        t.rows.push_back(std::move(row));
    }
    return t;
}

std::string readFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool isNumber(const std::string& cell, double& value)
{
    char* end = nullptr;
    value = std::strtod(cell.c_str(), &end);
    return !cell.empty() && end == cell.c_str() + cell.size();
}

/// Every baseline column of every baseline row again in `now` (same row order). Text cells exactly;
/// numbers within `relative` of the baseline plus `absolute`: this machine's
/// kernels reproduce them bit for bit, another CPU's SIMD width sums the products in another order
/// (float32 logits move by ~1e-6 relative). Columns counting tokens (same_top1, and its error) may
/// move by one token in `tokens` when a near tie of the top two logits flips.
void compareTables(const std::string& name, const Table& baseline, const Table& now, double relative,
                   double absolute = 1e-9)
{
    QVERIFY2(!baseline.rows.empty(), name.c_str());
    QCOMPARE(now.rows.size(), baseline.rows.size());
    for (std::size_t r = 0; r < baseline.rows.size(); ++r) {
        for (const auto& [column, expected] : baseline.rows[r]) {
            const auto it = now.rows[r].find(column);
            const std::string where = name + " row " + std::to_string(r + 2) + " column " + column;
            QVERIFY2(it != now.rows[r].end(), ("missing: " + where).c_str());
            double want = 0, got = 0;
            if (!isNumber(expected, want) || !isNumber(it->second, got)) {
                QVERIFY2(it->second == expected, (where + ": " + it->second + " != " + expected).c_str());
                continue;
            }
            if (std::isnan(want)) {
                QVERIFY2(std::isnan(got), (where + " is not nan").c_str());
                continue;
            }
            double tolerance = relative * std::abs(want) + absolute;
            if (column.rfind("same_top1", 0) == 0 && baseline.rows[r].count("tokens"))
                tolerance += 1.0 / std::stod(baseline.rows[r].at("tokens"));
            QVERIFY2(std::abs(got - want) <= tolerance,
                     (where + ": " + it->second + " against the baseline's " + expected).c_str());
        }
    }
}

} // namespace

class TestEvalBaseline : public QObject {
    Q_OBJECT

private slots:
    void theEvaluatorWritesTheNumbersItWroteBeforeItsRefactor()
    {
        auto spec = loadEvalSpecFile(kDir + "/spec.json");
        QVERIFY2(spec.ok(), spec.ok() ? "" : spec.error().message.c_str());
        // The evaluator of the baseline kept queries float32; the ggml conversion is what changed since.
        spec->ggmlQueryConversion = false;
        const auto result = eval::runEval(*spec);
        QVERIFY2(result.ok(), result.ok() ? "" : result.error().message.c_str());
        QCOMPARE(result->threads, 2);
        compareTables("eval_summary.csv", parseCsv(readFile(kDir + "/eval_summary.csv")),
                      parseCsv(eval::summaryCsv(*result)), kRelative, 1e-7);
        compareTables("eval_layers.csv", parseCsv(readFile(kDir + "/eval_layers.csv")), parseCsv(eval::layersCsv(*result)),
                      kRelative, 1e-7);
        // The proxy study ranks tokens (Spearman) and resamples chunks, with eval's seed and count: on
        // another build a near tie of two tokens' values may swap ranks (measured: 2e-3 on an interval's
        // end under Clang -O1); rho is compared to 2e-2 absolute.
        const auto proxies = eval::outputProxyStudy(*result, result->spec.seed(0) + 90, 200);
        compareTables("eval_proxies.csv", parseCsv(readFile(kDir + "/eval_proxies.csv")),
                      parseCsv(eval::outputProxiesCsv(proxies)), kRelative, 2e-2);
    }
};

QTEST_APPLESS_MAIN(TestEvalBaseline)
#include "tst_eval_baseline.moc"
