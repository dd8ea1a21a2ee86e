// SPDX-License-Identifier: GPL-3.0-or-later
// open + fstat (regular files only) + mmap(PROT_READ, MAP_PRIVATE) + madvise, with errors as data.
#include "core/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

namespace kvlens::io {

namespace {

int adviceFlag(MapAdvice advice)
{
    switch (advice) {
    case MapAdvice::Normal: return MADV_NORMAL;
    case MapAdvice::Sequential: return MADV_SEQUENTIAL;
    case MapAdvice::Random: return MADV_RANDOM;
    case MapAdvice::WillNeed: return MADV_WILLNEED;
    }
    return MADV_NORMAL;
}

/// Closes the descriptor when the map is made (the map keeps its own reference to the file).
struct MapDescriptor {
    int fd = -1;
    ~MapDescriptor()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

} // namespace

Result<MappedFile> MappedFile::open(const std::string& path, MapAdvice advice)
{
    MapDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (file.fd < 0)
        return Error{path, std::string("cannot be opened: ") + std::strerror(errno)};
    struct stat st {};
    if (::fstat(file.fd, &st) != 0)
        return Error{path, std::string("cannot be read: ") + std::strerror(errno)};
    if (!S_ISREG(st.st_mode))
        return Error{path, S_ISDIR(st.st_mode) ? "is a folder, not a file"
                                               : "is not a regular file (a device, FIFO or socket); refused"};
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size > std::numeric_limits<std::size_t>::max() / 2)
        return Error{path, "is too large to map (" + std::to_string(size) + " bytes)"};
    MappedFile mapped;
    mapped.m_path = path;
    if (size == 0)
        return mapped;
    void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (p == MAP_FAILED)
        return Error{path, std::string("cannot be mapped: ") + std::strerror(errno)};
    mapped.m_data = static_cast<const std::uint8_t*>(p);
    mapped.m_size = size;
    ::madvise(p, static_cast<std::size_t>(size), adviceFlag(advice)); // a hint: its failure changes nothing
    return mapped;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : m_path(std::move(other.m_path)), m_data(std::exchange(other.m_data, nullptr)), m_size(std::exchange(other.m_size, 0))
{
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept
{
    if (this != &other) {
        unmap();
        m_path = std::move(other.m_path);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

MappedFile::~MappedFile()
{
    unmap();
}

void MappedFile::unmap() noexcept
{
    if (m_data)
        ::munmap(const_cast<std::uint8_t*>(m_data), static_cast<std::size_t>(m_size));
    m_data = nullptr;
    m_size = 0;
}

} // namespace kvlens::io
