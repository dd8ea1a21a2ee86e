// SPDX-License-Identifier: GPL-3.0-or-later
// KL distribution view.
#include "widgets/kl_distribution_view.h"

#include "widgets/figures/basic_figures.h"

#include <QComboBox>
#include <QSignalBlocker>

namespace kvlens::widgets {

KlDistributionView::KlDistributionView(QWidget* parent)
    : ResultView(parent)
{
    m_budget = new QComboBox(this);
    m_budget->setToolTip(QStringLiteral("Nominal bit budget n whose KL distributions are shown."));
    m_mode = new QComboBox(this);
    m_mode->addItems({QStringLiteral("ECDF"), QStringLiteral("histogram")});
    addOption(QStringLiteral("Budget:"), m_budget);
    addOption(QStringLiteral("Show:"), m_mode);
    setToolTip(viewDescription());
}

QString KlDistributionView::viewDescription() const
{
    return QStringLiteral("How far each query's quantized attention p^ is from the exact p, as KL(p‖p^) in nats; "
                          "the tail (p99, worst) shows failures the mean hides.");
}

void KlDistributionView::setHistogram(bool histogram)
{
    m_mode->setCurrentIndex(histogram ? 1 : 0);
}

void KlDistributionView::setBudget(int budget)
{
    const int i = m_budget->findData(budget);
    if (i >= 0)
        m_budget->setCurrentIndex(i);
}

void KlDistributionView::redraw()
{
    if (!data().empty() && data().figures) {
        // Keep the budget list in step with the run, preserving the selection.
        const QVariant current = m_budget->currentData();
        const QSignalBlocker block(m_budget);
        m_budget->clear();
        for (int n : data().results->spec.budgets)
            m_budget->addItem(QStringLiteral("n = %1").arg(n), n);
        const int at = m_budget->findData(current);
        m_budget->setCurrentIndex(at >= 0 ? at : m_budget->count() - 1);
    }
    showFigure(klDistributionFigure(data(), currentPoint(), m_budget->currentData().toInt(), m_mode->currentIndex() == 1));
}

} // namespace kvlens::widgets
