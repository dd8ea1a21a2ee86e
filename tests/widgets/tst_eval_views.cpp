// SPDX-License-Identifier: GPL-3.0-or-later
// The figures of kvlens eval on a hand-made EvalResult: the plotted quantiles, bars, intervals and
// running means against values worked out by hand, zeros on the log axes, pages, and the export.
#include "common/approx.h"
#include "widgets/eval_views.h"

#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

constexpr int kChunks = 3, kPerChunk = 20, kLayers = 3;

/// Two configurations over 3 chunks x 20 scored tokens and 3 layers:
///  0 "exact" (fixed width): every KLD 0, every attribution row 0;
///  1 "TQ-KV" n = 3: token i has KLD 0.01 i (i = 0..59, so one exact 0); layer l, path p (K, V,
///    both = 0, 1, 2) has mean 0.1 (l + 1) + 0.01 p, SE 0.02, interval mean +- 0.0392.
eval::EvalResult makeResult(bool attribution = true)
{
    eval::EvalResult r;
    r.layers = kLayers;
    r.kvHeads = 2;
    r.headDim = 32;
    r.vocab = 256;
    r.chunksScored = kChunks;
    for (int c = 0; c < kChunks; ++c)
        for (int p = 0; p < kPerChunk; ++p)
            r.scored.push_back({c, 20 + p, 65, 66});
    const int n = kChunks * kPerChunk;
    eval::ConfigurationResult exact;
    exact.name = "exact";
    exact.budget = 0;
    exact.tokens.resize(static_cast<std::size_t>(n));
    eval::ConfigurationResult tq;
    tq.scheme = 1;
    tq.name = "TQ-KV";
    tq.budget = 3;
    for (int i = 0; i < n; ++i) {
        lm::TokenStat t;
        t.kld = 0.01 * i;
        tq.tokens.push_back(t);
    }
    r.configurations = {exact, tq};
    if (attribution)
        for (int c = 0; c < 2; ++c)
            for (int l = 0; l < kLayers; ++l) {
                int p = 0;
                for (eval::AttributionPath path : {eval::AttributionPath::K, eval::AttributionPath::V, eval::AttributionPath::Both}) {
                    eval::AttributionRow a;
                    a.configuration = c;
                    a.layer = l;
                    a.path = path;
                    if (c == 1) {
                        a.kld.mean = 0.1 * (l + 1) + 0.01 * p;
                        a.kld.error = 0.02;
                        a.kldLow = a.kld.mean - 0.0392;
                        a.kldHigh = a.kld.mean + 0.0392;
                    }
                    r.attribution.push_back(a);
                    ++p;
                }
            }
    return r;
}

template <typename T>
T* findPlottable(PlotWidget* plot, const QString& name = QString())
{
    for (int i = 0; i < plot->plottableCount(); ++i)
        if (auto* p = qobject_cast<T*>(plot->plottable(i)); p && (name.isEmpty() || p->name() == name))
            return p;
    return nullptr;
}

QCPErrorBars* errorsOf(PlotWidget* plot, QCPAbstractPlottable* data)
{
    for (int i = 0; i < plot->plottableCount(); ++i)
        if (auto* e = qobject_cast<QCPErrorBars*>(plot->plottable(i)); e && e->dataPlottable() == data)
            return e;
    return nullptr;
}

} // namespace

class TestEvalViews : public QObject {
    Q_OBJECT

private slots:
    void quantilesInterpolateTheSortedValues()
    {
        // n = 60 values 0, 0.01, ..., 0.59: the value at fraction f sits at position 59 f.
        const KldQuantiles q = kldQuantiles(makeResult().configurations[1].tokens);
        QCOMPARE(q.count, 60);
        QCOMPARE(q.zeros, 1);
        KVLENS_COMPARE_ABS(q.p5, 0.0295, 1e-12);   // position 2.95
        KVLENS_COMPARE_ABS(q.p25, 0.1475, 1e-12);  // 14.75
        KVLENS_COMPARE_ABS(q.median, 0.295, 1e-12); // 29.5
        KVLENS_COMPARE_ABS(q.p75, 0.4425, 1e-12);  // 44.25
        KVLENS_COMPARE_ABS(q.p95, 0.5605, 1e-12);  // 56.05
        KVLENS_COMPARE_ABS(q.p99, 0.5841, 1e-12);  // 58.41
        KVLENS_COMPARE_ABS(q.maximum, 0.59, 1e-12);
        KVLENS_COMPARE_ABS(q.mean, 0.295, 1e-12);  // 0.01 x 59 / 2
    }

