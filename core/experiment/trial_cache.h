// SPDX-License-Identifier: GPL-3.0-or-later
// Finished trials kept by what defines their numbers, so an edit recomputes only what changed.
#pragma once

#include "core/spec/result.h"

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kvlens {

/// What one trial's numbers depend on, hashed (FNV-1a over typed values, from the data model, not
/// from JSON text): the grid point's spec fields that define numbers (forEachSpecField), the
/// calibration rows the point draws (which depend on the whole scheme list), the scheme's paths
/// (every part's kind and every option; not its name), the budget, the seed value, the imported
/// data's hash for the point (0 for drawn data) and the backend that computes it.
/// Unlike trialId it does not change when a seed, scheme or budget is added to the spec.
std::uint64_t trialCacheKey(const ExperimentSpec& pointSpec, std::uint64_t pointDataHash, const SchemeConfig& scheme,
                            int budget, std::uint64_t seed, std::string_view backend);

/// Memory a trial's result holds (its arrays and samples), in bytes.
double trialBytes(const TrialResult& trial);

/// A bounded, thread-safe LRU store of finished trials. A hit gives the trial exactly as it was
/// computed (its key is rewritten by the caller to where it lands in the new run); entries are
/// evicted least-recently-used first once their bytes pass the limit.
class TrialCache {
public:
    explicit TrialCache(double limitMb = 512.0);

    struct Entry {
        TrialResult trial;
        std::string regimeNote; ///< the note of the draw it came from
    };
    /// The trial stored under `key`, if any (it becomes the most recently used).
    std::optional<Entry> find(std::uint64_t key);
    /// Stores (or replaces) a trial, then evicts down to the limit.
    void insert(std::uint64_t key, const TrialResult& trial, const std::string& regimeNote);

    /// A read-only cache serves hits but stores nothing new (--reuse: the earlier run's trials
    /// must not be evicted by the ones this run computes).
    void setReadOnly(bool readOnly);

    void setLimitMb(double limitMb);
    double limitMb() const;
    double bytes() const;
    std::size_t size() const;
    void clear();

private:
    void evict(); // holds m_mutex
    struct Node {
        std::uint64_t key;
        Entry entry;
        double bytes;
    };
    mutable std::mutex m_mutex;
    std::list<Node> m_order; ///< most recently used first
    std::unordered_map<std::uint64_t, std::list<Node>::iterator> m_index;
    double m_bytes = 0.0;
    double m_limitBytes;
    bool m_readOnly = false;
};

} // namespace kvlens
