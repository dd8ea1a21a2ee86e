// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens eval`: its options read into an eval spec, the evaluation, and its files written through a staging directory.
#include "app/eval_command.h"

#include "app/backend_factory.h"
#include "app/batch.h"
#include "app/interrupt.h"
#include "core/analysis/eval_analysis.h"
#include "core/common/hash.h"
#include "core/eval/eval_files.h"
#include "core/eval/eval_shard.h"
#include "core/eval/evaluator.h"
#include "core/io/atomic_file.h"
#include "core/io/file_read.h"
#include "core/io/staged_dir.h"
#include "widgets/eval_views.h"

#include <QDir>
#include <QString>

#include <algorithm>
#include <memory>
#include <optional>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

namespace kvlens::app {

/// Bootstrap resamples of the proxy study's intervals (resampling chunks).
constexpr int kProxyResamples = 200;

namespace {

std::string seconds(double s)
{
    char text[32];
    std::snprintf(text, sizeof text, s < 10 ? "%.1f s" : "%.0f s", s);
    return text;
}

} // namespace

bool isEvalSpecFile(const std::string& path)
{
    auto text = io::readRegularFile(path, io::kMaxSpecBytes);
    return text && isEvalSpecText(*text);
}

namespace {

std::vector<std::string> splitList(const std::string& text)
{
    // Commas separate schemes, except inside "K=..,V=.." (llama.cpp's per-path types).
    std::vector<std::string> out;
    std::string item;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        if (i == text.size() || text[i] == ',') {
            const bool llamaPair = i < text.size() && (item.rfind("K=", 0) == 0 || item.rfind("k=", 0) == 0)
                                   && item.find(',') == std::string::npos && i + 2 < text.size()
                                   && (text[i + 1] == 'V' || text[i + 1] == 'v') && text[i + 2] == '=';
            if (llamaPair) {
                item += ',';
                continue;
            }
            if (!item.empty())
                out.push_back(item);
            item.clear();
        } else {
            item += text[i];
        }
    }
    return out;
}

} // namespace

cli::Syntax evalSyntax()
{
    using L = EvalLimits;
    return {{cli::text("--spec", "EVAL.json", "an eval spec instead of the model options (its spec.json runs again)"),
             cli::text("--model", "DIR", "a Hugging Face model folder or a GGUF file (Llama, Mistral, Qwen2, GPT-2)"),
             cli::text("--text", "FILE", "UTF-8 text, tokenized by the model's tokenizer"),
             cli::text("--tokens", "FILE.npy", "token ids (.npy int32/int64) instead of --text"),
             cli::text("--schemes", "S,...", "the schemes: names, compositions, K=<type>,V=<type> (llama.cpp's types)"),
             cli::text("--budgets", "n,...", "bit budgets, each an integer in [1, 8] (default 2,3,4)"),
             cli::integer("--ctx", "N", L::kMinCtx, L::kMaxCtx, "tokens per chunk (default 512)"),
             cli::integer("--chunks", "N", 0, L::kMaxChunks, "chunks scored (0: every whole chunk of the text)"),
             cli::integer("--calibration", "T", -1, L::kMaxCtx * 16ll,
                          "tokens before the first chunk for calibration (-1: one chunk when a scheme calibrates)"),
             cli::text("--seeds", "FIRST[:COUNT]", "the first seed and how many (default 1:1)"),
             cli::integer("--residual", "R", 0, L::kMaxCtx, "the R most recent tokens of each query stay exact"),
             cli::choice("--attribution", {"none", "layers", "heads"},
                         "the damage with one layer (or one KV head) quantized (default layers)"),
             cli::integer("--threads", "N", 0, 1024, "worker threads of a forward (0: one per core)"),
             cli::integer("--memory-limit", "MB", 0, 1ll << 30, "memory allowed (0: 85 % of physical memory)"),
             cli::flag("--no-special", "byte-level BPE: do not match special tokens in the text"),
             cli::choice("--query-conversion", {"ggml", "none"},
                         "llama.cpp's cache types: queries converted as ggml converts them (ggml, the default) or "
                         "kept float32 (none: the codec alone)"),
             cli::text("--shard", "i/n", "score only shard i of n of the chunks (0 <= i < n), for a job array; "
                                         "bring the n directories together with kvlens merge"),
             cli::choice("--backend", {"cpu", "opencl", "auto"},
                         "where the forward passes run: the CPU (default), an OpenCL device (the KV codecs stay on the "
                         "CPU), or whichever ran one timed chunk faster"),
             cli::text("--device", "D",
                       "OpenCL device: an index or a name substring (implies --backend opencl); default: "
                       "$KVLENS_OPENCL_DEVICE, else the first GPU, else the first CPU device"),
             cli::text("--reuse", "OLD", "take the configurations an earlier evaluation OLD of the same model, text "
                                         "and settings computed; compute only the others"),
             cli::flag("--quiet", "no progress line"),
             cli::flag("--no-figures", "write the tables only, no figures"),
             cli::text("--out", "DIR", "the output directory, staged and put in place whole").isRequired()},
            {}};
}

