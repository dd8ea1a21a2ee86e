// SPDX-License-Identifier: GPL-3.0-or-later
// The Output tab: a click on a token makes it the drill-down's query, whose strip shows the closed-form
// model's known attention; the hover text holds the top five under both caches; the shading follows
// the KLD; configurations are cached across runs; a cancel leaves a partial run marked as such; the
// shaded text exports at a column's width.
#include "common/approx.h"
#include "common/closed_form_model.h"
#include "core/eval/evaluator.h"
#include "widgets/output_view.h"

#include <QApplication>
#include <QFile>
#include <QHelpEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QToolTip>

#include <algorithm>
#include <cmath>

using namespace kvlens;
using namespace kvlens::widgets;

namespace {

EvalSpec closedFormSpec(std::vector<std::string> schemes, std::vector<int> budgets, int ctx)
{
    EvalSpec s;
    s.modelDir = "closed-form";
    s.tokensFile = "generated";
    s.ctx = ctx;
    s.budgets = std::move(budgets);
    s.attribution = Attribution::None;
    s.threads = 2;
    for (const std::string& name : schemes)
        s.schemes.push_back(EvalScheme{*findScheme(name), {}, {}});
    return s;
}

/// The closed-form model's run: "exact" and KV at 1 bit over 16 x `chunks` tokens in chunks of 16.
ModelRun closedFormRun(int chunks = 4)
{
    using namespace kvlens::test::closed_form;
    auto model = std::make_shared<const lm::Transformer>(closedFormModel(2));
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < 16 * chunks; ++i)
        tokens.push_back((i * 7 + 3) % kVocab);
    auto r = eval::runEval(closedFormSpec({"exact", "KV"}, {1}, 16), *model, tokens, std::nullopt);
    if (!r)
        qFatal("%s", r.error().text().c_str());
    auto vocab = std::make_shared<std::vector<std::string>>();
    for (int v = 0; v < kVocab; ++v)
        vocab->push_back(std::string("tok") + char('A' + v));
    return ModelRun{std::make_shared<const eval::EvalResult>(std::move(*r)), vocab, model};
}

/// A hand-made run: one chunk of 8 tokens (4 context, 3 scored), one configuration whose KLDs are
/// 0.001, 0.01, 0.1; distinct top-5 lists under both caches.
ModelRun handMadeRun()
{
    auto r = std::make_shared<eval::EvalResult>();
    r->spec = closedFormSpec({"KV"}, {3}, 8);
    r->layers = 1;
    r->vocab = 20;
    r->chunksScored = 1;
    r->calibrationTokens = 0;
    r->tokens = {0, 1, 2, 3, 4, 5, 6, 7};
    eval::ConfigurationResult c;
    c.name = "KV";
    c.budget = 3;
    for (int i = 0; i < 3; ++i) {
        r->scored.push_back({0, 4 + i, 4 + i, 5 + i});
        lm::TokenStat t;
        t.kld = std::pow(10.0, i - 3);
        t.nllBase = 1.0 + 0.125 * i;
        t.nllQ = 2.0 + 0.25 * i;
        c.tokens.push_back(t);
        eval::TopTokens base{}, quant{};
        for (std::size_t k = 0; k < eval::kTopTokens; ++k) {
            base[k] = {static_cast<std::int32_t>(8 + k), static_cast<float>(0.30 - 0.05 * k - 0.001 * i)};
            quant[k] = {static_cast<std::int32_t>(13 + k), static_cast<float>(0.25 - 0.04 * k - 0.001 * i)};
        }
        r->topBase.push_back(base);
        c.top.push_back(quant);
        eval::TokenProxies proxies{};
        for (int k = 0; k < eval::kTokenProxyCount; ++k)
            proxies[static_cast<std::size_t>(k)] = static_cast<float>((k + 1) * 0.0125 * (i + 1));
        c.proxies.push_back(proxies);
    }
    c.summary = *lm::summarizeNextTokens(c.tokens);
    r->configurations.push_back(c);
    auto vocab = std::make_shared<std::vector<std::string>>();
    for (int v = 0; v < 20; ++v)
        vocab->push_back("w" + std::to_string(v));
    return ModelRun{r, vocab, nullptr};
}

} // namespace

