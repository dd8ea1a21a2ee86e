// SPDX-License-Identifier: GPL-3.0-or-later
// Sweep view: any reported metric against a swept parameter (or the budget), one line per scheme.
#pragma once

#include "widgets/result_view.h"

class QCheckBox;
class QComboBox;

namespace kvlens::widgets {

/// A metric (mean or p99 KL, recall, argmax shift, any 6D coordinate, bits) against a swept
/// parameter or the budget, one line per scheme (and budget, and value of any other swept
/// parameter), with 95% intervals over seeds; the x axis is logarithmic when the parameter
/// spans a decade or more.
class SweepView final : public ResultView {
    Q_OBJECT
public:
    explicit SweepView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "sweep";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Sweep"); }
    QString viewDescription() const override;

    /// The metrics offered, in the metric box's order.
    static QStringList metricNames();
    void setMetric(int index);
    /// Chooses the x parameter by name ("budget" or a sweep parameter such as "regime.nu").
    bool setXParameter(const QString& parameter);

protected:
    void redraw() override;

private:
    /// Lists the run's swept parameters and budgets in the x and budget boxes, keeping the choice.
    void refreshChoices();

    QComboBox* m_x = nullptr;
    QComboBox* m_metric = nullptr;
    QComboBox* m_budget = nullptr;
    QCheckBox* m_logY = nullptr;
};

} // namespace kvlens::widgets
