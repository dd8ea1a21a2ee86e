// SPDX-License-Identifier: GPL-3.0-or-later
// Damage against the exact bits a scheme spends: one point per (grid point, scheme, budget) with a
// seed-level interval, and the monotone lower envelope (the comparison at equal bits, issue 27).
#pragma once

#include "core/spec/result.h"

#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// What a rate-distortion point measures per query, averaged within a seed.
enum class DamageMetric {
    MeanKl,      ///< KL(p‖p̂) in nats: the attention weights' damage; a value error never moves the
                 ///< weights, so a scheme that quantizes only V has KL = 0 exactly
    OutputError, ///< ‖T − T̂‖² / ‖T‖² of the attention output: keys and values both
};
std::string_view damageMetricName(DamageMetric metric); ///< "mean_kl", "output_rel_error"
std::string_view damageMetricUnit(DamageMetric metric); ///< "nats", "relative (1)"

/// One (grid point, scheme, nominal budget) of a run placed at the bits it really spends.
struct RateDistortionPoint {
    int point = 0, scheme = 0;
    int budget = 0;            ///< the nominal budget n
    /// Exact bits per coordinate of the whole cache (K and V, every overhead counted): the mean
    /// over the cell's trials of TrialResult::bits.total().
    double bits = 0.0;
    double bitsSpread = 0.0;   ///< max − min of the trials' exact bits (0 for a fixed-rate scheme)
    /// Mean over seeds of the per-seed mean over queries (the seed is the unit of replication:
    /// the queries of one seed share one draw of the data, the rotation and the sketch).
    double damage = 0.0;
    /// 95% Student-t interval over seeds: damage ± t(0.975, n − 1) · sd / √n of the n per-seed
    /// means; NaN with one seed or a non-finite seed mean.
    double low = std::numeric_limits<double>::quiet_NaN();
    double high = std::numeric_limits<double>::quiet_NaN();
    int seeds = 0;             ///< n, the seeds (trials) of the cell
    bool finite = true;        ///< every per-seed mean is finite (else damage is NaN)
    bool exactZero = false;    ///< every query of every seed has damage exactly 0 (V-only's KL)
    /// No other finite point of the same grid point spends at most these bits for at most this
    /// damage with one of the two strictly less (the point is Pareto-optimal in bits and damage).
    bool onEnvelope = false;
};

/// Every cell of a run as a rate-distortion point, in walk order (point, budget, scheme).
struct RateDistortion {
    DamageMetric metric = DamageMetric::MeanKl;
    /// 0: one point per grid point's cell. n > 0: the n grid points pooled (a model's layers and
    /// heads), one point per (scheme, budget), all with `point` 0.
    int pooledPoints = 0;
    std::vector<RateDistortionPoint> points;

    /// The envelope of grid point `point`: indices into `points`, ascending in bits (so
    /// descending in damage); what the figure draws as a line.
    std::vector<int> envelope(int point) const;
};

/// The rate-distortion points of a result set. Cells without trials are left out; a partial run
/// gives each cell the seeds it holds (`seeds` says how many).
/// Student (1908) for the interval; the envelope is the non-dominated set of (bits, damage).
RateDistortion rateDistortion(const ResultSet& results, DamageMetric metric = DamageMetric::MeanKl);

/// The same with every grid point pooled: per (scheme, budget) and seed, the mean over the grid
/// points holding that seed of their per-seed means (each point weighs alike: a model's heads);
/// then the mean and Student-t interval over seeds as above. For a model run, the whole model's
/// rate-distortion; for a sweep over d or N, the bits differ by point (bitsSpread says how much).
RateDistortion rateDistortionPooled(const ResultSet& results, DamageMetric metric = DamageMetric::MeanKl);

/// point,point_label,scheme,budget_nominal,bits_exact,bits_spread,metric,unit,damage,ci_low,ci_high,
/// interval,seeds,on_envelope: one row per point, in walk order (pooled: point "all", point_label
/// "pooled over N grid points"). `interval` says how the interval was
/// made ("student_t_95_over_seeds", or why there is none: "none_one_seed", "none_not_finite").
std::string rateDistortionCsv(const ResultSet& results, const RateDistortion& rd);

} // namespace kvlens
