// SPDX-License-Identifier: GPL-3.0-or-later
// Validation view (paper B): CPU vs OpenCL with the same RNG, and two RNGs, compared per metric.
#pragma once

#include "core/analysis/validation.h"
#include "widgets/result_view.h"

#include <memory>

class QLabel;
class QPushButton;
class QTableWidget;

namespace kvlens::widgets {

/// What a validation produced: the report and the reference run it describes.
struct ValidationData {
    std::shared_ptr<const ResultSet> reference;
    std::shared_ptr<const stats::ValidationReport> report;
};

/// Shows a validation: per metric, the largest relative difference between the CPU and
/// OpenCL runs of the same draws (log scale, with the tolerance line), and a table with the
/// KS tests of both pairs and the verdict. The validation itself runs on request (button).
class ValidationView final : public ResultView {
    Q_OBJECT
public:
    explicit ValidationView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "validation";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Validation"); }
    QString viewDescription() const override;
    QString emptyText() const override;
    QString dataCsv() const override;
    /// The validation's reference run (its spec is what a validation export writes).
    std::shared_ptr<const ResultSet> figureResults() const override { return m_validation.reference; }
    QString noFigureReason() const override;

    void setValidation(const ValidationData& validation);
    void setBusy(bool busy, const QString& message = {});
    QTableWidget* table() const { return m_table; }
    QPushButton* runButton() const { return m_run; }

signals:
    /// The user asked for a validation of the current spec.
    void validationRequested();

protected:
    void redraw() override;

private:
    QPushButton* m_run = nullptr;
    QLabel* m_status = nullptr;
    QTableWidget* m_table = nullptr;
    ValidationData m_validation;
};

} // namespace kvlens::widgets

Q_DECLARE_METATYPE(kvlens::widgets::ValidationData)
