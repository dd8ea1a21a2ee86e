// SPDX-License-Identifier: GPL-3.0-or-later
// What a run produces: per-trial 6D points, per-query metric arrays, capped per-vector samples.
#pragma once

#include "core/spec/spec.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// The 6D error frame of a trial: mean SNR (dB) and mean direction error (rad) of K, V, T.
struct SixD {
    double snrK = 0.0, phiK = 0.0, snrV = 0.0, phiV = 0.0, snrT = 0.0, phiT = 0.0;

    std::array<double, 6> values() const { return {snrK, phiK, snrV, phiV, snrT, phiT}; }
    static constexpr std::array<const char*, 6> kNames = {"snr_k", "phi_k", "snr_v", "phi_v", "snr_t", "phi_t"};
};

/// Storage actually spent, in bits per coordinate with every overhead counted.
struct BitAccounting {
    double key = 0.0;
    double value = 0.0;
    double total() const { return 0.5 * (key + value); } ///< per coordinate of the whole cache (K and V)
};

/// A subsample of per-vector (SNR dB, phi rad) pairs, for scatter plots.
struct VectorSamples {
    std::vector<float> snrDb;
    std::vector<float> phi;
};

/// Wall-clock time of the stages of one trial, in milliseconds.
struct TrialTimings {
    double keyPath = 0.0, valuePath = 0.0, attention = 0.0, metrics = 0.0;
    double total() const { return keyPath + valuePath + attention + metrics; }
};

/// SpectralQuant's effective dimension on one path, both estimates and the one used (design §4).
struct EffectiveDimension {
    int used = 0;                    ///< 0: the path is not spectral
    double participationRatio = 0.0; ///< (sum lambda)^2 / sum lambda^2 of the calibration spectrum
    int gapRule = 0;                 ///< d_eff by the spectral-gap rule at the path's threshold
    bool byGap = false;              ///< which of the two decided `used`
    bool valid() const { return used > 0; }
};

/// Identity of a trial within its run.
struct TrialKey {
    int point = 0;       ///< grid point (0 without a sweep)
    int scheme = 0;      ///< index into ResultSet::schemes
    int budget = 0;      ///< bits per coordinate n
    int seedIndex = 0;   ///< slot; the seed is spec.seed(seedIndex)
    std::uint64_t seed = 0;
};

/// One trial: one scheme at one budget on one draw of the data.
struct TrialResult {
    TrialKey key;
    SixD sixD;
    BitAccounting bits;
    double relMseK = 0.0, relMseV = 0.0;  ///< sum ||x - x^||^2 / sum ||x||^2 over the set
    double rawMseK = 0.0;                 ///< mean ||k - k^||^2 / d
    double scoreErrorMean = 0.0;          ///< mean of s^ - s over all (query, key) pairs
    double scoreErrorVar = 0.0;           ///< variance of s^ - s
    double scoreErrorVarBase = 0.0;       ///< variance without the residual correction (= scoreErrorVar without one)
    double scoreErrorVarPredicted = 0.0;  ///< theory (design section 5); NaN where no closed form applies
    double logMeanExpScoreError = 0.0;    ///< log of the mean of exp(s^ - s): the Jensen inflation of the weights
    double meanEntropy = 0.0;             ///< mean H(p) of the exact attention, nats
    int saturatedNorms = 0;
    EffectiveDimension deffK, deffV;      ///< SpectralQuant paths only

    // Per query (spec.queries entries each).
    std::vector<float> kl, recall, fisher, a2, snrT, phiT, relMseT, d2;
    std::vector<std::uint8_t> argmaxShift;

    VectorSamples samplesK, samplesV, samplesT;
    TrialTimings timings;
};

/// Kinds of a trial's stored fields (forEachTrialField).
struct TrialScalar {};   ///< one int, std::uint64_t, double or bool
struct PerQuery {};      ///< a std::vector of float or std::uint8_t, spec.queries entries at most
struct PerVector {};     ///< a std::vector<float> sample, min(metrics.sample_cap, max(tokens, queries)) at most
struct WallClock {};     ///< a double in milliseconds: how long a stage took, not a number of the experiment

