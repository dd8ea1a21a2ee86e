// SPDX-License-Identifier: GPL-3.0-or-later
// The 6D error scatter: trial points in every pair of the six coordinates, or one pair enlarged.
#pragma once

#include "widgets/result_view.h"

class QComboBox;

namespace kvlens::widgets {

/// Scatter-plot matrix of the trial 6D points (SNR and phi of K, V and T), colour per scheme,
/// marker per budget; or one chosen pair of coordinates at full size.
class ScatterMatrixView final : public ResultView {
    Q_OBJECT
public:
    explicit ScatterMatrixView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "scatter_6d";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("6D error scatter"); }
    QString viewDescription() const override;

    /// Shows the whole matrix (true) or the pair chosen by setPair (false).
    void setMatrix(bool matrix);
    void setPair(int xCoordinate, int yCoordinate);

    /// Below this width a 6 x 6 matrix's panels are too small for readable ticks: export draws the chosen pair.
    static constexpr double kMatrixMinInches = 5.0;
    void beginPrint(double widthInches) override;
    double printAspect(double widthInches) const override;
    void endPrint() override;

protected:
    void redraw() override;

private:
    QComboBox* m_mode = nullptr;
    QComboBox* m_x = nullptr;
    QComboBox* m_y = nullptr;
    bool m_printPair = false; ///< an export at a single column draws the pair
};

} // namespace kvlens::widgets
