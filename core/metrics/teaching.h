// SPDX-License-Identifier: GPL-3.0-or-later
// The teaching view's numerics: one query's chain score noise -> softmax -> KL -> output, and the value-path contrast.
#pragma once

#include "core/attention/attention.h"
#include "core/common/result.h"
#include "core/common/types.h"
#include "core/regimes/regime.h"
#include "core/rng/rng.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvlens {

/// What one scheme's score noise does to one query (design sections 4 and 5).
///
/// Notation: s_j = q.k_j / sqrt(d) the exact scores of the N tokens, s^_j the cache's estimate,
/// ds_j = s^_j - s_j, p = softmax(s), p^ = softmax(s^), o = sum_j p_j v_j, o^ = sum_j p^_j v^_j.
struct ScoreNoiseChain {
    std::vector<float> deltaS;       ///< ds_j per token (N)
    std::vector<float> probsHat;     ///< p^ (N)
    double meanDeltaS = 0.0;         ///< (1/N) sum_j ds_j: a common shift, which softmax ignores
    double varianceDeltaS = 0.0;     ///< sigma^2 = (1/N) sum_j (ds_j - mean)^2 (population variance over tokens)
    double fisher = 0.0;             ///< Var_p(ds) = sum_j p_j ds_j^2 - (sum_j p_j ds_j)^2 (paper C)
    double kl = 0.0;                 ///< KL(p || p^) in nats
    /// Jensen's prediction of the mean weight inflation: exp(sigma^2 / 2). For Gaussian ds of
    /// variance sigma^2 it is exact: E[exp(ds - E ds)] = exp(sigma^2 / 2).
    double jensenFactor = 1.0;
    /// Measured mean weight inflation (1/N) sum_j exp(ds_j - mean): the unnormalized weight
    /// exp(s_j) of each token is multiplied by exp(ds_j); the common shift is removed because
    /// softmax cannot see it. >= 1 by Jensen's inequality, for any noise law.
    double measuredInflation = 1.0;
    /// What this query's normalizer actually did: Z^/Z * exp(-mean) = sum_j p_j exp(ds_j - mean),
    /// the p-weighted version of measuredInflation (noisier: dominated by the few heavy tokens).
    double partitionInflation = 1.0;
    double outputError = 0.0;        ///< ||o - o^|| / ||o||, both paths quantized
    double keyOutputError = 0.0;     ///< ||sum_j (p^_j - p_j) v_j|| / ||o||: the key path alone (exact values)
    double valueOutputError = 0.0;   ///< ||sum_j p_j (v^_j - v_j)|| / ||o||: the value path alone (exact weights)
};

/// Runs the chain for one query. `scores` and `scoresHat` hold N scores; `values` and
/// `valuesHat` are N x d (token-major). Softmax, KL and outputs are formed in double.
ScoreNoiseChain scoreNoiseChain(std::span<const float> scores, std::span<const float> scoresHat,
                                const Eigen::Ref<const RowMatrixXf>& values,
                                const Eigen::Ref<const RowMatrixXf>& valuesHat);

// softmaxVector, logSumExp and klFromScores are core/attention's (one softmax for the project).

/// Effective number of tokens a weight vector reads: N_eff = 1 / sum_j p_j^2 (1 for one-hot, N for uniform).
double effectiveTokens(std::span<const double> probs);

/// Least-squares slope of log y against log x (points with x <= 0 or y <= 0 are skipped; NaN
/// with fewer than two usable points).
double logLogSlope(std::span<const double> x, std::span<const double> y);

/// Density histogram on given edges (bins = edges - 1): fraction of values per bin divided by
/// the bin width; values outside [edges.front(), edges.back()] are left out.
std::vector<double> densityHistogram(std::span<const float> values, std::span<const double> edges);

/// Inputs of the value-path contrast. Keys and values get the same relative noise level eta:
/// k~_j = k_j + eta * rms_k * e_j and v~_j = v_j + eta * rms_v * e'_j, e, e' ~ N(0, I_d),
/// rms_x = sqrt(mean_j ||x_j||^2 / d), i.e. both caches at the same signal-to-noise ratio.
struct ValuePathConfig {
    std::string regime = "gaussian";
    RegimeParams regimeParams;         ///< empty: the regime's defaults
    int d = 128;
    std::vector<int> tokens = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096}; ///< N of each point (prefixes of one draw)
    double scoreScale = 1.0;           ///< queries are multiplied by this
    double noiseLevel = 0.3;           ///< eta, relative to the rms coordinate of each cache
    int repeats = 8;                   ///< noise draws averaged per point
    EngineKind engine = EngineKind::Mt19937_64;
    std::uint64_t seed = 1;
};

