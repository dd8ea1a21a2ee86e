// SPDX-License-Identifier: GPL-3.0-or-later
// Export through QCustomPlot's own PDF/PNG writers and a QCPPainter on QSvgGenerator, then atomic renames.
#include "widgets/figure_export.h"

#include "core/analysis/coverage.h"
#include "core/io/atomic_file.h"
#include "core/io/fault.h"
#include "core/io/staged_dir.h"
#include "widgets/result_view.h"

#include <QDir>
#include <QSet>
#include <QFontDatabase>
#include <QFileInfo>
#include <QSvgGenerator>
#include <QTemporaryDir>
#include <QTemporaryFile>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <vector>

namespace kvlens::widgets {

int ExportOptions::widthPoints() const
{
    return static_cast<int>(std::lround(widthInches * 72.0));
}

int ExportOptions::heightPoints() const
{
    return static_cast<int>(std::lround(widthInches * aspect * 72.0));
}

int ExportOptions::pngHeightPixels() const
{
    return static_cast<int>(std::lround(widthInches * aspect * dpi));
}

namespace {

/// Runs `write(tempPath)` on a temporary in the target's directory and renames it over
/// the target. Returns an error naming the target, or an empty string.
QString writeViaTemporary(const QString& target, const std::function<bool(const QString&)>& write)
{
    QTemporaryFile temp(target + QStringLiteral(".XXXXXX"));
    temp.setAutoRemove(true);
    if (!temp.open())
        return QStringLiteral("%1: cannot write (%2)").arg(target, temp.errorString());
    const QString tempPath = temp.fileName();
    temp.close();
    const QString folder = QFileInfo(target).absolutePath();
    if (io::faultFailsWrite(QFileInfo(target).fileName().toStdString()))
        return QStringLiteral("%1: cannot write (No space left on device)").arg(target);
    if (!write(tempPath)) // the writers (libpng, the PDF engine) do not say why; a full disk is the usual one
        return QStringLiteral("%1: the figure could not be written%2")
            .arg(target, QString::fromStdString(io::spaceNote(folder.toStdString())));
    // QTemporaryFile made it 0600; a figure gets the permissions any new file gets.
    if (!applyDefaultPermissions(QFile::encodeName(tempPath).toStdString()))
        return QStringLiteral("%1: cannot set permissions (%2)").arg(target, QString::fromLocal8Bit(std::strerror(errno)));
    // rename(2) replaces the target atomically; QFile::rename would refuse an existing one.
    if (std::rename(QFile::encodeName(tempPath).constData(), QFile::encodeName(target).constData()) != 0)
        return QStringLiteral("%1: cannot replace (%2)").arg(target, QString::fromLocal8Bit(std::strerror(errno)));
    temp.setAutoRemove(false);
    return QString();
}

/// The options with the view's own height for this width, where it asks for one (a panel grid
/// that re-flows into more rows at a single column needs more height).
ExportOptions withViewAspect(const ResultView& view, ExportOptions options)
{
    if (const double aspect = view.printAspect(options.widthInches); aspect > 0.0)
        options.aspect = aspect;
    return options;
}

/// The view's print layout while it lives (ResultView::beginPrint), the live one after.
struct PrintMode {
    PrintMode(ResultView& v, const ExportOptions& options) : view(v) { view.beginPrint(options.widthInches); }
    ~PrintMode() { view.endPrint(); }
    ResultView& view;
};

/// While it lives, the plot's dense point clouds (scatter graphs of more than kDenseCloud points
/// in all) are drawn as one image per axis rect at `dpi` in place of their markers, so a vector
/// export keeps its axes, text and lines as vectors but not 37 000 marker shapes (matplotlib's
/// rasterized=True). The clouds come back after.
struct RasterizedClouds {
    static constexpr int kDenseCloud = 2000;

