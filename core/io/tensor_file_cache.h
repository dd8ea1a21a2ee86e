// SPDX-License-Identifier: GPL-3.0-or-later
// Parsed tensor-file headers kept per file version, with a name index, for every reader of one file.
#pragma once

#include "core/common/result.h"
#include "core/io/tensor_file.h"

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

namespace kvlens::io {

/// One version of a tensor file's header(s), parsed once, with its tensors indexed by name.
struct CachedTensorFile {
    TensorFileInfo info;
    std::string identity; ///< fileIdentity(path) when it was parsed
    std::unordered_map<std::string, std::size_t> byName;

    /// The tensor named `name`, or null.
    const TensorInfo* find(const std::string& name) const;
};

/// The identity of a file's current contents as the file system tells it: path, inode, size and
/// modification time in nanoseconds (a replaced or rewritten file gets another); "" when it cannot
/// be stat'ed.
std::string fileIdentity(const std::string& path);

/// inspectTensorFile(path), parsed once per file identity: a header with a million metadata keys
/// or a dump of 10^5 layers is parsed once, not once per tensor, grid point, normalization and
/// draw. Holds the last few files (a small LRU); thread-safe.
Result<std::shared_ptr<const CachedTensorFile>> inspectTensorFileCached(const std::string& path);

/// How many headers inspectTensorFileCached has parsed in this process (tests count re-parses).
long long tensorHeaderParses();

/// Drops every cached header.
void clearTensorFileCache();

} // namespace kvlens::io
