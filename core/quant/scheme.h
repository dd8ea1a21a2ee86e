// SPDX-License-Identifier: GPL-3.0-or-later
// Quantization schemes as a pair of path configurations (keys, values), and the named schemes.
#pragma once

#include "core/common/result.h"
#include "core/quant/lloyd_max.h"
#include "core/quant/norm_quantizer.h"
#include "core/quant/uniform_quantizer.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// Rotation applied before quantizing (and undone after decoding).
enum class Rotation {
    None,
    Wht,   ///< randomized Walsh-Hadamard (data-oblivious)
    WhtPermuted, ///< a seeded permutation of the coordinates, then the randomized Walsh-Hadamard
    Eigen, ///< calibrated eigenbasis (SpectralQuant)
};

/// The scalar quantizer of a path.
enum class QuantizerKind {
    LloydBeta,      ///< norm + Lloyd-Max codebook of the sphere-coordinate Beta law
    LloydGauss,     ///< norm + Lloyd-Max codebook of N(0, 1/dim)
    LloydEmpirical, ///< norm + codebook fitted to calibration data
    Uniform,        ///< KIVI-style min-max integers in groups
    Spectral,       ///< SpectralQuant: per-coordinate codebooks in a calibrated eigenbasis (paper B)
};

/// How SpectralQuant spreads the budget over the eigen-coordinates.
enum class Allocation {
    WaterFilling, ///< reverse water-filling over the eigenvalues, integer bits (SQ)
    Uniform,      ///< the same bits on every leading coordinate (SQU)
};

/// How SpectralQuant picks the number d_eff of leading coordinates it models.
enum class DeffRule {
    Gap,           ///< the largest ratio lambda_i / lambda_{i+1} above a threshold
    Participation, ///< the participation ratio (sum lambda)^2 / sum lambda^2, rounded
};

/// HeadQ and its two controls (paper C).
enum class HeadqControl {
    None,        ///< the correction as designed
    WrongSign,   ///< the correction subtracted
    RandomBasis, ///< a random orthonormal basis of the same rank instead of the query PCA basis
};

/// How a value path spreads its bits over tokens.
enum class TokenPolicy {
    Uniform, ///< every token at the path's bits
    A2,      ///< more bits where the A^2 surrogate sum_j p_j^2 ||v_j - v^_j||^2 says they matter (paper C)
};

/// How a QJL path turns the stored signs back into a residual vector (scores always use the
/// unbiased inner-product estimator).
enum class QjlReconstruction {
    Unbiased, ///< r^ = c ||r|| S^T sign(S r), c = sqrt(pi/2)/m: E r^ = r, but E||r^ - r||^2 = ((pi/2) dim - 1)/m ||r||^2
    Mse,      ///< alpha r^ with alpha = 1 / (1 + e), e the unbiased error energy: minimizes E||alpha r^ - r||^2
};

/// The QJL sketch matrix.
enum class QjlSketchKind {
    Gaussian,   ///< i.i.d. N(0, 1) entries
    Orthogonal, ///< blocks of orthogonal rows of norm sqrt(dim) (each block the Q of a Gaussian draw)
};

/// What a path stores about the quantization residual.
enum class ResidualKind {
    None,
    Qjl,   ///< 1-bit QJL sketch of the residual (m sign bits + residual norm)
    HeadQ, ///< side code of the residual in a calibrated query basis (paper C)
};

std::string_view rotationName(Rotation r);           ///< "none", "wht", "wht_permuted", "eigen"
std::optional<Rotation> rotationFromName(std::string_view name);
std::string_view quantizerName(QuantizerKind q);     ///< "lloyd_beta", "lloyd_gauss", "lloyd_empirical", "uniform"
std::optional<QuantizerKind> quantizerFromName(std::string_view name);
std::string_view residualName(ResidualKind r);       ///< "none", "qjl", "headq"
std::optional<ResidualKind> residualFromName(std::string_view name);
std::string_view allocationName(Allocation a);       ///< "water_filling", "uniform"
std::optional<Allocation> allocationFromName(std::string_view name);
std::string_view deffRuleName(DeffRule r);           ///< "gap", "participation"
std::optional<DeffRule> deffRuleFromName(std::string_view name);
std::string_view headqControlName(HeadqControl c);   ///< "none", "wrong_sign", "random_basis"
std::optional<HeadqControl> headqControlFromName(std::string_view name);
std::string_view tokenPolicyName(TokenPolicy p);     ///< "uniform", "a2"
std::optional<TokenPolicy> tokenPolicyFromName(std::string_view name);
std::string_view qjlReconstructionName(QjlReconstruction r); ///< "unbiased", "mse"
std::optional<QjlReconstruction> qjlReconstructionFromName(std::string_view name);
std::string_view qjlSketchName(QjlSketchKind k);     ///< "gaussian", "orthogonal"
std::optional<QjlSketchKind> qjlSketchFromName(std::string_view name);