    void kldBoxesAreTheQuantilesAndZerosSitOnTheFloor()
    {
        EvalKldView view;
        view.resize(900, 650);
        view.setEvalResult(std::make_shared<const eval::EvalResult>(makeResult()));
        QVERIFY(view.noFigureReason().isEmpty());
        // The smallest positive statistic is TQ-KV's p5 (0.0295): the floor is a decade under its decade.
        KVLENS_COMPARE_REL(view.axisFloor(), 1e-3, 1e-12);
        auto* box = findPlottable<QCPStatisticalBox>(view.plot());
        QVERIFY(box);
        QCOMPARE(box->dataCount(), 2);
        const QCPStatisticalBoxData exact = *box->data()->at(0);
        for (double v : {exact.minimum, exact.lowerQuartile, exact.median, exact.upperQuartile, exact.maximum})
            KVLENS_COMPARE_REL(v, 1e-3, 1e-12); // every KLD 0: drawn at the floor
        const QCPStatisticalBoxData tq = *box->data()->at(1);
        KVLENS_COMPARE_ABS(tq.minimum, 0.0295, 1e-12);
        KVLENS_COMPARE_ABS(tq.lowerQuartile, 0.1475, 1e-12);
        KVLENS_COMPARE_ABS(tq.median, 0.295, 1e-12);
        KVLENS_COMPARE_ABS(tq.upperQuartile, 0.4425, 1e-12);
        KVLENS_COMPARE_ABS(tq.maximum, 0.5605, 1e-12);
        auto* worst = findPlottable<QCPGraph>(view.plot(), QStringLiteral("worst token"));
        auto* p99 = findPlottable<QCPGraph>(view.plot(), QStringLiteral("p99"));
        QVERIFY(worst && p99);
        KVLENS_COMPARE_ABS(worst->data()->at(1)->value, 0.59, 1e-12);
        KVLENS_COMPARE_ABS(p99->data()->at(1)->value, 0.5841, 1e-12);
        // The floor is inside the axis, and the figure says what it means.
        QVERIFY(view.plot()->xAxis->range().lower < 1e-3);
        const QString notes = view.plot()->footnotes().join(QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' '));
        QVERIFY2(notes.contains(QStringLiteral("KLD = 0 drawn at the axis floor 10^-3")), qPrintable(notes));
        QVERIFY2(notes.contains(QStringLiteral("exact (every token)")), qPrintable(notes));
        QVERIFY2(notes.contains(QStringLiteral("TQ-KV n=3 (1.7%)")), qPrintable(notes)); // 1 of 60
        // The CSV holds the values unclamped.
        QVERIFY2(view.dataCsv().contains(QStringLiteral("\nexact,exact,fixed,1,60,60,0,0,0,0,0,0,0,0\n")), qPrintable(view.dataCsv()));
        QVERIFY2(view.dataCsv().contains(QStringLiteral("\nTQ-KV n=3,TQ-KV,3,1,60,1,0.0295,0.1475,0.295,0.4425,0.5605,0.5841,0.59,0.295")),
                 qPrintable(view.dataCsv()));
    }

    void layerBarsAndIntervalsAreTheAttributionRows()
    {
        EvalLayersView view;
        view.resize(900, 650);
        view.setEvalResult(std::make_shared<const eval::EvalResult>(makeResult()));
        QCOMPARE(view.panelCount(), 1); // "exact" costs 0 at every layer: named, not drawn
        QVERIFY(view.plot()->footnotes().join(QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' ')).contains(QStringLiteral("0 exactly: exact")));
        int p = 0;
        for (const char* name : {"K only", "V only", "K and V"}) {
            auto* bars = findPlottable<QCPBars>(view.plot(), QString::fromLatin1(name));
            QVERIFY2(bars, name);
            QCOMPARE(bars->dataCount(), kLayers);
            QCPErrorBars* errors = errorsOf(view.plot(), bars);
            QVERIFY(errors);
            for (int l = 0; l < kLayers; ++l) {
                const double mean = 0.1 * (l + 1) + 0.01 * p;
                QCOMPARE(bars->data()->at(l)->key, double(l));
                KVLENS_COMPARE_ABS(bars->data()->at(l)->value, mean, 1e-12);
                const QCPErrorBarsData e = errors->data()->at(l);
                // The whiskers end at kldLow and kldHigh.
                KVLENS_COMPARE_ABS(mean - e.errorMinus, mean - 0.0392, 1e-12);
                KVLENS_COMPARE_ABS(mean + e.errorPlus, mean + 0.0392, 1e-12);
            }
            ++p;
        }
        QVERIFY2(view.dataCsv().contains(QStringLiteral("\nTQ-KV n=3,TQ-KV,3,1,2,both,0.32,0.2808,0.3592\n")), qPrintable(view.dataCsv()));
    }

    void noAttributionMeansNoLayerFigure()
    {
        EvalLayersView view;
        view.setEvalResult(std::make_shared<const eval::EvalResult>(makeResult(false)));
        QCOMPARE(view.panelCount(), 0);
        QVERIFY(view.noFigureReason().contains(QStringLiteral("--attribution none")));
    }

    void textRunningMeanStaysInsideEachChunk()
    {
        const std::vector<double> v{1, 2, 3, 10, 20};
        const std::vector<int> g{0, 0, 0, 1, 1};
        const std::vector<double> m = runningMean(v, g, 3);
        const std::vector<double> expected{1.5, 2.0, 2.5, 15.0, 15.0};
        for (std::size_t i = 0; i < v.size(); ++i)
            KVLENS_COMPARE_ABS(m[i], expected[i], 1e-12);

        EvalTextView view;
        view.resize(900, 650);
        view.setEvalResult(std::make_shared<const eval::EvalResult>(makeResult()));
        QCOMPARE(view.window(), 3); // 20 tokens a chunk: a tenth, made odd
        // Positive values 0.01 .. 0.59: their 1st percentile 0.01 + 0.58 x 0.01 lies in [0.01, 0.1).
        KVLENS_COMPARE_REL(view.axisFloor(), 0.01, 1e-12);
        auto* line = findPlottable<QCPGraph>(view.plot(), QStringLiteral("TQ-KV n=3"));
        auto* dots = findPlottable<QCPGraph>(view.plot(), QStringLiteral("TQ-KV n=3 per token"));
        QVERIFY(line && dots);
        QCOMPARE(dots->dataCount(), kChunks * kPerChunk);
        KVLENS_COMPARE_REL(dots->data()->at(0)->value, 0.01, 1e-12); // KLD 0 drawn at the floor
        KVLENS_COMPARE_ABS(dots->data()->at(7)->value, 0.07, 1e-12);
        auto lineAt = [&](double key) {
            for (auto it = line->data()->constBegin(); it != line->data()->constEnd(); ++it)
                if (it->key == key)
                    return it->value;
            return -1.0;
        };
        KVLENS_COMPARE_ABS(lineAt(5), 0.05, 1e-12);    // (0.04 + 0.05 + 0.06) / 3
        KVLENS_COMPARE_ABS(lineAt(19), 0.185, 1e-12);  // the chunk's last: (0.18 + 0.19) / 2
        KVLENS_COMPARE_ABS(lineAt(20), 0.205, 1e-12);  // the next chunk's first: (0.20 + 0.21) / 2
        QVERIFY(std::isnan(lineAt(19.5)));             // the line breaks between chunks
        QVERIFY(!findPlottable<QCPGraph>(view.plot(), QStringLiteral("exact")));
        const QString notes = view.plot()->footnotes().join(QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' '));
        QVERIFY2(notes.contains(QStringLiteral("1 of 60 values below 10^-2")), qPrintable(notes));
        QVERIFY2(notes.contains(QStringLiteral("KLD 0 at every token: exact")), qPrintable(notes));
    }

    void pagesGroupByBudgetWhenTooMany()
    {
        eval::EvalResult r = makeResult();
        r.configurations.clear();
        for (int b : {2, 3, 2, 3, 0}) {
            eval::ConfigurationResult c;
            c.name = "S";
            c.budget = b;
            r.configurations.push_back(c);
        }
        const std::vector<int> all{0, 1, 2, 3, 4};
        QCOMPARE(evalPages(r, all, 5).size(), std::size_t(1));
        const auto pages = evalPages(r, all, 2);
        QCOMPARE(pages.size(), std::size_t(3));
        QCOMPARE(pages[0].suffix, QStringLiteral("_n2"));
        QVERIFY(pages[0].configurations == (std::vector<int>{0, 2}));
        QCOMPARE(pages[1].suffix, QStringLiteral("_n3"));
        QVERIFY(pages[1].configurations == (std::vector<int>{1, 3}));
        QCOMPARE(pages[2].suffix, QStringLiteral("_fixed"));
        QVERIFY(pages[2].configurations == (std::vector<int>{4}));
        const auto split = evalPages(r, all, 1);
        QCOMPARE(split.size(), std::size_t(5));
        QCOMPARE(split[0].suffix, QStringLiteral("_n2_1"));
        QCOMPARE(split[1].suffix, QStringLiteral("_n2_2"));
        QCOMPARE(split[1].title, QStringLiteral("n = 2 (2 of 2)"));
    }

    void everyFigurePrintsLegibly_data()
    {
        QTest::addColumn<double>("inches");
        QTest::newRow("3.5 in") << 3.5;
        QTest::newRow("7 in") << 7.0;
    }
    void everyFigurePrintsLegibly()
    {
        QFETCH(double, inches);
        const auto result = std::make_shared<const eval::EvalResult>(makeResult());
        EvalKldView kld;
        EvalLayersView layers;
        EvalTextView text;
        for (EvalView* view : std::initializer_list<EvalView*>{&kld, &layers, &text}) {
            view->resize(900, 650);
            view->setEvalResult(result);
            ExportOptions options;
            options.widthInches = inches;
            const PrintCheck check = checkPrint(*view, options);
            QVERIFY(!check.texts.empty());
            QVERIFY2(check.smallest >= kMinimumPrintPoints - 1e-6, qPrintable(view->viewId()));
            QVERIFY2(check.overlaps.isEmpty(), qPrintable(view->viewId() + QStringLiteral(": ") + check.overlaps.join(QStringLiteral("; "))));
            QVERIFY2(check.collisions.isEmpty(), qPrintable(view->viewId() + QStringLiteral(": ") + check.collisions.join(QStringLiteral("; "))));
        }
    }

    void exportWritesEveryFigureWithItsData()
    {
        QTemporaryDir dir;
        const QString figures = dir.filePath(QStringLiteral("figures"));
        const QByteArray spec = "{\"kvlens_eval\": 1}\n";
        const ExportOutcome outcome = exportEvalFigures(makeResult(), figures, ExportOptions{}, spec);
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        QVERIFY2(outcome.skipped.isEmpty(), qPrintable(outcome.skipped.join(QLatin1Char(';'))));
        for (const char* stem : {"eval_kld", "eval_layers", "eval_text"})
            for (const char* ext : {".pdf", ".svg", ".png", ".csv", ".spec.json"}) {
                const QString path = figures + QLatin1Char('/') + QLatin1String(stem) + QLatin1String(ext);
                QVERIFY2(QFileInfo(path).size() > 0, qPrintable(path));
            }
        QFile s(figures + QStringLiteral("/eval_kld.spec.json"));
        QVERIFY(s.open(QIODevice::ReadOnly));
        QCOMPARE(s.readAll(), spec);
        // Without attribution the layer figure is named as skipped, and nothing of it written.
        QTemporaryDir other;
        const ExportOutcome none = exportEvalFigures(makeResult(false), other.path(), ExportOptions{}, spec);
        QVERIFY2(none.ok(), qPrintable(none.error));
        QCOMPARE(none.skipped.size(), 1);
        QVERIFY(none.skipped.first().contains(QStringLiteral("--attribution none")));
        QVERIFY(!QFile::exists(other.filePath(QStringLiteral("eval_layers.pdf"))));
        QVERIFY(QFile::exists(other.filePath(QStringLiteral("eval_text.pdf"))));
    }
};

QTEST_MAIN(TestEvalViews)
#include "tst_eval_views.moc"
