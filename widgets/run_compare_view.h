// SPDX-License-Identifier: GPL-3.0-or-later
// Two runs compared: a forest plot of B against A per scheme and budget (kvlens compare's figure).
#pragma once

#include "core/analysis/run_compare.h"
#include "widgets/result_view.h"

#include <memory>

class QComboBox;

namespace kvlens::widgets {

/// A forest plot of a run comparison (core/analysis/run_compare.h): one row per configuration both
/// runs hold, B against A in the chosen metric with its interval, and a line at "no change".
/// Ratio-scale metrics (KL, recall, φ) are drawn as the ratio of geometric means B / A on a log
/// axis, the line at 1: a mean KL moves by decades between budgets, so differences in nats would
/// flatten every row but the narrowest budget's. SNRs (dB, already logarithmic) are drawn as the
/// difference B − A, the line at 0. Rows whose test is significant after Holm are coloured; rows in
/// one run only are named in a footnote.
class RunCompareView final : public ResultView {
    Q_OBJECT
public:
    explicit RunCompareView(QWidget* parent = nullptr);
    QString viewId() const override { return QStringLiteral("run_comparison"); }
    QString viewTitle() const override { return QStringLiteral("Run comparison"); }
    QString viewDescription() const override;
    /// Shows a comparison (nullptr: none).
    void setComparison(std::shared_ptr<const RunComparison> comparison);
    const RunComparison* comparison() const { return m_comparison.get(); }
    /// Selects the metric drawn ("kl_mean" by default); false for a name runMetrics lacks.
    bool setMetric(const QString& name);
    /// The whole run_comparison.csv (every metric and row), so an export's CSV holds every plotted number.
    QString dataCsv() const override;
    QString emptyText() const override;
    double printAspect(double widthInches) const override;
    /// Rows drawn now (configurations of the chosen metric).
    int rowCount() const { return m_rows; }

protected:
    void redraw() override;

private:
    std::shared_ptr<const RunComparison> m_comparison;
    QComboBox* m_metric = nullptr;
    int m_rows = 0;
    int m_footnoteLines = 0;
};

} // namespace kvlens::widgets