class TestOutputView : public QObject {
    Q_OBJECT
private slots:
    void clickingATokenSetsTheQuery();
    void theTextScrollsToTheLastChunkWhereAClickDrillsDown();
    void theStripShowsTheKnownWeights();
    void hoverHoldsTheTopFiveUnderBoth();
    void shadingFollowsTheKld();
    void theSameKldHasTheSameColourInEveryConfiguration();
    void tokensAreShownEscaped();
    void configurationsAreCachedAcrossRuns();
    void aCancelledRunIsMarkedPartial();
    void theShadedTextExportsAtColumnWidth();
};

void TestOutputView::clickingATokenSetsTheQuery()
{
    OutputView v;
    v.resize(1100, 760);
    v.show();
    v.setModelRun(closedFormRun());
    v.setDrillHead(0, 0);
    QVERIFY(v.waitUntilIdle(10000));
    const int scored = 20;
    const QRect box = v.text()->scoredRect(scored);
    QVERIFY2(!box.isEmpty(), "the scored token is drawn");
    QSignalSpy probed(&v, &OutputView::probed);
    QTest::mouseClick(v.text(), Qt::LeftButton, {}, box.center());
    QVERIFY(probed.wait(10000));
    QCOMPARE(probed.front().front().toString(), QString());
    QCOMPARE(v.text()->selected(), scored);
    const auto& a = v.strip()->attention();
    QVERIFY(a.has_value());
    QCOMPARE(a->scored, scored);
    QCOMPARE(a->position, v.modelRun().result->scored[scored].position);
    QCOMPARE(a->configuration, v.configuration());
    QCOMPARE(a->layer, 0);
    QCOMPARE(a->head, 0);
    // A context token (first half of a chunk) is not a query: a click on it changes nothing.
    const QRect first = v.text()->scoredRect(0);
    QTest::mouseClick(v.text(), Qt::LeftButton, {}, QPoint(2, first.top() - 30));
    QCOMPARE(v.text()->selected(), scored);
}

void TestOutputView::theTextScrollsToTheLastChunkWhereAClickDrillsDown()
{
    // 21 chunks: more text than the pane holds in a 1366 x 768 window. Scrolled to the end, the last
    // scored token is in view, and a click on it makes it the drill-down's query.
    OutputView v;
    v.resize(1366, 768);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    v.setModelRun(closedFormRun(21));
    v.setDrillHead(0, 0);
    QVERIFY(v.waitUntilIdle(10000));
    QCOMPARE(v.modelRun().result->chunksScored, 21);
    const int last = static_cast<int>(v.modelRun().result->scored.size()) - 1;
    QScrollArea* scroll = v.textScroll();
    QScrollBar* bar = scroll->verticalScrollBar();
    QTRY_VERIFY(bar->maximum() > 0);
    const QRect box = v.text()->scoredRect(last);
    QVERIFY2(!box.isEmpty(), "the last scored token is laid out");
    QVERIFY(box.bottom() > scroll->viewport()->height()); // not on the first screen
    bar->setValue(bar->maximum());
    const QPoint shown = v.text()->mapTo(scroll->viewport(), box.center());
    QVERIFY2(scroll->viewport()->rect().contains(shown), "scrolled to the end, the last token is in view");
    QSignalSpy probed(&v, &OutputView::probed);
    QTest::mouseClick(v.text(), Qt::LeftButton, {}, box.center());
    QVERIFY(probed.wait(10000));
    QCOMPARE(probed.front().front().toString(), QString());
    QCOMPARE(v.text()->selected(), last);
    QVERIFY(v.strip()->attention().has_value());
    QCOMPARE(v.strip()->attention()->scored, last);
}

void TestOutputView::theStripShowsTheKnownWeights()
{
    // Head 0's exact attention of query t in the closed-form model is softmax_j of (a u)^2 / 2 sin(t - j)
    // (tests/common/closed_form_model.h). Through "exact" the quantized strip equals it; through KV at
    // 1 bit it does not, and the head search finds a changed head.
    using namespace kvlens::test::closed_form;
    OutputView v;
    v.resize(1100, 760);
    v.show();
    v.setModelRun(closedFormRun());
    v.setDrillHead(0, 0);
    for (const int scored : {3, 17}) {
        v.setConfiguration(0);
        v.selectToken(scored);
        QVERIFY(v.waitUntilIdle(10000));
        const auto& a = v.strip()->attention();
        QVERIFY(a.has_value());
        const std::vector<double> expected = closedFormWeights(a->position);
        QCOMPARE(a->exact.size(), expected.size());
        for (std::size_t j = 0; j < expected.size(); ++j) {
            KVLENS_COMPARE_ABS(a->exact[j], expected[j], 1e-5);
            KVLENS_COMPARE_ABS(a->quantized[j], expected[j], 1e-5);
        }
        // The first label is the key of the largest weight.
        const auto top = std::max_element(expected.begin(), expected.end()) - expected.begin();
        QCOMPARE(v.strip()->labelledKeys().front(), static_cast<int>(top));
    }
    v.setConfiguration(1); // KV n = 1: re-probed for the selected token
    QVERIFY(v.waitUntilIdle(10000));
    QVERIFY(v.strip()->attention()->kl > 0.0);
    v.setDrillHead(-1, 0); // the head that changed most
    QVERIFY(v.waitUntilIdle(10000));
    QVERIFY(v.strip()->attention()->kl > 0.0);
}

