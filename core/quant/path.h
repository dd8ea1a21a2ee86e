// SPDX-License-Identifier: GPL-3.0-or-later
// One cache path (K or V) planned for a budget and a seed, and the engine that encodes it: the one
// place where a codec's parts are composed, on the CPU's or a device's primitives.
#pragma once

#include "core/common/types.h"
#include "core/quant/codec_parts.h"
#include "core/quant/codec_primitives.h"
#include "core/quant/scheme.h"
#include "core/rng/rng.h"

#include <memory>
#include <string>
#include <vector>

namespace kvlens {

/// A path's planned parts. Random parts (signs, sketches, random bases) are drawn on the host
/// from the seed's named streams, so every backend sees the same ones. Immutable once planned
/// (but for tokenBits), and shared between threads.
struct PathPlan {
    PathConfig config;
    int d = 0;                 ///< vector dimension
    int dim = 0;               ///< stored dimension after the transforms (next power of two under the WHT)
    int bits = 0;              ///< the quantizer's bits at this budget
    float scoreScale = 1.0f;   ///< 1/sqrt(d): scores are q.k / sqrt(d)
    std::vector<std::shared_ptr<const TransformPlan>> transforms;
    std::shared_ptr<const QuantizerPlan> quantizer;
    std::vector<std::shared_ptr<const ResidualPlan>> residuals;
    std::shared_ptr<const TokenPolicyPlan> tokenPolicy;
    /// Per-token bits (assignTokenBits; empty: every token at `bits`).
    std::vector<int> tokenBits;

    /// Lets the token policy assign per-token bits for the rows about to be encoded.
    void assignTokenBits(const TokenContext& context);
    /// Tokens the codec encodes together (the largest group of its parts).
    int causalGroup() const;
    /// Predicted Var(s^ - s) of a key path (design section 5): D |q|^2 |k|^2 / d / dim for a scalar
    /// path, with the residual's factor in place of 1/dim when `withResidual`; NaN where the
    /// quantizer offers no distortion model.
    double predictedScoreErrorVariance(double meanQueryNorm2, double meanKeyNorm2, bool withResidual) const;
    /// SpectralQuant's effective dimension, where the quantizer has one.
    PathDimension dimension() const;
    /// Decisions of the path on the rows of x within `margin` of a boundary (see boundary_decisions.h).
    int boundaryDecisions(const RowMatrixXf& x, double margin) const;
    /// The relative distortion of the quantizer's codebook (Lloyd), or nothing.
    std::optional<double> relativeDistortion() const;
};

/// The widest projection of any part of the path (QJL's m, HeadQ's rank; 0 without one): memory
/// estimates and FLOP floors.
int projectionColumns(const PathConfig& config, int d);

/// Plans a path for budget n: each part in order, from the seed's named streams and the calibration
/// sets. `config` must be normalized (normalizePath).
PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const PlanInputs& inputs,
                  EngineKind engine, std::uint64_t seed);
/// Convenience: `calibration` (may be null) is the path's calibration set.
PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const RowMatrixXf* calibration,
                  EngineKind engine, std::uint64_t seed);

/// Storage of one path in bits per original coordinate, all overheads included: codes over the
/// stored dimension, norms, group scalars, windows, sketch bits and residual norms, side codes,
/// transforms' statistics (exact for `tokens` vectors).
double pathBitsPerCoordinate(const PathPlan& plan, int tokens);
/// The same from the configuration alone (no random draws; calibrated quantizers are planned on
/// nothing and report their budget): for menus and previews.
double pathBitsPerCoordinate(const PathConfig& config, int budget, int d, int tokens);

/// The engine: transforms forward (x and queries), quantize, the scores the cache would give
/// (q^ . x^ / sqrt(d) in the stored basis), each residual stage's correction, transforms back.
/// x is n x d; queries (nq x d) may be null for value paths. Stages run on `prims` when it offers
/// their primitives, else on the CPU's; `cpuStages` (when given) collects the names of the parts
/// that ran on the CPU for that reason.
PathResult encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries,
                      CodecPrimitives& prims, std::vector<std::string>* cpuStages = nullptr);
/// encodePath on the CPU's primitives: the oracle.
PathResult encodePathCpu(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries);

/// How a codec is applied to a cache written token by token.
struct CausalOptions {
    int residual = 0;    ///< the last R tokens stay exact (KIVI's and Hugging Face's recent window)
};

/// Causal application (what a deployed cache does): tokens are encoded in consecutive groups of
/// causalGroup() tokens, each group when it is complete, from its own rows and calibration data
/// only, never from a later token; the trailing incomplete group and the last `residual` tokens
/// stay exact. Rows of a complete group decode the same whatever follows them. With queries, the
/// scores of each group's columns are the cache's estimates (exact rows: exact scores). The token
/// policy, if any, is planned per group from `tokens` (null: no per-token bits).
PathResult encodePathCausal(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries,
                            const CausalOptions& options, const TokenContext* tokens = nullptr);

} // namespace kvlens
