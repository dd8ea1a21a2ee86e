// SPDX-License-Identifier: GPL-3.0-or-later
// Routing recall@k and argmax-shift rate against the bit budget, with 95% intervals over seeds.
#pragma once

#include "widgets/result_view.h"

namespace kvlens::widgets {

/// recall@k (left axis) and the argmax-shift rate (right axis, dashed) against the budget,
/// one line per scheme, with 95% intervals over seeds.
class RecallView final : public ResultView {
    Q_OBJECT
public:
    explicit RecallView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "routing_recall";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Routing recall"); }
    QString viewDescription() const override;
    /// Two panels one above the other: at a single column they need more than the default height.
    double printAspect(double widthInches) const override { return widthInches < 5.0 ? 0.95 : 0.0; }

protected:
    void redraw() override;
};

} // namespace kvlens::widgets
