// SPDX-License-Identifier: GPL-3.0-or-later
// The NumPy .npy format (versions 1.0, 2.0, 3.0): a strict header parser that validates before anything is allocated.
#pragma once

#include "core/common/result.h"
#include "core/io/tensor_file.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::io {

/// Largest header (the dict text, after the length field) the parser accepts. NumPy itself refuses
/// more than 10 000 bytes by default; 64 KiB leaves room for long shapes.
inline constexpr std::uint64_t kNpyMaxHeaderBytes = 64 * 1024;
/// Magic (6) + version (2) + the longest length field (4): a prefix of this many bytes plus
/// kNpyMaxHeaderBytes always holds a complete header.
inline constexpr std::uint64_t kNpyMaxPreambleBytes = 12 + kNpyMaxHeaderBytes;

/// What a .npy header says before its dtype is interpreted: for readers of element types that the
/// tensor readers refuse (the int32/int64 token ids of core/lm/token_ids.h).
struct NpyRawHeader {
    std::string descr;                ///< as written, e.g. "<i8"
    bool fortranOrder = false;
    std::vector<std::int64_t> shape;
    std::uint64_t dataOffset = 0;     ///< bytes before the payload
};

/// The magic, version, length field and dict of a .npy file of `fileSize` bytes whose first bytes are
/// `bytes` (reference: numpy.lib.format), checked as parseNpyHeader checks them, but with the dtype
/// and the payload size left to the caller. Errors are Error{label, message};
/// `supportedTypes` is the parenthesis the refusal of a structured dtype ends with.
Result<NpyRawHeader> parseNpyRawHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize,
                                       const std::string& label,
                                       std::string_view supportedTypes = "F16, F32, F64 only for .npy");

/// Parses the header of a whole .npy file held in `bytes` (reference: numpy.lib.format, "The .npy
/// format", NEP 1). The single tensor is named "array". The payload must be exactly
/// product(shape) × itemsize bytes, so a truncated or over-long file is an error. `label` names the
/// source (a path) in errors.
Result<TensorFileInfo> parseNpyHeader(std::span<const std::uint8_t> bytes, const std::string& label);

/// Same, for a prefix of a file of `fileSize` bytes: `bytes` must hold at least the complete header
/// (min(fileSize, kNpyMaxPreambleBytes) bytes always do); the payload size is checked against
/// `fileSize`. `tensor` is the name used in the result and in errors (an .npz member's name).
Result<TensorFileInfo> parseNpyHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize,
                                      const std::string& label, const std::string& tensor = "array");

} // namespace kvlens::io
