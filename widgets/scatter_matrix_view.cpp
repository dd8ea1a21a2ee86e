// SPDX-License-Identifier: GPL-3.0-or-later
// 6D scatter-plot matrix view.
#include "widgets/scatter_matrix_view.h"

#include "core/metrics/vector_metrics.h"

#include <QComboBox>

namespace kvlens::widgets {

namespace {

const QStringList& coordinateLabels()
{
    static const QStringList labels = {QStringLiteral("SNR_K (dB)"), QStringLiteral("φ_K (rad)"),
                                       QStringLiteral("SNR_V (dB)"), QStringLiteral("φ_V (rad)"),
                                       QStringLiteral("SNR_T (dB)"), QStringLiteral("φ_T (rad)")};
    return labels;
}

/// The matrix's labels: its panels are too short for the units, which one footnote gives.
const QStringList& shortLabels()
{
    static const QStringList labels = {QStringLiteral("SNR_K"), QStringLiteral("φ_K"), QStringLiteral("SNR_V"),
                                       QStringLiteral("φ_V"),   QStringLiteral("SNR_T"), QStringLiteral("φ_T")};
    return labels;
}

} // namespace

ScatterMatrixView::ScatterMatrixView(QWidget* parent)
    : ResultView(parent)
{
    m_mode = new QComboBox(this);
    m_mode->addItems({QStringLiteral("6×6 matrix"), QStringLiteral("one pair")});
    m_x = new QComboBox(this);
    m_y = new QComboBox(this);
    m_x->addItems(coordinateLabels());
    m_y->addItems(coordinateLabels());
    m_x->setCurrentIndex(1);
    m_y->setCurrentIndex(5);
    addOption(QStringLiteral("Show:"), m_mode);
    addOption(QStringLiteral("x:"), m_x);
    addOption(QStringLiteral("y:"), m_y);
    setToolTip(viewDescription());
}

QString ScatterMatrixView::viewDescription() const
{
    return QStringLiteral("Each trial as a point in the 6D error frame (scale and direction error of keys, values and "
                          "outputs); separated clouds mean the schemes damage attention differently.");
}

void ScatterMatrixView::setMatrix(bool matrix)
{
    m_mode->setCurrentIndex(matrix ? 0 : 1);
}

void ScatterMatrixView::setPair(int xCoordinate, int yCoordinate)
{
    m_x->setCurrentIndex(xCoordinate);
    m_y->setCurrentIndex(yCoordinate);
}

namespace {
const QString kExactNote = QStringLiteral("exact paths (SNR ∞: K of V-only, V of K-only) are left out of the panels of their SNR");
} // namespace

void ScatterMatrixView::drawPanel(QCPAxisRect* rect, int xc, int yc, bool legendEntries)
{
    const ResultSet& r = *data().results;
    const auto& budgets = r.spec.budgets;
    rect->axis(QCPAxis::atBottom)->setLabel(coordinateLabels()[xc]);
    rect->axis(QCPAxis::atLeft)->setLabel(coordinateLabels()[yc]);
    for (std::size_t bi = 0; bi < budgets.size(); ++bi) {
        for (std::size_t s = 0; s < r.schemes.size(); ++s) {
            QVector<double> x, y;
            for (const TrialResult& t : r.trials) {
                if (t.key.point != currentPoint() || t.key.scheme != static_cast<int>(s) || t.key.budget != budgets[bi])
                    continue;
                const auto v = t.sixD.values();
                const double vx = v[static_cast<std::size_t>(xc)], vy = v[static_cast<std::size_t>(yc)];
                // An exact path's SNR sits at the cap (200 dB): drawn, it would squeeze every
                // other point of that axis into a sliver. Left out of this panel, said below.
                auto capped = [](int c, double value) { return c % 2 == 0 && value >= kSnrCapDb - 1e-6; };
                if (capped(xc, vx) || capped(yc, vy)) {
                    m_exactLeftOut = true;
                    continue;
                }
                x.push_back(vx);
                y.push_back(vy);
            }
            if (x.isEmpty())
                continue;
            QCPGraph* g = m_plot->addScatterSeries(
                QStringLiteral("%1 n=%2").arg(schemeName(static_cast<int>(s))).arg(budgets[bi]),
                seriesColor(static_cast<int>(s)), seriesShape(static_cast<int>(bi)), legendEntries ? 6.0 : 4.0, rect);
            g->setData(x, y);
            if (!legendEntries)
                g->removeFromLegend();
        }
    }
    rect->axis(QCPAxis::atBottom)->rescale();
    rect->axis(QCPAxis::atLeft)->rescale();
    for (QCPAxis* axis : {rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft)}) {
        const QCPRange range = axis->range();
        const double pad = 0.08 * std::max(range.size(), 1e-9);
        axis->setRange(range.lower - pad, range.upper + pad);
    }
}

void ScatterMatrixView::beginPrint(double widthInches)
{
    m_printPair = m_mode->currentIndex() == 0 && widthInches < kMatrixMinInches;
    if (m_printPair)
        redraw();
}

void ScatterMatrixView::endPrint()
{
    if (m_printPair) {
        m_printPair = false;
        redraw();
    }
}

