// SPDX-License-Identifier: GPL-3.0-or-later
// Views fed a real result set: series counts, CSV = plotted points, and figure export for papers.
#include "common/approx.h"
#include "core/analysis/coverage.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "widgets/comparison_view.h"
#include "widgets/export_dialog.h"
#include "widgets/figure_export.h"
#include "widgets/figures/sweep_figure.h"
#include "widgets/formula_label.h"
#include "widgets/kl_distribution_view.h"
#include "widgets/model_map_view.h"
#include "widgets/rate_distortion_view.h"
#include "widgets/recall_view.h"
#include "widgets/scatter_matrix_view.h"
#include "widgets/shannon_phi_view.h"
#include "widgets/sweep_view.h"
#include "widgets/teaching_view.h"
#include "widgets/theory_view.h"
#include "widgets/validation_view.h"
#include "widgets/views.h"

#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFontComboBox>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

#include <sys/stat.h>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

/// 3 schemes x 2 budgets x 3 seeds on a small gaussian draw.
ViewData makeData()
{
    auto spec = specFromJson(R"({"d": 64, "tokens": 256, "queries": 16, "budgets": [3, 4], "seeds": {"count": 3},
                                "schemes": ["KV", "QKQV", "KIVI"], "metrics": {"sample_cap": 40},
                                "comparisons": {"bootstrap": 200, "permutations": 99}})");
    Q_ASSERT(spec.ok());
    CpuBackend backend(2);
    auto results = runExperiment(*spec, backend);
    Q_ASSERT(results.ok());
    return makeViewData(std::make_shared<const ResultSet>(std::move(results).value()), true);
}

QList<QStringList> csvRows(const QString& text)
{
    QList<QStringList> rows;
    for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
        rows.append(line.split(QLatin1Char(',')));
    return rows;
}

/// CSV rows (header first) of a per-trial Shannon-phi cloud (value or key site) that match a
/// trial's (phi, SNR) under its "scheme n=budget" series: an independent reading of the results.
int trialPointsMatched(const QList<QStringList>& rows, const ResultSet& results, bool values = true)
{
    const QStringList header = rows.first();
    const int series = header.indexOf(QStringLiteral("series")), x = header.indexOf(QStringLiteral("x")),
              y = header.indexOf(QStringLiteral("y"));
    int matched = 0;
    for (const auto& row : rows.mid(1)) {
        for (const TrialResult& t : results.trials) {
            const QString name = QStringLiteral("%1 n=%2")
                                     .arg(QString::fromStdString(results.schemes[t.key.scheme].name))
                                     .arg(t.key.budget);
            const double phi = values ? t.sixD.phiV : t.sixD.phiK, snr = values ? t.sixD.snrV : t.sixD.snrK;
            if (row[series] == name && std::abs(row[x].toDouble() - phi) < 1e-9 && std::abs(row[y].toDouble() - snr) < 1e-7)
                ++matched;
        }
    }
    return matched;
}

/// The texts of an SVG file's <text> elements.
QStringList svgTexts(const QString& path)
{
    QFile svg(path);
    if (!svg.open(QIODevice::ReadOnly))
        return {};
    QXmlStreamReader xml(&svg);
    QStringList texts;
    while (!xml.atEnd())
        if (xml.readNext() == QXmlStreamReader::StartElement && xml.name() == QLatin1String("text"))
            texts << xml.readElementText(QXmlStreamReader::IncludeChildElements);
    return texts;
}

/// Every footnote of a plot as one line (their wrapping undone).
QString notes(const PlotWidget* plot)
{
    return plot->footnotes().join(QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' '));
}

/// The legend entries' texts of a plot's main legend.
QStringList legendNames(const PlotWidget* plot)
{
    QStringList names;
    for (int i = 0; i < plot->legend->itemCount(); ++i)
        if (auto* e = qobject_cast<QCPPlottableLegendItem*>(plot->legend->item(i)))
            names << e->plottable()->name();
    return names;
}

/// K-only, V-only and TQ-KV on the shipped fp16 example: K-only and TQ-KV quantize the keys alike;
/// V-only keeps them in fp16, which is exact for fp16 data, so its KL is 0 exactly.
std::shared_ptr<const ResultSet> sensitivityRun()
{
    auto spec = specFromJson(R"({"regime": {"name": "imported", "file": ")" KVLENS_EXAMPLES_DIR R"(/kv_example.safetensors",
                                "k": "k", "v": "v", "q": "q", "head": 1, "token_start": 0, "query_start": 192},
                                "d": 64, "tokens": 128, "queries": 16, "budgets": [2, 3], "seeds": {"count": 2},
                                "schemes": ["K-only", "V-only", "TQ-KV"], "metrics": {"sample_cap": 10},
                                "comparisons": {"bootstrap": 50, "permutations": 19}})");
    Q_ASSERT(spec.ok());
    CpuBackend backend(2);
    auto results = runExperiment(*spec, backend);
    Q_ASSERT(results.ok());
    return std::make_shared<const ResultSet>(std::move(results).value());
}

/// Pixels of `png` within `tolerance` (sum of channel differences) of `color`.
int pixelsOf(const QImage& png, const QColor& color, int tolerance = 40)
{
    int count = 0;
    for (int y = 0; y < png.height(); ++y)
        for (int x = 0; x < png.width(); ++x) {
            const QColor c = png.pixelColor(x, y);
            count += std::abs(c.red() - color.red()) + std::abs(c.green() - color.green())
                         + std::abs(c.blue() - color.blue()) < tolerance;
        }
    return count;
}

/// What an export of every view of `data` at `inches` would print badly: text under
/// kMinimumPrintPoints, overlapping texts, labels longer than their axis, legends off the page;
/// one line per problem, every view's (`skipMap`: leave out the Model map, a model run's view).
/// The map's end-to-end evaluation, by hand: per layer of a 4-layer model, the attribution of
/// K-only at n = 2 and 3 (K, V and both paths, with intervals), as the Output tab's run gives it.
std::shared_ptr<const eval::EvalResult> handMadeAttribution()
{
    auto r = std::make_shared<eval::EvalResult>();
    r->layers = 4;
    r->kvHeads = 2;
    for (int budget : {2, 3}) {
        eval::ConfigurationResult c;
        c.name = "K-only";
        c.budget = budget;
        r->configurations.push_back(c);
        for (int layer = 0; layer < 4; ++layer)
            for (eval::AttributionPath path : {eval::AttributionPath::K, eval::AttributionPath::V, eval::AttributionPath::Both}) {
                eval::AttributionRow a;
                a.configuration = static_cast<int>(r->configurations.size()) - 1;
                a.layer = layer;
                a.path = path;
                a.kld.mean = 0.004 * (layer + 1) * (static_cast<int>(path) + 1) * (5 - budget);
                a.kldLow = 0.6 * a.kld.mean;
                a.kldHigh = 1.5 * a.kld.mean;
                r->attribution.push_back(a);
            }
    }
    return r;
}

