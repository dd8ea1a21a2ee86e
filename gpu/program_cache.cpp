// SPDX-License-Identifier: GPL-3.0-or-later
// Program binary cache on disk.
#include "gpu/program_cache.h"

#include "core/common/hash.h"
#include "core/io/atomic_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace kvlens::gpu {

std::string programCacheDirectory()
{
    if (const char* dir = std::getenv("KVLENS_CACHE_DIR"); dir && *dir)
        return dir;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        return std::string(xdg) + "/kvlens/opencl";
    if (const char* home = std::getenv("HOME"); home && *home)
        return std::string(home) + "/.cache/kvlens/opencl";
    return "/tmp/kvlens-opencl-cache";
}

std::string fnv1aHex(const std::string& text)
{
    const std::uint64_t h = fnv1a64(text);
    char buffer[17];
    std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(h));
    return buffer;
}

ProgramCache::ProgramCache(std::string directory)
    : m_directory(std::move(directory))
{
}

std::string ProgramCache::key(const std::string& platform, const std::string& device, const std::string& driver,
                              const std::string& version, const std::string& options, const std::string& source)
{
    return platform + "\n" + device + "\n" + driver + "\n" + version + "\n" + options + "\n" + fnv1aHex(source);
}

std::string ProgramCache::path(const std::string& key) const
{
    return m_directory + "/" + fnv1aHex(key) + ".bin";
}

std::optional<std::vector<unsigned char>> ProgramCache::load(const std::string& key) const
{
    std::ifstream in(path(key), std::ios::binary);
    if (!in)
        return std::nullopt;
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty())
        return std::nullopt;
    return bytes;
}

void ProgramCache::store(const std::string& key, const std::vector<unsigned char>& binary) const
{
    if (binary.empty() || !makeDirectories(m_directory))
        return;
    (void)writeFileAtomic(path(key), std::string_view(reinterpret_cast<const char*>(binary.data()), binary.size()));
}

} // namespace kvlens::gpu
