// SPDX-License-Identifier: GPL-3.0-or-later
// The model lens: a model run's damage per (layer, head) cell, the K-vs-V sensitivity per layer,
// and the bit-allocation advisor (the exact or Lagrangian choice of per-layer K and V widths).
#pragma once

#include "core/common/result.h"
#include "core/spec/allocation.h"
#include "core/spec/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvlens {

/// The (layer, head) of every grid point of a run over a model dump (regime "model"); empty for
/// any other run.
struct ModelCell {
    int layer = 0;
    int head = 0;
};
std::vector<ModelCell> modelCells(const ResultSet& results);

/// One value of the map, in long format.
struct MapValue {
    int layer = 0, head = 0;
    int scheme = 0, budget = 0;
    std::string metric;
    double value = 0.0;
    double ciLow = 0.0, ciHigh = 0.0; ///< 95% interval where one applies (NaN otherwise)
};
/// Per cell, scheme and budget: kl_mean (with a t-interval over its queries and seeds), kl_p99,
/// recall (mean top-k recall, Wald interval), argmax_shift (rate, Wilson interval), rel_mse_t
/// (mean output relative error, t-interval), score_err_var, score_err_var_pred, entropy.
std::vector<MapValue> modelMap(const ResultSet& results);
/// layer,head,scheme,budget,metric,value,ci_low,ci_high (one row per MapValue), then a comment-free
/// file: the positions used are in spec.json and the regime note.
std::string modelMapCsv(const ResultSet& results, const std::vector<MapValue>& map);

/// The K-vs-V asymmetry per layer: output error with only K quantized (scheme "K-only") against
/// only V quantized ("V-only"), per budget, over the layer's heads, queries and seeds. KL(p||p^) is
/// reported too, but it cannot see V (a value error never moves the weights: V-only's KL is 0).
struct SensitivityRow {
    int layer = 0, budget = 0;
    double kOnlyRelMseT = 0.0, vOnlyRelMseT = 0.0; ///< mean output relative error
    double kOnlyKl = 0.0;                          ///< mean KL with only K quantized
    double kOverV() const { return vOnlyRelMseT > 0.0 ? kOnlyRelMseT / vOnlyRelMseT : 0.0; }
};
/// Empty when the run lacks K-only or V-only.
std::vector<SensitivityRow> kvSensitivity(const ResultSet& results);
std::string kvSensitivityCsv(const std::vector<SensitivityRow>& rows);

/// What the advisor chooses from, per layer: for each K width, the expected loss of quantizing K
/// alone and its bits per coordinate; the same for V.
struct LayerCurves {
    int layer = 0;
    std::vector<int> kBits, vBits;               ///< the widths on offer (budgets run)
    std::vector<double> kLoss, vLoss;            ///< expected loss at each width (same order)
    std::vector<double> kCost, vCost;            ///< storage in bits per coordinate (overheads included)
};
/// A choice of (k, v) per layer: its average bits per coordinate over the whole cache (K and V,
/// every layer weighted alike) and its predicted loss (the sum over layers of K's and V's losses).
struct BitAllocation {
    std::vector<int> layers;       ///< the layer of each entry
    std::vector<int> kBits, vBits; ///< per layer
    std::vector<double> layerBits; ///< per layer: its K and V storage averaged (bits per coordinate)
    double bits = 0.0;
    double loss = 0.0;
};
/// BitAllocation cost and loss of a choice (indices into each layer's options).
BitAllocation evaluateAllocation(const std::vector<LayerCurves>& layers, const std::vector<int>& kChoice,
                              const std::vector<int>& vChoice);
/// The Pareto front of (average bits, predicted loss) over every per-layer choice, ascending in
/// bits: exact (every combination) while there are at most `exactLimit` of them; otherwise the
/// lower convex hull by Lagrangian relaxation (each layer and path minimizes loss + lambda cost on
/// its own, for every breakpoint lambda), which is exact at its vertices.
std::vector<BitAllocation> paretoFront(const std::vector<LayerCurves>& layers, long long exactLimit = 2000000);
/// The least-loss allocation of the front within `budget` bits per coordinate, if any fits.
std::optional<BitAllocation> allocate(const std::vector<LayerCurves>& layers, double budget,
                                   long long exactLimit = 2000000);
