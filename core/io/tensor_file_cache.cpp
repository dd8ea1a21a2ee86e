// SPDX-License-Identifier: GPL-3.0-or-later
// A small LRU of parsed tensor-file headers keyed by file identity (path, inode, size, mtime).
#include "core/io/tensor_file_cache.h"

#include <sys/stat.h>

#include <atomic>
#include <list>
#include <mutex>
#include <utility>

namespace kvlens::io {

namespace {

constexpr std::size_t kEntries = 8;

struct Cache {
    std::mutex mutex;
    std::list<std::shared_ptr<const CachedTensorFile>> entries; ///< most recently used first
    std::atomic<long long> parses{0};
};

Cache& cache()
{
    static Cache c;
    return c;
}

} // namespace

const TensorInfo* CachedTensorFile::find(const std::string& name) const
{
    const auto it = byName.find(name);
    return it == byName.end() ? nullptr : &info.tensors[it->second];
}

std::string fileIdentity(const std::string& path)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return {};
    return path + '\n' + std::to_string(st.st_ino) + '\n' + std::to_string(st.st_size) + '\n'
           + std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec);
}

Result<std::shared_ptr<const CachedTensorFile>> inspectTensorFileCached(const std::string& path)
{
    Cache& c = cache();
    const std::string key = fileIdentity(path);
    if (!key.empty()) {
        const std::lock_guard lock(c.mutex);
        for (auto it = c.entries.begin(); it != c.entries.end(); ++it)
            if ((*it)->identity == key) {
                c.entries.splice(c.entries.begin(), c.entries, it);
                return c.entries.front();
            }
    }
    c.parses.fetch_add(1);
    auto parsed = inspectTensorFile(path);
    if (!parsed)
        return parsed.error();
    auto entry = std::make_shared<CachedTensorFile>();
    entry->info = std::move(parsed).value();
    entry->identity = key;
    entry->byName.reserve(entry->info.tensors.size());
    for (std::size_t i = 0; i < entry->info.tensors.size(); ++i)
        entry->byName.emplace(entry->info.tensors[i].name, i);
    std::shared_ptr<const CachedTensorFile> shared = std::move(entry);
    if (!key.empty()) {
        const std::lock_guard lock(c.mutex);
        c.entries.push_front(shared);
        if (c.entries.size() > kEntries)
            c.entries.pop_back();
    }
    return shared;
}

long long tensorHeaderParses()
{
    return cache().parses.load();
}

void clearTensorFileCache()
{
    const std::lock_guard lock(cache().mutex);
    cache().entries.clear();
}

} // namespace kvlens::io
