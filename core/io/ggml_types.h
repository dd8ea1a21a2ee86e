// SPDX-License-Identifier: GPL-3.0-or-later
// ggml's tensor types in one table (ids, block sizes, bytes as GGUF files store them), the dequantizers of
// the weight types, and llama.cpp's KV-cache block types with ggml's reference quantizers, byte for byte.
#pragma once

#include "core/common/result.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvlens::ggml {

// --- The table of ggml's types -------------------------------------------------------------------

/// ggml's type ids (enum ggml_type in ggml/include/ggml.h), as a GGUF tensor info stores them. Ids 4
/// and 5 (q4_2, q4_3) were removed from ggml; 16..19 and 21..29 (the other iq types, i8..f64) are not
/// listed, so a file using them is refused by name.
enum class GgmlType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ4_NL = 20,
    BF16 = 30,
};

/// Values per super-block of the K types (ggml's QK_K).
inline constexpr std::uint32_t kSuperBlockSize = 256;

/// What a ggml type stores. Byte layouts of the weight types (ggml-common.h; little-endian, fp16 =
/// IEEE binary16, 256 values a super-block, sub-block j of 32 values):
///   q4_K  fp16 d, fp16 dmin, u8 scales[12], u8 qs[128]            x = d sc_j q - dmin m_j
///   q5_K  fp16 d, fp16 dmin, u8 scales[12], u8 qh[32], u8 qs[128] x = d sc_j q - dmin m_j
///   q6_K  u8 ql[128], u8 qh[64], int8 scales[16], fp16 d          x = d sc_i (q - 32)
/// sc_j and m_j are 6-bit (get_scale_min_k4): j < 4: sc = scales[j] & 63, m = scales[j + 4] & 63;
/// j >= 4: sc = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4, m = (scales[j + 4] >> 4) |
/// (scales[j] >> 6) << 4. q4_K value 64c + l (c = 0..3, l < 32) is the low nibble of qs[32c + l]
/// (sub-block 2c), value 64c + 32 + l its high nibble (sub-block 2c + 1); q5_K adds bit 2c (low) or
/// 2c + 1 (high) of qh[l] as the fifth bit. q6_K half h (128 values) with ql' = ql + 64h, qh' = qh +
/// 32h, sc' = scales + 8h, for l < 32 and i = l / 16: values l, l + 32, l + 64, l + 96 take the low
/// nibble of ql'[l], the low nibble of ql'[l + 32], the high nibble of ql'[l], the high nibble of
/// ql'[l + 32], with bits (0,1), (2,3), (4,5), (6,7) of qh'[l] as bits 4 and 5, scales sc'[i],
/// sc'[i + 2], sc'[i + 4], sc'[i + 6]. The 32-value types are described at TypeTraits below.
struct GgmlTypeTraits {
    GgmlType type;
    std::string_view name;      ///< ggml's type name (ggml_type_name): "f32", "q4_K", "iq4_nl"
    std::uint32_t blockSize;    ///< values per block: 1 (f32, f16, bf16), 32, or 256 (the K types)
    std::uint32_t bytesPerBlock;
    bool dequantizable;         ///< dequantizeRow handles it
    bool kvCacheType;           ///< llama.cpp accepts it as a cache type (-ctk / -ctv, common/arg.cpp)
};

/// Every listed type, in id order. Sizes from the static_asserts in ggml-common.h.
inline constexpr std::array<GgmlTypeTraits, 16> kGgmlTypes{{
    {GgmlType::F32, "f32", 1, 4, true, true},
    {GgmlType::F16, "f16", 1, 2, true, true},
    {GgmlType::Q4_0, "q4_0", 32, 18, true, true},
    {GgmlType::Q4_1, "q4_1", 32, 20, true, true},
    {GgmlType::Q5_0, "q5_0", 32, 22, true, true},
    {GgmlType::Q5_1, "q5_1", 32, 24, true, true},
    {GgmlType::Q8_0, "q8_0", 32, 34, true, true},
    {GgmlType::Q8_1, "q8_1", 32, 36, false, false},
    {GgmlType::Q2_K, "q2_K", kSuperBlockSize, 84, false, false},
    {GgmlType::Q3_K, "q3_K", kSuperBlockSize, 110, false, false},
    {GgmlType::Q4_K, "q4_K", kSuperBlockSize, 144, true, false},
    {GgmlType::Q5_K, "q5_K", kSuperBlockSize, 176, true, false},
    {GgmlType::Q6_K, "q6_K", kSuperBlockSize, 210, true, false},
    {GgmlType::Q8_K, "q8_K", kSuperBlockSize, 292, false, false},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 18, true, true},
    {GgmlType::BF16, "bf16", 1, 2, true, true},
}};

