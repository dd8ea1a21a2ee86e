// SPDX-License-Identifier: GPL-3.0-or-later
// ExperimentSpec: everything that defines a run, with validation that names the bad field.
#pragma once

#include "core/common/hash.h"
#include "core/common/result.h"
#include "core/quant/scheme.h"
#include "core/regimes/regime.h"
#include "core/rng/rng.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kvlens {

/// Options of the metrics a run computes.
struct MetricOptions {
    int topK = 5;          ///< k of routing recall
    int sampleCap = 512;   ///< per-vector (SNR, phi) samples kept per trial and site, for scatter plots
    bool operator==(const MetricOptions&) const = default;
};

/// Options of the comparison table (statistics issue): which scheme pairs, and the
/// resampling effort of the bootstrap intervals and the energy permutation test.
struct ComparisonOptions {
    std::vector<std::pair<std::string, std::string>> pairs; ///< empty: every pair of schemes
    int bootstrap = 2000;      ///< bootstrap resamples of the median-KL ratio
    int permutations = 999;    ///< permutations of the energy-distance test
    bool operator==(const ComparisonOptions&) const = default;
};

/// One swept parameter: "regime.<name>" (a numeric regime parameter), "d", "tokens",
/// "queries" or "score_scale", with its values. ("budget" is accepted in a spec and becomes
/// the budget list when the spec is normalized: budgets are already a trial dimension.)
enum class SweepParameter { Budget, D, Queries, Regime, ScoreScale, Tokens };

struct SweepAxis {
    SweepParameter parameter = SweepParameter::D;
    std::string regimeKey; ///< the regime parameter, when parameter is Regime
    std::vector<double> values;
    bool operator==(const SweepAxis&) const = default;

    /// "budget", "d", "queries", "regime.<key>", "score_scale" or "tokens" (spec files' names).
    std::string name() const;
    /// The axis a spec file's name gives (no values), or nothing when it cannot be swept.
    static std::optional<SweepAxis> named(std::string_view name);
    /// d, tokens and queries take integers.
    bool integral() const;
};

/// What the bit-allocation advisor minimizes, per (layer, path, width), over the per-query losses
/// of the layer's heads, queries and seeds.
enum class AdvisorStatistic { Mean, Median, P99 };
/// The per-query loss the advisor reads: the output relative error ||t^ - t||^2 / ||t||^2
/// (TrialResult::relMseT) or KL(p || p^) (TrialResult::kl), which is blind to V (a value error never
/// moves the weights: V-only's KL is 0, so V always gets the narrowest width).
enum class AdvisorLoss { RelMseT, Kl };
std::string_view advisorStatisticName(AdvisorStatistic s); ///< "mean", "median", "p99"
std::optional<AdvisorStatistic> parseAdvisorStatistic(std::string_view text);
std::string_view advisorLossName(AdvisorLoss l); ///< "rel_mse_t", "kl"
std::optional<AdvisorLoss> parseAdvisorLoss(std::string_view text);

/// The K/V bit-allocation advisor of a model run (--batch, a run with K-only and V-only): its
/// targets and what it minimizes. It reads the finished trials and changes none of them.
struct AdvisorOptions {
    /// Target average bits per coordinate (K and V, overheads included), one advice each; empty:
    /// the default, 3 (what --batch always did; a spec that does not name the advisor writes none).
    std::vector<double> bits;
    AdvisorStatistic objective = AdvisorStatistic::Mean;
    AdvisorLoss loss = AdvisorLoss::RelMseT;
    bool operator==(const AdvisorOptions&) const = default;

    static constexpr double kDefaultBits = 3.0;
    /// The targets the advisor runs for: `bits`, or {kDefaultBits}.
    std::vector<double> targets() const { return bits.empty() ? std::vector<double>{kDefaultBits} : bits; }
};

/// Where a run computes.
enum class BackendKind {
    Cpu,    ///< the CPU oracle
    OpenCl, ///< an OpenCL device (spec.device names it); the CPU, with a warning, when none is usable
    Auto,   ///< OpenCL when usable, else the CPU quietly
};
std::string_view backendKindName(BackendKind b); ///< "cpu", "opencl", "auto"
/// A backend as a spec file or a command line writes it: a kind, plus the reason when the text is
/// an exported "cpu (fallback: <reason>)" (which asks for the CPU: the run that wrote it fell back).
struct BackendText {
    BackendKind kind = BackendKind::Cpu;
    std::string fallback;
};
std::optional<BackendText> parseBackendText(std::string_view text);

