// SPDX-License-Identifier: GPL-3.0-or-later
// Sharding a run over machines: trial identities, the shard assignment, manifests, the trials file, merging.
#pragma once

#include "core/common/hash.h"
#include "core/common/result.h"
#include "core/spec/result.h"
#include "core/experiment/runner.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// Shard `index` of `count` (`--shard i/n`).
struct ShardId {
    int index = 0;
    int count = 1;
    bool operator==(const ShardId&) const = default;
};

inline constexpr int kMaxShards = 1000000;

/// Parses "i/n" (decimal integers, 0 <= i < n, 1 <= n <= kMaxShards); the error's field is "--shard"
/// and its message gives the allowed range.
Result<ShardId> parseShard(std::string_view text);


/// Stable identity of what a normalized spec computes: FNV-1a of specToJson of the spec with its
/// Neutral fields (forEachSpecField's roles: name, backend, fallback, device, memory_limit_mb)
/// value-initialized, continued with `dataHash` (ResultSet::dataHash: the imported tensors' content)
/// when non-zero. Stored runs hold it (manifest.json): tst_spec_hash keeps every shipped spec's value.
std::uint64_t specHash(const ExperimentSpec& spec, std::uint64_t dataHash = 0);

/// Identity of one trial: FNV-1a of (spec hash, grid point, scheme name, budget, seed value),
/// each little-endian (the name with its length). Independent of the shard count.
std::uint64_t trialId(std::uint64_t specHash, int point, std::string_view scheme, int budget, std::uint64_t seed);

/// 16 lowercase hex digits, and back (nothing for anything else).
std::string hex64(std::uint64_t value);
std::optional<std::uint64_t> parseHex64(std::string_view text);

/// Every trial of a normalized spec in walk order (point, budget, scheme, seed), with its id.
struct TrialCatalog {
    std::uint64_t specHash = 0;
    std::vector<TrialSlot> trialSlots; ///< walk order (not "slots": a Qt keyword)
    std::vector<std::uint64_t> ids;

    long long size() const { return static_cast<long long>(ids.size()); }
    /// Walk index of a trial id, or -1.
    long long find(std::uint64_t id) const;
    /// Walk index of a slot (no lookup: the walk order is arithmetic).
    long long walkIndex(const TrialSlot& slot) const;
    /// "point 1 (nu = 3), KV, n = 4, seed 3 [id 0123456789abcdef]" for messages.
    std::string describe(long long walkIndex) const;

    ExperimentSpec spec;
    std::vector<std::pair<std::uint64_t, long long>> byId; ///< sorted (id, walk index)
};
/// `dataHash`: as for specHash (the shards' manifests give it for imported data).
TrialCatalog catalogTrials(const ExperimentSpec& spec, std::uint64_t dataHash = 0);

/// The shard assignment. Trials are ordered by draw — (point, seed, budget, scheme) — and cut
/// into `count` contiguous blocks whose sizes differ by at most one; shard i takes block i.
/// A shard so draws as few (point, seed) data sets as its share allows (one or two more than
/// its share of draws), and the blocks depend only on the spec and n.
bool inShard(const ExperimentSpec& spec, const TrialSlot& slot, ShardId shard);
/// inShard as the runner's filter.
TrialFilter shardFilter(const ExperimentSpec& spec, ShardId shard);
/// Walk indices of a shard's trials, ascending.
std::vector<long long> shardWalkIndices(const ExperimentSpec& spec, ShardId shard);

/// DIR/manifest.json of a shard: what it ran, for `kvlens merge` to check.
struct ShardManifest {
    std::string programVersion;
    std::uint64_t specHash = 0;
    ShardId shard;
    long long specTrials = 0;            ///< trials of the whole spec
    std::string backend;                 ///< what ran (ResultSet::backend)
    std::string specBackend;             ///< spec.backend as spec.json gives it ("cpu (fallback: ...)" after one)
    std::string regimeNote;              ///< the regime's note, set by the shard that drew point 0, seed slot 0
    std::uint64_t dataHash = 0;          ///< FNV-1a of the imported tensors' bytes as read (ResultSet::dataHash); 0: drawn data
    std::vector<std::uint64_t> pointDataHashes; ///< the same per grid point (ResultSet::pointDataHashes); empty: drawn data
    double elapsedMs = 0.0;
    std::vector<std::uint64_t> trials;   ///< ids of the trials it ran, walk order
};
inline constexpr int kShardFormatVersion = 1;

