// SPDX-License-Identifier: GPL-3.0-or-later
// On-disk cache of built OpenCL program binaries, so a second start does not rebuild.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::gpu {

/// Where binaries live: $KVLENS_CACHE_DIR, else $XDG_CACHE_HOME/kvlens/opencl, else
/// ~/.cache/kvlens/opencl.
std::string programCacheDirectory();

/// 64-bit FNV-1a of a string, printed as 16 hex digits (cache file names).
std::string fnv1aHex(const std::string& text);

/// A cache keyed by everything that changes a binary: platform, device, driver version,
/// device version, build options and the source text.
class ProgramCache {
public:
    explicit ProgramCache(std::string directory = programCacheDirectory());

    static std::string key(const std::string& platform, const std::string& device, const std::string& driver,
                           const std::string& version, const std::string& options, const std::string& source);

    /// The stored binary for `key`, if any.
    std::optional<std::vector<unsigned char>> load(const std::string& key) const;
    /// Stores a binary atomically (temporary file + rename); failures are ignored (a cache).
    void store(const std::string& key, const std::vector<unsigned char>& binary) const;

    const std::string& directory() const { return m_directory; }

private:
    std::string path(const std::string& key) const;
    std::string m_directory;
};

} // namespace kvlens::gpu