/// Bits of a path's scalar quantizer: absolute, or relative to the budget n ("n", "n-1").
struct BitsRule {
    bool relative = true;
    int value = 0; ///< offset from n when relative, bits otherwise

    /// Bits at budget n.
    int at(int budget) const { return relative ? budget + value : value; }
    /// "n", "n-1", "n+2" or "3".
    std::string text() const;
    /// Parses the forms text() writes.
    static std::optional<BitsRule> parse(std::string_view text);
    bool operator==(const BitsRule&) const = default;
};

/// How one of the two caches (K or V) is stored.
struct PathConfig {
    Rotation rotation = Rotation::None;
    QuantizerKind quantizer = QuantizerKind::LloydBeta;
    BitsRule bits;                         ///< default "n"
    ScalarFormat normFormat = ScalarFormat::Fp16;
    ResidualKind residual = ResidualKind::None;
    int qjlDim = 0;                        ///< sketch rows m; 0 means m = d (one bit per coordinate)
    QjlReconstruction qjlReconstruction = QjlReconstruction::Unbiased;
    QjlSketchKind qjlSketch = QjlSketchKind::Gaussian;
    int groupSize = 32;                    ///< uniform quantizer
    UniformAxis axis = UniformAxis::PerToken;
    int window = 0;                        ///< uniform quantizer: full-precision recent tokens
    // SpectralQuant (quantizer = spectral, rotation = eigen).
    Allocation allocation = Allocation::WaterFilling;
    DeffRule deffRule = DeffRule::Gap;
    double gapThreshold = 10.0;            ///< minimum eigenvalue ratio the gap rule accepts as a cut
    int tailBits = 1;                      ///< bits of each coordinate past d_eff (counted in the budget)
    // HeadQ (residual = headq, key paths).
    int headqRank = 4;                     ///< r: rank of the query basis
    int headqBits = 8;                     ///< q: bits per side-code coordinate
    HeadqControl headqControl = HeadqControl::None;
    // Value paths.
    TokenPolicy tokenPolicy = TokenPolicy::Uniform;
    /// A registered codec (core/quant/codec.h) that replaces the composition above; empty:
    /// the built-in composition of rotation, quantizer and residual.
    std::string codec;
    bool operator==(const PathConfig&) const = default;
};

/// A scheme: a name, a one-line description, and the key and value paths.
struct SchemeConfig {
    std::string name;
    std::string description;
    PathConfig key;
    PathConfig value;
    bool builtin = false; ///< one of namedSchemes(), written to JSON by name only
    bool operator==(const SchemeConfig&) const = default;
};

/// The built-in schemes: KV, KQV, QKQV (paper A), Plain-/TQ- x {KV, QKV, KQV, QKQV}
/// (paper B), SQ-KV, SQU-KV, SQ-QKV (paper B's SpectralQuant), KIVI, KIVI-A2, HeadQ,
/// HeadQ-A2, HeadQ-wrong-sign, HeadQ-random-basis (paper C). Some are the same scheme under
/// two names (KV = Plain-KV, KQV = TQ-KQV, QKQV = TQ-QKQV), which keeps each paper's vocabulary.
const std::vector<SchemeConfig>& namedSchemes();
/// The named scheme called `name`, or nothing.
std::optional<SchemeConfig> findScheme(std::string_view name);
/// Comma-separated names, for error messages.
std::string schemeNames();

/// Checks a scheme at every budget in `budgets`; errors name `field` (e.g. "schemes[2].k.bits").
Status validateScheme(const SchemeConfig& scheme, const std::vector<int>& budgets, int d, const std::string& field);

/// True when any path needs a calibration set (empirical codebook, eigenbasis, HeadQ).
bool needsCalibration(const SchemeConfig& scheme);

} // namespace kvlens
