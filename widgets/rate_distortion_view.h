// SPDX-License-Identifier: GPL-3.0-or-later
// Rate–distortion view: each scheme's damage against the exact bits it spends, with seed-level intervals and the lower envelope.
#pragma once

#include "core/analysis/rate_distortion.h"
#include "widgets/result_view.h"

class QCheckBox;
class QComboBox;

namespace kvlens::widgets {

/// Schemes compared at equal bits: per scheme a line through its nominal budgets placed at the
/// exact bits per coordinate they spend (overheads included, K and V), damage on y (mean KL, or
/// the output's relative error) as the mean over seeds of each seed's mean, with a 95% Student-t
/// interval over seeds; under the points, the lower envelope (the points no other point beats on
/// both bits and damage). A run over several grid points (a model's layers and heads) can be drawn
/// pooled over them. Numbers: core/analysis/rate_distortion.h.
class RateDistortionView final : public ResultView {
    Q_OBJECT
public:
    explicit RateDistortionView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "rate_distortion";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Rate–distortion"); }
    QString viewDescription() const override;
    /// The points as core computes them (rateDistortionCsv): what rate_distortion.csv holds.
    QString dataCsv() const override;
    double printAspect(double widthInches) const override;

    /// The points drawn (all grid points; the figure shows the current one).
    const RateDistortion& points() const { return m_rd; }
    /// The damage on y: mean KL (default) or the output's relative error.
    void setMetric(DamageMetric metric);
    /// With several grid points: one point per scheme and budget pooled over them (the default for
    /// a model run: the whole model), or the current grid point's.
    void setPooled(bool pooled);
    /// The legend entry and series name of the envelope.
    static QString envelopeName();

protected:
    void redraw() override;

private:
    QComboBox* m_metric = nullptr;
    QCheckBox* m_logY = nullptr;
    QCheckBox* m_pool = nullptr;
    const ResultSet* m_shownRun = nullptr; ///< the run the pooling default was chosen for
    RateDistortion m_rd;
};

} // namespace kvlens::widgets
