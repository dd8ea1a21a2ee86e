// SPDX-License-Identifier: GPL-3.0-or-later
// The Shannon-phi plane as data: SNR against direction error of each vector (or trial) per scheme and budget.
#pragma once

#include "widgets/figure_spec.h"
#include "widgets/view_data.h"

#include <QStringList>

namespace kvlens::widgets {

/// The plane of one site at one grid point, and what it says about the clouds it leaves out or rings.
struct ShannonPhiFigure {
    FigureSpec figure;
    QStringList coincidences; ///< "B = A": clouds with exactly the points of an earlier one, drawn as rings
    QStringList drawOrder;    ///< series names back to front (the widest cloud first, rings last)
    QStringList exactClouds;  ///< clouds at the SNR cap on this site (an exact path), not drawn
    QString note;             ///< the note naming both (empty when there is nothing to say)
};

/// `site` 0, 1, 2: keys, values, outputs; `perVector`: every sampled vector, else one point per
/// trial (the 6D frame's means). Colour by scheme, lighter to darker and a marker per budget; the
/// 6.02 n dB line of an ideal n-bit code per budget.
ShannonPhiFigure shannonPhiFigure(const ViewData& data, int point, int site, bool perVector);

} // namespace kvlens::widgets