    RasterizedClouds(PlotWidget& p, int width, int height, int dpi) : plot(p)
    {
        QList<QCPGraph*> dense;
        int points = 0;
        for (int i = 0; i < plot.graphCount(); ++i) {
            QCPGraph* g = plot.graph(i);
            if (g->visible() && g->lineStyle() == QCPGraph::lsNone && g->scatterStyle().shape() != QCPScatterStyle::ssNone) {
                dense << g;
                points += g->dataCount();
            }
        }
        if (points <= kDenseCloud)
            return;
        const QString cloudLayer = QStringLiteral("kvlens-cloud"), imageLayer = QStringLiteral("kvlens-cloud-image");
        plot.addLayer(cloudLayer, plot.layer(QStringLiteral("main")), QCustomPlot::limAbove);
        plot.addLayer(imageLayer, plot.layer(QStringLiteral("grid")), QCustomPlot::limBelow);
        for (QCPGraph* g : dense) {
            layers.push_back({g, g->layer()});
            g->setLayer(cloudLayer);
        }
        // Render only the clouds, on the paper's white, at the print layout; the vector grid and
        // reference lines then draw over the image, light and dotted, as they would over markers.
        // Only the clouds: every layer off but the clouds' and their axis rects' (the graphs'
        // parent layerables, which must stay visible), and everything else on those layers hidden.
        // The axes stay drawn too: hiding their layer moves the axis rects (their margins are
        // laid out again without them) and the image would not sit where the markers were.
        QSet<QCPLayer*> keep{plot.layer(cloudLayer), plot.layer(QStringLiteral("axes"))};
        QSet<QCPLayerable*> parents;
        for (QCPLayerable* d : QList<QCPLayerable*>(dense.begin(), dense.end()))
            for (QCPLayerable* up = d->parentLayerable(); up; up = up->parentLayerable()) {
                if (up->layer())
                    keep.insert(up->layer());
                parents.insert(up);
            }
        QList<QPair<QCPLayer*, bool>> shownLayers;
        QList<QCPLayerable*> hidden;
        for (int i = 0; i < plot.layerCount(); ++i) {
            QCPLayer* l = plot.layer(i);
            shownLayers.push_back({l, l->visible()});
            l->setVisible(keep.contains(l));
            if (keep.contains(l) && l->name() != cloudLayer)
                for (QCPLayerable* child : l->children())
                    if (child->visible() && !parents.contains(child) && !qobject_cast<QCPAxis*>(child)) {
                        child->setVisible(false);
                        hidden << child;
                    }
        }
        // The axes stay for the layout, but their ticks must not: those pointing into the axis
        // rect would land in the image, drawn a second time under the vector ones and off their width.
        struct AxisPens {
            QCPAxis* axis;
            QPen base, tick, subTick;
        };
        QList<AxisPens> axisPens;
        for (QCPGraph* g : dense)
            for (QCPAxis* axis : g->keyAxis()->axisRect()->axes())
                if (std::none_of(axisPens.begin(), axisPens.end(), [axis](const AxisPens& a) { return a.axis == axis; })) {
                    axisPens.push_back({axis, axis->basePen(), axis->tickPen(), axis->subTickPen()});
                    axis->setBasePen(Qt::NoPen);
                    axis->setTickPen(Qt::NoPen);
                    axis->setSubTickPen(Qt::NoPen);
                }
        const double scale = dpi / 72.0;
        const QPixmap page = plot.toPixmap(width, height, scale);
        for (const AxisPens& a : axisPens) {
            a.axis->setBasePen(a.base);
            a.axis->setTickPen(a.tick);
            a.axis->setSubTickPen(a.subTick);
        }
        for (QCPLayerable* child : hidden)
            child->setVisible(true);
        for (const auto& [l, visible] : shownLayers)
            l->setVisible(visible);
        plot.layer(cloudLayer)->setVisible(false);

        // In the order of the graphs (a QSet of pointers would order the images by heap address,
        // so two exports of one figure wrote the same images in different orders).
        std::vector<QCPAxisRect*> rects;
        for (QCPGraph* g : dense)
            if (std::find(rects.begin(), rects.end(), g->keyAxis()->axisRect()) == rects.end())
                rects.push_back(g->keyAxis()->axisRect());
        const QRect live = plot.viewport();
        plot.setViewport(QRect(0, 0, width, height));
        plot.replot(QCustomPlot::rpImmediateRefresh);
        for (QCPAxisRect* rect : rects) {
            const QRect r = rect->rect();
            auto* image = new QCPItemPixmap(&plot);
            image->setLayer(imageLayer);
            // At its device pixel ratio the image keeps every pixel of `dpi` (a scaled item would
            // resample it to the layout's point grid).
            QPixmap cut = page.copy(QRect(QPoint(static_cast<int>(std::lround(r.left() * scale)),
                                                 static_cast<int>(std::lround(r.top() * scale))),
                                          QSize(static_cast<int>(std::lround(r.width() * scale)),
                                                static_cast<int>(std::lround(r.height() * scale)))));
            cut.setDevicePixelRatio(scale);
            image->setPixmap(cut);
            image->topLeft->setType(QCPItemPosition::ptAbsolute);
            image->bottomRight->setType(QCPItemPosition::ptAbsolute);
            image->topLeft->setCoords(r.left(), r.top());
            image->bottomRight->setCoords(r.left() + r.width(), r.top() + r.height());
            image->setClipToAxisRect(false);
            images << image;
        }
        plot.setViewport(live);
    }
    ~RasterizedClouds()
    {
        for (QCPItemPixmap* image : images)
            plot.removeItem(image);

        for (const auto& [g, layer] : layers)
            g->setLayer(layer);
        if (!layers.empty()) {
            plot.removeLayer(plot.layer(QStringLiteral("kvlens-cloud")));
            plot.removeLayer(plot.layer(QStringLiteral("kvlens-cloud-image")));
        }
    }
    bool active() const { return !images.isEmpty(); }

