// SPDX-License-Identifier: GPL-3.0-or-later
// The comparison table of the statistics issue, with a forest plot of median-KL ratios.
#pragma once

#include "widgets/result_view.h"

class QComboBox;
class QTableWidget;

namespace kvlens::widgets {

/// Every compared pair of schemes at each budget: a forest plot of the median-KL ratio with
/// its bootstrap interval (log axis, 1 = no difference), and the full table (tests, effect
/// sizes, Holm-adjusted p-values) below it; under that, the proxy study (which error measure
/// ranks queries by their KL).
class ComparisonView final : public ResultView {
    Q_OBJECT
public:
    explicit ComparisonView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "comparisons";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Comparisons"); }
    QString viewDescription() const override;
    double printAspect(double widthInches) const override;
    /// The whole comparison table (what comparisons.csv holds).
    QString dataCsv() const override;
    QString noFigureReason() const override;
    QTableWidget* table() const { return m_table; }
    /// The proxy study: Spearman rho of each proxy against per-query KL, per scheme and pooled.
    QTableWidget* proxyTable() const { return m_proxies; }

protected:
    void redraw() override;

private:
    void fillTable();
    void fillProxyTable();

    QComboBox* m_budget = nullptr;
    QTableWidget* m_table = nullptr;
    QTableWidget* m_proxies = nullptr;
    int m_rows = 0; ///< forest rows drawn
};

} // namespace kvlens::widgets