void TestOutputView::hoverHoldsTheTopFiveUnderBoth()
{
    OutputView v;
    v.resize(1000, 700);
    v.show();
    const ModelRun run = handMadeRun();
    v.setModelRun(run);
    for (int i = 0; i < 3; ++i) {
        const QString text = v.text()->hoverText(i);
        for (std::size_t k = 0; k < eval::kTopTokens; ++k) {
            const eval::TopToken b = run.result->topBase[i][k];
            const eval::TopToken q = run.result->configurations[0].top[i][k];
            QVERIFY2(text.contains(QStringLiteral("'w%1'</td><td align=right>%2").arg(b.token).arg(b.probability, 0, 'f', 3)),
                     qPrintable(text));
            QVERIFY2(text.contains(QStringLiteral("'w%1'</td><td align=right>%2").arg(q.token).arg(q.probability, 0, 'f', 3)),
                     qPrintable(text));
        }
        const lm::TokenStat& t = run.result->configurations[0].tokens[i];
        QVERIFY(text.contains(QStringLiteral("exact %1").arg(t.nllBase, 0, 'f', 3)));
        QVERIFY(text.contains(QStringLiteral("KV n=3 %1").arg(t.nllQ, 0, 'f', 3)) || text.contains(QString::number(t.nllQ, 'f', 3)));
        QVERIFY(text.contains(QStringLiteral("KLD %1").arg(QString::number(t.kld, 'g', 3))));
        QVERIFY(text.contains(QStringLiteral("<b>w%1</b>").arg(5 + i))); // the predicted token
        // The token's attention-level proxies (means over layers and heads), each named.
        const eval::TokenProxies& p = run.result->configurations[0].proxies[static_cast<std::size_t>(i)];
        for (const auto proxy : {eval::TokenProxy::AttnKl, eval::TokenProxy::Fisher, eval::TokenProxy::RelK})
            QVERIFY2(text.contains(QStringLiteral("%1 %2").arg(QLatin1String(eval::kTokenProxyColumns[static_cast<std::size_t>(proxy)]),
                                                             QString::number(p[static_cast<std::size_t>(proxy)], 'g', 3))),
                     qPrintable(text));
    }
    // The tooltip event shows that text.
    const QRect box = v.text()->scoredRect(1);
    QHelpEvent help(QEvent::ToolTip, box.center(), v.text()->mapToGlobal(box.center()));
    QApplication::sendEvent(v.text(), &help);
    QTRY_VERIFY(QToolTip::isVisible());
    QCOMPARE(QToolTip::text(), v.text()->hoverText(1));
}

void TestOutputView::shadingFollowsTheKld()
{
    OutputView v;
    v.resize(1000, 700);
    v.show();
    const ModelRun run = handMadeRun();
    v.setModelRun(run);
    QCoreApplication::processEvents();
    const QImage image = v.text()->grab().toImage();
    const double floor = v.text()->floor(), top = v.text()->top();
    QCOMPARE(top, 0.1);               // the worst token
    KVLENS_COMPARE_REL(floor, 1e-3, 1e-9); // the decade of the 5th percentile (0.001 .. 0.01 interpolated)
    double previousLightness = 2.0;
    for (int i = 0; i < 3; ++i) {
        const QRect box = v.text()->scoredRect(i);
        const QColor drawn = image.pixelColor(box.topLeft() + QPoint(1, 1));
        const QColor expected = kldColour(run.result->configurations[0].tokens[i].kld, floor, top);
        QCOMPARE(drawn.rgb(), expected.rgb());
        QVERIFY(expected.lightnessF() < previousLightness); // more damage, darker
        previousLightness = expected.lightnessF();
    }
    QCOMPARE(kldColour(0.0, floor, top).rgb(), QColor(255, 255, 255).rgb()); // zero: unshaded
}

