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

/// A regular file read front to back in blocks, with the refusals of readRegularFile and no size
/// cap: the caller reads what it needs (a streamed text stops once it has its tokens).
class RegularFileReader {
public:
    static Result<RegularFileReader> open(const std::string& path);
    RegularFileReader(RegularFileReader&& other) noexcept;
    RegularFileReader& operator=(RegularFileReader&&) = delete;
    ~RegularFileReader();
    /// The file's size when it was opened.
    std::uint64_t size() const { return m_size; }
    /// Reads up to `capacity` bytes into `buffer`: how many, 0 at the end of the file.
    Result<std::size_t> read(char* buffer, std::size_t capacity);

private:
    RegularFileReader(int fd, std::string path, std::uint64_t size);
    int m_fd = -1;
    std::string m_path;
    std::uint64_t m_size = 0;
};

/// "16 MiB", "1.5 GiB": a byte count for messages.
std::string byteSizeText(std::uint64_t bytes);

} // namespace kvlens::io
