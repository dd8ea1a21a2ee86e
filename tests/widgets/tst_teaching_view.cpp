// SPDX-License-Identifier: GPL-3.0-or-later
// Teaching view offscreen: every stage reveals its panel and caption, sliders recompute in the background, exports.
#include "common/approx.h"
#include "widgets/figure_export.h"
#include "widgets/figures/teaching_figure.h"
#include "widgets/teaching_view.h"
#include "widgets/views.h"

#include <QComboBox>
#include <QImage>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

#include <cmath>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

constexpr int kTimeoutMs = 60000;

/// Sentence ends: ". " inside the text plus the final full stop.
int sentences(const QString& text)
{
    return static_cast<int>(text.count(QStringLiteral(". "))) + (text.endsWith(QLatin1Char('.')) ? 1 : 0);
}

} // namespace

class TestTeachingView : public QObject {
    Q_OBJECT
private slots:
    void stepsThroughEveryStage()
    {
        TeachingView view;
        view.resize(1200, 760);
        QTRY_VERIFY_WITH_TIMEOUT(!view.isComputing(), kTimeoutMs);
        QVERIFY(view.result());
        QCOMPARE(view.stage(), int(TeachingView::ScoreNoise));
        QVERIFY(!view.backButton()->isEnabled());
        QStringList captions;
        for (int stage = 0; stage < TeachingView::StageCount; ++stage) {
            if (stage > 0)
                QTest::mouseClick(view.nextButton(), Qt::LeftButton);
            QCOMPARE(view.stage(), stage);
            QCOMPARE(view.stageBox()->currentIndex(), stage);
            const QString caption = view.caption();
            QVERIFY2(!captions.contains(caption), qPrintable(caption)); // every stage says something new
            QCOMPARE(sentences(caption), 2);
            captions << caption;
            for (int p = 0; p < TeachingView::PanelCount; ++p) {
                const auto panel = static_cast<TeachingView::Panel>(p);
                QVERIFY(view.panelRect(panel));
                if (TeachingView::panelStage(panel) <= stage)
                    QVERIFY2(view.panelPointCount(panel) > 0, qPrintable(QStringLiteral("stage %1 panel %2").arg(stage).arg(p)));
                else
                    QVERIFY2(view.panelPointCount(panel) == 0, qPrintable(QStringLiteral("stage %1 panel %2").arg(stage).arg(p)));
            }
        }
        // What each stage adds: the histograms (2 x bins), the top-10 weights (3 x 10) and the two
        // Jensen pairs, the two KL bars, the 3 x 2 output bars and the sweep's two lines + reference.
        const auto& r = *view.result();
        QCOMPARE(view.panelPointCount(TeachingView::ScoreHistogram), 2 * static_cast<int>(r.binEdges.size() - 1));
        QCOMPARE(view.panelPointCount(TeachingView::TopWeights), 3 * 10);
        QCOMPARE(view.panelPointCount(TeachingView::Jensen), 2 * 2);
        QCOMPARE(view.panelPointCount(TeachingView::KlPanel), 2);
        QCOMPARE(view.panelPointCount(TeachingView::OutputPanel), 3 * 2);
        QCOMPARE(view.panelPointCount(TeachingView::ValuePath), 3 * static_cast<int>(r.valuePath.points.size()));
        QVERIFY(!view.nextButton()->isEnabled());
        QVERIFY(view.seriesCount() > 0);

        // Back hides the last stage again; the stage box jumps anywhere.
        QTest::mouseClick(view.backButton(), Qt::LeftButton);
        QCOMPARE(view.stage(), int(TeachingView::Kl));
        QCOMPARE(view.panelPointCount(TeachingView::OutputPanel), 0);
        QCOMPARE(view.caption(), captions[TeachingView::Kl]);
        view.stageBox()->setCurrentIndex(0);
        QCOMPARE(view.stage(), 0);
        QCOMPARE(view.panelPointCount(TeachingView::TopWeights), 0);
        QVERIFY(view.panelPointCount(TeachingView::ScoreHistogram) > 0);
    }

