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
    Eigen, ///< calibrated eigenbasis (SpectralQuant)
};

/// The scalar quantizer of a path.
enum class QuantizerKind {
    LloydBeta,      ///< norm + Lloyd-Max codebook of the sphere-coordinate Beta law
    LloydGauss,     ///< norm + Lloyd-Max codebook of N(0, 1/dim)
    LloydEmpirical, ///< norm + codebook fitted to calibration data
    Uniform,        ///< KIVI-style min-max integers in groups
};

/// What a path stores about the quantization residual.
enum class ResidualKind {
    None,
    Qjl,   ///< 1-bit QJL sketch of the residual (m sign bits + residual norm)
    HeadQ, ///< side code of the residual in a calibrated query basis (paper C)
};

std::string_view rotationName(Rotation r);           ///< "none", "wht", "eigen"
std::optional<Rotation> rotationFromName(std::string_view name);
std::string_view quantizerName(QuantizerKind q);     ///< "lloyd_beta", "lloyd_gauss", "lloyd_empirical", "uniform"
std::optional<QuantizerKind> quantizerFromName(std::string_view name);
std::string_view residualName(ResidualKind r);       ///< "none", "qjl", "headq"
std::optional<ResidualKind> residualFromName(std::string_view name);

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
    int groupSize = 32;                    ///< uniform quantizer
    UniformAxis axis = UniformAxis::PerToken;
    int window = 0;                        ///< uniform quantizer: full-precision recent tokens
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
/// (paper B), KIVI (paper C's baseline). Some are the same scheme under two names
/// (KV = Plain-KV, KQV = TQ-KQV, QKQV = TQ-QKQV), which keeps each paper's vocabulary.
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
