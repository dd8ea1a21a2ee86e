// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens capture`: its options, checked before anything is loaded, and the dump written atomically.
#include "app/capture_command.h"

#include "app/batch.h"
#include "app/interrupt.h"
#include "core/io/atomic_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <unistd.h>

namespace kvlens::app {

namespace {

/// "all", or comma-separated layers and ranges A-B (inclusive), increasing, no repeats.
Result<std::vector<int>> parseLayers(const std::string& text)
{
    std::vector<int> layers;
    if (text == "all")
        return layers;
    constexpr long long kMaxLayer = (1 << 16) - 1;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        const std::string item = text.substr(at, comma - at);
        const std::size_t dash = item.find('-');
        auto first = cli::parseInteger("--layers", item.substr(0, dash), 0, kMaxLayer);
        if (!first)
            return Error{"--layers", "must be 'all' or layers and ranges like 0,2,5-7 (each in [0, "
                                         + std::to_string(kMaxLayer) + "]), got '" + text + "'"};
        long long last = *first;
        if (dash != std::string::npos) {
            auto end = cli::parseInteger("--layers", item.substr(dash + 1), 0, kMaxLayer);
            if (!end || *end < *first)
                return Error{"--layers", "range '" + item + "' must be A-B with A <= B, in [0, "
                                             + std::to_string(kMaxLayer) + "]"};
            last = *end;
        }
        for (long long l = *first; l <= last; ++l) {
            if (!layers.empty() && l <= layers.back())
                return Error{"--layers", "must list layers in increasing order without repeats, got '" + text + "'"};
            layers.push_back(static_cast<int>(l));
        }
        at = comma + 1;
    }
    return layers;
}

} // namespace

std::vector<std::string> captureReservedKeys()
{
    // The layout and what eval::runCapture writes beside it, from core's one list of each;
    // tst_capture_command checks that every key of a real dump is here or a --meta key.
    std::vector<std::string> keys = eval::dumpLayoutKeys();
    const auto& provenance = eval::dumpProvenanceKeys();
    keys.insert(keys.end(), provenance.begin(), provenance.end());
    return keys;
}

cli::Syntax captureSyntax()
{
    using L = eval::CaptureLimits;
    return {{cli::text("--model", "DIR", "a Hugging Face model folder (Llama, Mistral, Qwen2, GPT-2)").isRequired(),
             cli::text("--text", "FILE", "UTF-8 text, tokenized by the model's tokenizer"),
             cli::text("--tokens", "FILE.npy", "token ids (.npy int32/int64) instead of --text"),
             cli::integer("--ctx", "N", L::kMinCtx, L::kMaxCtx, "tokens captured (default 512)"),
             cli::integer("--offset", "T", 0, 1ll << 40, "the first token of the chunk (default 0)"),
             cli::text("--layers", "all|L,A-B,...", "the layers kept, increasing (default all)"),
             cli::choice("--dtype", {"f16", "f32"}, "the dump's float type (default f16)"),
             cli::integer("--threads", "N", 0, 1024, "worker threads of the forward (0: one per core)"),
             cli::integer("--memory-limit", "MB", 0, 1ll << 30, "memory allowed (0: half of physical memory)"),
             cli::flag("--no-special", "byte-level BPE: do not match special tokens in the text"),
             cli::text("--meta", "KEY=VALUE", "added to the dump's __metadata__ (not a key the dump writes itself)")
                 .isRepeatable(),
             cli::flag("--quiet", "no summary"),
             cli::text("--out", "FILE.safetensors", "the dump, written atomically").isRequired()},
            {}};
}

namespace {

/// --meta's KEY=VALUE entries: each key once, none the dump writes itself.
Status readMetadata(const std::vector<std::string>& entries, std::map<std::string, std::string>& metadata)
{
    const std::vector<std::string> reserved = captureReservedKeys();
    std::string reservedList;
    for (const std::string& k : reserved)
        reservedList += (reservedList.empty() ? "" : ", ") + k;
    for (const std::string& entry : entries) {
        const auto eq = entry.find('=');
        if (eq == std::string::npos || eq == 0)
            return Error{"--meta", "must be KEY=VALUE, got '" + entry + "'"};
        const std::string key = entry.substr(0, eq);
        if (std::find(reserved.begin(), reserved.end(), key) != reserved.end())
            return Error{"--meta", "key '" + key + "' is not allowed: the dump writes it itself (" + reservedList + ")"};
        if (metadata.count(key))
            return Error{"--meta", "key '" + key + "' is given twice"};
        metadata[key] = entry.substr(eq + 1);
    }
    return Ok{};
}

/// The dump's file: a .safetensors name in a folder that exists and can be written.
Status checkOutputFile(const std::string& file)
{
    const std::filesystem::path out(file);
    if (out.extension() != ".safetensors")
        return Error{"--out", "must name a .safetensors file, got '" + file + "'"};
    std::error_code ec;
    if (std::filesystem::is_directory(out, ec))
        return Error{"--out", file + " is a directory; give a file name"};
    const std::filesystem::path parent = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
    if (!std::filesystem::is_directory(parent, ec))
        return Error{"--out", "the directory " + parent.string() + " does not exist"};
    if (::access(parent.c_str(), W_OK) != 0)
        return Error{"--out", "the directory " + parent.string() + " cannot be written"};
    return Ok{};
}

} // namespace

