// SPDX-License-Identifier: GPL-3.0-or-later
// A run's output directory written as a whole: into a staging directory beside it, locked against
// a second writer, swapped into place at the end. The target holds all of one run, or is untouched.
#pragma once

#include "core/common/result.h"

#include <string>

namespace kvlens::io {

/// Usage: begin() before computing (it checks that the target can be written, and locks it);
/// write every file under path(); commit() when everything is written. Destroying an uncommitted
/// one (an error, Ctrl-C) removes the staging directory and leaves the target as it was.
///
///   TARGET/                               the run, once committed (old contents replaced whole)
///   .TARGET.kvlens-staging-XXXXXX/        path(): where the run writes until commit()
///   .TARGET.kvlens-lock                   flock()ed while a run owns TARGET; holds its pid
///
/// A process killed outright (kill -9, power loss) leaves at most a staging directory, which the
/// next begin() on the same target removes; TARGET itself is never half written.
class StagedDirectory {
public:
    /// Locks `target` and makes its staging directory (creating missing parents). Refused, naming
    /// the directory: a target another process holds (with that process's pid), a parent that cannot
    /// be written (read-only, permissions: errno in words), a target that is not a directory, and an
    /// existing directory that is neither empty nor a KVLens output (it would be replaced whole).
    static Result<StagedDirectory> begin(const std::string& target);

    StagedDirectory(StagedDirectory&& other) noexcept;
    StagedDirectory& operator=(StagedDirectory&& other) noexcept;
    StagedDirectory(const StagedDirectory&) = delete;
    StagedDirectory& operator=(const StagedDirectory&) = delete;
    ~StagedDirectory();

    /// Where to write the run's files.
    const std::string& path() const { return m_staging; }
    const std::string& target() const { return m_target; }

    /// Puts the staging directory in the target's place (atomically with renameat2 RENAME_EXCHANGE
    /// where the file system has it), removes the old contents and the lock. After an error the
    /// target is as it was.
    Status commit();

    /// Removes the staging directory and the lock; the target is as it was. Idempotent.
    void abort();

    /// " (no space left on device: 12 KiB free in DIR)" when the staging directory's file system
    /// is (nearly) full, else "": appended to a failed write's message, which may come from a
    /// library that does not say why (libpng).
    std::string spaceNote() const;

private:
    StagedDirectory() = default;
    void release();

    std::string m_target, m_staging, m_lockPath;
    int m_lockFd = -1;
    bool m_done = false;
};

/// " (no space left on device: 12 KiB free in DIR)" when the file system holding `dir` has less
/// than 1 MiB free, else "".
std::string spaceNote(const std::string& dir);

/// The marker file every staged output holds, so that a later run may replace it whole.
inline constexpr const char* kRunMarker = ".kvlens-run";

} // namespace kvlens::io