const std::vector<std::string>& evalRunOptions()
{
    static const std::vector<std::string> names{"--out",     "--quiet",   "--no-figures", "--threads",
                                                "--shard",   "--reuse",   "--backend",    "--device",
                                                "--width",   "--dpi",     "--font-family", "--font-size"};
    return names;
}

namespace {

/// FIRST or FIRST:COUNT.
Status readSeeds(const std::string& text, EvalSpec& s)
{
    const auto colon = text.find(':');
    const std::string firstText = text.substr(0, colon);
    std::uint64_t first = 0;
    const auto [ptr, ec] = std::from_chars(firstText.data(), firstText.data() + firstText.size(), first);
    if (ec != std::errc() || ptr != firstText.data() + firstText.size())
        return Error{"--seeds", "must be FIRST or FIRST:COUNT, got '" + text + "'"};
    s.firstSeed = first;
    if (colon != std::string::npos) {
        auto count = cli::parseInteger("--seeds", text.substr(colon + 1), 1, EvalLimits::kMaxSeeds);
        if (!count)
            return count.error();
        s.seedCount = static_cast<int>(*count);
    }
    return Ok{};
}

/// The spec the model options describe.
Result<EvalSpec> specFromOptions(const cli::Arguments& args)
{
    EvalSpec s;
    s.modelDir = args.value("--model");
    s.textFile = args.value("--text");
    s.tokensFile = args.value("--tokens");
    for (const std::string& name : splitList(args.value("--schemes"))) {
        auto scheme = findScheme(name);
        if (!scheme)
            return Error{"--schemes", "unknown scheme '" + name + "' (known: " + schemeNames() + ")"};
        s.schemes.push_back(EvalScheme{*scheme, {}, {}});
    }
    if (args.has("--budgets")) {
        s.budgets.clear();
        for (const std::string& b : splitList(args.value("--budgets"))) {
            auto n = cli::parseInteger("--budgets", b, 1, 8);
            if (!n)
                return n.error();
            s.budgets.push_back(static_cast<int>(*n));
        }
    }
    s.ctx = static_cast<int>(args.integer("--ctx", s.ctx));
    s.chunks = static_cast<int>(args.integer("--chunks", s.chunks));
    s.calibrationTokens = static_cast<int>(args.integer("--calibration", s.calibrationTokens));
    s.residual = static_cast<int>(args.integer("--residual", s.residual));
    s.memoryLimitMb = static_cast<double>(args.integer("--memory-limit", 0));
    if (args.has("--seeds"))
        if (auto seeds = readSeeds(args.value("--seeds"), s); !seeds)
            return seeds.error();
    const std::string attribution = args.value("--attribution", "layers");
    s.attribution = attribution == "none" ? Attribution::None : attribution == "heads" ? Attribution::Heads : Attribution::Layers;
    s.parseSpecialTokens = !args.has("--no-special");
    s.ggmlQueryConversion = args.value("--query-conversion", "ggml") == "ggml";
    if (s.schemes.empty())
        return Error{"--schemes", "choose at least one scheme (known: " + schemeNames() + ")"};
    return s;
}

} // namespace