/// Calls visit(name, kind, field) for every field of a TrialResult, in the order trials.bin stores
/// them. trials.bin's writer and reader, the bound on a stored record and the trial cache's byte
/// count all walk this list (so do the tests' trial comparisons): a new field is one line here.
template <class Trial, class Visit>
void forEachTrialField(Trial& t, Visit&& visit)
{
    visit("key.point", TrialScalar{}, t.key.point);
    visit("key.scheme", TrialScalar{}, t.key.scheme);
    visit("key.budget", TrialScalar{}, t.key.budget);
    visit("key.seed_index", TrialScalar{}, t.key.seedIndex);
    visit("key.seed", TrialScalar{}, t.key.seed);
    visit("snr_k", TrialScalar{}, t.sixD.snrK);
    visit("phi_k", TrialScalar{}, t.sixD.phiK);
    visit("snr_v", TrialScalar{}, t.sixD.snrV);
    visit("phi_v", TrialScalar{}, t.sixD.phiV);
    visit("snr_t", TrialScalar{}, t.sixD.snrT);
    visit("phi_t", TrialScalar{}, t.sixD.phiT);
    visit("bits_k", TrialScalar{}, t.bits.key);
    visit("bits_v", TrialScalar{}, t.bits.value);
    visit("rel_mse_k", TrialScalar{}, t.relMseK);
    visit("rel_mse_v", TrialScalar{}, t.relMseV);
    visit("raw_mse_k", TrialScalar{}, t.rawMseK);
    visit("score_err_mean", TrialScalar{}, t.scoreErrorMean);
    visit("score_err_var", TrialScalar{}, t.scoreErrorVar);
    visit("score_err_var_base", TrialScalar{}, t.scoreErrorVarBase);
    visit("score_err_var_pred", TrialScalar{}, t.scoreErrorVarPredicted);
    visit("log_mean_exp_score_err", TrialScalar{}, t.logMeanExpScoreError);
    visit("entropy_mean", TrialScalar{}, t.meanEntropy);
    visit("saturated_norms", TrialScalar{}, t.saturatedNorms);
    visit("deff_k", TrialScalar{}, t.deffK.used);
    visit("deff_pr_k", TrialScalar{}, t.deffK.participationRatio);
    visit("deff_gap_k", TrialScalar{}, t.deffK.gapRule);
    visit("deff_by_gap_k", TrialScalar{}, t.deffK.byGap);
    visit("deff_v", TrialScalar{}, t.deffV.used);
    visit("deff_pr_v", TrialScalar{}, t.deffV.participationRatio);
    visit("deff_gap_v", TrialScalar{}, t.deffV.gapRule);
    visit("deff_by_gap_v", TrialScalar{}, t.deffV.byGap);
    visit("query.kl", PerQuery{}, t.kl);
    visit("query.recall", PerQuery{}, t.recall);
    visit("query.fisher", PerQuery{}, t.fisher);
    visit("query.a2_value_error", PerQuery{}, t.a2);
    visit("query.snr_t", PerQuery{}, t.snrT);
    visit("query.phi_t", PerQuery{}, t.phiT);
    visit("query.rel_mse_t", PerQuery{}, t.relMseT);
    visit("query.d2", PerQuery{}, t.d2);
    visit("query.argmax_shift", PerQuery{}, t.argmaxShift);
    visit("samples_k.snr_db", PerVector{}, t.samplesK.snrDb);
    visit("samples_k.phi", PerVector{}, t.samplesK.phi);
    visit("samples_v.snr_db", PerVector{}, t.samplesV.snrDb);
    visit("samples_v.phi", PerVector{}, t.samplesV.phi);
    visit("samples_t.snr_db", PerVector{}, t.samplesT.snrDb);
    visit("samples_t.phi", PerVector{}, t.samplesT.phi);
    visit("ms_key_path", WallClock{}, t.timings.keyPath);
    visit("ms_value_path", WallClock{}, t.timings.valuePath);
    visit("ms_attention", WallClock{}, t.timings.attention);
    visit("ms_metrics", WallClock{}, t.timings.metrics);
}

#if defined(__GLIBCXX__) && defined(__x86_64__)
// A field added to TrialResult (or to a struct it holds) changes its size and stops the build here
// until forEachTrialField lists it: trials.bin must stay lossless.
static_assert(sizeof(TrialResult) == 608, "TrialResult changed: list the new field in forEachTrialField");
#endif

/// An immutable run result. Trials appear in walk order (point, budget, scheme, seed);
/// a cancelled run holds the trials that finished.
struct ResultSet {
    ExperimentSpec spec;                  ///< normalized
    std::vector<SchemeConfig> schemes;    ///< = spec.schemes
    std::vector<TrialResult> trials;
    long long totalTrials = 0;
    bool cancelled = false;
    double elapsedMs = 0.0;
    std::string backend;                  ///< what actually ran ("cpu", "opencl: <device>", "cpu (fallback: ...)")
    std::string regimeNote;               ///< the regime's note for the first seed
    /// FNV-1a of the bytes of every dataset a seed-independent (imported) regime gave the run, in
    /// point order; 0 for drawn data. Part of a shard's identity (specHash).
    std::uint64_t dataHash = 0;
    /// The same hash per grid point (each from the FNV offset basis), for the trial cache; zeros
    /// for drawn data.
    std::vector<std::uint64_t> pointDataHashes;
    /// Per grid point, the hash of the scored K, V, Q alone (no calibration rows): what a rerun of
    /// the same cells with other schemes must read again (the advisor's check). Not persisted.
    std::vector<std::uint64_t> pointScoredHashes;
    /// Trials taken from a trial cache instead of computed (runExperiment's `cache`).
    long long reusedTrials = 0;

    /// The spec of grid point `point` (spec.pointSpec).
    ExperimentSpec pointSpec(int point) const { return spec.pointSpec(point); }

    /// The trial with this identity, or nullptr.
    const TrialResult* find(int point, int scheme, int budget, int seedIndex) const;
    /// Index in `schemes` of the scheme called `name`, or -1.
    int schemeIndex(std::string_view name) const;
};

} // namespace kvlens
