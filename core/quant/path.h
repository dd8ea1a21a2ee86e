// SPDX-License-Identifier: GPL-3.0-or-later
// One cache path (K or V) resolved for a budget and a seed, and its CPU encoder (the oracle).
#pragma once

#include "core/common/types.h"
#include "core/quant/codec.h"
#include "core/quant/lloyd_max.h"
#include "core/quant/scheme.h"
#include "core/quant/spectral.h"
#include "core/quant/uniform_quantizer.h"
#include "core/rng/rng.h"

#include <memory>
#include <vector>

namespace kvlens {

/// Everything a backend needs to quantize one path: resolved bits, codebook, random signs,
/// sketch matrix. Random parts are drawn on the host so every backend sees the same inputs.
struct PathPlan {
    PathConfig config;
    int d = 0;                 ///< vector dimension
    int dim = 0;               ///< stored dimension (next power of two under the WHT, else d)
    int bits = 0;              ///< scalar bits at this budget
    std::vector<float> signs;  ///< WHT diagonal (dim entries), empty without rotation
    /// wht_permuted: stored coordinate i is original coordinate permutation[i] (drawn from the
    /// seed, after the signs, so the signs are TQ's; costs no bits). Empty otherwise.
    std::vector<int> permutation;
    std::shared_ptr<const Codebook> codebook; ///< Lloyd quantizers
    UniformOptions uniform;    ///< uniform quantizer
    RowMatrixXf sketch;        ///< QJL matrix S (m x dim), empty without QJL (m x d_eff for SpectralQuant)
    float scoreScale = 1.0f;   ///< 1/sqrt(d): scores are q.k / sqrt(d)

    // SpectralQuant: the calibrated eigenbasis and what lives in it.
    Eigen::MatrixXf eigenbasis;                 ///< d x d, columns by descending eigenvalue
    std::shared_ptr<const SpectralAnalysis> spectrum;
    int deff = 0;                               ///< leading coordinates modelled (the QJL acts on these)
    int gapDeff = 0;                            ///< the gap rule's d_eff, reported whichever rule decided
    std::vector<int> coordBits;                 ///< bits of each eigen-coordinate
    std::vector<std::shared_ptr<const Codebook>> coordCodebooks; ///< empirical, absolute units (null: 0 bits)
    std::vector<float> coordMeans;              ///< reconstruction of 0-bit coordinates

    // HeadQ: the side-code basis (d x r): the calibration queries' PCA, or a random one.
    Eigen::MatrixXf headqBasis;

    // Per-token bits of a value path under the A^2 policy (empty: every token at `bits`).
    std::vector<int> tokenBits;

    // A registered codec (config.codec names it): it encodes and counts its own bits.
    std::shared_ptr<const PathCodec> codec;

    int sketchRows() const { return static_cast<int>(sketch.rows()); }
};

/// Resolves a path for budget n; random parts (signs, sketches, random bases) come from the
/// seed's named streams.
PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const PlanInputs& inputs,
                  EngineKind engine, std::uint64_t seed);
/// Convenience: `calibration` (may be null) trains empirical codebooks.
PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const RowMatrixXf* calibration,
                  EngineKind engine, std::uint64_t seed);

/// Storage of one path in bits per original coordinate, all overheads included: codes over
/// the padded dimension, norms, sketch bits and residual norms, group parameters, the
/// full-precision window (exact for `tokens` vectors).
double pathBitsPerCoordinate(const PathPlan& plan, int tokens);
/// The same from the configuration alone (no random draws): for menus and previews.
double pathBitsPerCoordinate(const PathConfig& config, int budget, int d, int tokens);

/// x with its columns in the plan's permuted order (wht_permuted), else x itself.
RowMatrixXf permutedColumns(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x);

/// The CPU reference encoder: rotate, quantize, dequantize, sketch the residual, estimate
/// scores the way a real cache would (dequantized dot product + the QJL inner-product
/// term), and reconstruct. x is n x d; queries (nq x d) may be null for value paths.
PathResult encodePathCpu(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries);

} // namespace kvlens
