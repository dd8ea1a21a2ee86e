// SPDX-License-Identifier: GPL-3.0-or-later
// POSIX temp-file + fsync + rename, the same guarantee QSaveFile gives the Qt layers.
#include "core/io/atomic_file.h"

#include "core/io/fault.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace kvlens {

namespace {

mode_t defaultFileMode()
{
    const mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

} // namespace

bool applyDefaultPermissions(const std::string& path)
{
    return ::chmod(path.c_str(), defaultFileMode()) == 0;
}

Status writeFileAtomic(const std::string& path, std::string_view contents)
{
    const std::filesystem::path target(path);
    std::string pattern = (target.has_parent_path() ? target.parent_path().string() + "/" : std::string())
                          + "." + target.filename().string() + ".tmpXXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    const int fd = mkstemp(name.data());
    if (fd < 0)
        return Error{path, std::string("cannot write: ") + std::strerror(errno)};
    const std::string temp(name.data());
    auto fail = [&](const char* what) {
        const int code = errno;
        close(fd);
        unlink(temp.c_str());
        return Error{path, std::string(what) + ": " + std::strerror(code)};
    };
    const char* data = contents.data();
    std::size_t left = contents.size();
    if (io::faultFailsWrite(target.filename().string())) {
        errno = ENOSPC;
        return fail("write failed");
    }
    while (left > 0) {
        const ssize_t written = write(fd, data, left);
        if (written < 0) {
            if (errno == EINTR)
                continue;
            return fail("write failed");
        }
        data += written;
        left -= static_cast<std::size_t>(written);
    }
    if (fsync(fd) != 0)
        return fail("flush failed");
    // mkstemp creates 0600; give the file the usual permissions.
    fchmod(fd, defaultFileMode());
    if (close(fd) != 0) {
        unlink(temp.c_str());
        return Error{path, std::string("close failed: ") + std::strerror(errno)};
    }
    if (std::rename(temp.c_str(), path.c_str()) != 0) {
        const int code = errno;
        unlink(temp.c_str());
        return Error{path, std::string("cannot replace: ") + std::strerror(code)};
    }
    return Ok{};
}

Status makeDirectories(const std::string& dir)
{
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        return Error{dir, "cannot create the directory: " + ec.message()};
    if (!std::filesystem::is_directory(dir))
        return Error{dir, "exists and is not a directory"};
    return Ok{};
}

} // namespace kvlens
