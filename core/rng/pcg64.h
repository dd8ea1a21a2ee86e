// SPDX-License-Identifier: GPL-3.0-or-later
// PCG64 (XSL-RR 128/64), bit-compatible with NumPy's PCG64 bit generator.
#pragma once

#include <cstdint>

namespace kvlens {

/// PCG XSL-RR 128/64 (O'Neill 2014), the generator behind NumPy's `PCG64`.
/// Each call steps the 128-bit LCG (state = state * kMultiplier + increment) and then
/// outputs the XSL-RR permutation of the *new* state, as NumPy does.
class Pcg64 {
public:
    __extension__ typedef unsigned __int128 uint128; // GCC/Clang extension, spelled so -Wpedantic accepts it
    using result_type = std::uint64_t;

    static constexpr uint128 kMultiplier =
        (static_cast<uint128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;

    /// Raw state and increment; the increment must be odd (it is forced odd here).
    Pcg64(uint128 state, uint128 increment) : m_state(state), m_increment(increment | 1u) {}

    /// Seeds from one 64-bit value by expanding it with SplitMix64 into state and increment.
    /// This is KVLens's own seeding (NumPy uses SeedSequence): streams are reproducible
    /// across KVLens builds, not equal to NumPy's for the same integer seed.
    explicit Pcg64(std::uint64_t seed);

    static constexpr result_type min() { return 0; }
    static constexpr result_type max() { return ~result_type{0}; }

    result_type operator()()
    {
        m_state = m_state * kMultiplier + m_increment;
        const auto high = static_cast<std::uint64_t>(m_state >> 64);
        const auto low = static_cast<std::uint64_t>(m_state);
        const auto xored = high ^ low;
        const unsigned rotation = static_cast<unsigned>(high >> 58);
        return (xored >> rotation) | (xored << ((64u - rotation) & 63u));
    }

    uint128 state() const { return m_state; }
    uint128 increment() const { return m_increment; }

private:
    uint128 m_state;
    uint128 m_increment;
};

/// SplitMix64 step (Steele, Lea, Flood 2014): advances `state` and returns a well-mixed word.
inline std::uint64_t splitMix64(std::uint64_t& state)
{
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

} // namespace kvlens
