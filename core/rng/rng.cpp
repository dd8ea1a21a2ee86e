// SPDX-License-Identifier: GPL-3.0-or-later
// Engines, seed derivation and samplers (uniform, normal, gamma, chi-square, Student-t).
#include "core/rng/rng.h"

#include <cmath>

namespace kvlens {

Pcg64::Pcg64(std::uint64_t seed)
    : m_state(0), m_increment(1)
{
    std::uint64_t s = seed;
    const uint128 stateHigh = splitMix64(s);
    const uint128 stateLow = splitMix64(s);
    const uint128 incHigh = splitMix64(s);
    const uint128 incLow = splitMix64(s);
    m_state = (stateHigh << 64) | stateLow;
    m_increment = ((incHigh << 64) | incLow) | 1u;
}

std::string_view engineName(EngineKind kind)
{
    return kind == EngineKind::Pcg64 ? "pcg64" : "mt19937_64";
}

std::optional<EngineKind> engineFromName(std::string_view name)
{
    if (name == "mt19937_64")
        return EngineKind::Mt19937_64;
    if (name == "pcg64")
        return EngineKind::Pcg64;
    return std::nullopt;
}

std::uint64_t deriveSeed(std::uint64_t seed, Stream stream, std::uint64_t index)
{
    std::uint64_t s = seed;
    std::uint64_t mixed = splitMix64(s);
    s = mixed ^ (static_cast<std::uint64_t>(stream) * 0xD1B54A32D192ED03ULL);
    mixed = splitMix64(s);
    s = mixed ^ (index * 0x8CB92BA72F3D8DD7ULL);
    return splitMix64(s);
}

Rng::Rng(EngineKind kind, std::uint64_t seed)
    : m_kind(kind), m_mt(seed), m_pcg(seed)
{
}

std::uint64_t Rng::below(std::uint64_t n)
{
    // Lemire (2019), "Fast random integer generation in an interval".
    using u128 = Pcg64::uint128;
    std::uint64_t x = nextU64();
    u128 m = static_cast<u128>(x) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
        const std::uint64_t threshold = (0 - n) % n;
        while (low < threshold) {
            x = nextU64();
            m = static_cast<u128>(x) * n;
            low = static_cast<std::uint64_t>(m);
        }
    }
    return static_cast<std::uint64_t>(m >> 64);
}

double Rng::normal()
{
    if (m_hasSpare) {
        m_hasSpare = false;
        return m_spareNormal;
    }
    double u, v, s;
    do {
        u = 2.0 * uniform() - 1.0;
        v = 2.0 * uniform() - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double factor = std::sqrt(-2.0 * std::log(s) / s);
    m_spareNormal = v * factor;
    m_hasSpare = true;
    return u * factor;
}

double Rng::gamma(double shape)
{
    if (shape < 1.0) {
        // Gamma(a) = Gamma(a + 1) * U^(1/a)  (Marsaglia & Tsang, section 6).
        const double g = gamma(shape + 1.0);
        return g * std::pow(uniformOpen(), 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = normal();
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        const double u = uniformOpen();
        const double x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2)
            return d * v;
        if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v)))
            return d * v;
    }
}

double Rng::studentT(double nu)
{
    const double z = normal();
    const double chi2 = chiSquare(nu);
    return z / std::sqrt(chi2 / nu);
}

void Rng::fillNormal(float* out, std::size_t n, float scale)
{
    for (std::size_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(normal()) * scale;
}

} // namespace kvlens
