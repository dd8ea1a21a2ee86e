// SPDX-License-Identifier: GPL-3.0-or-later
// The set of result views, in tab order, shared by the window and headless batch export.
#pragma once

#include "widgets/result_view.h"

#include <QStringList>

#include <vector>

namespace kvlens::widgets {

/// Creates every view the window shows from one result set (Shannon-phi plane, 6D scatter, KL
/// distributions, routing recall, comparisons, theory, sweep, rate–distortion, model map, teaching),
/// in tab order, parented to `parent`. The Output and validation tabs the window makes itself.
std::vector<ResultView*> createViews(QWidget* parent);

/// Every view id the window opens on (`--view ID`), in tab order: createViews' views with the Output
/// tab after the Model map, then the validation tab. The same table as createViews, so --help, its
/// error and the README cannot miss a view.
QStringList viewIds();

} // namespace kvlens::widgets
