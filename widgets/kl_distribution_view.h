// SPDX-License-Identifier: GPL-3.0-or-later
// Distributions of per-query KL(p || p^): ECDF or histogram on a log axis, with mean, p99 and worst marked.
#pragma once

#include "widgets/result_view.h"

class QComboBox;

namespace kvlens::widgets {

/// Per-query KL of every scheme at one budget, pooled over seeds: ECDF or log-binned
/// histogram (bins computed in core), with the mean, p99 and worst query marked, because
/// mean KL alone is optimistic.
class KlDistributionView final : public ResultView {
    Q_OBJECT
public:
    explicit KlDistributionView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "kl_distribution";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("KL distributions"); }
    QString viewDescription() const override;

    void setHistogram(bool histogram);
    /// Selects the budget shown (must be one of the run's budgets).
    void setBudget(int budget);

protected:
    void redraw() override;

private:
    QComboBox* m_budget = nullptr;
    QComboBox* m_mode = nullptr;
};

} // namespace kvlens::widgets
