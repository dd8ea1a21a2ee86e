// SPDX-License-Identifier: GPL-3.0-or-later
// --reuse DIR: an earlier run's trials, checked and keyed for the trial cache.
#pragma once

#include "core/common/result.h"
#include "core/experiment/trial_cache.h"

#include <string>

namespace kvlens {

/// What an earlier run directory gave the cache.
struct ReusedRun {
    long long trials = 0;   ///< trials put into the cache
    std::string backend;    ///< what computed them (the manifest's backend)
    std::string note;       ///< why some could not be keyed (empty when all were)
};

/// Reads DIR/spec.json, DIR/manifest.json and DIR/trials.bin of an earlier `--batch` run or
/// shard, checks that they belong together (the spec's hash, the trials file's hash and
/// checksum, the manifest's ids), and stores every trial in `cache` under its trialCacheKey.
/// A later run then takes from it exactly the trials whose data, scheme, budget, seed and
/// backend match, and computes the rest. The cache's limit is raised to hold them all.
Result<ReusedRun> loadRunIntoCache(const std::string& dir, TrialCache& cache);

} // namespace kvlens
