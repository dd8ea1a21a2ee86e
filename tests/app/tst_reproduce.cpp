// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens --reproduce`: a shrunken run writes a self-contained report with every claim, its verdict, figures and CSVs.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "common/kvlens_process.h"

namespace {

using kvlens::test::Run;
using kvlens::test::runKvlens;

QByteArray readAll(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

QList<QStringList> readCsv(const QString& path)
{
    // Enough of RFC 4180 for these files: quoted fields may hold commas and doubled quotes.
    QFile f(path);
    QList<QStringList> rows;
    if (!f.open(QIODevice::ReadOnly))
        return rows;
    const QString text = QString::fromUtf8(f.readAll());
    QStringList row;
    QString field;
    bool quoted = false;
    for (int i = 0; i < text.size(); ++i) {
        const QChar c = text[i];
        if (quoted) {
            if (c == QLatin1Char('"') && i + 1 < text.size() && text[i + 1] == QLatin1Char('"')) {
                field += c;
                ++i;
            } else if (c == QLatin1Char('"')) {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == QLatin1Char('"')) {
            quoted = true;
        } else if (c == QLatin1Char(',')) {
            row << field;
            field.clear();
        } else if (c == QLatin1Char('\n')) {
            row << field;
            field.clear();
            rows << row;
            row.clear();
        } else {
            field += c;
        }
    }
    return rows;
}

const QStringList kClaimIds = {"A1-qjl-variance",    "A2-kqv-vs-qkqv",    "A3-kl-ratio-score-scale",
                               "A4-recall-follows-kl", "A5-heavy-tails",  "A6-low-rank",
                               "A7-budget-crossover", "AB1-vpath-paper-a", "AB2-vpath-paper-b",
                               "B1-sq-vs-tq",        "B2-water-filling",  "C1-headq",
                               "C2-fisher-proxy",     "M1-kv-asymmetry",   "M2-kqv-beats-qkqv",
                               // End to end, on the shipped model's output (kvlens eval).
                               "E1-kqv-beats-qkqv-output", "E2-headq-excess-ppl", "E3-k-dominates",
                               "E4-sq-vs-tq-output", "E5-advisor-output", "E6-map-vs-output",
                               "E7-proxies-output"};

} // namespace

class TestReproduce : public QObject {
    Q_OBJECT
private slots:
    void shrunkenRunWritesTheWholeReport()
    {
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("report"));
        const Run r = runKvlens({QStringLiteral("--reproduce"), QStringLiteral("--out"), out,
                                 QStringLiteral("--reproduce-scale"), QStringLiteral("0.1"), QStringLiteral("--threads"),
                                 QStringLiteral("2"), QStringLiteral("--no-figures")},
                                {}, 540000); // about 40 s in Release; several minutes under ASan
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY(r.err.contains("reproduce [14/15] paper_c_headq:"));
        QVERIFY(r.err.contains("reproduce [15/15] repro_tiny_lm:"));

        QFile page(out + QStringLiteral("/report.html"));
        QVERIFY(page.open(QIODevice::ReadOnly));
        const QString html = QString::fromUtf8(page.readAll());
        // Self-contained: nothing fetched from elsewhere; figures are data URIs.
        QVERIFY(!html.contains(QRegularExpression(QStringLiteral("src\\s*=\\s*[\"']?(https?:)?//"))));
        QVERIFY(!html.contains(QStringLiteral("<link")));
        QVERIFY(!html.contains(QStringLiteral("<script")));
        const int images = html.count(QStringLiteral("src=\"data:image/svg+xml;base64,"));
        QVERIFY2(images >= 13, qPrintable(QString::number(images)));
        QVERIFY(!html.contains(QStringLiteral("base64,\"")));  // no empty image
        // Every claim has a section that states a verdict word.
        const QRegularExpression verdict(QStringLiteral("<b>Verdict:</b> <span class=\"verdict (ok|no|depends|untestable)\">"
                                                        "(holds|holds, larger effect than claimed|borderline|contradicted|"
                                                        "depends on setting|not testable here)</span>"));
        for (const QString& id : kClaimIds) {
            const int at = html.indexOf(QStringLiteral("<section class=\"claim\" id=\"%1\">").arg(id));
            QVERIFY2(at >= 0, qPrintable(id));
            const int end = html.indexOf(QStringLiteral("</section>"), at);
            QVERIFY2(verdict.match(html.mid(at, end - at)).hasMatch(), qPrintable(id));
        }

        // Long tables fold under their claim (closed), short ones start open; the summary stays unfolded.
        const QRegularExpression folded(QStringLiteral("<details><summary>Checks \\((\\d+) rows\\)</summary>"));
        const QRegularExpressionMatch longChecks = folded.match(html);
        QVERIFY(longChecks.hasMatch());
        QVERIFY(longChecks.captured(1).toInt() > 12);
        QVERIFY(html.contains(QStringLiteral("<details open><summary>Checks (")));
        QVERIFY(html.indexOf(QStringLiteral("<details")) > html.indexOf(QStringLiteral("<h2>Summary</h2>")));
        QVERIFY(html.indexOf(QStringLiteral("<details")) > html.indexOf(QStringLiteral("<section class=\"claim\"")));
        QVERIFY(html.contains(QStringLiteral("@media print{")));
        QVERIFY(!html.contains(QRegularExpression(QStringLiteral("\\d\\.\\de-[0-9]{4}")))); // no "5.9e-1337"
        // Symbols are typeset in the prose, never a literal caret; identifiers keep their underscores.
        QVERIFY(html.contains(QStringLiteral("ε<sub>dir</sub><sup>K</sup>")));
        QVERIFY(!html.contains(QStringLiteral("ε_dir^K")));
        QVERIFY(html.contains(QStringLiteral("rel_mse_t")));

        // The end-to-end evaluations are written as kvlens eval writes them, with the advice.
        for (const char* f : {"/model_output/claims/eval_summary.csv", "/model_output/attribution/eval_layers.csv",
                              "/model_output/advice/eval_summary.csv", "/model_output/allocation.json",
                              "/model_output/output_proxies.csv"})
            QVERIFY2(QFile::exists(out + QLatin1String(f)), f);
        QVERIFY(!QDir(out + QStringLiteral("/model_output/claims/figures")).exists()); // --no-figures: none of eval's either
        QVERIFY(readAll(out + QStringLiteral("/model_output/allocation.json")).contains("\"loss\": \"kld_end_to_end\""));

        // claims.csv: one row per claim, and each verdict is the rule applied to its checks in checks.csv.
        const auto claimRows = readCsv(out + QStringLiteral("/claims.csv"));
        QCOMPARE(claimRows.size(), 1 + kClaimIds.size());
        const QStringList header = claimRows.first();
        const int idCol = header.indexOf(QStringLiteral("id")), verdictCol = header.indexOf(QStringLiteral("verdict"));
        const int checksCol = header.indexOf(QStringLiteral("checks")), holdingCol = header.indexOf(QStringLiteral("holding"));
        QVERIFY(idCol >= 0 && verdictCol >= 0 && checksCol >= 0 && holdingCol >= 0);
        const auto checkRows = readCsv(out + QStringLiteral("/checks.csv"));
        QVERIFY(checkRows.size() > kClaimIds.size());
        const int outcomeCol = checkRows.first().indexOf(QStringLiteral("outcome"));
        QVERIFY(outcomeCol >= 0);
        for (const QStringList& row : claimRows.mid(1)) {
            int total = 0, holds = 0, larger = 0, borderline = 0, contradicted = 0;
            for (const QStringList& check : checkRows.mid(1))
                if (check[0] == row[idCol]) {
                    ++total;
                    holds += check[3] == QStringLiteral("yes") ? 1 : 0;
                    const QString o = check[outcomeCol];
                    larger += o == QStringLiteral("holds, larger effect than claimed");
                    borderline += o == QStringLiteral("borderline");
                    contradicted += o == QStringLiteral("contradicted");
                    QCOMPARE(check[3] == QStringLiteral("yes"),
                             o == QStringLiteral("holds") || o == QStringLiteral("holds, larger effect than claimed"));
                }
            QCOMPARE(row[checksCol].toInt(), total);
            QCOMPARE(row[holdingCol].toInt(), holds);
            // The verdict is the rule of core/report applied to the checks' outcomes.
            const int testable = holds + borderline + contradicted;
            const QString expected = testable == 0 ? QStringLiteral("not testable here")
                                     : contradicted == 0 && borderline == 0
                                         ? (larger == testable ? QStringLiteral("holds, larger effect than claimed")
                                                               : QStringLiteral("holds"))
                                     : contradicted == 0 ? QStringLiteral("borderline")
                                     : holds + borderline == 0 ? QStringLiteral("contradicted")
                                                               : QStringLiteral("depends on setting");
            QCOMPARE(row[verdictCol], expected);
        }

        // Claim figures as PDF, SVG and CSV; each preset's run files as --batch writes them.
        for (const char* figure : {"a1_variance_ratio", "a3_kl_ratio_vs_score_scale", "a5_eps_dir_vs_nu",
                                   "a6_marginal_histograms", "a7_crossover", "ab1_vpath_output_error_ratio",
                                   "b2_water_filling_ratio", "c1_headq_kl", "c2_proxy_rho", "e7_proxy_rho"})
            for (const char* ext : {".pdf", ".svg", ".csv"}) {
                const QString path = out + QStringLiteral("/figures/") + QLatin1String(figure) + QLatin1String(ext);
                QVERIFY2(QFileInfo(path).size() > 100, qPrintable(path));
            }
        for (const char* preset : {"paper_a", "repro_score_scale", "heavy_tail_sweep", "low_rank_d1024",
                                   "paper_b_low_rank", "paper_c_headq"})
            for (const char* file : {"summary.csv", "queries.csv", "comparisons.csv", "spec.json", "tables.txt"}) {
                const QString path = out + QStringLiteral("/presets/") + QLatin1String(preset) + QLatin1Char('/') +
                                     QLatin1String(file);
                QVERIFY2(QFileInfo(path).size() > 0, qPrintable(path));
            }
        // The shrunken sizes really ran: two seeds of 16 queries, d capped at 256.
        QFile spec(out + QStringLiteral("/presets/low_rank_d1024/spec.json"));
        QVERIFY(spec.open(QIODevice::ReadOnly));
        const QByteArray json = spec.readAll();
        QVERIFY(json.contains("\"d\": 256"));
        QVERIFY(json.contains("\"queries\": 16"));
        // The terminal summary lists every claim with its verdict.
        for (const QString& id : kClaimIds)
            QVERIFY2(r.out.contains(id.toUtf8()), qPrintable(id));
    }

    void badOptionsWriteNothing_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QByteArray>("message");
        QTest::newRow("no --out") << QStringList{QStringLiteral("--reproduce")} << QByteArray("kvlens: --out DIR is required");
        QTest::newRow("scale 0") << QStringList{QStringLiteral("--reproduce"), QStringLiteral("--reproduce-scale"),
                                                QStringLiteral("0"), QStringLiteral("--out")}
                                 << QByteArray("kvlens: --reproduce-scale: must be a number in (0, 1], got '0'");
        QTest::newRow("scale not a number")
            << QStringList{QStringLiteral("--reproduce"), QStringLiteral("--reproduce-scale"), QStringLiteral("x"),
                           QStringLiteral("--out")}
            << QByteArray("kvlens: --reproduce-scale: must be a number in (0, 1], got 'x'");
    }
    void badOptionsWriteNothing()
    {
        QFETCH(QStringList, args);
        QFETCH(QByteArray, message);
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("report"));
        if (args.last() == QStringLiteral("--out"))
            args << out;
        const Run r = runKvlens(args, {}, 30000);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(message), r.err.constData());
        QVERIFY(!QDir(out).exists());
    }
};

QTEST_MAIN(TestReproduce)
#include "tst_reproduce.moc"
