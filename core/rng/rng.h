// SPDX-License-Identifier: GPL-3.0-or-later
// Seeded random streams and the samplers KVLens draws from, identical on every standard library.
#pragma once

#include "core/rng/pcg64.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace kvlens {

/// The two engines a spec can name. Both are fully specified algorithms, so a seed gives
/// the same stream with any compiler; the distributions on top are implemented here for
/// the same reason (std::normal_distribution and friends differ between libraries).
enum class EngineKind { Mt19937_64, Pcg64 };

std::string_view engineName(EngineKind kind);               ///< "mt19937_64" or "pcg64"
std::optional<EngineKind> engineFromName(std::string_view name);

/// Named sub-streams of one trial seed, so that, e.g., the keys do not change when a
/// scheme that draws a sketch matrix is added.
enum class Stream : std::uint64_t {
    Keys = 1,
    Values,
    Queries,
    CalibrationKeys,
    CalibrationValues,
    CalibrationQueries,
    Structure,      ///< regime structure shared by K, V, Q (subspaces, outlier channels, targets)
    KeySigns,       ///< WHT random signs of the key path
    ValueSigns,
    KeySketch,      ///< QJL sketch matrix of the key path
    ValueSketch,
    SchemeExtra,    ///< anything else a scheme draws (random bases of control schemes)
    Statistics,     ///< bootstrap and permutation resampling of the comparison table
};

/// Derives the seed of a named sub-stream from a trial seed (SplitMix64 mixing; distinct
/// streams give statistically independent seeds).
std::uint64_t deriveSeed(std::uint64_t seed, Stream stream, std::uint64_t index = 0);

/// A random stream: one engine plus the samplers. Not thread-safe; make one per thread.
class Rng {
public:
    Rng(EngineKind kind, std::uint64_t seed);
    Rng(EngineKind kind, std::uint64_t seed, Stream stream, std::uint64_t index = 0)
        : Rng(kind, deriveSeed(seed, stream, index)) {}

    EngineKind kind() const { return m_kind; }

    /// Next raw 64-bit word of the engine.
    std::uint64_t nextU64() { return m_kind == EngineKind::Pcg64 ? m_pcg() : m_mt(); }
    /// Uniform on [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(nextU64() >> 11) * 0x1.0p-53; }
    /// Uniform on (0, 1): never returns 0, so log() is safe.
    double uniformOpen() { return (static_cast<double>(nextU64() >> 11) + 0.5) * 0x1.0p-53; }
    /// Uniform integer in [0, n) without modulo bias (Lemire 2019, "Fast random integer
    /// generation in an interval"). Inline: the bootstrap draws millions of them.
    std::uint64_t below(std::uint64_t n)
    {
        using u128 = Pcg64::uint128;
        std::uint64_t x = nextU64();
        u128 m = static_cast<u128>(x) * n;
        auto low = static_cast<std::uint64_t>(m);
        if (low < n) [[unlikely]] {
            const std::uint64_t threshold = (0 - n) % n;
            while (low < threshold) {
                x = nextU64();
                m = static_cast<u128>(x) * n;
                low = static_cast<std::uint64_t>(m);
            }
        }
        return static_cast<std::uint64_t>(m >> 64);
    }
    /// +1 or -1 with probability 1/2 each.
    float sign() { return (nextU64() >> 63) ? -1.0f : 1.0f; }
    /// Standard normal by the 128-layer ziggurat (Marsaglia & Tsang 2000; Doornik 2005):
    /// one 64-bit draw for most samples, exact in distribution.
    double normal();
    /// Gamma(shape, 1) (Marsaglia & Tsang 2000; shape < 1 by the boost U^(1/shape)).
    double gamma(double shape);
    /// Chi-square with `dof` degrees of freedom: 2 * Gamma(dof / 2).
    double chiSquare(double dof) { return 2.0 * gamma(0.5 * dof); }
    /// Student-t with `nu` degrees of freedom: Z / sqrt(chi2_nu / nu).
    double studentT(double nu);

    /// Fills `out[0..n)` with standard normals times `scale`.
    void fillNormal(float* out, std::size_t n, float scale = 1.0f);

private:
    EngineKind m_kind;
    std::mt19937_64 m_mt;
    Pcg64 m_pcg;
};

} // namespace kvlens
