// SPDX-License-Identifier: GPL-3.0-or-later
// mkdtemp beside the target, flock on a lock file beside it, renameat2(RENAME_EXCHANGE) to commit.
#include "core/io/staged_dir.h"

#include "core/io/atomic_file.h"
#include "core/io/file_read.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

namespace kvlens::io {

namespace fs = std::filesystem;

namespace {

std::string errnoText(int code)
{
    return std::strerror(code);
}

/// A directory KVLens may replace whole: empty, or one of its outputs (the marker, or the files
/// every earlier version wrote first).
bool replaceable(const fs::path& dir)
{
    std::error_code ec;
    if (fs::is_empty(dir, ec) && !ec)
        return true;
    for (const char* name : {kRunMarker, "spec.json", "manifest.json", "report.html", "validation.csv"})
        if (fs::exists(dir / name, ec))
            return true;
    return false;
}

/// Removes what killed runs left beside `target`: staging and old directories. Called with the
/// lock held, so no live run owns them.
void removeLeftovers(const fs::path& parent, const std::string& base)
{
    std::error_code ec;
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        for (const std::string& prefix : {"." + base + ".kvlens-staging-", "." + base + ".kvlens-old-"})
            if (name.rfind(prefix, 0) == 0) {
                std::error_code ignored;
                fs::remove_all(it->path(), ignored);
            }
    }
}

} // namespace

Result<StagedDirectory> StagedDirectory::begin(const std::string& targetText)
{
    if (targetText.empty())
        return Error{"--out", "needs a directory"};
    fs::path target = fs::path(targetText).lexically_normal();
    if (target.has_filename() == false)
        target = target.parent_path();
    std::error_code ec;
    target = fs::absolute(target, ec);
    const fs::path parent = target.parent_path();
    const std::string base = target.filename().string();
    if (base.empty() || base == "." || base == "..")
        return Error{targetText, "cannot be used as an output directory"};
    if (auto made = makeDirectories(parent.string()); !made)
        return made.error();
    if (fs::exists(target, ec) && !fs::is_directory(target, ec))
        return Error{targetText, "exists and is not a directory"};
    if (fs::is_directory(target, ec) && !replaceable(target))
        return Error{targetText, "exists and holds files that are not a KVLens run; it would be replaced whole, "
                                 "so choose a new or empty directory"};

    StagedDirectory staged;
    staged.m_target = target.string();
    staged.m_lockPath = (parent / ("." + base + ".kvlens-lock")).string();
    // Lock, then check that the lock file is still the one at that path (a releasing run unlinks it).
    for (int attempt = 0;; ++attempt) {
        const int fd = ::open(staged.m_lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return Error{parent.string(), "cannot write into this directory: " + errnoText(errno)};
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int code = errno;
            std::string holder;
            if (auto text = readRegularFile(staged.m_lockPath, 4096); text)
                holder = *text;
            ::close(fd);
            while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' '))
                holder.pop_back();
            if (code == EWOULDBLOCK)
                return Error{targetText, "another kvlens run is writing this directory ("
                                             + (holder.empty() ? std::string("pid unknown") : holder)
                                             + "); wait for it to finish or choose another directory"};
            return Error{staged.m_lockPath, "cannot be locked: " + errnoText(code)};
        }
        struct stat open {}, named {};
        if (::fstat(fd, &open) == 0 && ::stat(staged.m_lockPath.c_str(), &named) == 0 && open.st_ino == named.st_ino
            && open.st_dev == named.st_dev) {
            staged.m_lockFd = fd;
            break;
        }
        ::close(fd);
        if (attempt >= 10)
            return Error{staged.m_lockPath, "keeps being replaced; cannot lock the output directory"};
    }
    const std::string holder = "pid " + std::to_string(::getpid()) + "\n";
    if (::ftruncate(staged.m_lockFd, 0) == 0) {
        const ssize_t ignored = ::write(staged.m_lockFd, holder.data(), holder.size());
        (void)ignored;
    }
    removeLeftovers(parent, base);

    std::string pattern = (parent / ("." + base + ".kvlens-staging-XXXXXX")).string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (!::mkdtemp(name.data())) {
        const int code = errno;
        staged.release();
        return Error{parent.string(), "cannot write into this directory: " + errnoText(code)};
    }
    staged.m_staging = name.data();
    ::chmod(staged.m_staging.c_str(), 0755 & ~[] { const mode_t m = ::umask(0); ::umask(m); return m; }());
    if (auto marker = writeFileAtomic(staged.m_staging + "/" + kRunMarker,
                                      "This directory was written by KVLens; a later run into it replaces it whole.\n");
        !marker) {
        const Error error = marker.error();
        staged.abort();
        return error;
    }
    return staged;
}