Result<EvalOptions> evalOptionsFrom(const cli::Arguments& args)
{
    EvalOptions o;
    o.outDir = args.value("--out");
    o.quiet = args.has("--quiet");
    o.figures = !args.has("--no-figures");
    if (args.has("--spec")) {
        // The file holds the run: an option that is one of its fields would be silently overridden or lost.
        const auto& run = evalRunOptions();
        for (const std::string& name : args.given())
            if (name != "--spec" && std::find(run.begin(), run.end(), name) == run.end())
                return Error{name, "is a field of the eval spec: with --spec, give it in the file (or the model "
                                   "options without --spec)"};
        auto loaded = loadEvalSpecFile(args.value("--spec"));
        if (!loaded)
            return loaded.error();
        o.spec = std::move(loaded).value();
    } else {
        auto spec = specFromOptions(args);
        if (!spec)
            return spec.error();
        o.spec = std::move(spec).value();
    }
    o.spec.threads = static_cast<int>(args.integer("--threads", o.spec.threads));
    if (auto ok = applyBackendOptions(o.spec, args.value("--backend"), args.value("--device")); !ok)
        return ok.error();
    if (args.has("--shard")) {
        auto shard = parseEvalShard(args.value("--shard"));
        if (!shard)
            return shard.error();
        o.shard = *shard;
    }
    o.reuseDir = withoutTrailingSlashes(args.value("--reuse"));
    if (auto ok = checkEvalSpec(o.spec); !ok)
        return ok.error();
    return o;
}

Result<eval::EvalShard> parseEvalShard(const std::string& text)
{
    const auto slash = text.find('/');
    if (slash == std::string::npos)
        return Error{"--shard", "must be i/n (0 <= i < n), got '" + text + "'"};
    auto index = cli::parseInteger("--shard", text.substr(0, slash), 0, (1 << 20) - 1);
    auto count = cli::parseInteger("--shard", text.substr(slash + 1), 1, 1 << 20);
    if (!index || !count || *index >= *count)
        return Error{"--shard", "must be i/n with 0 <= i < n <= 1048576, got '" + text + "'"};
    return eval::EvalShard{static_cast<int>(*index), static_cast<int>(*count)};
}

