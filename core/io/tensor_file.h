// SPDX-License-Identifier: GPL-3.0-or-later
// Reading K/V/Q tensors from .npy, .npz and .safetensors files: the shared types and the entry points.
#pragma once

#include "core/common/result.h"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::io {

/// The element types the readers accept; everything else is rejected by name.
enum class DType { F16, BF16, F32, F64 };

/// "F16", "BF16", "F32", "F64" (the safetensors spelling).
std::string_view dtypeName(DType type);
/// Bytes per stored element: 2, 2, 4, 8.
std::uint64_t dtypeSize(DType type);

/// One tensor as a header describes it, validated against the file but with no payload read.
/// A shape as errors print it: "[3, 4]".
std::string shapeText(const std::vector<std::int64_t>& shape);

struct TensorInfo {
    std::string name;                 ///< npy: "array"; npz: member name without ".npy"; safetensors: key
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;  ///< as stored (C order semantics; fortranOrder says how data is laid out)
    bool fortranOrder = false;        ///< npy only: the payload is column-major
    bool bigEndian = false;           ///< npy only: the payload is big-endian
    std::uint64_t dataOffset = 0;     ///< byte offset of the payload within the file (npy/safetensors) or member (npz)
    std::uint64_t dataBytes = 0;      ///< payload size in bytes
    std::uint64_t fileBytes = 0;      ///< size of the file (the whole archive, for npz) the header was read from

    /// Product of the shape (1 for a scalar), saturating at INT64_MAX; exact for every info a parser returned.
    std::int64_t elementCount() const;
};

/// Everything the header(s) of one file say.
struct TensorFileInfo {
    std::string path;
    std::string format;                            ///< "npy", "npz", "safetensors"
    std::vector<TensorInfo> tensors;               ///< npz: archive order; safetensors: payload order
    std::map<std::string, std::string> metadata;   ///< safetensors __metadata__ (string values only)
};

/// A tensor after reading: always C-order float32.
struct Tensor {
    std::string name;
    DType storedType = DType::F32;
    std::vector<std::int64_t> shape;
    std::vector<float> data;          ///< product(shape) values, row-major (C order)
};

/// Caps applied before any payload is allocated.
struct ReadLimits {
    /// Refuse a tensor whose float32 copy exceeds this many bytes, with the size in the message.
    std::uint64_t maxTensorBytes = 1ull << 32;
};

/// Parses and validates the header(s) of a .npy, .npz or .safetensors file (chosen by extension; an
/// unknown extension is an error naming the allowed ones) without reading payloads.
Result<TensorFileInfo> inspectTensorFile(const std::string& path);

/// Reads one tensor (by name; for .npy any name or "" selects the array), converts to C-order float32
/// (byte-swapping big-endian, transposing Fortran order, widening f16/bf16, narrowing f64 with IEEE
/// rounding, so magnitudes beyond FLT_MAX become ±inf), validated as inspectTensorFile does.
/// Errors name the path, the tensor and what is wrong.
Result<Tensor> readTensor(const std::string& path, const std::string& name, const ReadLimits& limits = {});

/// Which rows of which [rows x cols] matrix of a tensor of rank >= 2 laid out [..., rows, cols]:
/// `leading` holds the index of every dimension before the last two (outermost first).
struct SliceRequest {
    std::vector<std::int64_t> leading;
    std::int64_t rowStart = 0;
    std::int64_t rowCount = 0;
};

/// Reads just that block as C-order float32 (rowCount x cols), converting like readTensor (byte swap,
/// Fortran order, f16/bf16 widening, f64 narrowing). Memory stays O(slice + a fixed chunk): C-order
/// payloads seek to the block (stored .npz members and .safetensors too); deflated .npz members are
/// decompressed as a stream and skipped up to the block; Fortran-order payloads are streamed in chunks
/// picking the block's elements. Refuses (naming the field) a request outside the shape, a block whose
/// float32 copy exceeds limits.maxTensorBytes, and a file that changed size since `info` was read.
/// `info` is one of inspectTensorFile(path)->tensors; the result is named info.name, of shape
/// {rowCount, cols}. A .npy header or .npz member header is read again (at most 64 KiB) and must still
/// match `info`; a .safetensors header (up to 100 MB) is not. The zip CRC of a member is not checked:
/// it covers the whole member, which a slice read does not decompress.
Result<Tensor> readTensorSlice(const std::string& path, const TensorInfo& info, const SliceRequest& slice,
                               const ReadLimits& limits = {});