/// One point of the value-path contrast (averaged over the noise draws).
struct ValuePathPoint {
    int tokens = 0;
    double effectiveTokens = 0.0;   ///< N_eff = 1 / sum_j p_j^2 of the exact attention
    /// Value path: the fraction of a token's value error that survives the weighted read-out,
    /// ||sum_j p_j e_j|| / rms_j ||e_j|| (root mean square over draws). Its expectation squared is
    /// sum_j p_j^2 = 1 / N_eff exactly: unbiased noise averages out over the tokens read.
    double valueError = 0.0;
    /// Key path: the attention mass the same noise on keys moves, (1/2) sum_j |p^_j - p_j|
    /// (mean over draws). Every weight is multiplied by exp(ds_j), so a fixed fraction of the
    /// mass goes to the wrong tokens however many tokens share it.
    double keyMassMoved = 0.0;
    double keyKl = 0.0;             ///< KL(p || p^) of the key-path noise (mean over draws), about sigma_s^2 / 2
    /// ||sum_j (p^_j - p_j) v_j|| / rms_j ||v_j||: the key path's output error in units of one
    /// value vector (rms over draws), for comparison in the CSV.
    double keyOutputError = 0.0;
};

/// The value-path contrast: output error against N_eff for the same noise on values and on keys.
struct ValuePathSweep {
    ValuePathConfig config;
    std::vector<ValuePathPoint> points;
    double scoreNoiseStd = 0.0;     ///< measured std of the score noise the key noise causes (largest N)
    double valueSlope = 0.0;        ///< log-log slope of valueError against N_eff (theory: -1/2)
    double keySlope = 0.0;          ///< log-log slope of keyMassMoved against N_eff (theory: about 0)
};

/// Draws one dataset of max(tokens) tokens and one query, and measures each point on the
/// first N tokens. Deterministic in (engine, seed). `cancel` (may be null) stops early with an error.
Result<ValuePathSweep> valuePathSweep(const ValuePathConfig& config, const std::atomic<bool>* cancel = nullptr);

/// Inputs of the teaching view: a regime, one query, a pair of schemes, a budget and a score scale.
struct TeachingConfig {
    std::string regime = "gaussian";
    RegimeParams regimeParams;                        ///< empty: the regime's defaults
    int d = 128;
    int tokens = 1024;
    int budget = 3;                                   ///< bits n
    double scoreScale = 1.0;                          ///< queries are multiplied by this
    std::array<std::string, 2> schemes = {"KQV", "QKQV"};
    EngineKind engine = EngineKind::Mt19937_64;
    std::uint64_t seed = 1;
    int topTokens = 10;                               ///< tokens in the p vs p^ bar chart
    int histogramBins = 41;
    /// Value-path contrast; its regime, d, score scale, engine and seed are taken from above and
    /// its noise level from the relative key error of the noisier key path (0 skips the sweep).
    int sweepRepeats = 8;
    std::vector<int> sweepTokens = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
};

/// One scheme of the pair.
struct TeachingScheme {
    std::string name;
    double keyBits = 0.0, valueBits = 0.0; ///< bits per coordinate, overheads included
    double keyRelativeError = 0.0;         ///< sqrt(sum_j ||k^_j - k_j||^2 / sum_j ||k_j||^2)
    ScoreNoiseChain chain;
    std::vector<double> histogram;         ///< density of ds on TeachingResult::binEdges
};

/// Everything the teaching view draws.
struct TeachingResult {
    TeachingConfig config;
    std::vector<float> scores;             ///< s (N)
    std::vector<double> probs;             ///< p (N)
    double entropy = 0.0;                  ///< H(p) in nats
    double effectiveTokens = 0.0;          ///< 1 / sum p^2
    std::vector<int> topTokens;            ///< the largest p first (ties: lower index first)
    std::vector<double> binEdges;          ///< shared by both histograms, symmetric about 0
    std::array<TeachingScheme, 2> schemes;
    ValuePathSweep valuePath;
};

/// Draws the data (queries = 1), quantizes keys and values with both schemes at the budget
/// using the CPU reference encoder (scores from the key path's own estimator), and runs the
/// chain and the value-path contrast. Errors name the field ("teaching.budget", "regime.nu").
Result<TeachingResult> computeTeaching(const TeachingConfig& config, const std::atomic<bool>* cancel = nullptr);

/// The teaching numbers as CSV: one "quantity,scheme,index,value" row per number, so the
/// export beside a figure holds every histogram bin, weight and point drawn.
std::string teachingCsv(const TeachingResult& result);

} // namespace kvlens
