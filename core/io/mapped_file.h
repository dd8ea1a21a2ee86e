// SPDX-License-Identifier: GPL-3.0-or-later
// A read-only memory map of a regular file (model weights: GGUF, safetensors), unmapped when it goes away.
#pragma once

#include "core/common/result.h"

#include <cstdint>
#include <span>
#include <string>

namespace kvlens::io {

/// How the mapped bytes will be read (madvise; a hint the kernel may ignore).
enum class MapAdvice {
    Normal,     ///< MADV_NORMAL: the kernel's default read-ahead
    Sequential, ///< MADV_SEQUENTIAL: read front to back once
    Random,     ///< MADV_RANDOM: no read-ahead
    WillNeed,   ///< MADV_WILLNEED: start reading the whole file in now (llama.cpp's prefetch)
};

/// A regular file mapped read-only (PROT_READ, MAP_PRIVATE). Movable, not copyable; the destructor
/// unmaps. The bytes stay valid while the object lives. As with any map, a file truncated by another
/// process while mapped makes reads past its new end fault (SIGBUS): map files nobody rewrites.
class MappedFile {
public:
    /// Maps `path`. Refused with an error naming the path: a missing or unreadable file, anything
    /// that is not a regular file after following links (a folder, device, FIFO, socket; the file is
    /// opened with O_NONBLOCK so a FIFO cannot block the open), a file too large for the address
    /// space, and mmap failures (errno in words). An empty file maps to no bytes (data() is null).
    static Result<MappedFile> open(const std::string& path, MapAdvice advice = MapAdvice::WillNeed);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const std::uint8_t* data() const { return m_data; }
    std::uint64_t size() const { return m_size; }
    const std::string& path() const { return m_path; }
    std::span<const std::uint8_t> bytes() const { return {m_data, static_cast<std::size_t>(m_size)}; }

private:
    void unmap() noexcept;

    std::string m_path;
    const std::uint8_t* m_data = nullptr;
    std::uint64_t m_size = 0;
};

} // namespace kvlens::io
