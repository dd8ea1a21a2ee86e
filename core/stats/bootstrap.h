// SPDX-License-Identifier: GPL-3.0-or-later
// Seeded percentile-bootstrap confidence intervals for a location and for a ratio of locations.
#pragma once

#include "core/common/cancel.h"

#include <cstdint>
#include <span>
#include <vector>

namespace kvlens::stats {

/// The location a bootstrap interval is about.
enum class Location {
    Mean,
    Median, ///< the middle order statistic, or the mean of the two middle ones for even n
};

/// Every function here is defined for non-finite values: they are ordered -inf < finite < +inf <
/// NaN (stats/total_order.h), so a median over them is an order statistic of that order and a mean
/// is the IEEE sum; an interval from statistics that are NaN reads NaN. Nothing is dropped silently.

/// Each resampling loop polls `cancel` once per resample (throwing Cancelled).

/// Mean or median of `values` (0 for an empty sample).
double location(std::span<const double> values, Location loc);

/// A percentile-bootstrap confidence interval.
/// Degenerate input (an empty sample, a zero denominator location for a ratio, or no
/// resample asked for): resamples = 0 and lower = upper = estimate (0 when it is undefined).
struct BootstrapCi {
    double estimate = 0.0; ///< the statistic on the original samples
    double lower = 0.0;    ///< (1 - level)/2 quantile of the bootstrap statistics
    double upper = 0.0;    ///< (1 + level)/2 quantile
    double level = 0.95;
    int resamples = 0;     ///< bootstrap statistics the interval is made of (resamples asked,
                           ///< less any ratio whose denominator was 0)
};

/// Percentile bootstrap of location(x): `resamples` times, x.size() draws with replacement
/// (Rng(EngineKind::Pcg64, seed).below); the interval holds the (1 - level)/2 and
/// (1 + level)/2 quantiles of the resampled locations, interpolated linearly between order
/// statistics (Hyndman & Fan type 7, NumPy's default). 0 < level < 1.
/// Reference: Efron & Tibshirani, "An Introduction to the Bootstrap" (1993), sec. 13.3.
BootstrapCi bootstrapLocation(std::span<const double> x, Location loc, double level, int resamples,
                              std::uint64_t seed, const CancelToken& cancel = {});

/// Percentile bootstrap of location(x) / location(y) for independent samples: each resample
/// draws x.size() indices into x, then y.size() indices into y, from one
/// Rng(EngineKind::Pcg64, seed). Resamples with location(y*) = 0 are dropped.
BootstrapCi bootstrapRatio(std::span<const double> x, std::span<const double> y, Location loc, double level,
                           int resamples, std::uint64_t seed, const CancelToken& cancel = {});

/// Percentile bootstrap of location(x) / location(y) for paired samples (x.size() == y.size()):
/// each resample draws n pair indices and evaluates both locations over the same indices, so
/// the pairing (e.g. the same queries under two schemes) is kept. Resamples with
/// location(y*) = 0 are dropped.
BootstrapCi bootstrapPairedRatio(std::span<const double> x, std::span<const double> y, Location loc, double level,
                                 int resamples, std::uint64_t seed, const CancelToken& cancel = {});

/// How the per-query values of a comparison are replicated (issue 27's statistical unit).
enum class ClusterDesign {
    /// Synthetic regimes: each seed draws its own data and queries, so queries are nested in seeds
    /// and the seeds are the independent replications: resample seeds, each with all its queries.
    Nested,
    /// Imported and model regimes: the queries are fixed items shared by every seed, which only
    /// redraws the quantizer's randomness: resample seeds and, independently, queries (two-way).
    Crossed,
};

/// Percentile bootstrap of location(pooled x) / location(pooled y) (median by default) where x[k], y[k] are unit k's
/// values (a seed's queries) of two schemes on the same units: each resample draws the units with
/// replacement (paired: the same units for x and y); ClusterDesign::Crossed also draws the items
/// (query positions, the same for every unit and both samples; every unit must then hold equally
/// many). Resamples with a zero denominator median are dropped. The estimate is the pooled ratio.
/// Reference: Davison & Hinkley, "Bootstrap Methods and their Application" (1997), sec. 3.8
/// (hierarchical data: resampling the top stage).
BootstrapCi bootstrapClusteredRatio(const std::vector<std::vector<double>>& x, const std::vector<std::vector<double>>& y,
                                    ClusterDesign design, double level, int resamples, std::uint64_t seed,
                                    const CancelToken& cancel = {}, Location loc = Location::Median);

} // namespace kvlens::stats