void TestOutputView::theSameKldHasTheSameColourInEveryConfiguration()
{
    // Two configurations: A's KLDs 0.001, 0.01, 0.1 and B's ten times those. One scale for both: from
    // the decade of the pooled 5th percentile (0.001 .. 0.01 interpolated: 1e-3) to the worst token of
    // either (1.0); A's token 1 and B's token 0 (both 0.01 nats) are drawn in one colour.
    ModelRun run = handMadeRun();
    auto r = std::make_shared<eval::EvalResult>(*run.result);
    eval::ConfigurationResult b = r->configurations[0];
    b.name = "KQV";
    for (lm::TokenStat& t : b.tokens)
        t.kld *= 10.0;
    r->configurations.push_back(b);
    run.result = r;
    OutputView v;
    v.resize(1000, 700);
    v.show();
    v.setModelRun(run);
    v.setConfiguration(0);
    QCoreApplication::processEvents();
    const double floorA = v.text()->floor(), topA = v.text()->top();
    const QImage a = v.text()->grab().toImage();
    const QColor tokenOfA = a.pixelColor(v.text()->scoredRect(1).topLeft() + QPoint(1, 1));
    v.setConfiguration(1);
    QCoreApplication::processEvents();
    QCOMPARE(v.text()->configuration(), 1);
    QCOMPARE(v.text()->floor(), floorA);
    QCOMPARE(v.text()->top(), topA);
    KVLENS_COMPARE_REL(topA, 1.0, 1e-12);
    KVLENS_COMPARE_REL(floorA, 1e-3, 1e-9);
    const QImage bImage = v.text()->grab().toImage();
    const QColor tokenOfB = bImage.pixelColor(v.text()->scoredRect(0).topLeft() + QPoint(1, 1));
    QCOMPARE(tokenOfB.rgb(), tokenOfA.rgb());
    QCOMPARE(tokenOfA.rgb(), kldColour(0.01, floorA, topA).rgb());
    // And B's worst token (1.0) is darker than A's (0.1): the scale is not stretched per configuration.
    const QColor worstOfB = bImage.pixelColor(v.text()->scoredRect(2).topLeft() + QPoint(1, 1));
    const QColor worstOfA = a.pixelColor(v.text()->scoredRect(2).topLeft() + QPoint(1, 1));
    QVERIFY(worstOfB.lightnessF() < worstOfA.lightnessF());
}

void TestOutputView::tokensAreShownEscaped()
{
    QCOMPARE(displayToken("a\n"), QStringLiteral("a↵"));
    QCOMPARE(displayToken("\t"), QStringLiteral("→"));
    QCOMPARE(displayToken(std::string("\x01", 1)), QStringLiteral("<0x01>"));
    QCOMPARE(displayToken("\xff"), QStringLiteral("<0xff>"));
    QCOMPARE(displayToken("\xc3"), QStringLiteral("<0xc3>")); // half of a UTF-8 sequence
    QCOMPARE(displayToken("\xc3\xa9t\xc3\xa9"), QStringLiteral("été"));
}

