// SPDX-License-Identifier: GPL-3.0-or-later
// Sweep view.
#include "widgets/sweep_view.h"

#include "widgets/figures/sweep_figure.h"

#include <QCheckBox>
#include <QComboBox>
#include <QSignalBlocker>

namespace kvlens::widgets {

SweepView::SweepView(QWidget* parent)
    : ResultView(parent)
{
    setPointSelectable(false); // every grid point is on the x axis
    m_x = new QComboBox(this);
    m_x->setToolTip(QStringLiteral("Parameter on the x axis: a swept parameter, or the nominal bit budget n."));
    m_metric = new QComboBox(this);
    m_metric->addItems(metricNames());
    m_metric->setToolTip(QStringLiteral("Metric on the y axis, with 95% intervals over seeds."));
    m_budget = new QComboBox(this);
    m_budget->setToolTip(QStringLiteral("Budget drawn (all: one line per scheme and budget)."));
    m_logY = new QCheckBox(QStringLiteral("log y"), this);
    m_logY->setChecked(true);
    m_logY->setToolTip(QStringLiteral("Logarithmic y axis (KL spans decades)."));
    addOption(QStringLiteral("x:"), m_x);
    addOption(QStringLiteral("y:"), m_metric);
    addOption(QStringLiteral("Budget:"), m_budget);
    addOption(QString(), m_logY);
    setToolTip(viewDescription());
}

QString SweepView::viewDescription() const
{
    return QStringLiteral("A metric against a swept parameter, one line per scheme, with 95% intervals over seeds: "
                          "where each scheme holds up and where it breaks.");
}

QStringList SweepView::metricNames()
{
    return sweepMetricNames();
}

void SweepView::setMetric(int index)
{
    m_metric->setCurrentIndex(index);
}

bool SweepView::setXParameter(const QString& parameter)
{
    const int i = m_x->findData(parameter);
    if (i >= 0)
        m_x->setCurrentIndex(i);
    return i >= 0;
}

void SweepView::redraw()
{
    if (!data().empty() && data().figures)
        refreshChoices();
    SweepChoice choice;
    choice.xParameter = m_x->currentData().toString();
    choice.budget = m_budget->currentData().toInt();
    choice.metric = m_metric->currentIndex();
    choice.logY = m_logY->isChecked();
    if (!data().empty() && data().figures) {
        m_budget->setEnabled(choice.xParameter != QLatin1String("budget"));
        m_logY->setEnabled(sweepMetricIsKl(choice.metric));
    }
    showFigure(sweepFigure(data(), choice));
}

void SweepView::refreshChoices()
{
    // x choices: the swept parameters first (the point of a sweep), then the budget.
    const ExperimentSpec& spec = data().results->spec;
    const QVariant current = m_x->currentData();
    const QSignalBlocker block(m_x);
    m_x->clear();
    for (const SweepAxis* a : spec.gridAxes())
        m_x->addItem(sweepAxisLabel(QString::fromStdString(a->name())), QString::fromStdString(a->name()));
    m_x->addItem(QStringLiteral("nominal budget n"), QStringLiteral("budget"));
    const int at = m_x->findData(current);
    m_x->setCurrentIndex(at >= 0 ? at : 0);
    const QVariant budget = m_budget->currentData();
    const QSignalBlocker blockBudget(m_budget);
    m_budget->clear();
    m_budget->addItem(QStringLiteral("all"), 0);
    for (int n : spec.budgets)
        m_budget->addItem(QStringLiteral("n = %1").arg(n), n);
    const int b = m_budget->findData(budget);
    m_budget->setCurrentIndex(b >= 0 ? b : 0);
}

} // namespace kvlens::widgets
