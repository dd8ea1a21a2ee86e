// SPDX-License-Identifier: GPL-3.0-or-later
// open(O_NONBLOCK) + fstat + bounded read: no input file can block, or fill memory.
#include "core/io/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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

Result<std::string> readRegularFile(const std::string& path, std::uint64_t maxBytes)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return Error{path, std::string("cannot be opened: ") + std::strerror(errno)};
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return Error{path, std::string("cannot be read: ") + std::strerror(errno)};
    if (S_ISDIR(st.st_mode))
        return Error{path, "is a folder, not a file"};
    if (!S_ISREG(st.st_mode))
        return Error{path, "is not a regular file (a device, FIFO or socket); refused"};
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size > maxBytes)
        return Error{path, "is " + byteSizeText(size) + ", above the cap of " + byteSizeText(maxBytes)
                               + " for this kind of file; refused"};
    std::string contents(static_cast<std::size_t>(size), '\0');
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
    return contents;
}

} // namespace kvlens::io