namespace {

/// Configurations of `r` whose every token equals one of `old`'s (what --reuse took).
std::size_t reusedCount(const eval::EvalResult& r, const eval::EvalResult& old)
{
    std::size_t n = 0;
    for (const eval::ConfigurationResult& c : r.configurations)
        for (const eval::ConfigurationResult& o : old.configurations)
            if (o.name == c.name && o.budget == c.budget && !c.tokens.empty() && o.tokens.size() == c.tokens.size()
                && std::equal(c.tokens.begin(), c.tokens.end(), o.tokens.begin(), [](const lm::TokenStat& a, const lm::TokenStat& b) {
                       return a.kld == b.kld && a.nllQ == b.nllQ;
                   })) {
                ++n;
                break;
            }
    return n;
}

/// The progress line on `err`: percentage, elapsed, ETA, stage; at most ten updates a second.
eval::EvalCallbacks progressLine(const EvalOptions& options, std::ostream& err)
{
    eval::EvalCallbacks callbacks;
    callbacks.cancelled = [] { return InterruptScope::interrupted(); };
    if (options.quiet)
        return callbacks;
    const auto started = std::chrono::steady_clock::now();
    auto last = std::make_shared<std::chrono::steady_clock::time_point>(started - std::chrono::seconds(1));
    callbacks.progress = [&err, started, last](double done, double total, const std::string& stage) {
        const auto now = std::chrono::steady_clock::now();
        if (now - *last < std::chrono::milliseconds(100) && done < total)
            return;
        *last = now;
        const double elapsed = std::chrono::duration<double>(now - started).count();
        const double fraction = total > 0 ? done / total : 0.0;
        std::string line = "\rkvlens eval: " + std::to_string(static_cast<int>(100.0 * fraction)) + "%  " + seconds(elapsed);
        if (fraction > 0.02 && fraction < 1.0)
            line += ", ETA " + seconds(elapsed * (1.0 - fraction) / fraction);
        line += "  " + stage;
        if (line.size() < 100)
            line.append(100 - line.size(), ' ');
        err << line << std::flush;
    };
    return callbacks;
}

/// eval_shard.bin and manifest.json: the run, lossless, with what identifies it.
std::vector<std::pair<std::string, std::string>> runRecord(const eval::EvalResult& r)
{
    const std::string shard = eval::encodeEvalShard(r);
    const eval::EvalIdentity identity{eval::evalSpecHash(r.spec), r.modelHash, r.tokensHash, KVLENS_VERSION, r.threads};
    const std::uint64_t checksum = fnv1a64(shard);
    return {{"eval_shard.bin", shard}, {"manifest.json", eval::evalManifestJson(r, identity, checksum)}};
}

/// The tables, the report and the record of a whole run; a shard's spec and record only.
std::vector<std::pair<std::string, std::string>> runFiles(const eval::EvalResult& r, std::string& proxiesText)
{
    std::vector<std::pair<std::string, std::string>> files{{"spec.json", evalSpecToJson(r.spec)}};
    if (r.shardCount == 1) {
        const auto proxies = eval::outputProxyStudy(r, r.spec.seed(0) + 90, kProxyResamples);
        proxiesText = eval::outputProxiesText(proxies);
        files.insert(files.end(), {{"eval_summary.csv", eval::summaryCsv(r)},
                                   {"eval_tokens.csv", eval::tokensCsv(r)},
                                   {"eval_layers.csv", eval::layersCsv(r)},
                                   {"eval_proxies.csv", eval::outputProxiesCsv(proxies)},
                                   {"report.txt", eval::reportText(r) + proxiesText}});
    }
    for (auto& f : runRecord(r))
        files.push_back(std::move(f));
    return files;
}

} // namespace

int writeEvalRun(const eval::EvalResult& result, const EvalOptions& options, io::StagedDirectory& staged,
                 std::ostream& out, std::ostream& err)
{
    const std::string dir = staged.path();
    int written = 0;
    std::string proxiesText;
    std::string names;
    for (const auto& [name, text] : runFiles(result, proxiesText)) {
        names += (names.empty() ? "" : ", ") + name;
        if (auto ok = writeFileAtomic(dir + "/" + name, text); !ok) {
            err << "kvlens: " << ok.error().text() << "\n";
            written = kExitFailed;
            break;
        }
    }
    // The figures go into the staging directory too: a failure leaves DIR as it was.
    int figureFiles = 0;
    std::string skippedNote;
    const bool figures = options.figures && result.shardCount == 1;
    if (written == 0 && figures) {
        const auto outcome = widgets::exportEvalFigures(result, QDir(QString::fromStdString(dir)).filePath(QStringLiteral("figures")),
                                                        options.figure, QByteArray::fromStdString(evalSpecToJson(result.spec)));
        if (!outcome.ok()) {
            err << "kvlens: " << outcome.error.toStdString() << io::spaceNote(dir) << "\n";
            written = kExitFailed;
        }
        figureFiles = static_cast<int>(outcome.written.size());
        for (const QString& why : outcome.skipped) // a figure with nothing to draw is named, never silently absent
            skippedNote += "no figure: " + why.toStdString() + "\n";
    }
    std::ostringstream report;
    if (result.shardCount == 1)
        report << eval::reportText(result) << proxiesText;
    else
        report << "shard " << result.shardIndex << " of " << result.shardCount << ": chunks " << result.chunkIndices.front() + 1
               << ".." << result.chunkIndices.back() + 1 << " of the text, " << result.scored.size()
               << " scored tokens; bring the shards together with kvlens merge\n";
    const double tokensPerSecond = result.forwardMs > 0 ? result.forwardTokens / (result.forwardMs / 1000.0) : 0.0;
    report << "\n" << result.configurations.size() << " configurations, " << result.scored.size()
           << " scored tokens each, in " << seconds(result.elapsedMs / 1000.0) << " (forward passes "
           << static_cast<long long>(tokensPerSecond) << " tokens/s)\n";
    report << skippedNote;
    report << "wrote " << options.outDir << "/{" << names << "}";
    if (figures)
        report << " and " << figureFiles << " files in " << options.outDir << "/figures";
    report << "\n";
    return finishRun(staged, written, report.str(), out, err);
}

