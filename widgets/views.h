// SPDX-License-Identifier: GPL-3.0-or-later
// The set of result views, in tab order, shared by the window and headless batch export.
#pragma once

#include "widgets/result_view.h"

#include <QStringList>

#include <vector>

namespace kvlens::widgets {

/// Creates every view (Shannon-phi plane, 6D scatter, KL distributions, routing recall,
/// comparisons, theory, sweep, rate–distortion, model map, teaching), parented to `parent`.
std::vector<ResultView*> createViews(QWidget* parent);

/// Every view id the window opens on (`--view ID`), in tab order: createViews' views, then the
/// window's validation tab. One list, so --help, its error and the README cannot miss a view.
QStringList viewIds();

} // namespace kvlens::widgets
