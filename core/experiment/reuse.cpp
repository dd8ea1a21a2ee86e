// SPDX-License-Identifier: GPL-3.0-or-later
// Reading an earlier run directory into the trial cache.
#include "core/experiment/reuse.h"

#include "core/experiment/shard.h"
#include "core/io/file_read.h"
#include "core/spec/spec_json.h"

#include <algorithm>

namespace kvlens {

Result<ReusedRun> loadRunIntoCache(const std::string& dir, TrialCache& cache)
{
    auto named = [&](const std::string& file, const Error& e) {
        return Error{"--reuse", dir + "/" + file + ": " + (e.field.empty() ? "" : e.field + ": ") + e.message};
    };
    const auto spec = loadSpecFile(dir + "/spec.json", InputCheck::SkipInputs);
    if (!spec)
        return named("spec.json", spec.error());
    const auto manifestText = io::readRegularFile(dir + "/manifest.json", io::kMaxManifestBytes);
    if (!manifestText)
        return Error{"--reuse", dir + ": no readable manifest.json (not a directory written by this version's --batch "
                                      "or --shard)"};
    const auto manifest = manifestFromJson(*manifestText);
    if (!manifest)
        return named("manifest.json", manifest.error());
    // The header first: a wrong or oversized trials.bin is refused before its body is read.
    if (auto header = checkTrialsFile(dir + "/trials.bin", manifest->specHash, manifest->trials.size(), *spec); !header)
        return named("trials.bin", header.error());
    const auto bytes = io::readRegularFile(dir + "/trials.bin", io::kMaxTrialsFileBytes);
    if (!bytes)
        return named("trials.bin", bytes.error());
    auto trials = decodeTrials(*bytes);
    if (!trials)
        return named("trials.bin", trials.error());
    const std::uint64_t hash = specHash(*spec, manifest->dataHash);
    if (manifest->specHash != hash || trials->specHash != hash)
        return Error{"--reuse", dir + ": spec.json, manifest.json and trials.bin are not of one run (spec hash "
                                      + hex64(hash) + ", manifest " + hex64(manifest->specHash) + ", trials.bin "
                                      + hex64(trials->specHash) + ")"};
    if (trials->ids != manifest->trials)
        return Error{"--reuse", dir + ": trials.bin does not hold the trials manifest.json lists"};

    ReusedRun reused;
    // The backend as the runner names it: an OpenCL request that fell back ran on "cpu".
    reused.backend = manifest->backend.substr(0, manifest->backend.find(" (fallback"));
    const bool imported = manifest->dataHash != 0;
    const int points = spec->pointCount();
    if (imported && static_cast<int>(manifest->pointDataHashes.size()) != points) {
        reused.note = "its manifest has no per-point data hashes (written by an older version): its trials of "
                      "imported data cannot be matched";
        return reused;
    }
    double bytesNeeded = cache.bytes();
    for (const TrialResult& t : trials->trials)
        bytesNeeded += trialBytes(t) + 64.0;
    cache.setLimitMb(std::max(cache.limitMb(), bytesNeeded / 1e6 + 1.0));
    std::vector<ExperimentSpec> pointSpecs;
    for (int p = 0; p < points; ++p)
        pointSpecs.push_back(spec->pointSpec(p));
    for (const TrialResult& t : trials->trials) {
        if (t.key.point < 0 || t.key.point >= points || t.key.scheme < 0
            || t.key.scheme >= static_cast<int>(spec->schemes.size()))
            return Error{"--reuse", dir + "/trials.bin: a trial's grid point or scheme is outside its spec"};
        const ExperimentSpec& ps = pointSpecs[static_cast<std::size_t>(t.key.point)];
        const std::uint64_t pointHash = imported ? manifest->pointDataHashes[static_cast<std::size_t>(t.key.point)] : 0;
        cache.insert(trialCacheKey(ps, pointHash, ps.schemes[static_cast<std::size_t>(t.key.scheme)], t.key.budget,
                                   t.key.seed, reused.backend),
                     t, manifest->regimeNote);
        ++reused.trials;
    }
    return reused;
}

} // namespace kvlens