    PlotWidget& plot;
    std::vector<std::pair<QCPGraph*, QCPLayer*>> layers;
    QList<QCPItemPixmap*> images;
};

/// While it lives, the plot as a figure shows it and not as the window does: the window's own
/// marks (a selected cell's outline: PlotWidget::kUiLayer) hidden, every series shown whatever
/// a legend click hid, nothing selected; and, for a partial run, a note across the top saying how
/// much of the run the figure holds.
struct FigureState {
    FigureState(PlotWidget& p, const QString& partialNote) : plot(p)
    {
        plot.deselectAll();
        plot.setShowAllSeries(true);
        if (QCPLayer* ui = plot.uiLayer(); ui && ui->visible()) {
            ui->setVisible(false);
            uiHidden = true;
        }
        if (!partialNote.isEmpty()) {
            // A row of its own above everything (the layout makes room: it never covers data).
            plot.plotLayout()->insertRow(0);
            note = new QCPTextElement(&plot, partialNote, plot.legend ? plot.legend->font() : plot.font());
            note->setObjectName(QString::fromLatin1(PlotWidget::kNoteName));
            note->setTextColor(QColor(0xb0, 0x00, 0x20));
            plot.plotLayout()->addElement(0, 0, note);
            plot.plotLayout()->setRowStretchFactor(0, 0.001);
        }
    }
    ~FigureState()
    {
        if (note) {
            plot.plotLayout()->remove(note);
            plot.plotLayout()->simplify(); // the empty top row goes with it
        }
        if (uiHidden)
            plot.uiLayer()->setVisible(true);
        plot.setShowAllSeries(false);
        plot.replot(QCustomPlot::rpQueuedReplot);
    }
    PlotWidget& plot;
    bool uiHidden = false;
    QCPTextElement* note = nullptr;
};

/// The print style and tick counts of an export while it lives; exactly the live ones after
/// (every font, pen and legend frame as it was: an export leaves no mark on the window).
struct PrintLayout {
    PrintLayout(PlotWidget& p, const ExportOptions& options) : plot(p), live(p.saveStyle())
    {
        const double printPointSize = options.basePointSize > 0.0 ? options.basePointSize
                                                                  : (options.widthInches <= 4.0 ? 8.0 : 9.0);
        // The figure is laid out in points (1/72 in: the PDF and SVG page unit), but QCustomPlot
        // measures fonts at the screen's logical DPI; scale the point size so text comes out at
        // its nominal size on paper.
        dpi = plot.logicalDpiY() > 0 ? plot.logicalDpiY() : 96.0;
        plot.applyPaperStyle(printPointSize * 72.0 / dpi, kMinimumPrintPoints * 72.0 / dpi, options.fontFamily);
        width = options.widthPoints();
        height = options.heightPoints();
        plot.fitTicksToPrint(width, height);
    }
    ~PrintLayout()
    {
        plot.restoreStyle(*live);
        plot.restoreLiveTicks();
        plot.replot(QCustomPlot::rpQueuedReplot);
    }
    PlotWidget& plot;
    std::shared_ptr<PlotWidget::StyleState> live;
    double dpi = 96.0;
    int width = 0, height = 0;
};

QString saveText(const QString& path, const QByteArray& contents)
{
    // core's atomic write (temporary, fsync, rename) gives the file the usual 0666 & ~umask
    // permissions; QSaveFile left new figures 0600, unreadable to the rest of a shared project.
    if (auto written = writeFileAtomic(path.toStdString(), std::string_view(contents.constData(), contents.size())); !written)
        return QString::fromStdString(written.error().text());
    return QString();
}

} // namespace

FigureProvenance figureProvenance(const ResultView& view)
{
    FigureProvenance p;
    const std::shared_ptr<const ResultSet> results = view.figureResults();
    if (!results)
        return p;
    const RunCoverage coverage = runCoverage(*results);
    p.specJson = QByteArray::fromStdString(exportedSpecJson(*results));
    p.partialNote = QString::fromStdString(partialRunNote(coverage));
    p.partial = coverage.partial();
    if (coverage.partial() && !coverage.balanced)
        p.refusal = QStringLiteral("%1: the run is partial and its schemes hold different seeds (%2), so the figure "
                                   "would compare them on different draws; export it once the run has finished, or "
                                   "cancel it (a cancelled run keeps the seeds every scheme finished)")
                        .arg(view.viewTitle(), p.partialNote);
    return p;
}

ExportOutcome exportView(ResultView& view, const QString& dir, const QString& stem, const ExportOptions& requested,
                         const QByteArray& specJson)
{
    const ExportOptions options = withViewAspect(view, requested);
    ExportOutcome out;
    if (!QDir().mkpath(dir)) {
        out.error = QStringLiteral("%1: cannot create the folder").arg(dir);
        return out;
    }
    // Views that compute in the background (the teaching view) finish first, so an export never
    // catches a half-drawn figure.
    if (!view.waitUntilDrawn()) {
        out.error = QStringLiteral("%1: the view is still computing").arg(view.viewTitle());
        return out;
    }
    // The spec beside the figure is the run the figure was drawn from, and says what part of it
    // the files hold; the caller's text only for a view drawn from no single result set.
    const FigureProvenance provenance = figureProvenance(view);
    if (!provenance.refusal.isEmpty()) {
        out.error = provenance.refusal;
        return out;
    }
    const QByteArray spec = view.figureResults() ? provenance.specJson : specJson;
    const QString base = QDir(dir).filePath(stem);
    auto record = [&](const QString& path, const QString& error) {
        if (!error.isEmpty() && out.error.isEmpty())
            out.error = error;
        else if (error.isEmpty())
            out.written << path;
    };
    auto writeDataAndSpec = [&] {
        // A partial run's data says so on its first line (a comment: "#", as pandas' comment="#" reads it).
        const QString csv = provenance.partial
                                ? QStringLiteral("# %1 (the spec's \"partial\" block lists the seeds held)\n")
                                          .arg(provenance.partialNote)
                                      + view.dataCsv()
                                : view.dataCsv();
        record(base + QStringLiteral(".csv"), saveText(base + QStringLiteral(".csv"), csv.toUtf8()));
        if (!spec.isEmpty())
            record(base + QStringLiteral(".spec.json"), saveText(base + QStringLiteral(".spec.json"), spec));
    };
    // An empty figure ("Not a model run") is not written: the outcome says why. Its data still is,
    // where there is some (the validation's RNG comparison without an OpenCL device).
    if (const QString reason = view.noFigureReason(); !reason.isEmpty()) {
        // Data means a row under the header.
        if (view.dataCsv().trimmed().count(QLatin1Char('\n')) < 1) {
            out.skipped << QStringLiteral("%1: %2").arg(view.viewTitle(), reason);
            return out;
        }
        writeDataAndSpec();
        out.skipped << QStringLiteral("%1: no figure, %2; its data is in %3.csv").arg(view.viewTitle(), reason, stem);
        return out;
    }
    PlotWidget* plot = view.plot();
    const PrintMode mode(view, options);
    const FigureState figure(*plot, provenance.partialNote);
    const PrintLayout print(*plot, options);
    const double dpi = print.dpi;
    const int w = print.width, h = print.height;
    const QString title = view.viewTitle();

    std::optional<RasterizedClouds> clouds;
    if (options.pdf || options.svg)
        clouds.emplace(*plot, w, h, std::min(options.dpi, 300));
    if (options.pdf) {
        const QString path = base + QStringLiteral(".pdf");
        record(path, writeViaTemporary(path, [&](const QString& temp) {
                   return plot->savePdf(temp, w, h, QCP::epNoCosmetic, QStringLiteral("KVLens"), title);
               }));
    }
    if (options.svg) {
        const QString path = base + QStringLiteral(".svg");
        record(path, writeViaTemporary(path, [&](const QString& temp) {
                   // The view box is in points, like the PDF page; the generator converts font
                   // point sizes at its resolution, so it must match the DPI the fonts were scaled for.
                   QSvgGenerator generator;
                   generator.setFileName(temp);
                   generator.setResolution(static_cast<int>(dpi));
                   generator.setSize(QSize(static_cast<int>(std::lround(w * dpi / 72.0)),
                                           static_cast<int>(std::lround(h * dpi / 72.0))));
                   generator.setViewBox(QRect(0, 0, w, h));
                   generator.setTitle(title);
                   generator.setDescription(QStringLiteral("KVLens figure"));
                   QCPPainter painter;
                   if (!painter.begin(&generator))
                       return false;
                   painter.setMode(QCPPainter::pmVectorized);
                   painter.setMode(QCPPainter::pmNoCaching);
                   plot->toPainter(&painter, w, h);
                   return painter.end();
               }));
    }
    clouds.reset(); // the PNG draws every marker
    if (options.png) {
        const QString path = base + QStringLiteral(".png");
        const double scale = options.dpi / 72.0;
        record(path, writeViaTemporary(path, [&](const QString& temp) {
                   return plot->savePng(temp, w, h, scale, -1, options.dpi, QCP::ruDotsPerInch);
               }));
    }
    writeDataAndSpec();

    return out;
}

ExportOutcome exportViews(const std::vector<ResultView*>& views, const QString& dir,
                          const std::function<QString(const ResultView&)>& stemFor, const ExportOptions& options,
                          const QByteArray& specJson)
{
    ExportOutcome out;
    if (!QDir().mkpath(dir)) {
        out.error = QStringLiteral("%1: cannot create the folder").arg(dir);
        return out;
    }
    QTemporaryDir staging(QDir(dir).filePath(QStringLiteral(".kvlens-export-XXXXXX")));
    if (!staging.isValid()) {
        out.error = QStringLiteral("%1: cannot write into the folder (%2)").arg(dir, staging.errorString());
        return out;
    }
    QStringList staged;
    for (ResultView* view : views) {
        const ExportOutcome one = exportView(*view, staging.path(), stemFor(*view), options, specJson);
        if (!one.ok()) {
            // Name the file as the user will look for it, not its staging copy.
            out.error = QString(one.error).replace(staging.path(), QDir(dir).absolutePath());
            return out; // the staging folder goes with `staging`; nothing in `dir` changed
        }
        staged << one.written;
        out.skipped << one.skipped;
    }
    for (const QString& path : staged) {
        const QString target = QDir(dir).filePath(QFileInfo(path).fileName());
        if (std::rename(QFile::encodeName(path).constData(), QFile::encodeName(target).constData()) != 0) {
            out.error = QStringLiteral("%1: cannot replace (%2)").arg(target, QString::fromLocal8Bit(std::strerror(errno)));
            return out;
        }
        out.written << target;
    }
    return out;
}

PrintCheck checkPrint(ResultView& view, const ExportOptions& requested)
{
    const ExportOptions options = withViewAspect(view, requested);
    PrintCheck check;
    if (!view.waitUntilDrawn())
        return check;
    PlotWidget* plot = view.plot();
    const PrintMode mode(view, options);
    const FigureState figure(*plot, figureProvenance(view).partialNote);
    const PrintLayout print(*plot, options);
    const QRect live = plot->viewport();
    plot->setViewport(QRect(0, 0, print.width, print.height));
    plot->replot(QCustomPlot::rpImmediateRefresh);
    const double toPoints = print.dpi / 72.0; // font sizes are set scaled by 72 / dpi
    auto add = [&](const QString& what, const QString& text, const QFont& font, double scale = 1.0) {
        check.texts.push_back({what, text, font.pointSizeF() * scale * toPoints});
    };
    {
        for (QCPAxis* axis : plot->labelledAxes()) {
            if (!axis->visible())
                continue;
            if (isFormula(axis->label())) {
                for (const FormulaLayout::Piece& piece : plot->formulaLayout(axis).pieces)
                    add(QStringLiteral("axis label"), piece.text, piece.font);
            } else if (!axis->label().trimmed().isEmpty()) {
                add(QStringLiteral("axis label"), axis->label(), axis->labelFont());
            }
            if (!axis->tickLabels())
                continue;
            const bool exponents = PlotWidget::hasExponents(axis);
            for (const PlotWidget::TickSpan& t : PlotWidget::tickLabelSpans(axis)) {
                add(QStringLiteral("tick label"), t.label, axis->tickLabelFont());
                if (exponents)
                    add(QStringLiteral("tick exponent"), t.label, axis->tickLabelFont(), PlotWidget::kExponentScale);
            }
            check.overlaps << PlotWidget::tickOverlaps(axis);
        }
    }
    // An axis label much longer than its axis runs into the neighbouring panel's label or off the
    // page; centred, it may reach 7.5% past each end, into the margin, the panel gap.
    for (QCPAxis* axis : plot->labelledAxes()) {
            QCPAxisRect* rect = axis->axisRect();
            if (!axis->visible() || axis->label().trimmed().isEmpty())
                continue;
            const double labelWidth = isFormula(axis->label()) ? plot->formulaLayout(axis).width
                                                               : QFontMetricsF(axis->labelFont()).horizontalAdvance(axis->label());
            const double room = axis->orientation() == Qt::Horizontal ? rect->width() : rect->height();
            if (labelWidth > 1.15 * room + 1.0)
                check.collisions << QStringLiteral("axis label \"%1\" is %2 pt long on a %3 pt axis")
                                        .arg(formulaPlainText(axis->label()))
                                        .arg(labelWidth, 0, 'f', 0)
                                        .arg(room, 0, 'f', 0); // the layout is in points
        }
    QList<QCPLegend*> legends;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* l = qobject_cast<QCPLegend*>(e); l && !legends.contains(l))
            legends << l;
    for (QCPAxisRect* rect : plot->axisRects())
        for (int i = 0; i < rect->insetLayout()->elementCount(); ++i)
            if (auto* l = qobject_cast<QCPLegend*>(rect->insetLayout()->elementAt(i)); l && !legends.contains(l))
                legends << l;
    if (!legends.contains(plot->legend))
        legends << plot->legend;
    const QRect page(0, 0, print.width, print.height);
    QList<QRect> legendBoxes;
    for (QCPLegend* l : legends) {
        if (!l || !l->visible() || l->itemCount() == 0)
            continue;
        const QRect box = l->outerRect().marginsRemoved(l->margins());
        if (!page.contains(box))
            check.collisions << QStringLiteral("a legend (\"%1\") reaches outside the page").arg(
                                    qobject_cast<QCPPlottableLegendItem*>(l->item(0)) ? qobject_cast<QCPPlottableLegendItem*>(l->item(0))->plottable()->name() : QString());
        for (const QRect& other : legendBoxes)
            if (box.intersects(other))
                check.collisions << QStringLiteral("two legends overlap");
        legendBoxes << box;
    }
    for (QCPLegend* l : legends)
        if (l && l->visible())
            for (int i = 0; i < l->itemCount(); ++i)
                if (auto* item = qobject_cast<QCPPlottableLegendItem*>(l->item(i)))
                    add(QStringLiteral("legend"), item->plottable()->name(), item->font());
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(plot->item(i)); text && text->visible()) {
            if (isFormula(text->text()))
                for (const FormulaLayout::Piece& piece : layoutFormula(text->text(), text->font(), kMinimumPrintPoints * 72.0 / print.dpi).pieces)
                    add(QStringLiteral("text"), piece.text, piece.font);
            else
                add(QStringLiteral("text"), text->text(), text->font());
        }
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* title = qobject_cast<QCPTextElement*>(e); title && title->visible()) {
            add(QStringLiteral("title"), title->text(), title->font());
            // A note or title wider than the page is cut off at its edges.
            const QSizeF size = QFontMetricsF(title->font()).boundingRect(QRectF(), Qt::AlignLeft, title->text()).size();
            if (size.width() > print.width + 0.5)
                check.collisions << QStringLiteral("the text \"%1\" is %2 pt wide on a %3 pt page")
                                        .arg(title->text().section(QLatin1Char('\n'), 0, 0))
                                        .arg(size.width(), 0, 'f', 0)
                                        .arg(print.width);
        }
    plot->setViewport(live);
    check.smallest = 1e9;
    for (const PrintedText& t : check.texts)
        check.smallest = std::min(check.smallest, t.points);
    return check;
}

