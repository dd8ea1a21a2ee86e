// SPDX-License-Identifier: GPL-3.0-or-later
// Reported statistics per (grid point, scheme, budget): KL quantiles, recall, 6D means, theory.
#pragma once

#include "core/spec/result.h"

#include <span>
#include <vector>

namespace kvlens {

/// Sample quantile with linear interpolation between order statistics (Hyndman & Fan type 7,
/// NumPy's default): h = (n - 1) q, x_(floor h) + (h - floor h)(x_(floor h + 1) - x_(floor h)).
/// `values` is copied and sorted; empty input gives NaN.
double quantile(std::span<const float> values, double q);

/// One line of the summary table.
struct SummaryRow {
    int point = 0;
    int scheme = 0;
    int budget = 0;
    int trials = 0;
    long long queries = 0;
    BitAccounting bits;
    double klMean = 0.0, klMedian = 0.0, klP99 = 0.0, klMax = 0.0; ///< over all queries of all seeds
    double recallMean = 0.0;
    double argmaxShiftRate = 0.0;
    SixD sixD;                       ///< mean over seeds of the trial 6D points
    double relMseK = 0.0, relMseV = 0.0;
    double fisherMean = 0.0, a2Mean = 0.0;
    double scoreErrorVar = 0.0, scoreErrorVarBase = 0.0, scoreErrorVarPredicted = 0.0;
    double logMeanExpScoreError = 0.0;
    double meanEntropy = 0.0;
    int saturatedNorms = 0;
};

/// Aggregates the trials of a result set, one row per (point, scheme, budget) that has
/// trials, in walk order (point, budget, scheme).
std::vector<SummaryRow> summarize(const ResultSet& results);

} // namespace kvlens
