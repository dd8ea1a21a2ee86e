// SPDX-License-Identifier: GPL-3.0-or-later
// What a run produces: per-trial 6D points, per-query metric arrays, capped per-vector samples.
#pragma once

#include "core/spec/spec.h"

#include <array>
#include <cstdint>
#include <string>
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
};

} // namespace kvlens