void ScatterMatrixView::redraw()
{
    m_plot->resetPlot();
    m_exactLeftOut = false;
    const bool matrix = m_mode->currentIndex() == 0 && !m_printPair;
    m_x->setEnabled(!matrix);
    m_y->setEnabled(!matrix);
    if (data().empty()) {
        m_plot->xAxis->setLabel(coordinateLabels()[m_x->currentIndex()]);
        m_plot->yAxis->setLabel(coordinateLabels()[m_y->currentIndex()]);
        m_plot->replot();
        return;
    }
    if (!matrix) {
        drawPanel(m_plot->axisRect(), m_x->currentIndex(), m_y->currentIndex(), true);
        if (m_exactLeftOut)
            m_plot->addFootnote(kExactNote);
        m_plot->noteCoincidences(QStringLiteral("identical points, drawn as rings: "));
        m_plot->applyPaperStyle(m_plot->font().pointSizeF());
        m_plot->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    // Matrix: a 6 x 6 grid of axis rects above a legend row. Off-diagonal panel (i, j) plots
    // coordinate j against coordinate i; the diagonal names the coordinate.
    m_plot->plotLayout()->clear();
    auto* grid = new QCPLayoutGrid;
    m_plot->plotLayout()->addElement(0, 0, grid);
    m_plot->legend = new QCPLegend;
    m_plot->plotLayout()->addElement(1, 0, m_plot->legend);
    m_plot->legend->setWrap(6);
    m_plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    m_plot->plotLayout()->setRowStretchFactor(1, 0.001);
    m_plot->legend->setVisible(true);
    bool first = true;
    for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 6; ++j) {
            auto* rect = new QCPAxisRect(m_plot);
            rect->setAutoMargins(QCP::msLeft | QCP::msBottom);
            // Air above the top row and right of the last column, where the outer tick labels reach.
            // (top and right are not auto margins: they take setMargins' values.)
            rect->setMinimumMargins(QMargins(2, 2, 2, 2));
            rect->setMargins(QMargins(2, i == 0 ? 10 : 2, j == 5 ? 10 : 2, 2));
            grid->addElement(i, j, rect);
            QCPAxis* bottom = rect->axis(QCPAxis::atBottom);
            QCPAxis* left = rect->axis(QCPAxis::atLeft);
            bottom->setTickLabels(i == 5);
            left->setTickLabels(j == 0);
            // Small panels: three ticks at most per axis.
            bottom->ticker()->setTickCount(3);
            left->ticker()->setTickCount(3);
            if (i == j) {
                auto* label = new QCPItemText(m_plot);
                label->setClipAxisRect(rect);
                label->position->setAxisRect(rect);
                label->position->setType(QCPItemPosition::ptAxisRectRatio);
                label->position->setCoords(0.5, 0.5);
                label->setText(shortLabels()[i]);
                bottom->setTicks(false);
                left->setTicks(false);
                continue;
            }
            drawPanel(rect, j, i, first);
            first = false;
            if (i != 5)
                bottom->setLabel(QString());
            if (j != 0)
                left->setLabel(QString());
        }
    }
    // The diagonal's corner panels carry the outer axes of the first row (SNR_K) and the last column
    // (phi_T): give them that coordinate's range (from a neighbour) and their tick labels.
    auto* topLeft = qobject_cast<QCPAxisRect*>(grid->element(0, 0));
    auto* topNeighbour = qobject_cast<QCPAxisRect*>(grid->element(0, 1));
    auto* bottomRight = qobject_cast<QCPAxisRect*>(grid->element(5, 5));
    auto* rightNeighbour = qobject_cast<QCPAxisRect*>(grid->element(4, 5));
    if (topLeft && topNeighbour && bottomRight && rightNeighbour) {
        QCPAxis* left = topLeft->axis(QCPAxis::atLeft);
        left->setRange(topNeighbour->axis(QCPAxis::atLeft)->range());
        left->setTicks(true);
        left->setTickLabels(true);
        QCPAxis* bottom = bottomRight->axis(QCPAxis::atBottom);
        bottom->setRange(rightNeighbour->axis(QCPAxis::atBottom)->range());
        bottom->setTicks(true);
        bottom->setTickLabels(true);
    }
    // Label the outer row and column with their coordinates.
    for (int k = 0; k < 6; ++k) {
        auto* bottomRect = qobject_cast<QCPAxisRect*>(grid->element(5, k));
        auto* leftRect = qobject_cast<QCPAxisRect*>(grid->element(k, 0));
        bottomRect->axis(QCPAxis::atBottom)->setLabel(shortLabels()[k]);
        leftRect->axis(QCPAxis::atLeft)->setLabel(shortLabels()[k]);
    }
    m_plot->addFootnote(QStringLiteral("SNR in dB, φ (direction error) in radians")
                        + (m_exactLeftOut ? QStringLiteral("; ") + kExactNote : QString()));
    // Schemes sharing a path share its coordinates: in those panels their points lie on each other.
    m_plot->noteCoincidences(QStringLiteral("points identical in some panels, drawn as rings: "), false);
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

double ScatterMatrixView::printAspect(double widthInches) const
{
    // The 6 x 6 matrix needs a square page for its panels beside the legend and notes; the pair
    // drawn at a single column takes the export's own aspect.
    return m_mode->currentIndex() == 0 && widthInches >= kMatrixMinInches ? 1.0 : 0.0;
}

} // namespace kvlens::widgets
