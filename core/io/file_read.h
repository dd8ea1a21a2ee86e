// SPDX-License-Identifier: GPL-3.0-or-later
// Reading a whole input file safely: only regular files (never a device, FIFO or folder, even
// through a link), and only below a stated size, checked before a byte is read.
#pragma once

#include "core/common/result.h"

#include <cstdint>
#include <string>

namespace kvlens::io {

/// Caps for the small files KVLens reads whole.
inline constexpr std::uint64_t kMaxSpecBytes = 16ull << 20;      ///< spec.json: 16 MiB
inline constexpr std::uint64_t kMaxManifestBytes = 256ull << 20; ///< a shard's manifest.json
inline constexpr std::uint64_t kMaxTrialsFileBytes = 16ull << 30; ///< a shard's trials.bin

/// The contents of `path`. Refused with an error naming the path: a missing file, one that is not
/// a regular file after following links (devices such as /dev/zero, FIFOs, folders), one larger than
/// `maxBytes` (with both sizes), and read errors (errno in words). The file is opened with
/// O_NONBLOCK and checked with fstat on the open descriptor, so a FIFO swapped in after the check
/// cannot block the read.
Result<std::string> readRegularFile(const std::string& path, std::uint64_t maxBytes);

/// The first bytes of a regular file and its size, with the same refusals as readRegularFile (but
/// no size cap: only `prefixBytes` are read), so a header can be checked before a large body is.
struct FilePrefix {
    std::string bytes;        ///< min(prefixBytes, size) bytes
    std::uint64_t size = 0;   ///< the whole file's size
};
Result<FilePrefix> readRegularFilePrefix(const std::string& path, std::uint64_t prefixBytes);

/// "16 MiB", "1.5 GiB": a byte count for messages.
std::string byteSizeText(std::uint64_t bytes);

} // namespace kvlens::io
