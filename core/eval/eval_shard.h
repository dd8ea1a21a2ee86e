// SPDX-License-Identifier: GPL-3.0-or-later
// An evaluation's results stored losslessly (eval_shard.bin and its manifest), so that the shards of a
// run merge into exactly the unsharded run's files and a later run can take configurations from an
// earlier one (--reuse).
#pragma once

#include "core/common/result.h"
#include "core/eval/eval_result.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::eval {

/// What identifies an evaluation's numbers, beside its spec: the weights and the tokens it read.
struct EvalIdentity {
    std::uint64_t specHash = 0;  ///< evalSpecHash
    std::uint64_t modelHash = 0; ///< lm::Transformer::dataHash
    std::uint64_t tokensHash = 0; ///< the token ids the run reads (calibration and every chunk of the text)
    std::string programVersion;
    int threads = 0;              ///< the forward's worker threads (EvalResult::threads)
};

/// The spec's hash over every field that changes a number or a file: the spec JSON with the model
/// and text paths left out (their contents are EvalIdentity's data hashes, so one model at two paths
/// is one run), and threads and memory_limit_mb left out (they change neither). Backend and device
/// stay in: a forward on another device rounds differently, so its shards are another run.
std::uint64_t evalSpecHash(const EvalSpec& spec);
/// evalSpecHash of the spec with its schemes, budgets, seeds and name left out: what two runs must
/// share for one to take the other's configurations (--reuse).
std::uint64_t evalSettingsHash(const EvalSpec& spec);
/// FNV-1a of the token ids, in order.
std::uint64_t tokensHash(const std::vector<std::int32_t>& tokens);

/// eval_shard.bin: "KVLEVAL1", u32 format version 1, the result's per-token and per-chunk data (every
/// field finishEvalResult and the files read; not the text's ids, which tokensHash stands for), and a
/// trailing FNV-1a of all bytes before it. Little-endian.
std::string encodeEvalShard(const EvalResult& result);

/// Decodes eval_shard.bin bytes into `into` (whose spec the caller set from the shard's spec.json).
/// Untrusted: every count is checked against the bytes left before anything is sized by it, every
/// index against its range; a wrong magic, version, length or checksum is refused naming `label`.
Status decodeEvalShard(std::string_view bytes, const std::string& label, EvalResult& into);

/// manifest.json of an evaluation's directory: {"format": "kvlens-eval-shard", "format_version": 1,
/// "program_version", "spec_hash", "model_hash", "tokens_hash" (hex), "threads", "shard": {"index", "count"},
/// "chunks": [..], "configurations", "checksum" (eval_shard.bin's)}.
std::string evalManifestJson(const EvalResult& result, const EvalIdentity& identity, std::uint64_t checksum);

/// A parsed manifest.
struct EvalManifest {
    EvalIdentity identity;
    int shardIndex = 0, shardCount = 1;
    std::vector<int> chunks;
    int configurations = 0;
    std::uint64_t checksum = 0;
};

/// True when `text` is an eval manifest (its "format" is "kvlens-eval-shard").
bool isEvalManifest(std::string_view text);
/// Parses manifest.json text (untrusted: types and ranges checked, naming the key).
Result<EvalManifest> parseEvalManifest(std::string_view text, const std::string& label);

/// One shard directory's contents, read and checked against each other.
struct EvalShardInput {
    std::string dir;
    EvalManifest manifest;
    EvalResult result;
};

/// The shards of one evaluation merged into the unsharded run's result: refused, naming the directory,
/// unless every shard has one spec hash, model hash, tokens hash, program version, thread count and
/// shard count,
/// every index 0..count-1 comes exactly once, and their chunks are disjoint and complete. The merged
/// per-token data is the shards' in chunk order; the summaries, percentiles, intervals and attribution
/// rows are then computed from it (finishEvalResult), never averaged over shards.
Result<EvalResult> mergeEvalShards(std::vector<EvalShardInput> shards);

} // namespace kvlens::eval
