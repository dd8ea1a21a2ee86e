// SPDX-License-Identifier: GPL-3.0-or-later
// Everything the plot views draw, computed from a ResultSet off the GUI thread (bins, ECDFs, intervals, theory).
#pragma once

#include "core/spec/result.h"
#include "core/analysis/summary.h"

#include <array>
#include <span>
#include <vector>

namespace kvlens {

/// A mean with a 95% interval over seeds, the unit of replication: mean +- t(0.975, n - 1) sd / sqrt(n)
/// (Student's t; n = 1: no width).
struct Interval {
    double mean = 0.0, low = 0.0, high = 0.0;
    int n = 0;
};
Interval seedInterval(std::span<const double> perSeed);

/// Per-query KL of one (point, scheme, budget), pooled over seeds, ready to draw.
struct KlDistribution {
    int point = 0, scheme = 0, budget = 0;
    std::vector<double> ecdfX;      ///< sorted KL values (at most kMaxEcdfPoints, evenly spaced in rank)
    std::vector<double> ecdfY;      ///< fraction of queries <= x
    std::vector<double> density;    ///< fraction of queries per log bin (FigureData::klBinEdges)
    long long zeros = 0;            ///< queries with KL exactly 0 (left out of the log bins)
    double mean = 0.0, median = 0.0, p99 = 0.0, max = 0.0;
    static constexpr std::size_t kMaxEcdfPoints = 2000;
};

/// Routing recall and argmax-shift rate of one (point, scheme, budget), over seeds.
struct RecallPoint {
    int point = 0, scheme = 0, budget = 0;
    Interval recall;
    Interval argmaxShift;
};

/// The theory panel's line for one (point, scheme, budget) (design section 5).
struct TheoryRow {
    int point = 0, scheme = 0, budget = 0;
    double measured = 0.0;      ///< Var(s^ - s)
    double predicted = 0.0;     ///< NaN without a closed form
    double base = 0.0;          ///< Var without the residual correction
    bool qjlOnKeys = false;
    double qjlOverBase = 0.0;   ///< measured / base: about pi/2 for QJL on keys (NaN otherwise)
    int scalarPartner = -1;     ///< scheme with the same rotation and an n-bit scalar key path
    double overScalar = 0.0;    ///< measured / partner's measured: about 2 pi for "(n-1) + QJL" (NaN otherwise)
    double jensenPredicted = 0.0; ///< log E[exp(ds)] predicted by Jensen for zero-mean noise: sigma^2 / 2
    double jensenMeasured = 0.0;  ///< measured log E[exp(ds)]
};

/// Every reported metric of one (point, scheme, budget) with its 95% interval over seeds,
/// for plotting against a swept parameter.
struct SweepCell {
    int point = 0, scheme = 0, budget = 0;
    Interval klMean, klP99, recall, argmaxShift;
    std::array<Interval, 6> sixD;   ///< SNR_K, phi_K, SNR_V, phi_V, SNR_T, phi_T
    double bitsTotal = 0.0;         ///< bits per coordinate of the whole cache
};

/// The drawable content of a result set.
struct FigureData {
    std::vector<SummaryRow> summary;
    std::vector<double> klBinEdges;           ///< shared log-spaced bin edges of every KL histogram
    std::vector<KlDistribution> kl;
    std::vector<RecallPoint> recall;
    std::vector<TheoryRow> theory;
    std::vector<SweepCell> sweep;
    double meanEntropy = 0.0;                 ///< of the exact attention, nats
};

/// Builds the figure data (the heavy part of drawing, done where the run is).
FigureData buildFigureData(const ResultSet& results);

/// Mean attention entropy H(p) of the exact attention over a run's trials (nats; 0 without trials).
double runMeanEntropy(const ResultSet& results);

} // namespace kvlens
