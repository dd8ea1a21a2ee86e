// SPDX-License-Identifier: GPL-3.0-or-later
// Two finished runs compared (`kvlens compare A B`): what their specs change, and per shared
// (grid point, scheme, budget) how each metric moved from A to B, tested on the seed as the unit.
#pragma once

#include "core/common/result.h"
#include "core/experiment/shard.h"
#include "core/spec/result.h"
#include "core/stats/p_value.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvlens {

/// A finished run read back from its directory (what `--batch` or `kvlens merge` wrote).
struct RunDirectory {
    std::string dir;
    ShardManifest manifest;
    ResultSet results; ///< normalized spec, every trial in walk order
};

/// Reads DIR/spec.json, DIR/manifest.json and DIR/trials.bin and checks that they are one
/// finished, whole run: a readable manifest (a run writes it last, so without one the run did
/// not finish), shard 0 of 1 (a shard of several is refused: merge them first), the spec's
/// hash in the manifest and in trials.bin, every trial of the spec exactly once (checkShardSet).
/// trials.bin's header is checked against the manifest and the spec before its body is read,
/// and the spec's result memory is bounded by `memoryLimitBytes` (0: no bound) before anything
/// is allocated for it. The error's field is the directory; its message says what is wrong.
Result<RunDirectory> readRunDirectory(const std::string& dir, double memoryLimitBytes = 0.0);

/// One spec field whose value differs between A and B.
struct SpecDifference {
    std::string path;   ///< JSON path in spec.json: "budgets", "regime.nu", "schemes[1].k.bits"
    std::string a, b;   ///< the value as compact JSON; empty when the run's spec lacks the field
};

/// The fields of the normalized specs (spec.json as written: every default filled in) whose
/// values differ, in the order of the JSON paths. Objects are compared key by key; arrays of
/// equal length that hold objects or arrays element by element ("schemes[0].k.bits"); any other
/// array as one value (`budgets`: [2, 3] against [2, 3, 4] is one difference).
std::vector<SpecDifference> diffSpecs(const ExperimentSpec& a, const ExperimentSpec& b);

/// A per-seed metric the comparison reads from each trial.
struct RunMetric {
    const char* name;        ///< the CSV's `metric`: "kl_mean", ...
    const char* description; ///< what one seed's value is
    bool ratioScale;         ///< positive, so a log ratio means something (not for SNRs in dB)
};
/// kl_mean, kl_median (the seed statistic of comparisons.csv), recall, argmax_shift, rel_mse_t,
/// then the 6D coordinates snr_k, phi_k, snr_v, phi_v, snr_t, phi_t (comparisons.csv's energy test).
const std::vector<RunMetric>& runMetrics();

/// What a row is.
enum class RunRowStatus {
    Tested,     ///< a seed-level test was made
    Identical,  ///< every unit's value is the same in A and B (paired: seed by seed, bit for bit;
                ///< unpaired: one constant in both): nothing to test, p left blank
    Untestable, ///< too few units (paired: fewer than 2 shared seeds; unpaired: a run with fewer
                ///< than 2 seeds), or a seed's value is not finite
    OnlyInA,    ///< the configuration is in A only (listed, never silently dropped)
    OnlyInB,
};
std::string_view runRowStatusName(RunRowStatus s); ///< "tested", "identical", "untestable", "only_in_a", "only_in_b"

/// One configuration and one metric, B against A.
///
/// The unit is the seed. When A and B drew the same data at this grid point (the same regime and
/// parameters, sizes, score scale, engine and calibration rows; for imported tensors the same data
/// hash) and share seeds, seed k of A and seed k of B are one unit measured twice: the test is the
/// exact Wilcoxon signed-rank test over the shared seeds on d_k = B_k - A_k, the interval of the
/// difference Student's t over the d_k (k - 1 degrees of freedom). Otherwise the seeds of A and
/// of B are two independent groups: the exact Mann-Whitney test, Welch's interval. The log ratio
/// is ln(B_k / A_k) averaged over the pairs (paired) or mean ln B - mean ln A (unpaired): the log
/// of the ratio of geometric means, with the matching t interval.
struct RunCompareRow {
    std::string pointLabel;        ///< "nu = 3" (empty without a sweep)
    int pointA = -1, pointB = -1;  ///< grid points in each run (-1 where absent)
    std::string scheme;
    int budget = 0;
    std::string metric;            ///< empty for an only-in row
    RunRowStatus status = RunRowStatus::Tested;
    std::string note;              ///< why a row is not tested, and what the pairing is

    std::string unit = "seed";
    bool paired = false;
    int units = 0;                 ///< paired: seeds both hold; unpaired: seeds of A + seeds of B
    int unitsA = 0, unitsB = 0;
    double bitsA = 0.0, bitsB = 0.0; ///< exact bits per coordinate (mean over the units)
    double meanA = 0.0, meanB = 0.0; ///< mean over the units of the per-seed value
    double difference = 0.0;       ///< meanB - meanA
    double diffLow = 0.0, diffHigh = 0.0;
    bool hasLogRatio = false;      ///< every unit's value positive and the metric ratio-scale
    double logRatio = 0.0, logLow = 0.0, logHigh = 0.0;
    std::string test;              ///< "wilcoxon-seeds" or "mann-whitney-seeds"; "" when not tested
    stats::PValue p;
    stats::PValue pHolm;           ///< Holm over the tested rows of the same metric
    double pMin = 1.0;             ///< the smallest p the test can give with these units
    double level = 0.95;
};

/// Options of a run comparison.
struct RunCompareOptions {
    /// Refuse (an error) instead of falling back to the unpaired test where a shared
    /// configuration's data differ between the runs or they share no seed.
    bool requirePaired = false;
    double level = 0.95;
};

/// The comparison of two runs.
struct RunComparison {
    std::string dirA, dirB;
    std::vector<SpecDifference> specDiff;
    std::vector<SpecDifference> runDiff;  ///< manifest fields that differ: program_version, backend, data_hash
    std::vector<RunCompareRow> rows;      ///< configurations in A's order, then B's own; metrics in runMetrics order
    int sharedConfigurations = 0;
    int onlyA = 0, onlyB = 0;
    /// Why some or all rows are unpaired ("the runs drew different data at nu = 3: score_scale 1 in A,
    /// 4 in B"); empty when every shared configuration is paired.
    std::string pairingNote;
};

/// Compares two runs. Refused (an error naming the reason, nothing computed): the runs share no
/// configuration; with options.requirePaired, a shared configuration whose data differ or whose
/// seeds do not overlap.
Result<RunComparison> compareRuns(const RunDirectory& a, const RunDirectory& b, const RunCompareOptions& options = {});

/// spec_diff.csv: field, a, b (values as compact JSON), the spec's fields then the manifests'
/// ("run.program_version", "run.backend", "run.data_hash").
std::string specDiffCsv(const RunComparison& c);
/// run_comparison.csv: one row per (configuration, metric), and one per configuration in one run only.
std::string runComparisonCsv(const RunComparison& c);
/// The spec differences and the kl_mean rows as aligned text for terminals.
std::string runComparisonText(const RunComparison& c);

} // namespace kvlens
