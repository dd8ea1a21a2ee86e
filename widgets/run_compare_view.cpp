// SPDX-License-Identifier: GPL-3.0-or-later
// The run comparison's forest plot.
#include "widgets/run_compare_view.h"

#include "widgets/figures/forest_figures.h"

#include <QComboBox>

namespace kvlens::widgets {

RunCompareView::RunCompareView(QWidget* parent)
    : ResultView(parent)
{
    m_metric = new QComboBox(this);
    for (const RunMetric& m : runMetrics())
        m_metric->addItem(QString::fromLatin1(m.name), QString::fromLatin1(m.name));
    m_metric->setToolTip(QStringLiteral("The per-seed metric drawn."));
    addOption(QStringLiteral("Metric:"), m_metric);
    connect(m_metric, &QComboBox::currentIndexChanged, this, [this] {
        redraw();
        updateEmptyState();
    });
    setPointSelectable(false); // every grid point is drawn, labelled
    setToolTip(viewDescription());
}

QString RunCompareView::viewDescription() const
{
    return QStringLiteral("Run B against run A, per scheme and budget: the change of a per-seed metric with its 95% "
                          "interval, the seed as the unit (paired when both runs drew the same data).");
}

void RunCompareView::setComparison(std::shared_ptr<const RunComparison> comparison)
{
    m_comparison = std::move(comparison);
    redraw();
    updateEmptyState();
}

bool RunCompareView::setMetric(const QString& name)
{
    const int at = m_metric->findData(name);
    if (at < 0)
        return false;
    m_metric->setCurrentIndex(at);
    return true;
}

QString RunCompareView::dataCsv() const
{
    return m_comparison ? QString::fromStdString(runComparisonCsv(*m_comparison)) : QString();
}

QString RunCompareView::emptyText() const
{
    if (!m_comparison)
        return QStringLiteral("No comparison: kvlens compare DIR_A DIR_B --out DIR compares two finished runs.");
    return QString();
}

double RunCompareView::printAspect(double widthInches) const
{
    // An axis with its label, the legend row and the footnotes, then a row per configuration.
    const double inches = 1.2 + 0.19 * std::max(1, m_rows) + 0.13 * m_footnoteLines;
    return std::clamp(inches / widthInches, 0.35, 2.5);
}

void RunCompareView::redraw()
{
    ForestFigure forest = runCompareFigure(m_comparison.get(), m_metric->currentData().toString().toStdString());
    m_rows = forest.rows;
    m_footnoteLines = forest.footnoteLines;
    showFigure(std::move(forest.figure));
}

} // namespace kvlens::widgets
