// SPDX-License-Identifier: GPL-3.0-or-later
// Export dialog.
#include "widgets/export_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFontComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

namespace kvlens::widgets {

ExportDialog::ExportDialog(const QString& folder, const QString& stem, bool allViews, QWidget* parent)
    : QDialog(parent)
{
    setWindowTitle(allViews ? QStringLiteral("Export all views") : QStringLiteral("Export view"));
    auto* form = new QFormLayout(this);
    auto* formats = new QHBoxLayout;
    m_pdf = new QCheckBox(QStringLiteral("PDF"), this);
    m_svg = new QCheckBox(QStringLiteral("SVG"), this);
    m_png = new QCheckBox(QStringLiteral("PNG"), this);
    for (QCheckBox* c : {m_pdf, m_svg, m_png}) {
        c->setChecked(true);
        formats->addWidget(c);
    }
    m_pdf->setToolTip(QStringLiteral("Vector PDF with text as text, for LaTeX."));
    m_svg->setToolTip(QStringLiteral("Vector SVG with text as text, for editing."));
    m_png->setToolTip(QStringLiteral("Raster PNG at the resolution below."));
    form->addRow(QStringLiteral("Formats"), formats);
    m_width = new QComboBox(this);
    m_width->addItem(QStringLiteral("single column (3.5 in)"), 3.5);
    m_width->addItem(QStringLiteral("double column (7 in)"), 7.0);
    m_width->addItem(QStringLiteral("custom"), 0.0);
    m_customWidth = new QDoubleSpinBox(this);
    m_customWidth->setRange(1.0, 20.0); // what --width accepts
    m_customWidth->setValue(5.0);
    m_customWidth->setSuffix(QStringLiteral(" in"));
    m_customWidth->setEnabled(false);
    connect(m_width, &QComboBox::currentIndexChanged, this,
            [this] { m_customWidth->setEnabled(m_width->currentData().toDouble() == 0.0); });
    auto* width = new QHBoxLayout;
    width->addWidget(m_width);
    width->addWidget(m_customWidth);
    form->addRow(QStringLiteral("Width"), width);
    m_aspect = new QDoubleSpinBox(this);
    m_aspect->setRange(0.2, 3.0);
    m_aspect->setSingleStep(0.05);
    m_aspect->setValue(0.75);
    m_aspect->setToolTip(QStringLiteral("Height divided by width."));
    form->addRow(QStringLiteral("Aspect (h/w)"), m_aspect);
    m_fontSize = new QDoubleSpinBox(this);
    m_fontSize->setObjectName(QStringLiteral("fontSize"));
    // 4 reads "auto"; sizes start at 5 pt, as --font-size's do (below that no label reaches 6 pt).
    m_fontSize->setRange(4.0, 24.0);
    m_fontSize->setSingleStep(0.5);
    m_fontSize->setSpecialValueText(QStringLiteral("auto (8 pt single, 9 pt double)"));
    m_fontSize->setSuffix(QStringLiteral(" pt"));
    m_fontSize->setToolTip(QStringLiteral("Base font size of the figure in points; no text is printed below 6 pt."));
    form->addRow(QStringLiteral("Font size"), m_fontSize);
    m_fontFamily = new QFontComboBox(this);
    m_fontFamily->setObjectName(QStringLiteral("fontFamily"));
    m_fontFamily->setCurrentFont(QFont(ExportOptions{}.fontFamily));
    m_fontFamily->setToolTip(QStringLiteral("Font of every text in the figure, embedded in the PDF as a subset (--font-family)."));
    form->addRow(QStringLiteral("Font"), m_fontFamily);
    m_dpi = new QSpinBox(this);
    m_dpi->setRange(72, 1200);
    m_dpi->setValue(300);
    m_dpi->setSuffix(QStringLiteral(" dpi"));
    form->addRow(QStringLiteral("PNG resolution"), m_dpi);
    m_folder = new QLineEdit(folder, this);
    auto* browse = new QPushButton(QStringLiteral("Browse…"), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, QStringLiteral("Export folder"), m_folder->text());
        if (!dir.isEmpty())
            m_folder->setText(dir);
    });
    auto* folderRow = new QHBoxLayout;
    folderRow->addWidget(m_folder, 1);
    folderRow->addWidget(browse);
    form->addRow(QStringLiteral("Folder"), folderRow);
    m_stem = new QLineEdit(stem, this);
    m_stem->setToolTip(allViews ? QStringLiteral("Prefix of every file name (the view name is appended).")
                                : QStringLiteral("File name without extension; .csv and .spec.json go beside it."));
    form->addRow(allViews ? QStringLiteral("Name prefix") : QStringLiteral("File name"), m_stem);
    auto* box = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(box, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(box, &QDialogButtonBox::rejected, this, &QDialog::reject);
    form->addRow(box);
}

ExportOptions ExportDialog::options() const
{
    ExportOptions o;
    const double preset = m_width->currentData().toDouble();
    o.widthInches = preset > 0.0 ? preset : m_customWidth->value();
    o.aspect = m_aspect->value();
    o.dpi = m_dpi->value();
    o.pdf = m_pdf->isChecked();
    o.svg = m_svg->isChecked();
    o.png = m_png->isChecked();
    o.basePointSize = m_fontSize->value() >= 5.0 ? m_fontSize->value() : 0.0; // below 5: auto
    o.fontFamily = m_fontFamily->currentFont().family();
    return o;
}

QString ExportDialog::folder() const
{
    return m_folder->text();
}

QString ExportDialog::stem() const
{
    return m_stem->text();
}

} // namespace kvlens::widgets
