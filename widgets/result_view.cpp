// SPDX-License-Identifier: GPL-3.0-or-later
// Shared plumbing of the views.
#include "widgets/result_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QLabel>
#include <QSignalBlocker>

#include <algorithm>
#include <cmath>

namespace kvlens::widgets {

ResultView::ResultView(QWidget* parent)
    : QWidget(parent)
{
    m_layout = new QVBoxLayout(this);
    m_layout->setContentsMargins(4, 4, 4, 4);
    m_options = new QHBoxLayout;
    m_options->addStretch(1);
    m_layout->addLayout(m_options);
    m_point = new QComboBox(this);
    m_point->setToolTip(QStringLiteral("Grid point of the sweep shown in this view."));
    m_point->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_pointLabel = new QLabel(QStringLiteral("Point:"), this);
    m_options->insertWidget(0, m_pointLabel);
    m_options->insertWidget(1, m_point);
    connect(m_point, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
    m_pointLabel->setVisible(false);
    m_point->setVisible(false);
    m_plot = new PlotWidget(this);
    m_plot->setMinimumSize(320, 240);
    m_layout->addWidget(m_plot, 1);
    m_placeholder = new QLabel(m_plot);
    m_placeholder->setAlignment(Qt::AlignCenter);
    m_placeholder->setWordWrap(true);
    m_placeholder->setAutoFillBackground(true);
    m_placeholder->setStyleSheet(QStringLiteral("QLabel { background: white; color: #555; }"));
    m_placeholder->hide();
    m_plot->installEventFilter(this);
    // Now with the base text, and once more when the subclass is complete (its emptyText()).
    updateEmptyState();
    QMetaObject::invokeMethod(this, [this] { updateEmptyState(); }, Qt::QueuedConnection);
}

void ResultView::setData(const ViewData& data)
{
    m_data = data;
    refreshPoints();
    redraw();
    updateEmptyState();
}

QString ResultView::emptyText() const
{
    if (!m_data.results)
        return QStringLiteral("Run an experiment to fill this view (Run in the Experiment dock, or Ctrl+R).");
    if (m_data.results->trials.empty())
        return QStringLiteral("computing… 0 of %1 trials").arg(m_data.results->totalTrials);
    return QString();
}

QString ResultView::noFigureReason() const
{
    if (const QString empty = emptyText(); !empty.isEmpty())
        return empty;
    return m_plot->seriesCount() > 0 ? QString() : QStringLiteral("nothing is drawn");
}

QString ResultView::placeholderText() const
{
    return m_placeholder->isVisible() || !m_placeholder->isHidden() ? m_placeholder->text() : QString();
}

void ResultView::updateEmptyState()
{
    const QString text = emptyText();
    m_placeholder->setText(text);
    m_placeholder->setGeometry(m_plot->rect());
    m_placeholder->setVisible(!text.isEmpty());
    if (!text.isEmpty())
        m_placeholder->raise();
}

bool ResultView::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == m_plot && event->type() == QEvent::Resize)
        m_placeholder->setGeometry(m_plot->rect());
    return QWidget::eventFilter(watched, event);
}

void ResultView::refreshPoints()
{
    const int points = m_data.results ? m_data.results->spec.pointCount() : 1;
    const QSignalBlocker block(m_point);
    const int current = m_point->currentIndex();
    m_point->clear();
    for (int p = 0; p < points && m_data.results; ++p)
        m_point->addItem(QString::fromStdString(m_data.results->spec.pointLabel(p)), p);
    m_point->setCurrentIndex(current >= 0 && current < points ? current : 0);
    const bool visible = m_pointSelectable && points > 1;
    m_point->setVisible(visible);
    m_pointLabel->setVisible(visible);
}

int ResultView::currentPoint() const
{
    return std::max(0, m_point->currentIndex());
}

void ResultView::setPoint(int point)
{
    m_point->setCurrentIndex(point);
}

void ResultView::setPointSelectable(bool selectable)
{
    m_pointSelectable = selectable;
    refreshPoints();
}

void ResultView::addOption(const QString& label, QWidget* widget)
{
    const int at = m_options->count() - 1; // before the stretch (and after the point selector)
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
    // Room around the data: a marker at the extreme of an axis is drawn whole, not cut by the frame.
    for (QCPAxis* axis : {m_plot->xAxis, m_plot->yAxis}) {
        const QCPRange r = axis->range();
        if (axis->scaleType() == QCPAxis::stLogarithmic) {
            if (r.lower > 0.0)
                axis->setRange(r.lower / 1.15, r.upper * 1.15);
        } else {
            const double pad = 0.04 * (r.size() > 0.0 ? r.size() : std::max(1.0, std::abs(r.center())));
            axis->setRange(r.lower - pad, r.upper + pad);
        }
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
