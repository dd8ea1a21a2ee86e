// SPDX-License-Identifier: GPL-3.0-or-later
// llama.cpp's KV-cache block types (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl), byte for byte as ggml stores them.
#pragma once

#include "core/common/result.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvlens::quant::ggml {

/// The ggml block types llama.cpp accepts for a quantized KV cache (`-ctk` / `-ctv`).
enum class Type : std::uint8_t { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL };

/// Values per block, for every type here (ggml's QK8_0, QK4_0, QK4_1, QK5_0, QK5_1, QK4_NL).
inline constexpr std::size_t kBlockSize = 32;

/// What a type stores. Byte layouts (little-endian, fp16 = IEEE binary16; ggml-common.h):
///   q8_0   fp16 d, int8 q[32]                              x = q d
///   q4_0   fp16 d, u8 qs[16]                               x = (q - 8) d
///   q4_1   fp16 d, fp16 m, u8 qs[16]                       x = q d + m
///   q5_0   fp16 d, u8 qh[4], u8 qs[16]                     x = (q - 16) d
///   q5_1   fp16 d, fp16 m, u8 qh[4], u8 qs[16]             x = q d + m
///   iq4_nl fp16 d, u8 qs[16]                               x = kIq4nlValues[q] d
/// qs byte j holds the low four bits of value j (low nibble) and of value j + 16 (high nibble); for
/// the 5-bit types, bit j of the little-endian 32-bit word qh is the fifth bit of value j.
struct TypeTraits {
    Type type;
    std::string_view name;    ///< as llama.cpp spells it on the command line ("q8_0")
    std::size_t blockSize;    ///< values per block
    std::size_t bytesPerBlock;
    double bitsPerCoordinate; ///< 8 * bytesPerBlock / blockSize
};

/// Every type, in the order of the enum.
inline constexpr std::array<TypeTraits, 6> kTypes{{
    {Type::Q8_0, "q8_0", kBlockSize, 34, 8.5},
    {Type::Q4_0, "q4_0", kBlockSize, 18, 4.5},
    {Type::Q4_1, "q4_1", kBlockSize, 20, 5.0},
    {Type::Q5_0, "q5_0", kBlockSize, 22, 5.5},
    {Type::Q5_1, "q5_1", kBlockSize, 24, 6.0},
    {Type::IQ4_NL, "iq4_nl", kBlockSize, 18, 4.5},
}};

/// The sixteen non-linear levels of iq4_nl (ggml-common.h, kvalues_iq4nl).
inline constexpr std::array<std::int8_t, 16> kIq4nlValues{-127, -104, -83, -65, -49, -35, -22, -10,
                                                          1,    13,   25,  38,  53,  69,  89,  113};

/// The traits of `type`.
const TypeTraits& traits(Type type);

/// The type llama.cpp calls `name` (exact, lower case: "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
/// "iq4_nl"); an unknown name is refused with the allowed list.
Result<Type> parseGgmlType(std::string_view name);

/// "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl", for messages.
std::string ggmlTypeNames();

/// Bytes of a quantized row of `length` values; refused unless length is a positive multiple of 32.
Result<std::size_t> rowBytes(Type type, std::size_t length);

/// Quantizes one row as ggml's reference quantizer does (quantize_row_<type>_ref in
/// ggml/src/ggml-quants.c), bit for bit: x is `length` floats, out exactly rowBytes(type, length)
/// bytes, blocks of 32 consecutive values. Refused: a length that is not a positive multiple of 32,
/// a wrong output size, a NaN or infinite value, and a block whose fp16 scale (or q4_1/q5_1 minimum)
/// would overflow binary16 (|d| >= 65520), where ggml would store an infinity. On refusal `out`
/// holds unspecified bytes.
/// Where ggml's result is undefined, KVLens writes a defined one (the dequantized row is the same):
/// an iq4_nl block with max |x| < 1e-15 gets d = 0 and codes 0 (llama.cpp 01243c58 clears them; ggml
/// d99724f2 packs an unfilled buffer), and a block whose reciprocal scale overflows float (max |x| below about 1e-36) gets its
/// codes clamped to their range.
Status quantizeRow(Type type, std::span<const float> x, std::span<std::uint8_t> out);

/// Dequantizes one row as ggml's dequantize_row_<type> does, bit for bit: in is rowBytes(type,
/// y.size()) bytes, y the row. Refused: sizes that do not match, and a block whose stored fp16
/// scale or minimum is infinite or NaN (never written by quantizeRow; it would put inf or NaN in y).
/// On refusal `y` is left untouched.
Status dequantizeRow(Type type, std::span<const std::uint8_t> in, std::span<float> y);

} // namespace kvlens::quant::ggml
