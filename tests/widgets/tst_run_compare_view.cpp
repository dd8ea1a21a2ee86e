// SPDX-License-Identifier: GPL-3.0-or-later
// The run comparison's forest plot: what it draws, on which scale, and that it prints legibly at both widths.
#include "widgets/figure_export.h"
#include "widgets/plot_widget.h"
#include "widgets/run_compare_view.h"

#include <QTest>

#include <cmath>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

RunCompareRow row(const std::string& scheme, int budget, const std::string& metric, double a, double b, double logRatio,
                  RunRowStatus status = RunRowStatus::Tested, double p = 0.0078125)
{
    RunCompareRow r;
    r.scheme = scheme;
    r.budget = budget;
    r.metric = metric;
    r.status = status;
    r.paired = true;
    r.units = r.unitsA = r.unitsB = 8;
    r.meanA = a;
    r.meanB = b;
    r.difference = b - a;
    r.diffLow = r.difference - 0.5 * std::abs(r.difference);
    r.diffHigh = r.difference + 0.5 * std::abs(r.difference);
    r.hasLogRatio = true;
    r.logRatio = logRatio;
    r.logLow = logRatio - 0.2;
    r.logHigh = logRatio + 0.2;
    r.test = status == RunRowStatus::Tested ? "wilcoxon-seeds" : "";
    r.p = stats::PValue{p, std::log(p)};
    r.pHolm = r.p;
    return r;
}

/// Mean KL over three decades of budgets, as a real comparison has: B twice A at n = 2, the same at n = 3.
std::shared_ptr<const RunComparison> makeComparison()
{
    auto c = std::make_shared<RunComparison>();
    c->dirA = "runs/base/";
    c->dirB = "runs/wider_scores";
    c->rows = {row("KV", 2, "kl_mean", 0.1, 0.2, std::log(2.0)), row("KV", 3, "kl_mean", 0.01, 0.011, std::log(1.1), RunRowStatus::Tested, 0.3),
               row("KV", 4, "kl_mean", 0.001, 0.001, 0.0, RunRowStatus::Identical),
               row("QKQV", 2, "kl_mean", 0.3, 0.9, std::log(3.0)), row("QKQV", 3, "kl_mean", 0.05, 0.04, std::log(0.8)),
               row("QKQV", 4, "kl_mean", 0.004, 0.002, std::log(0.5)), row("KV", 2, "snr_k", 10.0, 9.0, 0.0)};
    c->rows.back().hasLogRatio = false;
    RunCompareRow only;
    only.scheme = "KQV";
    only.budget = 2;
    only.status = RunRowStatus::OnlyInB;
    c->rows.push_back(only);
    c->sharedConfigurations = 6;
    c->onlyB = 1;
    return c;
}

} // namespace

class TestRunCompareView : public QObject {
    Q_OBJECT

private slots:
    void drawsRatiosOnALogAxisAndNamesTheRest()
    {
        RunCompareView view;
        view.resize(900, 650);
        view.setComparison(makeComparison());
        QCOMPARE(view.rowCount(), 6);
        QVERIFY(view.plot()->xAxis->scaleType() == QCPAxis::stLogarithmic);
        // Significant (4: p = 0.0078), not significant (1), identical (1).
        QCOMPARE(view.seriesCount(), 3);
        const QString notes = view.plot()->footnotes().join(QLatin1Char('\n'));
        QVERIFY2(notes.contains(QStringLiteral("A: base, B: wider_scores")), qPrintable(notes));
        QVERIFY2(notes.contains(QStringLiteral("KQV n=2 (B)")), qPrintable(notes));
        // Every interval and the line at 1 inside the x range.
        const QCPRange x = view.plot()->xAxis->range();
        QVERIFY(x.lower < 0.8 * std::exp(-0.2) && x.upper > 3.0 * std::exp(0.2));
        // SNRs in dB: differences on a linear axis.
        QVERIFY(view.setMetric(QStringLiteral("snr_k")));
        QCOMPARE(view.rowCount(), 1);
        QVERIFY(view.plot()->xAxis->scaleType() == QCPAxis::stLinear);
        QVERIFY(view.plot()->xAxis->range().contains(0.0));
        QVERIFY(view.plot()->xAxis->range().contains(-1.5));
    }

    void printsLegibly_data()
    {
        QTest::addColumn<double>("inches");
        QTest::newRow("3.5 in") << 3.5;
        QTest::newRow("7 in") << 7.0;
    }
    void printsLegibly()
    {
        QFETCH(double, inches);
        RunCompareView view;
        view.resize(900, 650);
        view.setComparison(makeComparison());
        ExportOptions options;
        options.widthInches = inches;
        const PrintCheck check = checkPrint(view, options);
        QVERIFY(!check.texts.empty());
        QVERIFY(check.smallest >= kMinimumPrintPoints - 1e-6);
        QVERIFY2(check.overlaps.isEmpty(), qPrintable(check.overlaps.join(QStringLiteral("; "))));
        QVERIFY2(check.collisions.isEmpty(), qPrintable(check.collisions.join(QStringLiteral("; "))));
    }
};

QTEST_MAIN(TestRunCompareView)
#include "tst_run_compare_view.moc"