    void theKlPanelIsKlOfTheWeightsItShows()
    {
        // The description's values: the KL bars equal sum_j p_j log(p_j / p^_j), computed here from the
        // weights computeTeaching returns; a stage not yet reached holds no points.
        TeachingConfig config;
        config.tokens = 256;
        config.d = 64;
        config.sweepRepeats = 0;
        auto result = computeTeaching(config);
        QVERIFY2(result.ok(), result.ok() ? "" : result.error().text().c_str());
        const TeachingResult& r = *result;
        const FigureSpec f = teachingFigure(&r, {}, static_cast<int>(TeachingStage::Output), 0.0);
        QCOMPARE(static_cast<int>(f.panels.size()), static_cast<int>(TeachingPanel::Count));
        const auto bars = f.dataSeries(static_cast<int>(TeachingPanel::Kl));
        QCOMPARE(static_cast<int>(bars.size()), 2);
        for (int s = 0; s < 2; ++s) {
            const std::vector<float>& hat = r.schemes[static_cast<std::size_t>(s)].chain.probsHat;
            QCOMPARE(hat.size(), r.probs.size());
            double kl = 0.0;
            for (std::size_t j = 0; j < r.probs.size(); ++j)
                if (r.probs[j] > 0.0)
                    kl += r.probs[j] * std::log(r.probs[j] / static_cast<double>(hat[j]));
            QVERIFY(kl > 0.0);
            QCOMPARE(bars[static_cast<std::size_t>(s)]->size(), 1);
            KVLENS_COMPARE_REL(bars[static_cast<std::size_t>(s)]->y.front(), kl, 1e-4); // p^ is stored as float
        }
        const FigureSpec first = teachingFigure(&r, {}, static_cast<int>(TeachingStage::ScoreNoise), 0.0);
        QVERIFY(first.dataSeries(static_cast<int>(TeachingPanel::Kl)).empty());
        QVERIFY(!first.dataSeries(static_cast<int>(TeachingPanel::ScoreHistogram)).empty());
    }

    void budgetSliderRecomputesInTheBackground()
    {
        TeachingView view;
        QTRY_VERIFY_WITH_TIMEOUT(!view.isComputing(), kTimeoutMs);
        const auto atThree = view.result();
        QCOMPARE(atThree->config.budget, 3);
        QSignalSpy computed(&view, &TeachingView::computed);
        view.budgetSlider()->setValue(2);
        // Nothing is computed on the spot: the old result stays until the new one arrives.
        QVERIFY(view.isComputing());
        QCOMPARE(view.result(), atThree);
        QTRY_VERIFY_WITH_TIMEOUT(!view.isComputing(), kTimeoutMs);
        QCOMPARE(computed.count(), 1);
        QCOMPARE(view.result()->config.budget, 2);
        // Fewer bits, noisier QJL keys: larger score variance and KL.
        QVERIFY(view.result()->schemes[1].chain.varianceDeltaS > atThree->schemes[1].chain.varianceDeltaS);
        QVERIFY(view.result()->schemes[1].chain.kl > atThree->schemes[1].chain.kl);
        // The table shows the new numbers.
        QCOMPARE(view.metricsTable()->item(3, 1)->text(), QString::number(view.result()->schemes[1].chain.kl, 'g', 4));
    }

    void staleResultsAreDropped()
    {
        TeachingView view;
        QTRY_VERIFY_WITH_TIMEOUT(!view.isComputing(), kTimeoutMs);
        QSignalSpy computed(&view, &TeachingView::computed);
        // Each move outlives the debounce, so computations overlap; only the last may be drawn.
        for (int position : {2, 16, 5, 12}) {
            view.scaleSlider()->setValue(position);
            QTest::qWait(160);
        }
        QTRY_VERIFY_WITH_TIMEOUT(!view.isComputing(), kTimeoutMs);
        QTest::qWait(200); // let any late finished() of an older request arrive
        QVERIFY(computed.count() >= 1);
        QCOMPARE(computed.last().at(0).toULongLong(), view.requestCount());
        QCOMPARE(view.result()->config.scoreScale, TeachingView::scaleAt(12));
    }

