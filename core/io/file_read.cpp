// SPDX-License-Identifier: GPL-3.0-or-later
// open(O_NONBLOCK) + fstat + bounded read: no input file can block, or fill memory.
#include "core/io/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <utility>

namespace kvlens::io {

std::string byteSizeText(std::uint64_t bytes)
{
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 4) {
        value /= 1024.0;
        ++unit;
    }
    char text[48];
    if (unit == 0)
        std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
    else
        std::snprintf(text, sizeof text, value < 10.0 ? "%.1f %s" : "%.0f %s", value, units[unit]);
    return text;
}

namespace {

/// Opens `path` without blocking and refuses anything but a regular file (fstat on the descriptor).
Result<int> openRegular(const std::string& path, std::uint64_t& size)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return Error{path, std::string("cannot be opened: ") + std::strerror(errno)};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return Error{path, std::string("cannot be read: ") + std::strerror(e)};
    }
    if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return Error{path, S_ISDIR(st.st_mode) ? "is a folder, not a file"
                                               : "is not a regular file (a device, FIFO or socket); refused"};
    }
    size = static_cast<std::uint64_t>(st.st_size);
    return fd;
}

/// Reads up to contents.size() bytes; shrinks `contents` to what was read.
Status readInto(int fd, const std::string& path, std::string& contents)
{
    std::size_t got = 0;
    while (got < contents.size()) {
        const ssize_t n = ::read(fd, contents.data() + got, contents.size() - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return Error{path, std::string("read error: ") + std::strerror(errno)};
        }
        if (n == 0)
            break; // shrank while reading
        got += static_cast<std::size_t>(n);
    }
    contents.resize(got);
    return Ok{};
}

struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
};

} // namespace

Result<FilePrefix> readRegularFilePrefix(const std::string& path, std::uint64_t prefixBytes)
{
    FilePrefix out;
    auto fd = openRegular(path, out.size);
    if (!fd)
        return fd.error();
    const Closer closer{*fd};
    out.bytes.assign(static_cast<std::size_t>(std::min(prefixBytes, out.size)), '\0');
    if (auto read = readInto(*fd, path, out.bytes); !read)
        return read.error();
    return out;
}

RegularFileReader::RegularFileReader(int fd, std::string path, std::uint64_t size)
    : m_fd(fd), m_path(std::move(path)), m_size(size)
{
}

RegularFileReader::RegularFileReader(RegularFileReader&& other) noexcept
    : m_fd(other.m_fd), m_path(std::move(other.m_path)), m_size(other.m_size)
{
    other.m_fd = -1;
}

RegularFileReader::~RegularFileReader()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

Result<RegularFileReader> RegularFileReader::open(const std::string& path)
{
    std::uint64_t size = 0;
    auto fd = openRegular(path, size);
    if (!fd)
        return fd.error();
    return RegularFileReader(*fd, path, size);
}

Result<std::size_t> RegularFileReader::read(char* buffer, std::size_t capacity)
{
    for (;;) {
        const ssize_t n = ::read(m_fd, buffer, capacity);
        if (n >= 0)
            return static_cast<std::size_t>(n);
        if (errno != EINTR)
            return Error{m_path, std::string("read error: ") + std::strerror(errno)};
    }
}

Result<std::string> readRegularFile(const std::string& path, std::uint64_t maxBytes)
{
    std::uint64_t size = 0;
    auto fd = openRegular(path, size);
    if (!fd)
        return fd.error();
    const Closer closer{*fd};
    if (size > maxBytes)
        return Error{path, "is " + byteSizeText(size) + ", above the cap of " + byteSizeText(maxBytes)
                               + " for this kind of file; refused"};
    std::string contents(static_cast<std::size_t>(size), '\0');
    if (auto read = readInto(*fd, path, contents); !read)
        return read.error();
    return contents;
}

} // namespace kvlens::io