/// A run: regime (with parameters), sizes, schemes, budgets, seeds, engine, backend
/// (design section 7). Trials walk regime x budget x scheme x seed.
struct ExperimentSpec {
    std::string name = "default";       ///< free text shown in titles and exports
    std::string regime = "gaussian";
    RegimeParams regimeParams;          ///< normalized: every parameter present
    int d = 128;                        ///< head dimension
    int tokens = 1024;                  ///< N keys and values
    int queries = 64;                   ///< Q queries
    int calibrationTokens = 0;          ///< calibration rows for calibrated schemes (0: same as tokens)
    double scoreScale = 1.0;            ///< queries are multiplied by this (gaussian scores have this std)
    std::vector<SchemeConfig> schemes;
    std::vector<int> budgets = {2, 3, 4};
    std::uint64_t firstSeed = 1;        ///< seeds are firstSeed, firstSeed + 1, ...
    int seedCount = 8;
    EngineKind engine = EngineKind::Mt19937_64;
    BackendKind backend = BackendKind::Cpu;
    /// Why a requested OpenCL run ran on the CPU: set on the spec of a result (exports write the
    /// backend as "cpu (fallback: <reason>)"), never a request.
    std::string fallback;
    std::string device;                 ///< OpenCL device index or name substring ("" = default)
    MetricOptions metrics;
    ComparisonOptions comparisons;
    double memoryLimitMb = 0.0;         ///< refuse runs estimated above this (0: half of physical memory)
    std::vector<SweepAxis> sweep;       ///< grid axes; the run is their Cartesian product (none: one point)
    AdvisorOptions advisor;             ///< the allocation advisor's targets and objective (not the trials')
    /// Where each scheme came from in the spec file, for error messages only.
    struct SchemeOrigins {
        /// Per scheme: "schemes[2]", or "schemes[1] (allocation.json: K3/V2)" for a scheme an allocation
        /// file expanded to; empty entries read "schemes[i]".
        std::vector<std::string> fields;
        /// The allocation files the schemes came from, with the layers each lists, so that a model run
        /// can refuse a file made for another model (a layer it lacks, or one of its layers missing).
        struct Allocation {
            std::string field; ///< "schemes[1]"
            std::string path;
            std::vector<int> layers; ///< in file order
        };
        std::vector<Allocation> allocations;
        /// Not part of a run's identity: two specs that differ only here are the same run.
        bool operator==(const SchemeOrigins&) const { return true; }
    } schemeOrigins;

    bool operator==(const ExperimentSpec&) const = default;

    /// The backend as exports write it: "cpu", "opencl", "auto" or "cpu (fallback: <reason>)".
    std::string backendText() const;

    /// Grid points: the product of the sweep axes' sizes (1 without a sweep).
    int pointCount() const;
    /// The spec of grid point `point`: the base with that point's values applied, no sweep.
    ExperimentSpec pointSpec(int point) const;
    /// The swept values of a point, in axis order.
    std::vector<double> pointValues(int point) const;
    /// "nu = 1.5, d = 128" (empty without a sweep).
    std::string pointLabel(int point) const;
    /// The axes that define grid points.
    std::vector<const SweepAxis*> gridAxes() const;

    /// The seed of the i-th seed slot.
    std::uint64_t seed(int index) const { return firstSeed + static_cast<std::uint64_t>(index); }
    /// Calibration rows actually drawn: 0 when no scheme needs calibration.
    int calibrationRows() const;
    /// Total number of trials over every grid point.
    long long trialCount() const;
    /// How an error names scheme `index`: its origin in the spec file, else "schemes[index]".
    std::string schemeField(int index) const;
    /// The regime's data are a model's (layer, head) cells (Regime::hasModelCells; false for an
    /// unknown regime).
    bool hasModelCells() const;
};

/// Roles of a spec field for a run's identities: the trial cache key (core/experiment/trial_cache.h)
/// hashes the DefinesNumbers fields; the spec hash (specHash, core/experiment/shard.h) every field
/// but the Neutral ones.
struct DefinesNumbers {}; ///< changes what a trial computes
struct ArrangesTrials {}; ///< changes only which trials run, or how they are compared or advised on
struct Neutral {};        ///< changes no result: how the run is named, where it computes, its memory limit

