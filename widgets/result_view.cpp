// SPDX-License-Identifier: GPL-3.0-or-later
// Shared plumbing of the views.
#include "widgets/result_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>

namespace kvlens::widgets {

ResultView::ResultView(QWidget* parent)
    : QWidget(parent)
{
    m_layout = new QVBoxLayout(this);
    m_layout->setContentsMargins(4, 4, 4, 4);
    m_options = new QHBoxLayout;
    m_options->addStretch(1);
    m_layout->addLayout(m_options);
    m_plot = new PlotWidget(this);
    m_plot->setMinimumSize(320, 240);
    m_layout->addWidget(m_plot, 1);
}

void ResultView::setData(const ViewData& data)
{
    m_data = data;
    redraw();
}

void ResultView::addOption(const QString& label, QWidget* widget)
{
    const int at = m_options->count() - 1; // before the stretch
    if (!label.isEmpty()) {
        auto* l = new QLabel(label, this);
        l->setBuddy(widget);
        m_options->insertWidget(at, l);
    }
    m_options->insertWidget(m_options->count() - 1, widget);
    if (auto* combo = qobject_cast<QComboBox*>(widget))
        connect(combo, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
    else if (auto* check = qobject_cast<QCheckBox*>(widget))
        connect(check, &QCheckBox::toggled, this, [this] { redraw(); });
}

QString ResultView::schemeName(int index) const
{
    if (!m_data.results || index < 0 || index >= static_cast<int>(m_data.results->schemes.size()))
        return QStringLiteral("?");
    return QString::fromStdString(m_data.results->schemes[static_cast<std::size_t>(index)].name);
}

void ResultView::finishPlot()
{
    m_plot->rescaleAxes();
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
