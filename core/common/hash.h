// SPDX-License-Identifier: GPL-3.0-or-later
// 64-bit FNV-1a (Fowler, Noll, Vo): the one non-cryptographic hash of the project (spec and trial
// identities, imported-data hashes, OpenCL program-cache keys).
#pragma once

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

// The published test vectors (Noll's FNV page): "" and "a".
static_assert(fnv1a64("") == 0xcbf29ce484222325ULL);
static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);

} // namespace kvlens