QStringList printProblems(const ViewData& data, double inches, bool skipMap,
                          std::shared_ptr<const eval::EvalResult> evaluation = nullptr)
{
    QWidget host;
    QStringList problems;
    for (ResultView* view : createViews(&host)) {
        if (skipMap && view->viewId() == QLatin1String("model_map"))
            continue;
        view->resize(900, 650);
        view->setData(data);
        if (auto* map = qobject_cast<ModelMapView*>(view); map && evaluation) {
            // With the end-to-end panel beside the map and the judgement's footnote under it.
            map->setEvaluation(evaluation);
            if (map->attributionPoints() != 3 * evaluation->layers)
                problems << QStringLiteral("model_map: %1 attribution points drawn").arg(map->attributionPoints());
            for (int waited = 0; map->judging() && waited < 30000; waited += 20)
                QTest::qWait(20);
            if (!map->plot()->footnotes().join(QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' ')).contains(
                    QStringLiteral("predicts it best")))
                problems << QStringLiteral("model_map: no judgement footnote (%1)").arg(map->predictsText());
        }
        if (auto* teaching = qobject_cast<TeachingView*>(view))
            teaching->setStage(TeachingView::StageCount - 1); // every panel, as --batch exports it
        ExportOptions options;
        options.widthInches = inches;
        const PrintCheck check = checkPrint(*view, options);
        if (check.texts.empty())
            problems << view->viewId() + QStringLiteral(": no text");
        for (const PrintedText& t : check.texts)
            if (t.points < kMinimumPrintPoints - 1e-6)
                problems << QStringLiteral("%1: %2 \"%3\" at %4 pt").arg(view->viewId(), t.what, t.text).arg(t.points);
        for (const QString& o : check.overlaps)
            problems << view->viewId() + QStringLiteral(": ") + o;
        for (const QString& c : check.collisions)
            problems << view->viewId() + QStringLiteral(": ") + c;
    }
    return problems;
}

} // namespace

