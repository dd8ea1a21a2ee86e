// SPDX-License-Identifier: GPL-3.0-or-later
// Holm's step-down correction for a family of p-values, in linear and in log space.
#pragma once

#include <span>
#include <vector>

namespace kvlens::stats {

/// Holm-adjusted p-values, in input order. With p_(1) <= ... <= p_(m) the sorted values
/// (ties keep input order), adj_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)); reject H_(i) at
/// family-wise level alpha iff adj_(i) <= alpha. Adjusted values are >= the raw ones and
/// non-decreasing in the sorted order. Inputs must lie in [0, 1] (asserted in debug builds).
/// Reference: Holm (1979), "A simple sequentially rejective multiple test procedure".
std::vector<double> holmAdjust(std::span<const double> p);

/// holmAdjust on natural-log p-values (log p <= 0), returning adjusted log p-values:
/// adj_(i) = max_{j<=i} min(0, log(m - j + 1) + log p_(j)). Values far below log(1e-300)
/// (where p itself underflows) are adjusted exactly.
std::vector<double> holmAdjustLog(std::span<const double> logP);

} // namespace kvlens::stats
