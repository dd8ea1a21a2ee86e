// SPDX-License-Identifier: GPL-3.0-or-later
// 6D scatter-plot matrix view.
#include "widgets/scatter_matrix_view.h"

#include "widgets/figures/scatter_matrix_figure.h"

#include <QComboBox>

namespace kvlens::widgets {

ScatterMatrixView::ScatterMatrixView(QWidget* parent)
    : ResultView(parent)
{
    m_mode = new QComboBox(this);
    m_mode->addItems({QStringLiteral("6×6 matrix"), QStringLiteral("one pair")});
    m_x = new QComboBox(this);
    m_y = new QComboBox(this);
    m_x->addItems(sixDCoordinateLabels());
    m_y->addItems(sixDCoordinateLabels());
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
    const bool matrix = m_mode->currentIndex() == 0 && !m_printPair;
    m_x->setEnabled(!matrix);
    m_y->setEnabled(!matrix);
    showFigure(scatterMatrixFigure(data(), currentPoint(), matrix, m_x->currentIndex(), m_y->currentIndex()));
}

double ScatterMatrixView::printAspect(double widthInches) const
{
    // The 6 x 6 matrix needs a square page for its panels beside the legend and notes; the pair
    // drawn at a single column takes the export's own aspect.
    return m_mode->currentIndex() == 0 && widthInches >= kMatrixMinInches ? 1.0 : 0.0;
}

} // namespace kvlens::widgets