/// The curves of a model run: loss = the objective's statistic (default: the mean) of the per-query
/// loss (default: the output relative error rel_mse_t; or KL) of K-only at k and of V-only at v,
/// over the layer's heads, queries and seeds; cost = their measured bits.
/// Refuses (field "advisor", naming the layer, path and width) when any layer of the run has a
/// missing or non-finite K-only or V-only loss at a width: advising over the other layers would
/// compare an allocation of fewer layers with uniform splits of all of them. Empty without
/// K-only / V-only trials.
Result<std::vector<LayerCurves>> layerCurves(const ResultSet& results, const AdvisorOptions& objective = {});

/// "mean output relative error", "p99 of the output relative error", "median KL".
std::string advisorObjectiveText(const AdvisorOptions& objective);

/// The best allocation that gives every layer the same K width and the same V width, within
/// `budget` bits per coordinate, if any fits.
std::optional<BitAllocation> bestUniformSplit(const std::vector<LayerCurves>& layers, double budget);

/// A measured check of an allocation: the loss when it is run as its own experiment.
struct AllocationCheck {
    std::string name;            ///< "advice", "uniform K3/V2", "TQ-KV n = 3"
    double bits = 0.0;           ///< measured average bits per coordinate
    double predicted = 0.0;      ///< from the single-path curves (NaN for the plain schemes)
    double measured = 0.0;       ///< sum over layers of the mean rel_mse_t
    double low = 0.0, high = 0.0; ///< 95% interval of `measured` (per-layer intervals in quadrature)
    int layers = 0;              ///< layers summed: every layer of the run (the same for every check)
    long long nonFinite = 0;     ///< queries whose output error was not finite (measured is then +inf)
};
/// The summed per-layer objective (default: mean output error) of a run over model cells, with its
/// interval, and the mean stored bits (for AllocationCheck). The interval of a mean is the normal
/// one; of a median or p99 the distribution-free one (order statistics at ranks
/// n p -+ 1.96 sqrt(n p (1 - p)), Conover 1999, sec. 3.2); per-layer half-widths add in quadrature.
AllocationCheck measuredLoss(const ResultSet& results, const std::string& name, double predicted,
                             const AdvisorOptions& objective = {});
std::string allocationChecksCsv(const std::vector<AllocationCheck>& checks);
std::string allocationChecksText(const std::vector<AllocationCheck>& checks, const AdvisorOptions& objective = {});

/// The terminal summary: per layer and budget the K-only / V-only output-error ratio, whether K
/// damage exceeds V damage in every layer, and the advice at `targetBits` against uniform widths
/// (kvSensitivityText, then advisorText).
std::string modelLensText(const std::vector<SensitivityRow>& sensitivity, const std::vector<LayerCurves>& curves,
                          double targetBits);
std::string kvSensitivityText(const std::vector<SensitivityRow>& sensitivity);
/// The advice at `targetBits` (per layer K and V widths, predicted loss) and the best uniform split
/// within the same bits; says so when nothing fits.
std::string advisorText(const std::vector<LayerCurves>& curves, double targetBits, const AdvisorOptions& objective = {});

std::string paretoCsv(const std::vector<BitAllocation>& front);
/// {"format": "kvlens-allocation", "spec_hash", "target_bits", "bits", "predicted_loss", "loss":
///  `loss` (what the curves measured: "rel_mse_t" for a model run's, "kld_end_to_end" for an
///  evaluation's), "layers": [{"layer", "k_bits", "v_bits", "scheme": "TQ"}...]}.
std::string allocationJson(const BitAllocation& allocation, double targetBits, std::uint64_t specHash,
                           const std::string& loss = "rel_mse_t", const std::string& objective = "mean");
/// The allocation as the file allocationJson writes (entries of TurboQuant widths, each layer's
/// measured bits), for allocationLayersCsv and llamaCppTypes. `objective` empty: not named.
AllocationFile allocationFile(const BitAllocation& allocation, double targetBits, std::uint64_t specHash,
                              const std::string& loss = "rel_mse_t", const std::string& objective = {});

} // namespace kvlens