Result<ExportOptions> figureOptionsFrom(const QString& width, const QString& dpi, const QString& fontFamily,
                                        const QString& fontSize)
{
    ExportOptions o;
    if (!width.isEmpty()) {
        bool ok = false;
        const double inches = width == QLatin1String("single") ? 3.5 : width == QLatin1String("double") ? 7.0 : width.toDouble(&ok);
        if (width != QLatin1String("single") && width != QLatin1String("double") && (!ok || !(inches >= 1.0 && inches <= 20.0)))
            return Error{"--width", "must be single (3.5 in), double (7 in) or inches in [1, 20]; got '" + width.toStdString() + "'"};
        o.widthInches = inches;
    }
    if (!dpi.isEmpty()) {
        bool ok = false;
        const int value = dpi.toInt(&ok);
        if (!ok || value < 72 || value > 1200)
            return Error{"--dpi", "must be an integer in [72, 1200]; got '" + dpi.toStdString() + "'"};
        o.dpi = value;
    }
    if (!fontSize.isEmpty()) {
        bool ok = false;
        const double pt = fontSize.toDouble(&ok);
        if (!ok || !(pt >= 5.0 && pt <= 24.0))
            return Error{"--font-size", "must be a size in pt in [5, 24]; got '" + fontSize.toStdString() + "'"};
        o.basePointSize = pt;
    }
    if (!fontFamily.isEmpty()) {
        if (!QFontDatabase::families().contains(fontFamily, Qt::CaseInsensitive))
            return Error{"--font-family", "no installed font family '" + fontFamily.toStdString()
                                              + "' (fc-list : family lists them; the default is DejaVu Sans)"};
        o.fontFamily = fontFamily;
    }
    return o;
}

} // namespace kvlens::widgets