    void scoreScaleMakesAttentionPeaked()
    {
        TeachingView view;
        QTRY_VERIFY_WITH_TIMEOUT(!view.isComputing(), kTimeoutMs);
        const double flat = view.result()->effectiveTokens;
        view.scaleSlider()->setValue(16); // c = 4
        QVERIFY(view.waitUntilDrawn());
        QCOMPARE(view.result()->config.scoreScale, 4.0);
        QVERIFY2(view.result()->effectiveTokens < flat / 10.0,
                 qPrintable(QStringLiteral("%1 vs %2").arg(view.result()->effectiveTokens).arg(flat)));
    }

    void metricsExplainThemselves()
    {
        TeachingView view;
        QVERIFY(view.waitUntilDrawn());
        QTableWidget* table = view.metricsTable();
        QCOMPARE(table->columnCount(), 2);
        QCOMPARE(table->horizontalHeaderItem(0)->text(), QStringLiteral("KQV"));
        QCOMPARE(table->horizontalHeaderItem(1)->text(), QStringLiteral("QKQV"));
        for (int r = 0; r < table->rowCount(); ++r) {
            QVERIFY(table->verticalHeaderItem(r)->toolTip().size() > 30);
            QVERIFY(!table->item(r, 0)->text().isEmpty());
        }
        QVERIFY(view.budgetSlider()->toolTip().size() > 30);
        QVERIFY(view.scaleSlider()->toolTip().size() > 30);
        QCOMPARE(view.toolTip(), view.viewDescription());
    }

    void reachableFromTheViewFactory()
    {
        QWidget host;
        int found = 0;
        for (ResultView* v : createViews(&host))
            if (v->viewId() == QStringLiteral("teaching")) {
                QVERIFY(qobject_cast<TeachingView*>(v));
                ++found;
            }
        QCOMPARE(found, 1);
    }

    void exportsPngSvgAndData()
    {
        QTemporaryDir dir;
        TeachingView view;
        view.resize(1200, 760);
        view.setStage(TeachingView::Output);
        ExportOptions options;
        options.widthInches = 7.0;
        options.dpi = 100;
        // Export waits for the computation the constructor started.
        const auto outcome = exportView(view, dir.path(), QStringLiteral("teaching"), options, QByteArray("{}\n"));
        QVERIFY2(outcome.ok(), qPrintable(outcome.error));
        QCOMPARE(outcome.written.size(), 5);
        for (const char* ext : {"pdf", "svg", "png", "csv", "spec.json"})
            QVERIFY2(QFileInfo(dir.filePath(QStringLiteral("teaching.") + QLatin1String(ext))).size() > 0, ext);

        const QImage png(dir.filePath(QStringLiteral("teaching.png")));
        QCOMPARE(png.width(), 700);
        // Not a blank page: a fair share of the pixels are drawn.
        int inked = 0;
        for (int y = 0; y < png.height(); y += 2)
            for (int x = 0; x < png.width(); x += 2)
                inked += png.pixelColor(x, y) != QColor(Qt::white);
        QVERIFY2(inked > png.width() * png.height() / 4 / 50, qPrintable(QString::number(inked)));

        QFile svg(dir.filePath(QStringLiteral("teaching.svg")));
        QVERIFY(svg.open(QIODevice::ReadOnly));
        QXmlStreamReader xml(&svg);
        QStringList texts;
        while (!xml.atEnd())
            if (xml.readNext() == QXmlStreamReader::StartElement && xml.name() == QLatin1String("text"))
                texts << xml.readElementText(QXmlStreamReader::IncludeChildElements);
        QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
        const QString all = texts.join(QLatin1Char(' '));
        QVERIFY2(all.contains(QStringLiteral("values vs keys")), qPrintable(all.left(400)));
        QVERIFY(all.contains(QStringLiteral("Jensen")));

        QFile csv(dir.filePath(QStringLiteral("teaching.csv")));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        const QString data = QString::fromUtf8(csv.readAll());
        QCOMPARE(data, view.dataCsv());
        QVERIFY(data.startsWith(QStringLiteral("quantity,scheme,index,value\n")));
        QVERIFY(data.contains(QStringLiteral("sweep.value_error")));
        QVERIFY(data.contains(QStringLiteral("jensen_factor,QKQV")));
    }
};

QTEST_MAIN(TestTeachingView)
#include "tst_teaching_view.moc"