/// Refuses a `slice` of `info` that readTensorSlice cannot serve, naming the request field at fault
/// ('leading', 'leading[k]', 'rowStart', 'rowCount'): a tensor of rank < 2, an index outside its
/// dimension, rowCount < 1, rows past the end, or a float32 block larger than `limits`.
Status checkSliceRequest(const TensorInfo& info, const SliceRequest& slice, const std::string& label,
                         const ReadLimits& limits = {});

/// A forward-only stream of the bytes that hold a payload (a file, an .npz member), from their
/// first byte: what the slice reader pulls from, so that each format supplies only read and skip.
class ByteStream {
public:
    virtual ~ByteStream() = default;
    /// Reads exactly out.size() bytes at the current position and moves past them.
    virtual Status read(std::span<std::uint8_t> out) = 0;
    /// Moves `n` bytes forward without returning them: a seek where the source allows one.
    virtual Status skip(std::uint64_t n) = 0;
};

/// The block `slice` of the payload `info` describes, read from `stream`, which starts at offset 0
/// of what info.dataOffset is measured in (the file; the member, for npz). Checks the request
/// (checkSliceRequest) and that the shape times the item size equals info.dataBytes before reading.
Result<Tensor> decodeTensorSlice(ByteStream& stream, const TensorInfo& info, const SliceRequest& slice,
                                 const std::string& label, const ReadLimits& limits = {});

/// Same, for a whole .npy or .safetensors file held in memory (the fuzz targets use it); `bytes`
/// must be info.fileBytes long.
Result<Tensor> decodeTensorSlice(std::span<const std::uint8_t> bytes, const TensorInfo& info, const SliceRequest& slice,
                                 const std::string& label, const ReadLimits& limits = {});

/// True when `a` and `b` describe the same payload: dtype, shape, Fortran and byte order, offset and
/// size (name and fileBytes aside). The slice readers compare a header read again with the caller's.
bool samePayloadLayout(const TensorInfo& a, const TensorInfo& b);

/// Converts a payload of exactly `info.dataBytes` bytes to a C-order float32 tensor. Checks that the
/// shape times the item size equals the payload size (with overflow checks) and that the float32 copy
/// fits `limits` before allocating. `label` names the source (a path) in errors.
Result<Tensor> decodeTensor(std::span<const std::uint8_t> payload, const TensorInfo& info, const std::string& label,
                            const ReadLimits& limits = {});

/// product(shape) × dtypeSize(type) in bytes, or an error naming `tensor` when a dimension is negative
/// or the product overflows 63 bits. Shared by the format parsers.
Result<std::uint64_t> checkedPayloadBytes(const std::vector<std::int64_t>& shape, DType type, const std::string& tensor,
                                          const std::string& label);

/// Refuses `info` when its float32 copy would exceed `limits.maxTensorBytes`, naming both sizes;
/// the readers call it before a payload is allocated.
Status checkReadLimits(const TensorInfo& info, const std::string& label, const ReadLimits& limits);

/// `text` in single quotes for a one-line error message: control and non-ASCII bytes escaped as
/// \xNN, anything past 80 bytes cut with "...", so a hostile name cannot forge or flood a message.
std::string quoteName(std::string_view text);

/// "a, b, c" from the quoted names of `tensors` (at most 8, then "and N more"): what a file holds,
/// for "no tensor named ..." errors.
std::string tensorNameList(const std::vector<TensorInfo>& tensors);

} // namespace kvlens::io
