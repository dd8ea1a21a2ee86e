// SPDX-License-Identifier: GPL-3.0-or-later
// NumPy .npz archives (zip files of .npy members, stored or deflated, Zip64 included) read through libzip.
#pragma once

#include "core/common/result.h"
#include "core/io/tensor_file.h"

#include <cstdint>
#include <span>
#include <string>

namespace kvlens::io {

/// Lists the tensors of an .npz archive held in memory: every member whose name ends in ".npy",
/// named without the suffix, in archive order; other members are ignored. Each member's .npy header
/// is decompressed and validated (parseNpyHeader) against the member's uncompressed size; payloads
/// are not read. Duplicate member names, encrypted members and archives libzip cannot open are errors.
Result<TensorFileInfo> parseNpzArchive(std::span<const std::uint8_t> bytes, const std::string& label);

/// Reads the member `name` (without ".npy") of an .npz archive held in memory as C-order float32.
/// The member's size is checked against its .npy header and `limits` before the payload is
/// decompressed, and the zip CRC is verified.
Result<Tensor> readNpzMember(std::span<const std::uint8_t> bytes, const std::string& name, const std::string& label,
                             const ReadLimits& limits = {});

/// parseNpzArchive for a file, which libzip reads on demand (the archive is not loaded whole). Only a
/// regular file is opened (never a FIFO, device or folder).
Result<TensorFileInfo> inspectNpzFile(const std::string& path);

/// readNpzMember for a file.
Result<Tensor> readNpzFileMember(const std::string& path, const std::string& name, const ReadLimits& limits = {});

/// readTensorSlice for an .npz file; `info` is one of inspectNpzFile(path)->tensors. The archive must
/// still be info.fileBytes long and the member's .npy header, decompressed again, must match `info`.
/// A stored member is seeked to the block; a deflated one is decompressed up to the block and thrown
/// away in fixed-size pieces, and no further, so its CRC (which covers the whole member) is not checked.
Result<Tensor> readNpzFileMemberSlice(const std::string& path, const TensorInfo& info, const SliceRequest& slice,
                                      const ReadLimits& limits = {});

/// readNpzFileMemberSlice for an archive held in memory (`bytes` must be info.fileBytes long), as
/// parseNpzArchive lists it; for the fuzz target.
Result<Tensor> readNpzMemberSlice(std::span<const std::uint8_t> bytes, const TensorInfo& info, const SliceRequest& slice,
                                  const std::string& label, const ReadLimits& limits = {});

} // namespace kvlens::io