/// Calls visit(name, role, field) for every field of an ExperimentSpec, in declaration order, role
/// DefinesNumbers, ArrangesTrials or Neutral. The scheme list arranges trials (the cache key takes the
/// trial's scheme itself) but also decides whether calibration rows are drawn, which the key adds.
/// tst_experiment changes each field in turn and checks that the cache key and the spec hash follow
/// exactly these roles, and fails when ExperimentSpec grows a field that is not listed here.
template <class Spec, class Visit>
void forEachSpecField(Spec& s, Visit&& visit)
{
    visit("name", Neutral{}, s.name);
    visit("regime", DefinesNumbers{}, s.regime);
    visit("regime_params", DefinesNumbers{}, s.regimeParams);
    visit("d", DefinesNumbers{}, s.d);
    visit("tokens", DefinesNumbers{}, s.tokens);
    visit("queries", DefinesNumbers{}, s.queries);
    visit("calibration_tokens", DefinesNumbers{}, s.calibrationTokens);
    visit("score_scale", DefinesNumbers{}, s.scoreScale);
    visit("schemes", ArrangesTrials{}, s.schemes);
    visit("budgets", ArrangesTrials{}, s.budgets);
    visit("seeds.first", ArrangesTrials{}, s.firstSeed);
    visit("seeds.count", ArrangesTrials{}, s.seedCount);
    visit("rng", DefinesNumbers{}, s.engine);
    visit("backend", Neutral{}, s.backend); // the backend that ran is in the cache key and the manifest
    visit("fallback", Neutral{}, s.fallback);
    visit("device", Neutral{}, s.device);
    visit("metrics.top_k", DefinesNumbers{}, s.metrics.topK);
    visit("metrics.sample_cap", DefinesNumbers{}, s.metrics.sampleCap);
    visit("comparisons", ArrangesTrials{}, s.comparisons);
    visit("memory_limit_mb", Neutral{}, s.memoryLimitMb);
    visit("sweep", ArrangesTrials{}, s.sweep);
    visit("advisor", ArrangesTrials{}, s.advisor); // read after the trials: two runs differing here share them
    visit("scheme_origins", Neutral{}, s.schemeOrigins);
}

/// Adds a DefinesNumbers field's value to a typed hash: text with its length, integers and the engine
/// as 64 bits, reals by their bits, a parameter (or codec option) value as its alternative's index
/// and value, a parameter map as its size and its entries in key order. The trial cache key and
/// kvlens compare's check of what a grid point draws (core/analysis/run_compare.h) both hash with it.
void hashFieldValue(Fnv1a& h, const std::string& value);
void hashFieldValue(Fnv1a& h, int value);
void hashFieldValue(Fnv1a& h, double value);
void hashFieldValue(Fnv1a& h, EngineKind value);
void hashFieldValue(Fnv1a& h, const std::variant<double, std::string>& value);
void hashFieldValue(Fnv1a& h, const RegimeParams& params);

/// The default experiment (issue #3): gaussian, d = 128, N = 1024, Q = 64, KV, KQV, QKQV,
/// budgets 2, 3, 4, 8 seeds.
ExperimentSpec defaultSpec();

/// How much of a spec normalizeSpec checks: everything, or everything but the imported regime's
/// files (for reading back a finished run's spec.json on a machine without them: kvlens merge).
enum class InputCheck { Full, SkipInputs };

/// Checks every field and fills the regime's defaults; errors name the field and its range.
/// Text that reaches a terminal or spec.json (name, scheme names and descriptions, device, regime
/// text) must be valid UTF-8 without control characters.
Result<ExperimentSpec> normalizeSpec(const ExperimentSpec& spec, InputCheck inputs = InputCheck::Full);

/// Allowed ranges, shared by validation, the GUI's spin boxes and the docs.
struct SpecLimits {
    static constexpr int kMinD = 4, kMaxD = 16384;
    static constexpr int kMinTokens = 1, kMaxTokens = 1 << 22;
    static constexpr int kMinQueries = 1, kMaxQueries = 1 << 16;
    static constexpr int kMaxCalibration = 1 << 22;
    static constexpr int kMinBudget = 2, kMaxBudget = 8;
    static constexpr int kMaxSeeds = 100000;
    static constexpr double kMaxScoreScale = 1000.0;
    static constexpr int kMaxSampleCap = 1 << 20;
    static constexpr int kMaxResamples = 1000000;
    static constexpr int kMaxPoints = 100000;
    /// Most advisor targets, and the widest (fp16: no allocation of narrower widths costs more).
    static constexpr int kMaxAdvisorTargets = 64;
    static constexpr double kMaxAdvisorBits = 16.0;
    /// Most schemes compared all against all when comparisons.pairs is empty (2016 pairs).
    static constexpr int kMaxAllPairsSchemes = 64;
};

} // namespace kvlens