namespace {

/// The largest eval_shard.bin read (a run's per-token data; a real study's is megabytes).
constexpr std::uint64_t kMaxEvalShardBytes = 16ull << 30;

} // namespace

Result<eval::EvalShardInput> readEvalRecord(const std::string& dir)
{
    eval::EvalShardInput in;
    in.dir = dir;
    auto text = io::readRegularFile(dir + "/manifest.json", io::kMaxManifestBytes);
    if (!text)
        return Error{dir, "no readable manifest.json (not an evaluation's directory, or its run did not finish): "
                              + text.error().message};
    auto manifest = eval::parseEvalManifest(*text, dir + "/manifest.json");
    if (!manifest)
        return manifest.error();
    in.manifest = std::move(*manifest);
    auto spec = loadEvalSpecFile(dir + "/spec.json");
    if (!spec)
        return spec.error();
    if (eval::evalSpecHash(*spec) != in.manifest.identity.specHash)
        return Error{dir + "/spec.json", "is not the spec its manifest names (the spec hashes differ)"};
    auto bytes = io::readRegularFile(dir + "/eval_shard.bin", kMaxEvalShardBytes);
    if (!bytes)
        return bytes.error();
    if (fnv1a64(*bytes) != in.manifest.checksum)
        return Error{dir + "/eval_shard.bin", "does not match its manifest's checksum (damaged, or from another run)"};
    in.result.spec = std::move(*spec);
    if (auto s = eval::decodeEvalShard(*bytes, dir + "/eval_shard.bin", in.result); !s)
        return s.error();
    if (in.result.chunkIndices != in.manifest.chunks)
        return Error{dir + "/eval_shard.bin", "does not hold the chunks its manifest lists"};
    return in;
}

int runEvalCommand(const EvalOptions& options, std::ostream& out, std::ostream& err)
{
    std::optional<eval::EvalShardInput> reuse;
    if (!options.reuseDir.empty()) {
        auto record = readEvalRecord(options.reuseDir);
        if (!record) {
            err << "kvlens: --reuse: " << record.error().text() << "\n";
            return kExitRefused;
        }
        reuse = std::move(*record);
    }
    auto staged = io::StagedDirectory::begin(options.outDir);
    if (!staged) {
        err << "kvlens: " << staged.error().text() << "\n";
        return kExitRefused;
    }
    const InterruptScope interrupts;
    eval::EvalCallbacks callbacks = progressLine(options, err);
    const EvalSpec& spec = options.spec;
    std::ostream* progress = options.quiet ? nullptr : &err;
    callbacks.prepare = [&spec, &err, progress](lm::Transformer& model) { return prepareForward(spec, model, err, progress); };
    auto result = eval::runEval(options.spec, callbacks, options.shard, reuse ? &reuse->result : nullptr);
    if (!options.quiet)
        err << "\n";
    if (!result) {
        err << "kvlens: " << result.error().text() << "\n";
        staged->abort();
        return kExitRefused;
    }
    if (result->cancelled || InterruptScope::interrupted()) {
        err << "kvlens: " << InterruptScope::what() << " after " << result->chunksScored << " chunks; nothing written\n";
        staged->abort();
        return InterruptScope::exitStatus();
    }
    if (reuse)
        out << "reused " << reusedCount(*result, reuse->result) << " of " << result->configurations.size()
            << " configurations from " << options.reuseDir << "\n";
    return writeEvalRun(*result, options, *staged, out, err);
}

} // namespace kvlens::app
