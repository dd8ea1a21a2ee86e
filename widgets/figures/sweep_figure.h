// SPDX-License-Identifier: GPL-3.0-or-later
// The Sweep view's figure as data: a metric against a swept parameter (or the budget), one line per scheme.
#pragma once

#include "widgets/figure_spec.h"
#include "widgets/view_data.h"

#include <QString>
#include <QStringList>

namespace kvlens::widgets {

/// What the Sweep view's controls choose.
struct SweepChoice {
    QString xParameter = QStringLiteral("budget"); ///< a sweep parameter's name ("regime.nu"), or "budget"
    int budget = 0;    ///< the budget drawn, 0: all (ignored when the budget is on x)
    int metric = 0;    ///< index into sweepMetricNames()
    bool logY = true;  ///< a log y axis (for the KL metrics)
};

/// The metrics the Sweep view offers, in its metric box's order.
QStringList sweepMetricNames();
/// Whether metric `index` is a KL (the ones a log y axis applies to).
bool sweepMetricIsKl(int index);
/// The axis label of a parameter ("regime.nu" gives "nu").
QString sweepAxisLabel(const QString& parameter);

/// The figure: per (scheme, budget unless on x, values of the other swept parameters) a line of the
/// metric's mean over seeds with its 95% interval (FigureData::sweep), averaging the other swept
/// parameters and keeping the middle budget when that would draw more than 12 lines (footnotes say
/// so); on a log y axis a line's points at 0 are left out and its legend entry says how many.
FigureSpec sweepFigure(const ViewData& data, const SweepChoice& choice);

} // namespace kvlens::widgets
