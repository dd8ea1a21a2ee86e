// SPDX-License-Identifier: GPL-3.0-or-later
// 64-bit FNV-1a (Fowler, Noll, Vo): the one non-cryptographic hash of the project (spec and trial
// identities, imported-data hashes, OpenCL program-cache keys).
#pragma once

#include <bit>
#include <cstdint>
#include <string_view>

namespace kvlens {

inline constexpr std::uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnvPrime = 0x00000100000001b3ULL;

/// FNV-1a of `bytes`, continuing from `hash` (so a hash can be built in pieces).
constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash = kFnvOffsetBasis)
{
    for (const char c : bytes) {
        hash ^= static_cast<unsigned char>(c);
        hash *= kFnvPrime;
    }
    return hash;
}

/// FNV-1a's step over 8-byte little-endian words instead of bytes (the tail's bytes one by one):
/// eight times fewer multiplies, for hashing gigabytes of model weights at memory speed. Not FNV-1a's
/// published values; a different function, used only where its name says so (weight data hashes).
inline std::uint64_t fnv1a64Words(const std::uint8_t* data, std::uint64_t size, std::uint64_t hash = kFnvOffsetBasis)
{
    std::uint64_t i = 0;
    for (; i + 8 <= size; i += 8) {
        std::uint64_t w = 0;
        for (int b = 0; b < 8; ++b)
            w |= static_cast<std::uint64_t>(data[i + static_cast<std::uint64_t>(b)]) << (8 * b);
        hash = (hash ^ w) * kFnvPrime;
    }
    for (; i < size; ++i)
        hash = (hash ^ data[i]) * kFnvPrime;
    return hash;
}

/// FNV-1a over typed values, each written unambiguously (numbers as their bytes, text with its
/// length first), so that different sequences of values never hash the same bytes.
class Fnv1a {
public:
    void bytes(std::string_view b) { m_hash = fnv1a64(b, m_hash); }
    void u64(std::uint64_t v)
    {
        char b[8];
        for (int i = 0; i < 8; ++i)
            b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
        bytes(std::string_view(b, 8));
    }
    void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
    /// The bit pattern (so 0.1 + 0.2 and 0.3 differ); -0.0 and 0.0 are one value.
    void f64(double v) { u64(std::bit_cast<std::uint64_t>(v == 0.0 ? 0.0 : v)); }
    void text(std::string_view s)
    {
        u64(s.size());
        bytes(s);
    }
    std::uint64_t value() const { return m_hash; }

private:
    std::uint64_t m_hash = kFnvOffsetBasis;
};

// The published test vectors (Noll's FNV page): "" and "a".
static_assert(fnv1a64("") == 0xcbf29ce484222325ULL);
static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);

} // namespace kvlens
