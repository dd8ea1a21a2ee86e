// SPDX-License-Identifier: GPL-3.0-or-later
// Shared plumbing of the views.
#include "widgets/result_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTableWidget>

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

QTableWidget* ResultView::addTable(const QStringList& headers, const QStringList& tooltips)
{
    auto* table = new QTableWidget(this);
    table->setColumnCount(static_cast<int>(headers.size()));
    for (int c = 0; c < headers.size(); ++c) {
        auto* item = new QTableWidgetItem(headers[c]);
        item->setToolTip(tooltips.value(c));
        table->setHorizontalHeaderItem(c, item);
    }
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->verticalHeader()->setVisible(false);
    table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    return table;
}

void ResultView::splitBelowPlot(const QList<QWidget*>& below, const QList<int>& stretch)
{
    m_layout->removeWidget(m_plot);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_plot);
    for (QWidget* w : below)
        split->addWidget(w);
    for (int i = 0; i < stretch.size(); ++i)
        split->setStretchFactor(i, stretch[i]);
    m_layout->addWidget(split, 1);
}

QString ResultView::schemeName(int index) const
{
    return schemeLabel(m_data.results.get(), index);
}

void ResultView::showFigure(FigureSpec figure)
{
    m_figure = std::move(figure);
    const std::vector<QCPAxisRect*> panels = drawFigure(*m_plot, m_figure);
    m_panels = QVector<QCPAxisRect*>(panels.begin(), panels.end());
}

} // namespace kvlens::widgets