StagedDirectory::StagedDirectory(StagedDirectory&& other) noexcept
    : m_target(std::move(other.m_target)), m_staging(std::move(other.m_staging)),
      m_lockPath(std::move(other.m_lockPath)), m_lockFd(other.m_lockFd), m_done(other.m_done)
{
    other.m_lockFd = -1;
    other.m_done = true;
}

StagedDirectory& StagedDirectory::operator=(StagedDirectory&& other) noexcept
{
    if (this != &other) {
        abort();
        m_target = std::move(other.m_target);
        m_staging = std::move(other.m_staging);
        m_lockPath = std::move(other.m_lockPath);
        m_lockFd = other.m_lockFd;
        m_done = other.m_done;
        other.m_lockFd = -1;
        other.m_done = true;
    }
    return *this;
}

StagedDirectory::~StagedDirectory()
{
    abort();
}

void StagedDirectory::release()
{
    if (m_lockFd >= 0) {
        // Unlinked while still locked, so a run waiting on this file sees it replaced and retries.
        ::unlink(m_lockPath.c_str());
        ::close(m_lockFd);
        m_lockFd = -1;
    }
}

void StagedDirectory::abort()
{
    if (m_done)
        return;
    m_done = true;
    if (!m_staging.empty()) {
        std::error_code ignored;
        fs::remove_all(m_staging, ignored);
    }
    release();
}

Status StagedDirectory::commit()
{
    if (m_done)
        return Error{m_target, "the output directory was already committed or abandoned"};
    std::error_code ec;
    if (const int dir = ::open(m_staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
    const bool exists = fs::exists(m_target, ec);
    if (!exists) {
        if (std::rename(m_staging.c_str(), m_target.c_str()) != 0) {
            const int code = errno;
            abort();
            return Error{m_target, "cannot be put in place: " + errnoText(code)};
        }
    } else if (::renameat2(AT_FDCWD, m_staging.c_str(), AT_FDCWD, m_target.c_str(), RENAME_EXCHANGE) == 0) {
        // The staging path now holds the old run.
        fs::remove_all(m_staging, ec);
    } else {
        // No RENAME_EXCHANGE here: move the old run aside, then the new one in. A kill between the
        // two renames leaves the old run beside the target, never a mix.
        const fs::path parent = fs::path(m_target).parent_path();
        std::string pattern = (parent / ("." + fs::path(m_target).filename().string() + ".kvlens-old-XXXXXX")).string();
        std::vector<char> name(pattern.begin(), pattern.end());
        name.push_back('\0');
        if (!::mkdtemp(name.data())) {
            const int code = errno;
            abort();
            return Error{m_target, "cannot be replaced: " + errnoText(code)};
        }
        const std::string old = std::string(name.data()) + "/run";
        if (std::rename(m_target.c_str(), old.c_str()) != 0) {
            const int code = errno;
            fs::remove_all(name.data(), ec);
            abort();
            return Error{m_target, "cannot be replaced: " + errnoText(code)};
        }
        if (std::rename(m_staging.c_str(), m_target.c_str()) != 0) {
            const int code = errno;
            std::rename(old.c_str(), m_target.c_str());
            fs::remove_all(name.data(), ec);
            abort();
            return Error{m_target, "cannot be put in place: " + errnoText(code)};
        }
        fs::remove_all(name.data(), ec);
    }
    m_done = true;
    release();
    return Ok{};
}

std::string spaceNote(const std::string& dir)
{
    struct statvfs st {};
    if (::statvfs(dir.c_str(), &st) != 0)
        return {};
    const std::uint64_t free = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
    if (free >= (1ull << 20))
        return {};
    return " (no space left on device: " + byteSizeText(free) + " free in " + dir + ")";
}

std::string StagedDirectory::spaceNote() const
{
    return io::spaceNote(m_staging.empty() ? fs::path(m_target).parent_path().string() : m_staging);
}

} // namespace kvlens::io