class TestViews : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        ::umask(022); // the permission checks below assume the common default
        m_data = makeData();
    }

    void shannonPhiSeriesAndData()
    {
        ShannonPhiView view;
        view.setData(m_data);
        QCOMPARE(view.seriesCount(), 3 * 2); // one cloud per scheme and budget
        // Per-trial mode: one point per trial, and the CSV holds exactly the plotted points.
        view.setPerVector(false);
        view.setSite(ShannonPhiView::Site::Values);
        const auto rows = csvRows(view.dataCsv());
        QCOMPARE(rows.size(), 1 + 18);
        QCOMPARE(trialPointsMatched(rows, *m_data.results), 18);
        // Per-vector mode: every sample of every trial.
        view.setPerVector(true);
        QCOMPARE(csvRows(view.dataCsv()).size(), 1 + 18 * 40);
    }

    void shannonPhiCoincidingCloudsStayVisible()
    {
        // KQV and QKQV store values the same way ((n-1)-bit Lloyd-Max + 1-bit QJL after the WHT):
        // at the value site their clouds are the same points. The later one is drawn as rings on
        // top and named in a note; their keys, and so their outputs, differ.
        auto spec = specFromJson(R"({"d": 32, "tokens": 128, "queries": 8, "budgets": [2, 4], "seeds": {"count": 2},
                                    "schemes": ["KV", "KQV", "QKQV"], "metrics": {"sample_cap": 20}})");
        QVERIFY(spec.ok());
        CpuBackend backend(2);
        auto results = runExperiment(*spec, backend);
        QVERIFY(results.ok());
        const auto shared = std::make_shared<const ResultSet>(std::move(results).value());
        // Which clouds are identical, read from the results themselves.
        auto samePoints = [&](int a, int b, int budget, bool values) {
            std::vector<double> pa, pb;
            for (const TrialResult& t : shared->trials) {
                if (t.key.budget != budget)
                    continue;
                if (t.key.scheme != a && t.key.scheme != b)
                    continue;
                const VectorSamples& v = values ? t.samplesV : t.samplesT;
                auto& out = t.key.scheme == a ? pa : pb;
                for (std::size_t i = 0; i < v.phi.size(); ++i)
                    out.insert(out.end(), {v.phi[i], v.snrDb[i]});
            }
            return !pa.empty() && pa == pb;
        };
        QVERIFY(samePoints(1, 2, 2, true) && samePoints(1, 2, 4, true));
        QVERIFY(!samePoints(0, 1, 2, true) && !samePoints(1, 2, 2, false));

        ShannonPhiView view;
        view.setData(makeViewData(shared, true));
        view.setPerVector(true);
        view.setSite(ShannonPhiView::Site::Values);
        QCOMPARE(view.coincidences(), (QStringList{QStringLiteral("QKQV n=2 = KQV n=2"), QStringLiteral("QKQV n=4 = KQV n=4")}));
        QVERIFY(view.coincidenceNote().contains(QStringLiteral("QKQV n=4 = KQV n=4")));
        const QStringList order = view.drawOrder();
        QCOMPARE(order.size(), 6);
        const QStringList rings = order.mid(4); // drawn last, on top
        QCOMPARE(QSet<QString>(rings.cbegin(), rings.cend()),
                 (QSet<QString>{QStringLiteral("QKQV n=2"), QStringLiteral("QKQV n=4")}));
        // The rings are hollow and larger than the markers they surround.
        QCPGraph* ring = nullptr;
        QCPGraph* under = nullptr;
        for (int i = 0; i < view.plot()->graphCount(); ++i) {
            QCPGraph* g = view.plot()->graph(i);
            if (g->name() == QStringLiteral("QKQV n=2"))
                ring = g;
            if (g->name() == QStringLiteral("KQV n=2"))
                under = g;
        }
        QVERIFY(ring && under);
        QCOMPARE(ring->scatterStyle().brush().style(), Qt::NoBrush);
        QVERIFY(ring->scatterStyle().size() > under->scatterStyle().size());
        // The legend keeps scheme-by-budget order.
        QStringList legend;
        for (int i = 0; i < view.plot()->legend->itemCount(); ++i)
            if (auto* e = qobject_cast<QCPPlottableLegendItem*>(view.plot()->legend->item(i)))
                legend << e->plottable()->name();
        QCOMPARE(legend.first(), QStringLiteral("KV n=2"));
        QCOMPARE(legend.last(), QStringLiteral("QKQV n=4"));

        // In the exported PNG the rings show: more pixels of their colour than the legend icon
        // alone would paint (drawn filled under KQV's markers, QKQV n=2 would show only there).
        {
            QTemporaryDir dir;
            view.resize(900, 650);
            ExportOptions options;
            options.widthInches = 7.0;
            options.dpi = 150;
            options.pdf = options.svg = false;
            QVERIFY(exportView(view, dir.path(), QStringLiteral("rings"), options, QByteArray("{}")).ok());
            const QImage png(dir.filePath(QStringLiteral("rings.png")));
            QVERIFY(!png.isNull());
            const QColor ringColor = ring->scatterStyle().pen().color();
            int ringPixels = 0;
            for (int y = 0; y < png.height(); ++y)
                for (int x = 0; x < png.width(); ++x) {
                    const QColor c = png.pixelColor(x, y);
                    ringPixels += std::abs(c.red() - ringColor.red()) + std::abs(c.green() - ringColor.green())
                                      + std::abs(c.blue() - ringColor.blue()) < 40;
                }
            const int icon = 2 * 9 * 9 * 150 / 72; // generously: twice the icon's area at 9 pt
            QVERIFY2(ringPixels > 2 * icon, qPrintable(QStringLiteral("%1 ring pixels").arg(ringPixels)));
        }

        // Hue by scheme, lightness by budget: n = 2 lighter than n = 4, the same hue.
        QColor kv2, kv4;
        for (int i = 0; i < view.plot()->graphCount(); ++i) {
            if (view.plot()->graph(i)->name() == QStringLiteral("KV n=2"))
                kv2 = view.plot()->graph(i)->pen().color();
            if (view.plot()->graph(i)->name() == QStringLiteral("KV n=4"))
                kv4 = view.plot()->graph(i)->pen().color();
        }
        QVERIFY2(kv2.lightnessF() > kv4.lightnessF() + 0.2, qPrintable(QStringLiteral("%1 %2").arg(kv2.lightnessF()).arg(kv4.lightnessF())));
        QVERIFY(std::abs(kv2.hslHueF() - kv4.hslHueF()) < 0.01);

        // Outputs: the keys differ, so no cloud coincides and there is no note.
        view.setSite(ShannonPhiView::Site::Output);
        QVERIFY(view.coincidences().isEmpty());
        QVERIFY(view.coincidenceNote().isEmpty());
        // The widest cloud (x span + y span, each relative to the widest) is drawn first.
        QMap<QString, std::pair<double, double>> spans;
        double xMax = 0.0, yMax = 0.0;
        for (int i = 0; i < view.plot()->graphCount(); ++i) {
            const QCPGraph* g = view.plot()->graph(i);
            bool found = false;
            const QCPRange xr = g->getKeyRange(found), yr = g->getValueRange(found);
            spans[g->name()] = {xr.size(), yr.size()};
            xMax = std::max(xMax, xr.size());
            yMax = std::max(yMax, yr.size());
        }
        QCOMPARE(spans.size(), 6);
        QString widest;
        double best = -1.0;
        for (auto it = spans.cbegin(); it != spans.cend(); ++it)
            if (const double w = it->first / xMax + it->second / yMax; w > best) {
                best = w;
                widest = it.key();
            }
        QCOMPARE(view.drawOrder().first(), widest);
        QCOMPARE(view.plot()->graph(0)->name(), widest);
    }

    void scatterMatrixSeries()
    {
        ScatterMatrixView view;
        view.setData(m_data);
        QCOMPARE(view.seriesCount(), 30 * 3 * 2); // 30 off-diagonal panels x schemes x budgets
        view.setMatrix(false);
        view.setPair(0, 4);
        QCOMPARE(view.seriesCount(), 3 * 2);
        QCOMPARE(view.plot()->xAxis->label(), QStringLiteral("SNR_K (dB)"));
    }

    void klDistributionSeries()
    {
        KlDistributionView view;
        view.setData(m_data);
        view.setBudget(3);
        // Per scheme: the ECDF and the mean, p99 and worst markers.
        QCOMPARE(view.seriesCount(), 3 * 4);
        view.setHistogram(true);
        QCOMPARE(view.seriesCount(), 3 * 4);
        QCOMPARE(view.plot()->xAxis->scaleType(), QCPAxis::stLogarithmic);
    }

    void recallSeriesWithIntervals()
    {
        RecallView view;
        view.setData(m_data);
        QCOMPARE(view.seriesCount(), 3 * 2); // recall and argmax shift per scheme
        const auto rows = csvRows(view.dataCsv());
        QCOMPARE(rows.size(), 1 + 3 * 2 * 2); // two budgets each
        const int minus = rows.first().indexOf(QStringLiteral("y_error_minus"));
        QVERIFY(minus >= 0);
        QVERIFY(!rows.at(1).at(minus).isEmpty()); // intervals are exported with the points
        // Two stacked panels (recall, argmax shift) on one budget axis with whole-number ticks only.
        view.resize(700, 600);
        view.plot()->replot();
        QCOMPARE(view.plot()->axisRects().size(), 2);
        QCPAxis* x1 = view.plot()->axisRects()[0]->axis(QCPAxis::atBottom);
        QCPAxis* x2 = view.plot()->axisRects()[1]->axis(QCPAxis::atBottom);
        QCOMPARE(x1->range(), x2->range());
        QCOMPARE(x2->range(), QCPRange(2.5, 4.5)); // budgets 3 and 4, half a step either side
        for (double tick : x2->tickVector())
            QCOMPARE(tick, std::round(tick));
        QVERIFY(!x2->tickVector().isEmpty());
    }

    void clickingALegendEntryHidesItsSeriesUntilClickedAgain()
    {
        KlDistributionView view;
        view.resize(800, 500);
        view.setData(m_data);
        view.show();
        PlotWidget* plot = view.plot();
        plot->replot();
        QCPPlottableLegendItem* entry = nullptr;
        for (int i = 0; i < plot->legend->itemCount() && !entry; ++i)
            entry = qobject_cast<QCPPlottableLegendItem*>(plot->legend->item(i));
        QVERIFY(entry);
        const QString name = entry->plottable()->name();
        QVERIFY(entry->plottable()->visible());
        QTest::mouseClick(plot, Qt::LeftButton, {}, entry->rect().center());
        QVERIFY(plot->seriesHidden(name));
        plot->replot();
        QVERIFY(!entry->plottable()->visible());
        // New data (a progressive snapshot) redraws every series: the hidden one stays hidden.
        view.setData(m_data);
        plot->replot();
        int hidden = 0;
        for (int i = 0; i < plot->plottableCount(); ++i)
            hidden += plot->plottable(i)->name() == name && !plot->plottable(i)->visible() ? 1 : 0;
        QVERIFY(hidden >= 1);
        plot->toggleSeries(name);
        plot->replot();
        for (int i = 0; i < plot->plottableCount(); ++i)
            QVERIFY(plot->plottable(i)->visible() || plot->plottable(i)->name() != name);
    }

    void everyViewPrintsLegiblyAtOneAndTwoColumns_data()
    {
        QTest::addColumn<double>("inches");
        QTest::newRow("3.5 in") << 3.5;
        QTest::newRow("7 in") << 7.0;
    }

    void everyViewPrintsLegiblyAtOneAndTwoColumns()
    {
        QFETCH(double, inches);
        // The Model map is a model run's view: everyViewPrintsLegiblyOnAModelRun draws it.
        const QStringList problems = printProblems(m_data, inches, true);
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QStringLiteral("\n"))));
    }

    void everyViewPrintsLegiblyOnAModelRun_data()
    {
        QTest::addColumn<double>("inches");
        QTest::newRow("3.5 in") << 3.5;
        QTest::newRow("7 in") << 7.0;
    }

    void everyViewPrintsLegiblyOnAModelRun()
    {
        // The shipped tiny model's map (4 layers x 8 heads: 32 grid points) with K-only, V-only and
        // TQ-KV at 2 and 3 bits, as the Model map preset runs it: every view, the map included, at
        // a column and at two, with no text under 6 pt, no overlaps and nothing off the page.
        QFETCH(double, inches);
        static const ViewData model = [] {
            auto spec = specFromJson(R"({"regime": {"name": "model", "file": ")" KVLENS_EXAMPLES_DIR R"(/tiny_lm_kv.safetensors",
                                        "layers": "all", "heads": "all", "query_start": 448}, "d": 32, "tokens": 512,
                                        "queries": 16, "budgets": [2, 3], "seeds": {"count": 2},
                                        "schemes": ["K-only", "V-only", "TQ-KV"], "metrics": {"sample_cap": 10},
                                        "comparisons": {"bootstrap": 50, "permutations": 19}})");
            Q_ASSERT(spec.ok());
            CpuBackend backend(2);
            auto results = runExperiment(*spec, backend);
            Q_ASSERT(results.ok());
            return makeViewData(std::make_shared<const ResultSet>(std::move(results).value()), true);
        }();
        const QStringList problems = printProblems(model, inches, false, handMadeAttribution());
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QStringLiteral("\n"))));
    }

    void exportDialogOffersWhatTheCommandLineDoes()
    {
        // Width, resolution, font size and family, with --width/--dpi/--font-size/--font-family's limits.
        ExportDialog dialog(QStringLiteral("/tmp"), QStringLiteral("fig"), false);
        auto* size = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("fontSize"));
        auto* family = dialog.findChild<QFontComboBox*>(QStringLiteral("fontFamily"));
        QVERIFY(size && family);
        QCOMPARE(dialog.options().basePointSize, 0.0); // auto
        QCOMPARE(dialog.options().fontFamily, QStringLiteral("DejaVu Sans"));
        size->setValue(4.5); // under 5 pt is not a size: auto
        QCOMPARE(dialog.options().basePointSize, 0.0);
        size->setValue(10.0);
        QCOMPARE(dialog.options().basePointSize, 10.0);
        family->setCurrentFont(QFont(QStringLiteral("DejaVu Serif")));
        QCOMPARE(dialog.options().fontFamily, QStringLiteral("DejaVu Serif"));
        QCOMPARE(dialog.options().widthInches, 3.5);
    }

    void formulaLabelsPutTheHatOverThePAndScriptsBesideTheirBase()
    {
        QFont font(QStringLiteral("DejaVu Sans"));
        font.setPointSizeF(8.0);
        const FormulaLayout kl = layoutFormula(QStringLiteral("KL(p‖p̂) per query"), font, 6.0);
        QCOMPARE(kl.hats.size(), std::size_t{1});
        const FormulaLayout::Hat& hat = kl.hats.front();
        const QRectF hatBox = hat.path.boundingRect();
        // Centred over the second p's ink, and above it.
        QVERIFY(hatBox.center().x() > hat.letter.left() && hatBox.center().x() < hat.letter.right());
        QVERIFY(std::abs(hatBox.center().x() - hat.letter.center().x()) < 0.05 * hat.letter.width() + 0.01);
        QVERIFY(hatBox.bottom() < hat.letter.top());
        QVERIFY(hatBox.bottom() > hat.letter.top() - 0.5 * QFontMetricsF(font).height());
        // The hatted p is a piece of its own, right after "KL(p‖".
        const QFontMetricsF fm(font);
        QVERIFY(std::abs(hat.letter.center().x() - (fm.horizontalAdvance(QStringLiteral("KL(p‖")) +
                                                     fm.horizontalAdvance(QStringLiteral("p")) / 2.0)) < 1.0);
        QCOMPARE(formulaPlainText(QStringLiteral("KL(p‖p̂)")), QStringLiteral("KL(p‖p)"));
        // ε_dir^K: subscript and superscript stacked after ε, smaller, below and above the baseline.
        const FormulaLayout eps = layoutFormula(QStringLiteral("ε_dir^K"), font, 6.0);
        QCOMPARE(eps.pieces.size(), std::size_t{3});
        QCOMPARE(eps.pieces[1].text, QStringLiteral("dir"));
        QCOMPARE(eps.pieces[2].text, QStringLiteral("K"));
        QVERIFY(eps.pieces[1].origin.y() > 0.0 && eps.pieces[2].origin.y() < 0.0);
        QCOMPARE(eps.pieces[1].origin.x(), eps.pieces[2].origin.x());
        QCOMPARE(eps.pieces[1].font.pointSizeF(), 6.0); // 3/4 of 8 pt, at the floor
        QVERIFY(!isFormula(QStringLiteral("top-5 recall")) && isFormula(QStringLiteral("SNR_K (dB)")));
        // In the KL view the axis label is drawn by the formula painter: QCustomPlot's own is transparent.
        KlDistributionView view;
        view.setData(m_data);
        view.plot()->replot();
        QVERIFY(isFormula(view.plot()->xAxis->label()));
        QCOMPARE(view.plot()->xAxis->labelColor().alpha(), 0);
        QCOMPARE(view.plot()->formulaLayout(view.plot()->xAxis).hats.size(), std::size_t{1});
    }

    void schemeNamesAreNotTypesetAsFormulas()
    {
        // llama.cpp's type names hold "_<digit>" and "_<letters>" after a digit: names, set as written.
        for (const char* name : {"q8_0", "K=q8_0,V=q4_0", "iq4_nl", "q5_1 n=2"}) {
            QVERIFY2(!isFormula(QString::fromLatin1(name)), name);
            QCOMPARE(formulaPlainText(QString::fromLatin1(name)), QString::fromLatin1(name));
        }
        // A letter's subscript and a power still are scripts.
        QVERIFY(isFormula(QStringLiteral("φ_K")));
        QCOMPARE(formulaPlainText(QStringLiteral("SNR_{T}")), QStringLiteral("SNRT"));
        QVERIFY(isFormula(QStringLiteral("10^3")));
    }

    void denseCloudsAreRasterizedInVectorExports()
    {
        // The default run's per-vector Shannon-phi plane: 36 864 markers. Vector files keep axes,
        // text and lines as vectors and the clouds as one image; the PNG draws every marker.
        CpuBackend backend(2);
        auto results = runExperiment(defaultSpec(), backend);
        QVERIFY(results.ok());
        ShannonPhiView view;
        view.resize(900, 650);
        view.setData(makeViewData(std::make_shared<const ResultSet>(std::move(results).value()), true));
        view.setPerVector(true);
        QVERIFY(view.plot()->graphCount() > 0);
        int markers = 0;
        for (int i = 0; i < view.plot()->graphCount(); ++i)
            markers += view.plot()->graph(i)->dataCount();
        QVERIFY2(markers > 20000, qPrintable(QString::number(markers)));
        QTemporaryDir dir;
        const auto outcome = exportView(view, dir.path(), QStringLiteral("phi"), ExportOptions{}, QByteArray("{}"));
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        const QFileInfo pdf(dir.filePath(QStringLiteral("phi.pdf"))), svg(dir.filePath(QStringLiteral("phi.svg")));
        QVERIFY2(pdf.size() < 300 * 1024, qPrintable(QString::number(pdf.size())));
        QVERIFY2(svg.size() < 300 * 1024, qPrintable(QString::number(svg.size())));
        QFile svgFile(svg.filePath());
        QVERIFY(svgFile.open(QIODevice::ReadOnly));
        const QByteArray svgText = svgFile.readAll();
        QVERIFY(svgText.contains("<image"));  // the clouds
        QVERIFY(svgText.contains("<text") || svgText.contains("font-family")); // the text stays text
        // After the export the live plot has its markers back, and no image item.
        QCOMPARE(view.plot()->itemCount() > 0 ? qobject_cast<QCPItemPixmap*>(view.plot()->item(view.plot()->itemCount() - 1)) : nullptr,
                 static_cast<QCPItemPixmap*>(nullptr));
        for (int i = 0; i < view.plot()->graphCount(); ++i)
            QVERIFY(view.plot()->graph(i)->realVisibility());
    }

    void aViewWithoutDataSaysWhatToDo()
    {
        QWidget host;
        for (ResultView* view : createViews(&host)) {
            const QString id = view->viewId();
            if (id == QLatin1String("teaching") || id == QLatin1String("model_map"))
                continue; // they draw their own example / note
            QVERIFY2(view->placeholderText().contains(QStringLiteral("Run an experiment")), qPrintable(id));
            // A run that has started but finished no trial yet.
            auto started = std::make_shared<ResultSet>();
            started->spec = m_data.results->spec;
            started->totalTrials = 36;
            view->setData(makeViewData(started, false));
            QVERIFY2(view->placeholderText().contains(QStringLiteral("computing… 0 of 36")), qPrintable(id));
            view->setData(m_data);
            QVERIFY2(view->placeholderText().isEmpty(), qPrintable(id));
        }
        ValidationView validation;
        QVERIFY(validation.placeholderText().contains(QStringLiteral("Run validation")));
    }

    void logErrorBarsReachingZeroGetAMarkerNotABarToTheFloor()
    {
        PlotWidget plot;
        PlotWidget::setLogAxis(plot.yAxis);
        QCPGraph* g = plot.addLineSeries(QStringLiteral("s"), seriesColor(0), QCPScatterStyle::ssCircle);
        g->setData(QVector<double>{1, 2, 3}, QVector<double>{1.0, 0.1, 0.01});
        auto* bars = new QCPErrorBars(plot.xAxis, plot.yAxis);
        bars->setDataPlottable(g);
        bars->setData(QVector<double>{0.5, 0.2, 0.01}, QVector<double>{0.1, 0.1, 0.1}); // 2nd below 0, 3rd exactly 0
        QCOMPARE(plot.clipLogErrorBars(), 2);
        QCOMPARE(bars->data()->at(0).errorMinus, 0.5);
        QCOMPARE(bars->data()->at(1).errorMinus, 0.0);
        QCOMPARE(bars->data()->at(2).errorMinus, 0.0);
        QCOMPARE(bars->data()->at(1).errorPlus, 0.1);
        QCPGraph* marker = plot.graph(plot.graphCount() - 1);
        QCOMPARE(marker->name(), QStringLiteral("interval reaches 0"));
        QCOMPARE(marker->dataCount(), 2);
        QCOMPARE(marker->data()->at(0)->value, 0.1 / 1.5);
        // A linear axis keeps its bars as they are.
        PlotWidget linear;
        QCPGraph* h = linear.addLineSeries(QStringLiteral("s"), seriesColor(0), QCPScatterStyle::ssCircle);
        h->setData(QVector<double>{1}, QVector<double>{0.1});
        auto* linearBars = new QCPErrorBars(linear.xAxis, linear.yAxis);
        linearBars->setDataPlottable(h);
        linearBars->setData(QVector<double>{0.2}, QVector<double>{0.1});
        QCOMPARE(linear.clipLogErrorBars(), 0);
        QCOMPARE(linearBars->data()->at(0).errorMinus, 0.2);
    }

    void comparisonAndTheoryTables()
    {
        {
            ComparisonView forest;
            forest.setData(m_data);
            QCOMPARE(forest.plot()->yAxis->grid()->zeroLinePen().style(), Qt::NoPen); // row 0 is not an interval
        }
        ComparisonView comparisons;
        comparisons.setData(m_data);
        QCOMPARE(comparisons.table()->rowCount(), 3 * 2); // 3 pairs x 2 budgets
        QVERIFY(comparisons.seriesCount() >= 1);
        QVERIFY(comparisons.dataCsv().startsWith(QStringLiteral("regime,point,budget,budget_b,kind,scheme_a")));
        TheoryView theory;
        theory.setData(m_data);
        QCOMPARE(theory.table()->rowCount(), 3 * 2);
        QCOMPARE(theory.seriesCount(), 2 * 2); // KIVI has no closed-form prediction
        // The proxy study: one row per scheme and a pooled one, the best proxy in bold.
        QCOMPARE(comparisons.proxyTable()->rowCount(), 3 + 1);
        QCOMPARE(comparisons.proxyTable()->item(3, 0)->text(), QStringLiteral("(pooled)"));
        QCOMPARE(comparisons.proxyTable()->item(0, 1)->text(), QStringLiteral("96")); // 16 queries x 3 seeds x 2 budgets
        int bold = 0;
        for (int c = 2; c < comparisons.proxyTable()->columnCount(); ++c)
            bold += comparisons.proxyTable()->item(0, c)->font().bold() ? 1 : 0;
        QCOMPARE(bold, 1);
    }

    void theoryTableShowsSpectralQuantsEffectiveDimension()
    {
        auto spec = specFromJson(R"({"regime": {"name": "low_rank", "rank": 4, "noise": 0.05}, "d": 64, "tokens": 256,
                                    "queries": 8, "budgets": [2], "seeds": {"count": 1}, "schemes": ["TQ-KV", "SQ-KV"],
                                    "comparisons": {"bootstrap": 50, "permutations": 19}})");
        QVERIFY(spec.ok());
        CpuBackend backend(2);
        auto results = runExperiment(*spec, backend);
        QVERIFY(results.ok());
        TheoryView theory;
        theory.setData(makeViewData(std::make_shared<const ResultSet>(std::move(results).value()), true));
        QCOMPARE(theory.table()->horizontalHeaderItem(2)->text(), QStringLiteral("d_eff K; V"));
        QCOMPARE(theory.table()->item(0, 2)->text(), QStringLiteral("–")); // TQ-KV
        // Rank 4: both estimators agree; the gap rule (the default) decided.
        const QString deff = theory.table()->item(1, 2)->text();
        QVERIFY2(deff.startsWith(QStringLiteral("4 (PR ")) && deff.contains(QStringLiteral("gap 4*")), qPrintable(deff));
    }

    void sweepViewPlotsAgainstTheSweptParameter()
    {
        auto spec = specFromJson(R"({"regime": "heavy_tail", "d": 32, "tokens": 64, "queries": 8, "budgets": [3, 4],
                                    "seeds": {"count": 2}, "schemes": ["KV", "KQV"], "sweep": {"regime.nu": [1.5, 3, 30]},
                                    "comparisons": {"bootstrap": 50, "permutations": 19}})");
        QVERIFY(spec.ok());
        CpuBackend backend(2);
        auto results = runExperiment(*spec, backend);
        QVERIFY(results.ok());
        const ViewData data = makeViewData(std::make_shared<const ResultSet>(std::move(results).value()), true);
        SweepView view;
        view.setData(data);
        QCOMPARE(view.seriesCount(), 2 * 2); // scheme x budget, each over the three nu values
        const auto rows = csvRows(view.dataCsv());
        QCOMPARE(rows.size(), 1 + 4 * 3);
        QCOMPARE(view.plot()->xAxis->label(), QStringLiteral("nu"));
        // nu spans 1.5 .. 30, more than a decade: a log axis.
        QCOMPARE(view.plot()->xAxis->scaleType(), QCPAxis::stLogarithmic);
        QVERIFY(view.setXParameter(QStringLiteral("budget")));
        QCOMPARE(view.seriesCount(), 2 * 3); // scheme x nu, each over the two budgets
        // The other views show one grid point at a time.
        ShannonPhiView shannon;
        shannon.setData(data);
        shannon.setPerVector(false);
        QCOMPARE(csvRows(shannon.dataCsv()).size(), 1 + 2 * 2 * 2); // point 0 only: schemes x budgets x seeds
        shannon.setPoint(2);
        QCOMPARE(csvRows(shannon.dataCsv()).size(), 1 + 2 * 2 * 2);
    }

    void sweepFigureValuesAreTheSeedMeansOfTheTrials()
    {
        // The description, not the drawing: each line's point at nu is the mean over seeds of each
        // trial's mean KL over its queries (computed here from the raw trials), its interval the
        // sweep cell's seed interval.
        auto spec = specFromJson(R"({"regime": "heavy_tail", "d": 32, "tokens": 64, "queries": 8, "budgets": [3, 4],
                                    "seeds": {"count": 3}, "schemes": ["KV", "KQV"], "sweep": {"regime.nu": [1.5, 3, 30]},
                                    "comparisons": {"bootstrap": 50, "permutations": 19}})");
        QVERIFY(spec.ok());
        CpuBackend backend(2);
        auto results = runExperiment(*spec, backend);
        QVERIFY(results.ok());
        const ViewData data = makeViewData(std::make_shared<const ResultSet>(std::move(results).value()), true);
        SweepChoice choice;
        choice.xParameter = QStringLiteral("regime.nu");
        choice.metric = 0; // mean KL
        const FigureSpec f = sweepFigure(data, choice);
        const auto lines = f.dataSeries(0);
        QCOMPARE(static_cast<int>(lines.size()), 2 * 2);
        const ResultSet& r = *data.results;
        int checked = 0;
        for (const SeriesSpec* line : lines) {
            QCOMPARE(line->size(), 3);
            // Which (scheme, budget) the line is, from its legend name "KV n=3".
            int scheme = -1, budget = 0;
            for (std::size_t sc = 0; sc < r.schemes.size(); ++sc)
                for (int n : {3, 4})
                    if (line->name == QString::fromStdString(r.schemes[sc].name) + QStringLiteral(" n=%1").arg(n)) {
                        scheme = static_cast<int>(sc);
                        budget = n;
                    }
            QVERIFY2(scheme >= 0, qPrintable(line->name));
            for (int i = 0; i < line->size(); ++i) {
                const double nu = line->x[i];
                double sum = 0.0;
                int seeds = 0;
                for (const TrialResult& t : r.trials) {
                    if (t.key.scheme != scheme || t.key.budget != budget || r.spec.pointValues(t.key.point).front() != nu)
                        continue;
                    double kl = 0.0;
                    for (float v : t.kl)
                        kl += v;
                    sum += kl / static_cast<double>(t.kl.size());
                    ++seeds;
                }
                QCOMPARE(seeds, 3);
                KVLENS_COMPARE_REL(line->y[i], sum / seeds, 1e-6);
                // The interval's ends are the sweep cell's seed interval, about the mean.
                int cells = 0;
                for (const SweepCell& c : data.figures->sweep)
                    if (c.scheme == scheme && c.budget == budget && r.spec.pointValues(c.point).front() == nu) {
                        KVLENS_COMPARE_REL(line->y[i] + line->errorPlus[i], c.klMean.high, 1e-9);
                        QVERIFY(c.klMean.low < c.klMean.mean && c.klMean.mean < c.klMean.high);
                        if (c.klMean.low > 0.0) {
                            KVLENS_COMPARE_REL(line->y[i] - line->errorMinus[i], c.klMean.low, 1e-9);
                        } else {
                            // A lower end at or below 0 has no place on the log axis: no downward bar,
                            // a marker under the point instead.
                            QCOMPARE(line->errorMinus[i], 0.0);
                            const int mark = f.findSeries(QStringLiteral("interval reaches 0"));
                            QVERIFY(mark >= 0);
                            QVERIFY(f.series[static_cast<std::size_t>(mark)].x.contains(nu));
                        }
                        ++cells;
                    }
                QCOMPARE(cells, 1);
                ++checked;
            }
        }
        QCOMPARE(checked, 4 * 3);
        QCOMPARE(f.panels.front().x.ticks, AxisSpec::Ticks::LogTuned); // nu spans 1.5 .. 30
    }

    void everyViewDescribesItself()
    {
        QWidget host;
        for (ResultView* v : createViews(&host)) {
            QVERIFY(!v->viewId().isEmpty());
            QVERIFY(v->viewDescription().size() > 40);
            QCOMPARE(v->toolTip(), v->viewDescription());
            v->setData(m_data);
            QVERIFY2(v->waitUntilDrawn(), qPrintable(v->viewId())); // the teaching view computes in the background
            if (v->viewId() == QLatin1String("model_map")) // a model run's view: a placeholder line here
                QCOMPARE(v->seriesCount(), 0);
            else
                QVERIFY2(v->seriesCount() > 0, qPrintable(v->viewId()));
        }
    }

    void exportWritesPrintableFiles()
    {
        QTemporaryDir dir;
        ShannonPhiView view;
        view.resize(800, 600);
        view.setData(m_data);
        view.setPerVector(false); // one point per trial, keys (the default site)
        ExportOptions options;
        options.widthInches = 7.0;
        options.dpi = 150;
        const auto outcome = exportView(view, dir.path(), QStringLiteral("fig"), options, QByteArray("{\"d\": 64}\n"));
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        QCOMPARE(outcome.written.size(), 5);

        QFile pdf(dir.filePath(QStringLiteral("fig.pdf")));
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        QVERIFY(pdf.read(5) == "%PDF-");

        QFile svg(dir.filePath(QStringLiteral("fig.svg")));
        QVERIFY(svg.open(QIODevice::ReadOnly));
        QXmlStreamReader xml(&svg);
        QStringList texts;
        while (!xml.atEnd()) {
            if (xml.readNext() == QXmlStreamReader::StartElement && xml.name() == QLatin1String("text"))
                texts << xml.readElementText(QXmlStreamReader::IncludeChildElements);
        }
        QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
        QVERIFY(texts.join(QLatin1Char(' ')).contains(QStringLiteral("direction error")));
        QVERIFY(texts.join(QLatin1Char(' ')).contains(QStringLiteral("SNR_K (dB)")));

        const QImage png(dir.filePath(QStringLiteral("fig.png")));
        QCOMPARE(png.width(), 7 * 150);
        QCOMPARE(png.height(), options.pngHeightPixels());

        QFile csv(dir.filePath(QStringLiteral("fig.csv")));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        // The exported data read back against the results (not against dataCsv(), which wrote it).
        const auto exported = csvRows(QString::fromUtf8(csv.readAll()));
        QCOMPARE(exported.size(), 1 + 18);
        QCOMPARE(trialPointsMatched(exported, *m_data.results, false), 18);
        // The spec beside the figure is the run the figure was drawn from, whatever text the caller
        // passed (that is for views drawn from no single run: the report's claim figures).
        QFile spec(dir.filePath(QStringLiteral("fig.spec.json")));
        QVERIFY(spec.open(QIODevice::ReadOnly));
        QCOMPARE(spec.readAll(), QByteArray::fromStdString(specToJson(m_data.results->spec) + "\n"));
        // Nothing but the five files (no temporaries left behind), each readable by group and others
        // under the usual umask 022, as any new file is (the temporaries they were written as are 0600).
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 5);
        for (const QString& name : QDir(dir.path()).entryList(QDir::Files))
            QVERIFY2(QFileInfo(dir.filePath(name)).permissions().testFlag(QFileDevice::ReadOther), qPrintable(name));
    }

    void failedExportNamesThePathAndKeepsTheOld()
    {
        QTemporaryDir dir;
        ShannonPhiView view;
        view.setData(m_data);
        // A directory where the PDF should go cannot be replaced.
        QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("fig.pdf/keep")));
        ExportOptions options;
        options.svg = options.png = false;
        const auto outcome = exportView(view, dir.path(), QStringLiteral("fig"), options, QByteArray("{}"));
        QVERIFY(!outcome.ok());
        QVERIFY2(outcome.error.contains(dir.filePath(QStringLiteral("fig.pdf"))), qPrintable(outcome.error));
        QVERIFY(QFileInfo(dir.filePath(QStringLiteral("fig.pdf/keep"))).isDir());
    }

    void exportingSeveralViewsIsOneSet()
    {
        // The window's Export all: a failure in the last view (here an injected full disk) leaves
        // every file already in the folder as it was, and no staging folder behind.
        QTemporaryDir dir;
        ShannonPhiView shannon;
        KlDistributionView kl;
        shannon.setData(m_data);
        kl.setData(m_data);
        ExportOptions options;
        options.pdf = options.svg = false;
        const std::vector<ResultView*> views{&shannon, &kl};
        auto stem = [](const ResultView& v) { return QStringLiteral("p_") + v.viewId(); };
        const QString oldCsv = dir.filePath(QStringLiteral("p_shannon_phi.csv"));
        {
            QFile f(oldCsv);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("the previous export\n");
        }
        qputenv("KVLENS_FAULT", "enospc:p_kl_distribution.csv");
        const auto failed = exportViews(views, dir.path(), stem, options, QByteArray("{}"));
        qunsetenv("KVLENS_FAULT");
        QVERIFY(!failed.ok());
        QVERIFY2(failed.error.contains(dir.filePath(QStringLiteral("p_kl_distribution.csv")))
                     && failed.error.contains(QStringLiteral("No space left on device")),
                 qPrintable(failed.error));
        QFile old(oldCsv);
        QVERIFY(old.open(QIODevice::ReadOnly));
        QCOMPARE(old.readAll(), QByteArray("the previous export\n"));
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
                 QStringList{QStringLiteral("p_shannon_phi.csv")});

        const auto done = exportViews(views, dir.path(), stem, options, QByteArray("{}"));
        QVERIFY2(done.ok(), qPrintable(done.error));
        QCOMPARE(done.written.size(), 2 * 3); // png, csv, spec.json of each view
        QVERIFY(done.written.contains(oldCsv));
        QVERIFY(QFile(oldCsv).size() > 100); // replaced by the view's data
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).size(), 6);
    }


    void aPartialRunIsExportedAsPartialOrRefused()
    {
        // A cancelled run by hand: KIVI lacks seed 2 at n = 3 and seed 1 at n = 4; KV lacks seed 0 at n = 4.
        auto partial = std::make_shared<ResultSet>(*m_data.results);
        partial->cancelled = true;
        std::erase_if(partial->trials, [&](const TrialResult& t) {
            const std::string& name = partial->schemes[static_cast<std::size_t>(t.key.scheme)].name;
            return (name == "KIVI" && t.key.budget == 3 && t.key.seedIndex == 2)
                   || (name == "KIVI" && t.key.budget == 4 && t.key.seedIndex == 1)
                   || (name == "KV" && t.key.budget == 4 && t.key.seedIndex == 0);
        });
        QCOMPARE(partial->trials.size(), std::size_t{15});
        QTemporaryDir dir;
        ExportOptions options;
        options.dpi = 100;
        {
            // The schemes hold different seeds: any figure comparing them would compare different draws.
            KlDistributionView kl;
            kl.setData(makeViewData(partial, false));
            const auto refused = exportView(kl, dir.path(), QStringLiteral("kl"), options);
            QVERIFY(!refused.ok());
            QVERIFY2(refused.error.contains(QStringLiteral("different seeds")), qPrintable(refused.error));
            QVERIFY(QDir(dir.path()).entryList(QDir::Files).isEmpty());
        }
        // On the seeds every scheme holds: n = 3 seeds 0, 1; n = 4 seed 2 — 3 x 3 = 9 of 18 trials.
        const auto shared = std::make_shared<const ResultSet>(sharedSeedTrials(*partial));
        QCOMPARE(shared->trials.size(), std::size_t{9});
        KlDistributionView kl;
        kl.resize(800, 600);
        kl.setData(makeViewData(shared, false));
        const int rowsBefore = kl.plot()->plotLayout()->rowCount();
        const auto outcome = exportView(kl, dir.path(), QStringLiteral("kl"), options);
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        QCOMPARE(outcome.written.size(), 5);
        // 1. The spec lists what the files hold, and still reads as the run's spec.
        QFile specFile(dir.filePath(QStringLiteral("kl.spec.json")));
        QVERIFY(specFile.open(QIODevice::ReadOnly));
        const QByteArray specText = specFile.readAll();
        const QJsonObject json = QJsonDocument::fromJson(specText).object();
        const QJsonObject block = json.value(QStringLiteral("partial")).toObject();
        QCOMPARE(block.value(QStringLiteral("trials")).toInt(), 9);
        QCOMPARE(block.value(QStringLiteral("of")).toInt(), 18);
        QCOMPARE(block.value(QStringLiteral("held")).toArray().size(), 3 * 2);
        for (const QJsonValue& cell : block.value(QStringLiteral("held")).toArray()) {
            const int budget = cell.toObject().value(QStringLiteral("budget")).toInt();
            const QJsonArray seeds = cell.toObject().value(QStringLiteral("seeds")).toArray();
            QCOMPARE(seeds.size(), budget == 3 ? 2 : 1);
            QCOMPARE(seeds.first().toInt(), budget == 3 ? 1 : 3); // seeds 1, 2, 3 are indices 0, 1, 2
        }
        const auto back = specFromJson(specText.toStdString());
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().text().c_str());
        QVERIFY(*back == shared->spec);
        // 2. The data says so on its first line.
        QFile csv(dir.filePath(QStringLiteral("kl.csv")));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        const QString firstLine = QString::fromUtf8(csv.readLine());
        QVERIFY2(firstLine.startsWith(QStringLiteral("# partial run: 9 of 18 trials")), qPrintable(firstLine));
        // 3. The figure carries the note.
        const QStringList texts = svgTexts(dir.filePath(QStringLiteral("kl.svg")));
        QVERIFY2(texts.join(QLatin1Char(' ')).contains(QStringLiteral("partial run: 9 of 18 trials")),
                 qPrintable(texts.join(QStringLiteral(" | "))));
        // The live view is as it was: the note was for the files.
        QCOMPARE(kl.plot()->plotLayout()->rowCount(), rowsBefore);
        // And a whole run's export says nothing of the kind.
        KlDistributionView whole;
        whole.setData(m_data);
        QVERIFY(exportView(whole, dir.path(), QStringLiteral("whole"), options).ok());
        QFile wholeCsv(dir.filePath(QStringLiteral("whole.csv")));
        QVERIFY(wholeCsv.open(QIODevice::ReadOnly));
        QVERIFY(!wholeCsv.readAll().contains("partial"));
        QVERIFY(!svgTexts(dir.filePath(QStringLiteral("whole.svg"))).join(QLatin1Char(' ')).contains(QStringLiteral("partial run")));
    }

    void anExportLeavesTheLiveFigureAsItWasAndHidesNoSeries()
    {
        KlDistributionView view;
        view.resize(800, 600);
        view.setData(m_data);
        view.show();
        PlotWidget* plot = view.plot();
        plot->replot();
        // The user hides KV by a click on its legend entry.
        plot->toggleSeries(QStringLiteral("KV"));
        plot->replot();
        QCPLegend* legend = plot->legend;
        const QPen border = legend->borderPen();
        const QBrush brush = legend->brush();
        const QFont font = legend->font();
        const QMargins margins = legend->margins();
        const QFont axisFont = plot->xAxis->tickLabelFont();
        QTemporaryDir dir;
        ExportOptions options;
        options.dpi = 100;
        options.pdf = options.svg = false;
        QVERIFY(exportView(view, dir.path(), QStringLiteral("kl"), options).ok());
        plot->replot();
        // The window's legend frame and fonts are as they were (an export used to restyle them).
        QCOMPARE(legend->borderPen(), border);
        QCOMPARE(legend->brush(), brush);
        QCOMPARE(legend->font(), font);
        QCOMPARE(legend->margins(), margins);
        QCOMPARE(plot->xAxis->tickLabelFont(), axisFont);
        QVERIFY(plot->seriesHidden(QStringLiteral("KV"))); // still hidden in the window...
        // ...but drawn in the figure: its CSV holds it, so the figure shows it.
        const QImage png(dir.filePath(QStringLiteral("kl.png")));
        QVERIFY(!png.isNull());
        const int kvPixels = pixelsOf(png, seriesColor(0));
        const int icon = 2 * 16 * 8 * 100 / 72; // the legend icon's line, generously
        QVERIFY2(kvPixels > icon, qPrintable(QString::number(kvPixels)));
    }

    void seriesALogAxisCannotShowOrThatCoincideAreExplained()
    {
        const auto run = sensitivityRun();
        // From the results: K-only and TQ-KV have the same KL query by query; V-only's is 0.
        auto klOf = [&](const char* scheme, int budget) {
            std::vector<float> kl;
            for (const TrialResult& t : run->trials)
                if (run->schemes[static_cast<std::size_t>(t.key.scheme)].name == scheme && t.key.budget == budget)
                    kl.insert(kl.end(), t.kl.begin(), t.kl.end());
            return kl;
        };
        QVERIFY(!klOf("K-only", 2).empty() && klOf("K-only", 2) == klOf("TQ-KV", 2));
        QVERIFY(!klOf("V-only", 3).empty());
        for (int budget : {2, 3})
            for (float v : klOf("V-only", budget))
                QVERIFY2(v == 0.0f, qPrintable(QString::number(v)));
        const ViewData data = makeViewData(run, true);

        KlDistributionView kl;
        kl.setData(data);
        kl.setBudget(2);
        QVERIFY2(legendNames(kl.plot()).contains(QStringLiteral("V-only: KL = 0 exactly")),
                 qPrintable(legendNames(kl.plot()).join(QStringLiteral(", "))));
        QVERIFY2(notes(kl.plot()).contains(QStringLiteral("TQ-KV = K-only")),
                 qPrintable(kl.plot()->footnotes().join(QStringLiteral(" | "))));
        // The later of two identical curves is dashed, so the one under it shows through.
        for (int i = 0; i < kl.plot()->graphCount(); ++i)
            if (kl.plot()->graph(i)->name() == QStringLiteral("TQ-KV"))
                QCOMPARE(kl.plot()->graph(i)->pen().style(), Qt::CustomDashLine);

        SweepView sweep;
        sweep.setData(data);
        QVERIFY(sweep.setXParameter(QStringLiteral("budget")));
        sweep.setMetric(0); // mean KL, log y
        QVERIFY2(legendNames(sweep.plot()).contains(QStringLiteral("V-only: KL = 0 exactly")),
                 qPrintable(legendNames(sweep.plot()).join(QStringLiteral(", "))));
        QVERIFY(notes(sweep.plot()).contains(QStringLiteral("TQ-KV = K-only")));

        RecallView recall;
        recall.setData(data);
        QVERIFY(notes(recall.plot()).contains(QStringLiteral("TQ-KV = K-only")));
        // V-only's keys are exact: recall 1, a line of its own.
        QVERIFY(!notes(recall.plot()).contains(QStringLiteral("V-only")));

        RateDistortionView rd;
        rd.setData(data);
        QVERIFY2(legendNames(rd.plot()).contains(QStringLiteral("V-only: KL = 0 exactly")),
                 qPrintable(legendNames(rd.plot()).join(QStringLiteral(", "))));
        // TQ-KV is the envelope here (K-only spends fp16 values for the same KL): a line through
        // points is no coincidence to note.
        QVERIFY2(!notes(rd.plot()).contains(RateDistortionView::envelopeName()), qPrintable(notes(rd.plot())));
        // On the output's error V-only has a place: it is drawn.
        rd.setMetric(DamageMetric::OutputError);
        QVERIFY(legendNames(rd.plot()).contains(QStringLiteral("V-only")));
    }

    void budgetAxesSayNominal()
    {
        RecallView recall;
        recall.setData(m_data);
        QCOMPARE(recall.plot()->axisRects()[1]->axis(QCPAxis::atBottom)->label(), QStringLiteral("nominal budget n (bits)"));
        SweepView sweep;
        sweep.setData(m_data);
        QVERIFY(sweep.setXParameter(QStringLiteral("budget")));
        QCOMPARE(sweep.plot()->xAxis->label(), QStringLiteral("nominal budget n (bits)"));
        // The sweep's "bits" metric is the exact count (TrialResult::bits), and says so.
        QVERIFY(SweepView::metricNames().last().startsWith(QStringLiteral("exact bits per coordinate")));
        for (ResultView* v : {static_cast<ResultView*>(&recall), static_cast<ResultView*>(&sweep)})
            for (QCPAxisRect* rect : v->plot()->axisRects())
                for (QCPAxis* axis : rect->axes())
                    QVERIFY2(!axis->label().contains(QStringLiteral("bits per coordinate"))
                                 || axis->label().startsWith(QStringLiteral("exact")),
                             qPrintable(axis->label()));
    }

    void theRateDistortionViewDrawsTheEnvelopeAndSeedIntervals()
    {
        RateDistortionView view;
        view.resize(800, 600);
        view.setData(m_data);
        const ResultSet& r = *m_data.results;
        QCOMPARE(view.plot()->xAxis->label(), QStringLiteral("exact bits per coordinate (K and V)"));
        // Independently: each cell's exact bits and mean KL from the summary (its KL mean is over
        // every query of every seed: with equal queries per seed, the mean of the seeds' means),
        // and the cells no other cell beats on both.
        struct Cell {
            double bits, kl;
        };
        std::vector<Cell> cells;
        for (const SummaryRow& row : m_data.figures->summary)
            cells.push_back({row.bits.total(), row.klMean});
        QCOMPARE(cells.size(), std::size_t{6});
        std::vector<Cell> front;
        for (const Cell& a : cells) {
            bool beaten = false;
            for (const Cell& b : cells)
                beaten = beaten || (b.bits <= a.bits && b.kl <= a.kl && (b.bits < a.bits || b.kl < a.kl));
            if (!beaten)
                front.push_back(a);
        }
        std::sort(front.begin(), front.end(), [](const Cell& a, const Cell& b) { return a.bits < b.bits; });
        QCPGraph* envelope = nullptr;
        for (int i = 0; i < view.plot()->graphCount(); ++i)
            if (view.plot()->graph(i)->name() == RateDistortionView::envelopeName())
                envelope = view.plot()->graph(i);
        QVERIFY(envelope);
        QCOMPARE(envelope->dataCount(), static_cast<int>(front.size()));
        for (int i = 0; i < envelope->dataCount(); ++i) {
            KVLENS_COMPARE_ABS(envelope->data()->at(i)->key, front[static_cast<std::size_t>(i)].bits, 1e-12);
            KVLENS_COMPARE_REL(envelope->data()->at(i)->value, front[static_cast<std::size_t>(i)].kl, 1e-9);
        }
        // KV at n = 3: the bar is t(0.975, 2) sd / sqrt(3) of the three seeds' mean KL.
        std::vector<double> means;
        for (const TrialResult& t : r.trials)
            if (t.key.scheme == 0 && t.key.budget == 3) {
                double sum = 0.0;
                for (float v : t.kl)
                    sum += v;
                means.push_back(sum / static_cast<double>(t.kl.size()));
            }
        QCOMPARE(means.size(), std::size_t{3});
        const double mean = (means[0] + means[1] + means[2]) / 3.0;
        double ss = 0.0;
        for (double m : means)
            ss += (m - mean) * (m - mean);
        const double t2 = std::sqrt(2.0 * 0.95 * 0.95 / (1.0 - 0.95 * 0.95)); // closed form for 2 df
        const double half = t2 * std::sqrt(ss / 2.0 / 3.0);
        const auto csv = csvRows(view.dataCsv());
        const QStringList header = csv.first();
        QCOMPARE(header.indexOf(QStringLiteral("bits_exact")), 4);
        bool found = false;
        for (const QStringList& row : csv.mid(1))
            if (row[2] == QStringLiteral("KV") && row[3] == QStringLiteral("3")) {
                found = true;
                KVLENS_COMPARE_REL(row[header.indexOf(QStringLiteral("damage"))].toDouble(), mean, 1e-9);
                KVLENS_COMPARE_REL(row[header.indexOf(QStringLiteral("ci_high"))].toDouble() - mean, half, 1e-6);
                QCOMPARE(row[header.indexOf(QStringLiteral("seeds"))], QStringLiteral("3"));
            }
        QVERIFY(found);
        // The figure says what a point and a bar are.
        QVERIFY2(notes(view.plot()).contains(QStringLiteral("mean of the 3 seeds' means, bars: 95% t-interval over seeds")),
                 qPrintable(view.plot()->footnotes().join(QStringLiteral(" | "))));
    }

    void theRateDistortionFigureAtOneAndTwoColumns()
    {
        // Written where the author looks at them (KVLENS_FIGURE_DIR), else into a temporary folder.
        QTemporaryDir temp;
        const QString out = qEnvironmentVariableIsSet("KVLENS_FIGURE_DIR") ? qEnvironmentVariable("KVLENS_FIGURE_DIR")
                                                                          : temp.path();
        CpuBackend backend(2);
        auto results = runExperiment(defaultSpec(), backend);
        QVERIFY(results.ok());
        RateDistortionView view;
        view.resize(900, 650);
        view.setData(makeViewData(std::make_shared<const ResultSet>(std::move(results).value()), false));
        for (double inches : {3.5, 7.0}) {
            ExportOptions options;
            options.widthInches = inches;
            const PrintCheck check = checkPrint(view, options);
            for (const PrintedText& t : check.texts)
                QVERIFY2(t.points >= kMinimumPrintPoints - 1e-6, qPrintable(QStringLiteral("%1 \"%2\" at %3 pt").arg(t.what, t.text).arg(t.points)));
            QVERIFY2(check.overlaps.isEmpty(), qPrintable(check.overlaps.join(QStringLiteral("; "))));
            QVERIFY2(check.collisions.isEmpty(), qPrintable(check.collisions.join(QStringLiteral("; "))));
            const auto outcome = exportView(view, out, QStringLiteral("rate_distortion_%1in").arg(inches), options);
            QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        }
    }
private:
    ViewData m_data;
};

QTEST_MAIN(TestViews)
#include "tst_views.moc"
