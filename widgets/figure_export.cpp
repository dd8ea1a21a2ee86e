// SPDX-License-Identifier: GPL-3.0-or-later
// Export through QCustomPlot's own PDF/PNG writers and a QCPPainter on QSvgGenerator, then atomic renames.
#include "widgets/figure_export.h"

#include "core/io/fault.h"
#include "core/io/staged_dir.h"
#include "widgets/result_view.h"

#include <QDir>
#include <QFileInfo>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTemporaryDir>
#include <QTemporaryFile>

#include <cmath>
#include <cstdio>
#include <functional>

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
    // rename(2) replaces the target atomically; QFile::rename would refuse an existing one.
    if (std::rename(QFile::encodeName(tempPath).constData(), QFile::encodeName(target).constData()) != 0)
        return QStringLiteral("%1: cannot replace (%2)").arg(target, QString::fromLocal8Bit(std::strerror(errno)));
    temp.setAutoRemove(false);
    return QString();
}

QString saveText(const QString& path, const QByteArray& contents)
{
    if (io::faultFailsWrite(QFileInfo(path).fileName().toStdString()))
        return QStringLiteral("%1: cannot write (No space left on device)").arg(path);
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(contents) != contents.size() || !file.commit())
        return QStringLiteral("%1: cannot write (%2)").arg(path, file.errorString());
    return QString();
}

} // namespace

ExportOutcome exportView(ResultView& view, const QString& dir, const QString& stem, const ExportOptions& options,
                         const QByteArray& specJson)
{
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
    PlotWidget* plot = view.plot();
    const double livePointSize = plot->font().pointSizeF();
    const double printPointSize = options.basePointSize > 0.0 ? options.basePointSize
                                                              : (options.widthInches <= 4.0 ? 8.0 : 9.0);
    plot->deselectAll();
    // The figure is laid out in points (1/72 in: the PDF and SVG page unit), but QCustomPlot
    // measures fonts at the screen's logical DPI; scale the point size so text comes out at
    // its nominal size on paper.
    const double dpi = plot->logicalDpiY() > 0 ? plot->logicalDpiY() : 96.0;
    plot->applyPaperStyle(printPointSize * 72.0 / dpi);
    const int w = options.widthPoints(), h = options.heightPoints();
    const QString base = QDir(dir).filePath(stem);
    const QString title = view.viewTitle();

    auto record = [&](const QString& path, const QString& error) {
        if (!error.isEmpty() && out.error.isEmpty())
            out.error = error;
        else if (error.isEmpty())
            out.written << path;
    };
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
    if (options.png) {
        const QString path = base + QStringLiteral(".png");
        const double scale = options.dpi / 72.0;
        record(path, writeViaTemporary(path, [&](const QString& temp) {
                   return plot->savePng(temp, w, h, scale, -1, options.dpi, QCP::ruDotsPerInch);
               }));
    }
    record(base + QStringLiteral(".csv"), saveText(base + QStringLiteral(".csv"), view.dataCsv().toUtf8()));
    record(base + QStringLiteral(".spec.json"), saveText(base + QStringLiteral(".spec.json"), specJson));

    plot->applyPaperStyle(livePointSize);
    plot->replot(QCustomPlot::rpQueuedReplot);
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

} // namespace kvlens::widgets
