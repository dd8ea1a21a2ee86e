// SPDX-License-Identifier: GPL-3.0-or-later
// The 6D error scatter as data: trials in the frame of (SNR, phi) of keys, values and outputs, a matrix or one pair.
#pragma once

#include "widgets/figure_spec.h"
#include "widgets/view_data.h"

namespace kvlens::widgets {

/// The six coordinates with units ("SNR_K (dB)", "φ_K (rad)", ...), in the frame's order.
const QStringList& sixDCoordinateLabels();

/// The trials at `point` as points: with `matrix`, a 6 x 6 matrix whose panel (i, j) plots coordinate
/// j against coordinate i (the diagonal names the coordinate), one legend row under it; else the pair
/// (xCoordinate, yCoordinate) at full size. One series per scheme and budget; points of an exact path
/// at the SNR cap are left out of the panels of that SNR (a footnote says so).
FigureSpec scatterMatrixFigure(const ViewData& data, int point, bool matrix, int xCoordinate, int yCoordinate);

} // namespace kvlens::widgets
