// SPDX-License-Identifier: GPL-3.0-or-later
// Atomic file writes without Qt: write a temporary beside the target, flush, rename over it.
#pragma once

#include "core/common/result.h"

#include <string>
#include <string_view>

namespace kvlens {

/// Writes `contents` to `path` atomically: either the old file stays untouched or the new
/// one is complete. Errors name the path and the system's reason.
Status writeFileAtomic(const std::string& path, std::string_view contents);

/// Gives a file made by mkstemp (0600) the permissions a new file gets, 0666 & ~umask, so
/// exports stay readable to a shared project; false when chmod fails.
bool applyDefaultPermissions(const std::string& path);

/// Creates `dir` and missing parents; an error names the directory that could not be made.
Status makeDirectories(const std::string& dir);

} // namespace kvlens
