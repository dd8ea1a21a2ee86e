// SPDX-License-Identifier: GPL-3.0-or-later
// Main window: for now a placeholder plot; the control dock and views arrive with the GUI issue.
#include "app/main_window.h"

#include "widgets/plot_widget.h"

namespace kvlens::app {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent)
{
    setWindowTitle(QStringLiteral("KVLens"));
    auto* plot = new widgets::PlotWidget(this);
    plot->xAxis->setLabel(QStringLiteral("direction error φ (rad)"));
    plot->yAxis->setLabel(QStringLiteral("SNR (dB)"));
    setCentralWidget(plot);
    resize(1100, 750);
}

} // namespace kvlens::app
