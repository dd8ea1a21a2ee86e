// SPDX-License-Identifier: GPL-3.0-or-later
// Which trials of its grid a result set holds: what an export of a partial (cancelled) run must say,
// and the trials on which its schemes can be compared (the seeds they share).
#pragma once

#include "core/spec/result.h"

#include <string>
#include <vector>

namespace kvlens {

/// The seeds a result set holds of one (point, budget, scheme) cell of its grid.
struct CoverageCell {
    int point = 0;
    int budget = 0;               ///< the nominal budget n
    int scheme = 0;               ///< index into ResultSet::schemes
    std::vector<int> seedIndices; ///< ascending; the seeds are spec.seed(index)
};

/// What a result set holds of its grid.
struct RunCoverage {
    long long held = 0;  ///< trials held (in the grid; each slot counted once)
    long long total = 0; ///< trials of the whole grid: ResultSet::totalTrials, else spec.trialCount()
    /// At every (point, budget), every scheme holds the same seeds: any figure comparing schemes
    /// compares them on the same draws. A complete run is balanced.
    bool balanced = true;
    std::vector<CoverageCell> cells; ///< every cell of the grid, in walk order (point, budget, scheme)

    bool partial() const { return held < total; }
};

/// The coverage of a result set's trials over its spec's grid.
RunCoverage runCoverage(const ResultSet& results);

/// The trials of `results` whose seed every scheme holds at their (point, budget), in the same
/// order; everything else is copied. Of a cancelled run, this is what its schemes can be compared
/// on: the result is balanced, and keeps totalTrials (so it still says it is partial).
ResultSet sharedSeedTrials(const ResultSet& results);

/// "partial run: 32 of 72 trials", with what they are ("; each scheme on the same seeds" when
/// balanced, "; the schemes hold different seeds" when not); "" for a complete run.
std::string partialRunNote(const RunCoverage& coverage);

/// The spec of a result set as an export writes it beside a figure or table: specToJson of
/// results.spec, and for a partial run a "partial" object, which the spec reader accepts and
/// ignores:
///   "partial": {"note": "...", "trials": 32, "of": 72, "balanced": true,
///               "held": [{"point": 0, "budget": 2, "scheme": "KV", "seeds": [1, 2]}, ...]}
/// with one "held" entry per cell of the grid (seeds as spec.seed values; [] for a cell with none).
std::string exportedSpecJson(const ResultSet& results);

} // namespace kvlens
