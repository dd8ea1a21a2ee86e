// SPDX-License-Identifier: GPL-3.0-or-later
// Two or more finished runs drawn on the same axes: one run whose schemes are every run's schemes,
// named "run/scheme", so every view overlays them without knowing it holds several runs.
#pragma once

#include "core/common/result.h"
#include "core/spec/result.h"

#include <string>
#include <vector>

namespace kvlens {

/// One run of an overlay and the name its series carry ("A", "B", "run 14:02").
struct OverlayRun {
    std::string name;
    const ResultSet* results = nullptr;
};

/// The spec fields runs may differ in and still share axes: the schemes, the first seed, the
/// name, the comparisons and advisor settings, the backend, device, RNG engine and memory limit.
/// Everything else (regime, d, tokens, queries, sweep, budgets, seed count, ...) decides the grid
/// or the data every view's axes are drawn over.
bool overlayMayDiffer(const std::string& specPath);

/// The runs as one: the first run's spec with every run's schemes, each renamed "name/scheme" (a
/// run's trials keep their seeds, metrics and order, their scheme index shifted past the earlier
/// runs' schemes); the merged spec's comparison pairs are each scheme of the first run against
/// the scheme of the same name in every later run. Refused, naming the first field, when two runs
/// differ in a field overlayMayDiffer refuses or in their data hash (imported bytes), when a run
/// is cancelled, when fewer than two runs are given or two share a name.
Result<ResultSet> overlayRuns(const std::vector<OverlayRun>& runs);

} // namespace kvlens
