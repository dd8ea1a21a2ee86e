// SPDX-License-Identifier: GPL-3.0-or-later
// Shared figure style: Okabe-Ito colours, interactions, fonts.
#include "widgets/plot_widget.h"

namespace kvlens::widgets {

const QVector<QColor>& okabeItoPalette()
{
    static const QVector<QColor> palette = {
        QColor(0xE6, 0x9F, 0x00), // orange
        QColor(0x56, 0xB4, 0xE9), // sky blue
        QColor(0x00, 0x9E, 0x73), // bluish green
        QColor(0xF0, 0xE4, 0x42), // yellow
        QColor(0x00, 0x72, 0xB2), // blue
        QColor(0xD5, 0x5E, 0x00), // vermillion
        QColor(0xCC, 0x79, 0xA7), // reddish purple
        QColor(0x00, 0x00, 0x00), // black
    };
    return palette;
}

QColor seriesColor(int i)
{
    const auto& palette = okabeItoPalette();
    const int n = static_cast<int>(palette.size()) - 1; // black is reserved
    return palette[((i % n) + n) % n];
}

PlotWidget::PlotWidget(QWidget* parent)
    : QCustomPlot(parent)
{
    setInteractions(QCP::iRangeDrag | QCP::iRangeZoom | QCP::iSelectPlottables);
    legend->setVisible(true);
    applyPaperStyle();
}

void PlotWidget::applyPaperStyle(double basePointSize)
{
    QFont font(QStringLiteral("DejaVu Sans"));
    font.setPointSizeF(basePointSize);
    setFont(font);
    setBackground(Qt::white);
    for (QCPAxis* axis : {xAxis, yAxis, xAxis2, yAxis2}) {
        axis->setLabelFont(font);
        QFont tickFont = font;
        tickFont.setPointSizeF(basePointSize * 0.9);
        axis->setTickLabelFont(tickFont);
        axis->setBasePen(QPen(Qt::black, 0));
        axis->setTickPen(QPen(Qt::black, 0));
        axis->setSubTickPen(QPen(Qt::black, 0));
        axis->grid()->setPen(QPen(QColor(0xDD, 0xDD, 0xDD), 0, Qt::DotLine));
    }
    QFont legendFont = font;
    legendFont.setPointSizeF(basePointSize * 0.9);
    legend->setFont(legendFont);
    legend->setBrush(QColor(255, 255, 255, 220));
    legend->setBorderPen(QPen(QColor(0xAA, 0xAA, 0xAA), 0));
}

} // namespace kvlens::widgets