Result<CaptureOptions> captureOptionsFrom(const cli::Arguments& args)
{
    CaptureOptions o;
    eval::CaptureSpec& s = o.spec;
    s.modelDir = args.value("--model");
    s.textFile = args.value("--text");
    s.tokensFile = args.value("--tokens");
    o.outFile = args.value("--out");
    s.ctx = static_cast<int>(args.integer("--ctx", s.ctx));
    s.offset = args.integer("--offset", s.offset);
    s.threads = static_cast<int>(args.integer("--threads", s.threads));
    s.memoryLimitMb = static_cast<double>(args.integer("--memory-limit", static_cast<long long>(s.memoryLimitMb)));
    s.f32 = args.value("--dtype") == "f32";
    s.parseSpecialTokens = !args.has("--no-special");
    o.quiet = args.has("--quiet");
    if (args.has("--layers")) {
        auto layers = parseLayers(args.value("--layers"));
        if (!layers)
            return layers.error();
        s.layers = std::move(layers).value();
    }
    if (auto meta = readMetadata(args.values("--meta"), s.metadata); !meta)
        return meta.error();
    if (s.textFile.empty() == s.tokensFile.empty())
        return Error{"--text", "give exactly one of --text FILE and --tokens FILE.npy"};
    if (auto out = checkOutputFile(o.outFile); !out)
        return out.error();
    if (auto ok = eval::checkCaptureSpec(s); !ok) {
        const std::string& f = ok.error().field;
        const std::string arg = f == "memory_limit_mb" ? "--memory-limit" : f == "metadata" ? "--meta" : "--" + f;
        return Error{arg, ok.error().message};
    }
    return o;
}

int runCaptureCommand(const CaptureOptions& options, std::ostream& out, std::ostream& err)
{
    const InterruptScope interrupts;
    auto result = eval::runCapture(options.spec, [] { return InterruptScope::interrupted(); });
    if (!result && result.error().cancelled()) {
        err << "kvlens: " << InterruptScope::what() << "; nothing written\n";
        return InterruptScope::exitStatus();
    }
    if (!result) {
        const std::string& f = result.error().field;
        // The spec's field names as the command line spells them.
        const std::string arg = f == "ctx" || f == "offset" || f == "layers" ? "--" + f
                                : f == "memory_limit_mb" ? "--memory-limit" : f;
        err << "kvlens capture: " << Error{arg, result.error().message}.text() << "\n";
        return kExitRefused;
    }
    if (InterruptScope::interrupted()) {
        err << "kvlens: " << InterruptScope::what() << "; nothing written\n";
        return InterruptScope::exitStatus();
    }
    auto bytes = eval::dumpFileBytes(*result, options.spec.f32);
    if (!bytes) {
        err << "kvlens capture: " << bytes.error().text() << "\n";
        return kExitRefused;
    }
    if (auto ok = writeFileAtomic(options.outFile, *bytes); !ok) {
        err << "kvlens capture: " << ok.error().text() << "\n";
        return kExitFailed;
    }
    if (options.quiet)
        return kExitOk;
    char size[32];
    std::snprintf(size, sizeof size, "%.2f MB", static_cast<double>(bytes->size()) / 1e6);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f ms", result->forwardMs);
    out << "wrote " << options.outFile << " (" << size << ", " << (options.spec.f32 ? "F32" : "F16") << "): "
        << result->captured.size() << " layers (model layers " << result->metadata["model_layers"] << ") x "
        << result->qHeads << " query heads / " << result->kvHeads << " KV heads x head_dim " << result->headDim << ", "
        << result->tokens << " tokens\n";
    out << "  " << result->metadata["source"] << "\n";
    out << "  forward " << ms;
    if (result->metadata.count("span_loss"))
        out << "; span loss " << result->metadata["span_loss"];
    out << "\n";
    return kExitOk;
}

} // namespace kvlens::app
