// SPDX-License-Identifier: GPL-3.0-or-later
// Theory panel: measured against predicted score-error variance, the pi/2 and 2 pi ratios, Jensen inflation.
#pragma once

#include "widgets/result_view.h"

class QTableWidget;

namespace kvlens::widgets {

/// Measured variance of the score error s^ - s against its prediction (scalar:
/// D_n ||q||^2 ||k||^2 / d; scalar + QJL: (pi/2) D_{n-1} ||q||^2 ||k||^2 / m), log-log with
/// the identity line; the table adds QJL / ignoring the residual (about pi/2), QJL against the
/// n-bit scalar (about 2 pi) and Jensen's inflation sigma^2/2 against the measured log E[exp(ds)].
class TheoryView final : public ResultView {
    Q_OBJECT
public:
    explicit TheoryView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "theory";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Theory"); }
    QString viewDescription() const override;
    /// The theory table (every row, with the plotted measured and predicted variances).
    QString dataCsv() const override;
    QTableWidget* table() const { return m_table; }

protected:
    void redraw() override;

private:
    QTableWidget* m_table = nullptr;
};

} // namespace kvlens::widgets
