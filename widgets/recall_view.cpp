// SPDX-License-Identifier: GPL-3.0-or-later
// Routing recall view.
#include "widgets/recall_view.h"

#include "widgets/figures/basic_figures.h"

namespace kvlens::widgets {

RecallView::RecallView(QWidget* parent)
    : ResultView(parent)
{
    setToolTip(viewDescription());
}

QString RecallView::viewDescription() const
{
    return QStringLiteral("Fraction of each query's top-k keys that the quantized attention still ranks in its top-k "
                          "(top panel), and how often the single most-attended key changes (bottom panel).");
}

void RecallView::redraw()
{
    showFigure(recallFigure(data(), currentPoint()));
}

} // namespace kvlens::widgets
