// SPDX-License-Identifier: GPL-3.0-or-later
// Export dialog: formats, print width (single or double column), PNG resolution, folder and file name.
#pragma once

#include "widgets/figure_export.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFontComboBox;
class QLineEdit;
class QSpinBox;

namespace kvlens::widgets {

class ExportDialog : public QDialog {
    Q_OBJECT
public:
    /// `allViews`: the dialog exports every view (the stem becomes a prefix).
    ExportDialog(const QString& folder, const QString& stem, bool allViews, QWidget* parent = nullptr);

    ExportOptions options() const;
    QString folder() const;
    QString stem() const;

private:
    QCheckBox* m_pdf = nullptr;
    QCheckBox* m_svg = nullptr;
    QCheckBox* m_png = nullptr;
    QComboBox* m_width = nullptr;
    QDoubleSpinBox* m_customWidth = nullptr;
    QDoubleSpinBox* m_aspect = nullptr;
    QSpinBox* m_dpi = nullptr;
    QDoubleSpinBox* m_fontSize = nullptr;
    QFontComboBox* m_fontFamily = nullptr;
    QLineEdit* m_folder = nullptr;
    QLineEdit* m_stem = nullptr;
};

} // namespace kvlens::widgets