/// The traits of the type with ggml id `id`, or nullptr when the table does not list it.
const GgmlTypeTraits* findGgmlType(std::uint32_t id);

/// The traits of `type` (every enumerator is in the table).
const GgmlTypeTraits& ggmlTraits(GgmlType type);

/// ggml's name of `type` ("q4_K").
inline std::string_view ggmlName(GgmlType type) { return ggmlTraits(type).name; }

/// Bytes of a row of `n` values of `type`. Refused (naming the type, n and the block size): n < 0,
/// n not a multiple of the block size, a byte count past 2^63 - 1.
Result<std::uint64_t> rowBytes(GgmlType type, std::int64_t n);

// --- Dequantizing rows (the weight types) ------------------------------------------------------------

/// The instruction sets the dequantizers have kernels for. The kernel is chosen at run time from
/// what the CPU reports (cpuid, with the OS's register-state check), whatever the build's -march:
/// one binary runs on machines with and without AVX-512.
enum class SimdLevel { Scalar, Avx2, Avx512 };

/// "scalar", "avx2", "avx512".
std::string_view simdLevelName(SimdLevel level);

/// Whether this CPU runs `level` (Scalar always; Avx2 needs AVX2, FMA and F16C; Avx512 needs AVX-512F
/// as well). Always false for the vector levels on a non-x86 build.
bool simdLevelSupported(SimdLevel level);

/// The widest supported level, decided once.
SimdLevel bestSimdLevel();

/// Dequantizes one row as ggml's dequantize_row_<type> (ggml/src/ggml-quants.c) and its f16/bf16
/// conversions do, bit for bit: `src` holds rowBytes(type, n) bytes, `dst` n floats; n >= 0 a multiple
/// of the type's block size. For types with ggmlTraits(type).dequantizable (f32, f16, bf16, q8_0,
/// q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_K, q5_K, q6_K); the others are a programmer error (assert).
/// Every value is an exact product (an fp16 scale times codes of at most 8 bits fits a float's 24-bit
/// significand) with at most one rounding (q4_1, q5_1, q4_K, q5_K subtract or add the minimum), so
/// the result does not depend on FMA contraction or on the kernel. Unchecked, as in ggml: an infinite
/// or NaN scale gives inf or NaN values (the GGUF reader does not scan payloads). A NaN f16 value comes
/// out quiet (bit 22 set, the payload kept), as the F16C conversion gives it; bf16 NaNs keep their bits.
/// The hot types (f16, bf16, q8_0, q4_K, q6_K) run AVX2 or AVX-512 kernels (bestSimdLevel()).
void dequantizeRow(GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n);

/// dequantizeRow with the kernels of `level`, which must be supported (assert): for tests, which
/// compare every level with Scalar bit for bit, and for benchmarks.
void dequantizeRowAt(SimdLevel level, GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n);

// --- Quantizing rows (for tests and scripts) ---------------------------------------------------------

/// Writes the row `x` (n values, a multiple of the block size, finite) as `type` into `out`
/// (rowBytes(type, n) bytes), for every dequantizable type: f32 as is; f16 and bf16 rounded to
/// nearest even; q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl by ggml's reference quantizer (quantizeRow(Type)
/// below, bit for bit); q4_K, q5_K, q6_K by a simple valid encoding, not ggml's search: per sub-block
/// (32 values; q6_K 16) a scale covering its range (q4_K, q5_K: [min(0, min x), max x]; q6_K: max |x|
/// with codes -32..31), the 6-bit (q6_K: 8-bit) sub-block scales rounded up against the super-block
/// scale, codes rounded to nearest and clamped; every value then lies within one code step of the
/// sub-block (plus the fp16 rounding of the super-block scales). Refused with the type named: a type
/// that is not dequantizable, a wrong length or output size, a non-finite value, a value or scale that
/// overflows fp16.
Status quantizeRow(GgmlType type, std::span<const float> x, std::span<std::uint8_t> out);

// --- llama.cpp's KV-cache block types --------------------------------------------------------------

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

/// The ggml id of a KV-cache block type.
GgmlType ggmlType(Type type);

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

} // namespace kvlens::ggml
