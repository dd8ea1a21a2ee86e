// SPDX-License-Identifier: GPL-3.0-or-later
// The KVLens main window.
#pragma once

#include <QMainWindow>

namespace kvlens::app {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
};

} // namespace kvlens::app