void TestOutputView::configurationsAreCachedAcrossRuns()
{
    // The shipped tiny Llama over its held-out text: KV at n = 2, then KV and KQV. The second run
    // computes KQV only; KV's numbers are the first run's exactly.
    OutputView v;
    v.resize(1100, 760);
    v.setDefaults(QStringLiteral(KVLENS_MODELS_DIR "/tiny-llama"), QStringLiteral(KVLENS_MODELS_DIR "/tiny-llama/heldout.txt"));
    v.setContext(64);
    v.setChunks(2);
    v.setSchemes(QStringLiteral("KV"));
    v.setBudgets(QStringLiteral("2"));
    QSignalSpy finished(&v, &OutputView::runFinished);
    v.startRun();
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.back().front().toString(), QString());
    QCOMPARE(v.lastComputed(), 1);
    const auto first = v.modelRun().result;
    QCOMPARE(first->configurations.size(), std::size_t{1});
    QCOMPARE(first->chunksScored, 2);
    QCOMPARE(first->configurations[0].tokens.size(), std::size_t{2 * 31});
    QVERIFY(first->configurations[0].summary.kld.mean > 0.0);
    // The long status line after a run never widens the tab (it clips, the tooltip holds it all).
    QVERIFY2(v.statusText().size() > 100, qPrintable(v.statusText()));
    QVERIFY2(v.minimumSizeHint().width() <= 1000, qPrintable(QString::number(v.minimumSizeHint().width())));

    v.setSchemes(QStringLiteral("KV, KQV"));
    v.startRun();
    QVERIFY(finished.count() == 2 || finished.wait(120000));
    QCOMPARE(v.lastComputed(), 1);
    const auto second = v.modelRun().result;
    QCOMPARE(second->configurations.size(), std::size_t{2});
    QCOMPARE(second->configurations[0].name, std::string("KV"));
    QCOMPARE(second->configurations[1].name, std::string("KQV"));
    QCOMPARE(second->configurations[0].summary.kld.mean, first->configurations[0].summary.kld.mean);
    QCOMPARE(second->scored.size(), first->scored.size());
    // Both configurations have per-layer attribution rows, renumbered to their place.
    for (const int c : {0, 1})
        QCOMPARE(std::count_if(second->attribution.begin(), second->attribution.end(),
                               [c](const eval::AttributionRow& r) { return r.configuration == c; }),
                 std::ptrdiff_t{3 * 4});
    // Nothing new: everything from the cache, at once.
    v.startRun();
    QCOMPARE(finished.count(), 3);
    QCOMPARE(v.lastComputed(), 0);
    QCOMPARE(v.modelRun().result->configurations.size(), std::size_t{2});
    // A bad field is named, not run.
    v.setSchemes(QStringLiteral("no-such-scheme"));
    v.startRun();
    QVERIFY2(v.statusText().contains(QStringLiteral("schemes")), qPrintable(v.statusText()));
    QVERIFY(!v.isRunning());
}

void TestOutputView::aCancelledRunIsMarkedPartial()
{
    OutputView v;
    v.setDefaults(QStringLiteral(KVLENS_MODELS_DIR "/tiny-llama"), QStringLiteral(KVLENS_MODELS_DIR "/tiny-llama/heldout.txt"));
    v.setContext(64);
    v.setChunks(100);
    v.setSchemes(QStringLiteral("KV, KQV, TQ-KV"));
    v.setBudgets(QStringLiteral("2, 3"));
    QSignalSpy finished(&v, &OutputView::runFinished);
    v.startRun();
    QTRY_VERIFY_WITH_TIMEOUT(v.modelRun().result && v.modelRun().result->chunksScored >= 1, 120000);
    v.cancelRun();
    QVERIFY(finished.count() == 1 || finished.wait(60000));
    QVERIFY2(finished.back().at(0).toString().isEmpty(), qPrintable(finished.back().at(0).toString()));
    QCOMPARE(finished.back().at(1).toBool(), true);
    QVERIFY(v.modelRun().result->cancelled);
    QVERIFY(v.modelRun().result->chunksScored < 100);
    QVERIFY2(v.statusText().contains(QStringLiteral("partial")), qPrintable(v.statusText()));
    // A cancelled run is not cached: the same spec computes again.
    v.setChunks(2);
    v.setSchemes(QStringLiteral("KV"));
    v.setBudgets(QStringLiteral("2"));
    v.startRun();
    QVERIFY(finished.count() == 2 || finished.wait(120000));
    QCOMPARE(v.lastComputed(), 1);
    QVERIFY(!v.modelRun().result->cancelled);
}

void TestOutputView::theShadedTextExportsAtColumnWidth()
{
    OutputView v;
    v.setModelRun(closedFormRun());
    QTemporaryDir dir;
    for (const double inches : {3.5, 7.0}) {
        const QString path = dir.filePath(QStringLiteral("text_%1.pdf").arg(inches));
        QString error;
        QVERIFY2(v.exportShadedText(path, inches, 0, 2, &error), qPrintable(error));
        QFile f(path);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray pdf = f.readAll();
        QVERIFY(pdf.startsWith("%PDF"));
        // The page is exactly the column wide (in points).
        QVERIFY2(pdf.contains(QByteArray("/MediaBox [0 0 ") + QByteArray::number(static_cast<int>(inches * 72))),
                 pdf.left(2000).constData());
    }
    OutputView empty;
    QString error;
    QVERIFY(!empty.exportShadedText(dir.filePath(QStringLiteral("x.pdf")), 3.5, 0, 1, &error));
    QVERIFY(!error.isEmpty());
}

QTEST_MAIN(TestOutputView)
#include "tst_output_view.moc"
