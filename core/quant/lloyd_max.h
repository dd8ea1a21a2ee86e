// SPDX-License-Identifier: GPL-3.0-or-later
// Lloyd-Max scalar codebooks for the sphere-coordinate Beta law, the Gaussian law and data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// The law a codebook is optimal for.
enum class CodebookLaw {
    /// A coordinate t of a uniformly random unit vector in R^dim: density
    /// proportional to (1 - t^2)^((dim-3)/2) on [-1, 1], i.e. (t+1)/2 ~ Beta((dim-1)/2, (dim-1)/2).
    Beta,
    /// N(0, sigma^2) with sigma = 1/sqrt(dim) (so it applies to unit-vector coordinates),
    /// or sigma = 1 when dim = 0 (the textbook unit-variance codebook).
    Gaussian,
    /// Fitted by Lloyd's algorithm to samples.
    Empirical,
};

std::string_view codebookLawName(CodebookLaw law);                ///< "beta", "gauss", "empirical"
std::optional<CodebookLaw> codebookLawFromName(std::string_view name); ///< also accepts "gaussian"

/// A scalar quantizer with 2^bits levels: levels ascending, thresholds the midpoints of
/// neighbouring levels (the Lloyd-Max optimality condition). Reports its design the way
/// Eigen's solvers report info(): iterations and `converged` instead of throwing.
struct Codebook {
    CodebookLaw law = CodebookLaw::Beta;
    int dim = 0;                    ///< dimension of the Beta law, or 1/sigma^2 of the Gaussian one
    int bits = 0;
    std::vector<double> levels;     ///< 2^bits reconstruction values, ascending
    std::vector<double> thresholds; ///< 2^bits - 1 cell boundaries, ascending
    double mse = 0.0;               ///< E[(t - Q(t))^2] under the law (or over the samples)
    double variance = 0.0;          ///< E[t^2] under the law, so mse / variance is the relative distortion
    int iterations = 0;
    bool converged = false;

    std::vector<float> levelsF;     ///< float copies, used by the encoders
    std::vector<float> thresholdsF;

    int levelCount() const { return static_cast<int>(levels.size()); }

    /// Index of the cell holding x: the number of thresholds strictly below x
    /// (a value exactly on a threshold goes to the lower cell). Branch-free.
    int encode(float x) const
    {
        const int count = static_cast<int>(thresholdsF.size());
        if (count <= 15) {
            int code = 0;
            for (int i = 0; i < count; ++i)
                code += x > thresholdsF[static_cast<std::size_t>(i)] ? 1 : 0;
            return code;
        }
        // Branchless binary search over 2^bits - 1 thresholds.
        int base = 0;
        for (int step = (count + 1) / 2; step > 0; step /= 2)
            base += x > thresholdsF[static_cast<std::size_t>(base + step - 1)] ? step : 0;
        return base;
    }
    float decode(int code) const { return levelsF[static_cast<std::size_t>(code)]; }
};

/// Options of the Lloyd-Max iteration.
struct LloydOptions {
    double tolerance = 1e-12;   ///< stop when no level moves more than this
    int maxIterations = 200000;
    /// Empirical designs only: starting levels (ascending, 2^bits of them). Empty: the sample
    /// quantiles. On samples the iteration stops at the first fixed point, which from quantiles
    /// leaves the sparse tails under-served at 6-8 bits; a law's Lloyd-Max levels start nearer.
    std::vector<double> initialLevels;
};

/// Lloyd-Max codebook for the Beta sphere-coordinate law in dimension dim (>= 3), 1..8 bits.
/// Cell probabilities from the regularized incomplete beta function (Boost.Math ibeta);
/// cell first moments in closed form, integral of t (1-t^2)^k dt = -(1-t^2)^(k+1) / (2(k+1)).
/// Reference: Max (1960), "Quantizing for minimum distortion"; Zandieh et al. (TurboQuant).
Codebook designBetaCodebook(int dim, int bits, const LloydOptions& options = {});

/// Lloyd-Max codebook for N(0, sigma^2), sigma = 1/sqrt(dim) (dim = 0: sigma = 1), 1..8 bits.
/// Check values (Max 1960): mse/sigma^2 = 0.3634, 0.1175, 0.03454, 0.009497 for 1..4 bits.
Codebook designGaussianCodebook(int dim, int bits, const LloydOptions& options = {});

/// Lloyd's algorithm (1-D k-means) on samples, initialised at sample quantiles; exact
/// cell means with prefix sums over the sorted samples. `dim` is recorded, not used.
Codebook designEmpiricalCodebook(std::span<const float> samples, int bits, int dim = 0,
                                 const LloydOptions& options = {});

/// The codebook `base` moved to mean `shift` and stretched by `scale` (> 0): levels and
/// thresholds x -> shift + scale x, mse and variance scaled by scale^2 (variance about 0 of the
/// stretched law, not the shifted one). Used for per-coordinate codebooks of known spread.
Codebook affineCodebook(const Codebook& base, double shift, double scale);

/// Designs (once) and returns the Beta or Gaussian codebook for (law, dim, bits).
/// Thread-safe; codebooks are immutable and shared.
std::shared_ptr<const Codebook> cachedCodebook(CodebookLaw law, int dim, int bits);

} // namespace kvlens
