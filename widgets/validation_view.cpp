// SPDX-License-Identifier: GPL-3.0-or-later
// Validation view.
#include "widgets/validation_view.h"

#include "widgets/figures/basic_figures.h"

#include <QLabel>
#include <QPushButton>
#include <QTableWidget>

#include <algorithm>

namespace kvlens::widgets {

ValidationView::ValidationView(QWidget* parent)
    : ResultView(parent)
{
    m_run = new QPushButton(QStringLiteral("Run validation"), this);
    m_run->setToolTip(QStringLiteral("Run the current spec on the CPU and on the OpenCL device with the same RNG, and "
                                     "on the CPU with the other RNG, then compare (three runs)."));
    m_status = new QLabel(this);
    addOption(QString(), m_run);
    addOption(QString(), m_status);
    connect(m_run, &QPushButton::clicked, this, &ValidationView::validationRequested);
    const QStringList headers = {QStringLiteral("scheme"),      QStringLiteral("n"),
                                 QStringLiteral("metric"),      QStringLiteral("impl. max rel. diff"),
                                 QStringLiteral("impl. KS p"),  QStringLiteral("seed KS D"),
                                 QStringLiteral("seed KS p"),   QStringLiteral("verdict")};
    const QStringList tips = {
        QStringLiteral("Scheme."), QStringLiteral("Bit budget."), QStringLiteral("Per-trial metric compared."),
        QStringLiteral("Largest relative difference between CPU and OpenCL on the same draws (must be below the tolerance)."),
        QStringLiteral("Kolmogorov-Smirnov p of the CPU and OpenCL per-trial values."),
        QStringLiteral("Kolmogorov-Smirnov distance between the runs with the two RNGs (different draws)."),
        QStringLiteral("Kolmogorov-Smirnov p of the two RNGs: small values mean the RNG matters."),
        QStringLiteral("'implementation difference' only when the same-RNG pair differs.")};
    m_table = addTable(headers, tips);
    splitBelowPlot({m_table});
    setToolTip(viewDescription());
    updateEmptyState();
}

QString ValidationView::viewDescription() const
{
    return QStringLiteral("Paper B's validation: the same spec on CPU and OpenCL with the same RNG must agree to float "
                          "tolerance; with two RNGs the KS tests must not separate the runs.");
}

QString ValidationView::dataCsv() const
{
    if (!m_validation.report || !m_validation.reference)
        return QString();
    return QString::fromStdString(stats::validationCsv(*m_validation.reference, *m_validation.report));
}

QString ValidationView::emptyText() const
{
    if (m_validation.report && m_validation.reference)
        return QString();
    return m_status && !m_status->text().isEmpty()
               ? m_status->text()
               : QStringLiteral("Press Run validation to compare the CPU and OpenCL backends (same RNG) and the two "
                                "RNGs on the current spec.");
}

QString ValidationView::noFigureReason() const
{
    if (m_validation.report && !m_validation.report->implementationRan)
        return QStringLiteral("no OpenCL device, so only the RNG comparison ran (its rows are in the table and the CSV)");
    return ResultView::noFigureReason();
}

void ValidationView::setValidation(const ValidationData& validation)
{
    m_validation = validation;
    redraw();
    updateEmptyState();
}

void ValidationView::setBusy(bool busy, const QString& message)
{
    m_run->setEnabled(!busy);
    m_status->setText(message);
    updateEmptyState();
}

void ValidationView::redraw()
{
    showFigure(validationFigure(m_validation.reference.get(), m_validation.report.get()));
    m_table->setRowCount(0);
    if (!m_validation.report || !m_validation.reference)
        return;
    const auto& report = *m_validation.report;
    const ResultSet& r = *m_validation.reference;
    auto name = [&](int scheme) { return QString::fromStdString(r.schemes[static_cast<std::size_t>(scheme)].name); };
    m_status->setText(report.implementationRan
                          ? QStringLiteral("%1 implementation difference(s); reference %2, implementation %3, seed %4")
                                .arg(report.implementationDifferences())
                                .arg(QString::fromStdString(report.referenceLabel),
                                     QString::fromStdString(report.implementationLabel),
                                     QString::fromStdString(report.seedLabel))
                          : QStringLiteral("OpenCL not available (%1); only the RNG comparison ran")
                                .arg(QString::fromStdString(report.implementationNote)));

    m_table->setRowCount(static_cast<int>(report.rows.size()));
    int row = 0;
    for (const auto& v : report.rows) {
        const QString cells[] = {name(v.scheme),
                                 QString::number(v.budget),
                                 QString::fromStdString(v.metric),
                                 report.implementationRan ? QString::number(v.implMaxRelDiff, 'g', 3) : QStringLiteral("n/a"),
                                 report.implementationRan ? QString::number(v.implKsP.p, 'g', 3) : QStringLiteral("n/a"),
                                 QString::number(v.seedKsD, 'g', 3),
                                 QString::number(v.seedKsP.p, 'g', 3),
                                 QString::fromStdString(v.verdict)};
        for (int c = 0; c < 8; ++c)
            m_table->setItem(row, c, new QTableWidgetItem(cells[c]));
        ++row;
    }
}

} // namespace kvlens::widgets
