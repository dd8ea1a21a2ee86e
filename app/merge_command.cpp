// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens merge`: its options, the shards read and checked; the files come from writeRunFiles.
#include "app/merge_command.h"

#include "app/batch.h"
#include "app/eval_command.h"
#include "app/interrupt.h"
#include "core/common/hash.h"
#include "core/eval/eval_shard.h"
#include "core/experiment/shard.h"
#include "core/spec/spec_json.h"
#include "core/io/file_read.h"
#include "core/io/staged_dir.h"

#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

namespace kvlens::app {

namespace {

/// The whole file if it is a regular file below `cap` (a link to /dev/zero is refused, not read
/// until memory runs out), or an error naming it.
Result<std::string> readWholeFile(const std::string& path, std::uint64_t cap)
{
    return io::readRegularFile(path, cap);
}

} // namespace

cli::Syntax mergeSyntax()
{
    return {{cli::text("--out", "DIR", "where to write the merged run: the files an unsharded --batch run writes").isRequired(),
             cli::flag("--no-figures", "write the tables only")},
            {"DIR_0 ... DIR_{n-1}", "shard directories",
             "the output directories of kvlens --batch SPEC --shard i/n --out DIR_i, in any order", 1, -1}};
}

MergeOptions mergeOptionsFrom(const cli::Arguments& args)
{
    MergeOptions options;
    for (const std::string& dir : args.positionals())
        options.shardDirs.push_back(withoutTrailingSlashes(dir));
    options.outDir = args.value("--out");
    options.figures = !args.has("--no-figures");
    return options;
}

namespace {

/// kvlens merge of an evaluation's shards: read, checked and merged (eval::mergeEvalShards), then
/// written by the one writer of kvlens eval, as the unsharded run writes them.
int runEvalMerge(const MergeOptions& options, std::ostream& out, std::ostream& err)
{
    std::vector<eval::EvalShardInput> shards;
    for (const std::string& dir : options.shardDirs) {
        if (samePath(dir, options.outDir)) {
            err << "kvlens merge: --out " << options.outDir << " is one of the shard directories; choose another\n";
            return kExitRefused;
        }
        auto shard = readEvalRecord(dir);
        if (!shard) {
            err << "kvlens merge: " << shard.error().text() << "; nothing written\n";
            return kExitRefused;
        }
        shards.push_back(std::move(*shard));
    }
    auto merged = eval::mergeEvalShards(std::move(shards));
    if (!merged) {
        err << "kvlens merge: " << merged.error().text() << "; nothing written\n";
        return kExitRefused;
    }
    auto staged = io::StagedDirectory::begin(options.outDir);
    if (!staged) {
        err << "kvlens merge: " << staged.error().text() << "\n";
        return kExitRefused;
    }
    const InterruptScope interrupts;
    EvalOptions write;
    write.spec = merged->spec;
    write.outDir = options.outDir;
    write.figures = options.figures;
    write.figure = options.figure;
    return writeEvalRun(*merged, write, *staged, out, err);
}

/// Whether `dir` holds an evaluation's shard (its manifest says kvlens-eval-shard).
bool isEvalShardDir(const std::string& dir)
{
    const auto text = readWholeFile(dir + "/manifest.json", io::kMaxManifestBytes);
    return text && eval::isEvalManifest(*text);
}

} // namespace

int runMerge(const MergeOptions& options, std::ostream& out, std::ostream& err)
{
    if (!options.shardDirs.empty() && isEvalShardDir(options.shardDirs.front()))
        return runEvalMerge(options, out, err);
    // Every manifest first: a set that does not fit together is refused before any trial is read.
    std::vector<ShardPart> parts;
    bool unreadable = false;
    for (const std::string& dir : options.shardDirs) {
        if (samePath(dir, options.outDir)) {
            err << "kvlens merge: --out " << options.outDir << " is one of the shard directories; choose another\n";
            return 2;
        }
        const auto text = readWholeFile(dir + "/manifest.json", io::kMaxManifestBytes);
        if (!text) {
            err << "kvlens merge: " << dir << ": no readable manifest.json (not a shard directory, or its shard "
                << "did not finish): " << text.error().message << "\n";
            unreadable = true;
            continue;
        }
        auto manifest = manifestFromJson(*text);
        if (!manifest) {
            err << "kvlens merge: " << dir << "/manifest.json: " << manifest.error().text() << "\n";
            unreadable = true;
            continue;
        }
        parts.push_back(ShardPart{dir, std::move(*manifest)});
    }
    if (unreadable)
        return 2;

    // The spec as the shards ran it; an imported regime's tensor file need not be here, since
    // trials.bin holds every result and the manifests the hash of the data that was read.
    const Result<ExperimentSpec> spec = loadSpecFile(parts.front().label + "/spec.json", InputCheck::SkipInputs);
    if (!spec) {
        err << "kvlens merge: " << spec.error().text() << "\n";
        return 2;
    }
    // Checked before the catalogue is built, which holds every trial of the spec.
    const MemoryEstimate need = estimateMemory(*spec, 1);
    if (const double limit = 0.5 * physicalMemoryBytes(); limit > 0.0 && need.resultBytes > limit) {
        err << "kvlens merge: the spec's " << spec->trialCount() << " trials need about "
            << static_cast<long long>(need.resultBytes / 1e6) << " MB, above half of this machine's memory\n";
        return 2;
    }
    auto staged = io::StagedDirectory::begin(options.outDir);
    if (!staged) {
        err << "kvlens merge: " << staged.error().text() << "\n";
        return 2;
    }
    const TrialCatalog catalog = catalogTrials(*spec, parts.front().manifest.dataHash);
    if (auto checked = checkShardSet(catalog, parts); !checked) {
        err << "kvlens merge: " << checked.error().message << "\nnothing written\n";
        return 2;
    }

    std::vector<std::vector<TrialResult>> trials;
    trials.reserve(parts.size());
    for (const ShardPart& p : parts) {
        // The header first: a wrong or oversized trials.bin is refused before its body is read.
        if (auto header = checkTrialsFile(p.label + "/trials.bin", p.manifest.specHash, p.manifest.trials.size(), *spec);
            !header) {
            err << "kvlens merge: " << p.label << "/" << header.error().text() << "; nothing written\n";
            return 2;
        }
        const auto bytes = readWholeFile(p.label + "/trials.bin", io::kMaxTrialsFileBytes);
        if (!bytes) {
            err << "kvlens merge: " << bytes.error().text() << "; nothing written\n";
            return 2;
        }
        auto decoded = decodeTrials(*bytes);
        if (!decoded) {
            err << "kvlens merge: " << p.label << "/" << decoded.error().text() << "; nothing written\n";
            return 2;
        }
        if (decoded->specHash != p.manifest.specHash || decoded->ids != p.manifest.trials) {
            err << "kvlens merge: " << p.label << "/trials.bin does not hold the trials its manifest lists; "
                << "nothing written\n";
            return 2;
        }
        trials.push_back(std::move(decoded->trials));
    }
    Result<ResultSet> merged = mergeShards(catalog, parts, std::move(trials));
    if (!merged) {
        err << "kvlens merge: " << merged.error().text() << "; nothing written\n";
        return 2;
    }
    merged->dataHash = parts.front().manifest.dataHash;
    merged->pointDataHashes = parts.front().manifest.pointDataHashes; // the advisor's rerun checks the files against them
    const InterruptScope interrupts;
    std::ostringstream report;
    report << "merged " << parts.size() << " shards (" << merged->trials.size() << " trials) into " << options.outDir
           << "\n";
    const int written = writeRunFiles(*merged, staged->path(), options.figures, report, err, options.outDir, false,
                                      options.figure);
    return finishRun(*staged, written, report.str(), out, err);
}

} // namespace kvlens::app