/// The manifest as JSON: {"format": "kvlens-shard", "format_version": 1, "program_version",
/// "spec_hash" (hex), "shard": {"index", "count"}, "spec_trials", "backend", "spec_backend",
/// "regime_note", "data_hash" (hex), "point_data_hashes" (hex, imported data only; for --reuse),
/// "elapsed_ms", "trials_file": "trials.bin", "trial_count", "trials": [hex ids]}.
std::string manifestToJson(const ShardManifest& manifest);
/// Reads a manifest; errors name the key that is missing or wrong.
Result<ShardManifest> manifestFromJson(std::string_view text);

/// DIR/trials.bin: every TrialResult of a shard, lossless (floats as their bits), little-endian:
///   "KVLTRIAL" | u32 format version | u64 spec hash | u64 trial count
///   | per trial: u64 id, the key, every scalar, every per-query array and per-vector sample
///     (u64 length + elements), the timings
///   | u64 FNV-1a of every byte before it.
std::string encodeTrials(std::uint64_t specHash, const std::vector<TrialResult>& trials,
                         const std::vector<std::uint64_t>& ids);
struct ShardTrials {
    std::uint64_t specHash = 0;
    std::vector<std::uint64_t> ids;
    std::vector<TrialResult> trials;
};
/// Decodes trials.bin; a wrong magic, version, length or checksum is an error.
Result<ShardTrials> decodeTrials(std::string_view bytes);

/// What the first 28 bytes of a trials.bin say, read before its body.
struct TrialsFileHeader {
    std::uint64_t specHash = 0;
    std::uint64_t count = 0;     ///< trials the file claims
    std::uint64_t fileBytes = 0; ///< the file's size
};
/// Reads only the header of `path` (magic, version, spec hash, trial count) and checks it against
/// what the manifest says: the spec hash, `expectedTrials`, and a file size no larger than that
/// many records of `spec` can take (maxTrialRecordBytes). A file that fails is refused before
/// its body is read (a 2 GiB trials.bin with a wrong magic costs 28 bytes, not 2 GiB).
Result<TrialsFileHeader> checkTrialsFile(const std::string& path, std::uint64_t specHash, std::uint64_t expectedTrials,
                                         const ExperimentSpec& spec);
/// An upper bound on the bytes one trial of `spec` takes in trials.bin (its arrays hold at most
/// queries or sampleCap values).
double maxTrialRecordBytes(const ExperimentSpec& spec);

/// The manifest of a finished run (or shard) of `spec` (normalized, as requested).
ShardManifest manifestFor(const ResultSet& results, const ExperimentSpec& spec, ShardId shard);

/// One shard as merge sees it; `label` (its directory) names it in messages.
struct ShardPart {
    std::string label;
    ShardManifest manifest;
};

/// Checks that shards make up `spec` exactly once: the same spec hash (= specHash(spec)),
/// program version and shard count; every shard index once; every trial of the spec in exactly
/// one shard. The error's message lists each problem on its own line (which shard is missing or
/// given twice, by directory, with trial counts and the first few trials).
Status checkShardSet(const TrialCatalog& catalog, const std::vector<ShardPart>& parts);

/// Puts checked shards' trials back into one ResultSet in walk order — the unsharded run's
/// (timings are the shards'; elapsedMs is their sum; backend and note from the manifests).
/// `trials[k]` belongs to `parts[k]` and must hold exactly its manifest's trials.
Result<ResultSet> mergeShards(const TrialCatalog& catalog, const std::vector<ShardPart>& parts,
                              std::vector<std::vector<TrialResult>> trials);

} // namespace kvlens
