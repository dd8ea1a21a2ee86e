// SPDX-License-Identifier: GPL-3.0-or-later
// The safetensors format: header length, JSON header and payload offsets, validated before anything is read.
#pragma once

#include "core/common/result.h"
#include "core/io/tensor_file.h"

#include <cstdint>
#include <span>
#include <string>

namespace kvlens::io {

/// Largest JSON header accepted, the cap of the reference implementation (huggingface/safetensors,
/// MAX_HEADER_SIZE = 100 000 000 bytes).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

/// Parses a safetensors header: an 8-byte little-endian length N, then N bytes of JSON mapping each
/// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} and an optional "__metadata__"
/// object of strings. `bytes` must hold at least the first 8 + N bytes of a file of `fileSize` bytes.
/// Checks: N ≤ kSafetensorsMaxHeaderBytes and 8 + N ≤ fileSize; arrays and objects nested at most
/// kMaxJsonDepth levels (json_text.h; checked before the JSON is parsed); dtypes F16, BF16, F32, F64 only;
/// no duplicate keys; shape × itemsize equals end − begin; sorted by begin, the offsets tile the
/// byte buffer [0, fileSize − 8 − N) exactly (no overlap, no hole, none past the end). Tensors are
/// returned in payload order, with dataOffset relative to the start of the file.
Result<TensorFileInfo> parseSafetensorsHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize,
                                              const std::string& label);

} // namespace kvlens::io
