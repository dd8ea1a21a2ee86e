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

namespace {

/// Tables of the 128-layer ziggurat for N(0, 1) (Marsaglia & Tsang 2000, in Doornik's 2005
/// "ZIGNOR" form, which draws the layer index from bits independent of the uniform).
struct Ziggurat {
    static constexpr int kLayers = 128;
    static constexpr double kR = 3.442619855899;          // start of the tail
    static constexpr double kV = 9.91256303526217e-3;     // area of each layer
    double x[kLayers + 1];
    double ratio[kLayers];

    Ziggurat()
    {
        double f = std::exp(-0.5 * kR * kR);
        x[0] = kV / f;
        x[1] = kR;
        x[kLayers] = 0.0;
        for (int i = 2; i < kLayers; ++i) {
            x[i] = std::sqrt(-2.0 * std::log(kV / x[i - 1] + f));
            f = std::exp(-0.5 * x[i] * x[i]);
        }
        for (int i = 0; i < kLayers; ++i)
            ratio[i] = x[i + 1] / x[i];
    }
};

const Ziggurat& ziggurat()
{
    static const Ziggurat table;
    return table;
}

} // namespace

double Rng::normal()
{
    const Ziggurat& z = ziggurat();
    for (;;) {
        const std::uint64_t bits = nextU64();
        const int layer = static_cast<int>(bits & 0x7f);                      // 7 low bits: the layer
        const double u = 2.0 * (static_cast<double>(bits >> 11) * 0x1.0p-53) - 1.0; // 53 high bits: U(-1, 1)
        if (std::abs(u) < z.ratio[layer])
            return u * z.x[layer]; // inside the layer's rectangle: most draws end here
        if (layer == 0) {
            // The tail beyond R (Marsaglia 1964).
            double a, b;
            do {
                a = -std::log(uniformOpen()) / Ziggurat::kR;
                b = -std::log(uniformOpen());
            } while (b + b < a * a);
            return u > 0.0 ? Ziggurat::kR + a : -(Ziggurat::kR + a);
        }
        // The wedge between this layer's rectangle and the curve.
        const double candidate = u * z.x[layer];
        const double f0 = std::exp(-0.5 * (z.x[layer] * z.x[layer] - candidate * candidate));
        const double f1 = std::exp(-0.5 * (z.x[layer + 1] * z.x[layer + 1] - candidate * candidate));
        if (f1 + uniform() * (f0 - f1) < 1.0)
            return candidate;
    }
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
