// SPDX-License-Identifier: GPL-3.0-or-later
// The GGUF format (llama.cpp's model files): header, metadata and tensor infos, validated as untrusted
// input before anything is allocated, without reading the tensor data.
#pragma once

#include "core/common/result.h"
#include "core/io/ggml_types.h"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::io {

/// Caps for untrusted headers (ggml's own: GGML_MAX_DIMS 4, GGML_MAX_NAME 64 with the terminator).
inline constexpr std::uint64_t kGgufMaxHeaderBytes = 512ull << 20;  ///< metadata + tensor infos
inline constexpr std::uint64_t kGgufMaxStringBytes = 16ull << 20;   ///< one string value
inline constexpr std::uint64_t kGgufMaxKeyBytes = 65535;            ///< a key (the GGUF spec's limit)
inline constexpr std::uint64_t kGgufMaxTensorNameBytes = 63;        ///< a tensor name
inline constexpr std::uint64_t kGgufMaxAlignment = 1ull << 20;      ///< general.alignment
inline constexpr std::uint64_t kGgufMaxElements = 1ull << 40;       ///< values in one tensor
inline constexpr std::uint32_t kGgufMaxDims = 4;
inline constexpr std::uint64_t kGgufDefaultAlignment = 32;

/// A metadata value's type id as the file stores it (gguf_type in ggml/include/gguf.h).
enum class GgufValueType : std::uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

/// "u8", "i8", ... "string", "array", "f64".
std::string_view ggufTypeName(GgufValueType type);

/// One metadata value, kept as stored: numbers by their bits, arrays of numbers as their raw bytes (so
/// memory stays what the file holds), strings and arrays of strings as strings. Nested arrays are refused.
struct GgufValue {
    GgufValueType type = GgufValueType::U8;
    GgufValueType elementType = GgufValueType::U8; ///< arrays: the elements' type (never Array)
    std::uint64_t count = 0;                        ///< arrays: how many elements
    std::uint64_t bits = 0;                         ///< numbers and bool: the stored bits, zero-extended
    std::string text;                               ///< a string
    std::vector<std::uint8_t> raw;                  ///< an array of numbers or bools: count x size, little-endian
    std::vector<std::string> strings;               ///< an array of strings

    bool isArray() const { return type == GgufValueType::Array; }
    /// "u32", "string", "array of f32": for messages.
    std::string typeText() const;
};

/// One tensor info, validated: dims innermost first (a [rows x cols] matrix is stored cols, rows).
struct GgufTensor {
    std::string name;
    std::vector<std::uint64_t> dims; ///< 1 .. 4 entries, each >= 1; dims[0] is the row length
    ggml::GgmlType type = ggml::GgmlType::F32;
    std::uint64_t offset = 0;        ///< absolute offset in the file (the data section's start + the stored offset)
    std::uint64_t bytes = 0;         ///< rowBytes(type, dims[0]) x rowCount()

    std::uint64_t rowLength() const { return dims.empty() ? 0 : dims[0]; }
    /// Product of dims[1..] (1 for a vector).
    std::uint64_t rowCount() const;
    std::uint64_t elementCount() const { return rowLength() * rowCount(); }
};

/// Everything a GGUF header says, checked against the file's size.
struct GgufFile {
    std::string path;                                  ///< the label errors name (the path, for files)
    std::uint32_t version = 3;                         ///< 2 or 3
    std::map<std::string, GgufValue, std::less<>> metadata;
    std::vector<GgufTensor> tensors;                   ///< in the header's order
    std::uint64_t alignment = kGgufDefaultAlignment;   ///< general.alignment, or 32
    std::uint64_t dataOffset = 0;                      ///< where the data section starts (a multiple of alignment)
    std::uint64_t fileSize = 0;

    /// The value of `key`, or null.
    const GgufValue* find(std::string_view key) const;
    /// The tensor called `name`, or null.
    const GgufTensor* findTensor(std::string_view name) const;

    /// Typed accessors. A missing key is refused ("key 'x' is missing"); so is a value of another type,
    /// naming the key and both types. Integers convert between the integer types when the value fits
    /// (converters write u32 or u64, i32 or u32 for the same key), floats from f32 or f64, the rest exactly.
    template <class T>
    Result<T> get(std::string_view key) const;
    /// As get, but a missing key gives an empty optional (a wrong type is still refused).
    template <class T>
    Result<std::optional<T>> getOptional(std::string_view key) const;

    Result<std::string> getString(std::string_view key) const { return get<std::string>(key); }
    Result<std::uint32_t> getU32(std::string_view key) const { return get<std::uint32_t>(key); }
    Result<std::int32_t> getI32(std::string_view key) const { return get<std::int32_t>(key); }
    Result<std::uint64_t> getU64(std::string_view key) const { return get<std::uint64_t>(key); }
    Result<float> getF32(std::string_view key) const { return get<float>(key); }
    Result<bool> getBool(std::string_view key) const { return get<bool>(key); }
    /// T: std::string, float or std::int32_t (as get converts them, element by element).
    template <class T>
    Result<std::vector<T>> getArray(std::string_view key) const { return get<std::vector<T>>(key); }
};

/// Parses a GGUF header held in `bytes`, the first bytes of a file of `fileSize` bytes (all of it, or
/// at least the header). Versions 2 and 3 (1, the 2023 format with 32-bit counts, is refused by name; a
/// big-endian file is recognised and refused). Checks, each refused in one line naming `label`, the
/// key or tensor, and the allowed range, before anything is allocated for it:
///  - tensor, key and array-element counts that the remaining bytes cannot hold (each needs its
///    minimum size); strings past the end, longer than kGgufMaxStringBytes (keys kGgufMaxKeyBytes,
///    tensor names kGgufMaxTensorNameBytes); a header longer than kGgufMaxHeaderBytes;
///  - duplicate keys or tensor names, keys and names that are empty or not UTF-8; unknown value
///    types, nested arrays, bools other than 0 and 1;
///  - general.alignment that is not an integer power of two in 1 .. kGgufMaxAlignment;
///  - n_dims outside 1 .. 4, a dimension of 0, an element count past kGgufMaxElements, a ggml type
///    outside the table (ggml_types.h), a row length that is not a multiple of the type's block, an
///    offset not a multiple of the alignment, tensor bytes that overlap, run past the file, or overflow.
/// Reads nothing past `fileSize` or the end of `bytes`; allocates what it keeps (a small multiple of
/// the bytes it has read). The tensor data is not looked at.
Result<GgufFile> parseGgufHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize, const std::string& label);

/// Reads the header of the GGUF file at `path` with bounded buffered reads (pread, 1 MiB at a time),
/// never the tensor data, with the checks of parseGgufHeader and those of io::readRegularFile on the
/// file itself (regular files only; errors name the path).
Result<GgufFile> readGgufHeader(const std::string& path);

} // namespace kvlens::io
