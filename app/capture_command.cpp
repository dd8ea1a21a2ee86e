// SPDX-License-Identifier: GPL-3.0-or-later
#include "app/capture_command.h"

#include "app/batch.h"
#include "app/interrupt.h"
#include "core/io/atomic_file.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <unistd.h>

namespace kvlens::app {

const char* captureUsage()
{
    return "  kvlens capture --model DIR (--text FILE | --tokens FILE.npy) [--ctx 512] [--offset T]\n"
           "              [--layers all|L,A-B,...] [--dtype f16|f32] [--threads N] [--memory-limit MB]\n"
           "              [--no-special] [--meta KEY=VALUE]... [--quiet] --out FILE.safetensors\n"
           "                                       a model dump (Q, K after RoPE, V of every layer and head over\n"
           "                                       tokens T..T+ctx-1, one causal chunk at positions 0..ctx-1) from\n"
           "                                       the evaluator's forward, for the model regime and the advisor\n";
}

namespace {

Result<long long> integerArgument(const std::string& name, const std::string& text, long long lo, long long hi)
{
    long long v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
        return Error{name, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text + "'"};
    return v;
}

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
        auto first = integerArgument("--layers", item.substr(0, dash), 0, kMaxLayer);
        if (!first)
            return Error{"--layers", "must be 'all' or layers and ranges like 0,2,5-7 (each in [0, "
                                         + std::to_string(kMaxLayer) + "]), got '" + text + "'"};
        long long last = *first;
        if (dash != std::string::npos) {
            auto end = integerArgument("--layers", item.substr(dash + 1), 0, kMaxLayer);
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

Result<CaptureOptions> parseCaptureArguments(const std::vector<std::string>& args)
{
    CaptureOptions o;
    eval::CaptureSpec& s = o.spec;
    std::vector<std::string> seen;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> Result<std::string> {
            if (i + 1 >= args.size() || args[i + 1].empty())
                return Error{a, "needs a value"};
            return args[++i];
        };
        if (a != "--meta") {
            if (std::find(seen.begin(), seen.end(), a) != seen.end())
                return Error{a, "is given twice; give it once"};
            seen.push_back(a);
        }
        if (a == "--model" || a == "--text" || a == "--tokens" || a == "--out") {
            auto v = value();
            if (!v)
                return v.error();
            (a == "--model" ? s.modelDir : a == "--text" ? s.textFile : a == "--tokens" ? s.tokensFile : o.outFile) = *v;
        } else if (a == "--ctx" || a == "--offset" || a == "--threads" || a == "--memory-limit") {
            auto v = value();
            if (!v)
                return v.error();
            const long long hi = a == "--ctx" ? eval::CaptureLimits::kMaxCtx
                                 : a == "--offset" ? (1ll << 40)
                                 : a == "--threads" ? 1024 : (1ll << 30);
            auto n = integerArgument(a, *v, a == "--ctx" ? eval::CaptureLimits::kMinCtx : 0, hi);
            if (!n)
                return n.error();
            if (a == "--ctx")
                s.ctx = static_cast<int>(*n);
            else if (a == "--offset")
                s.offset = *n;
            else if (a == "--threads")
                s.threads = static_cast<int>(*n);
            else
                s.memoryLimitMb = static_cast<double>(*n);
        } else if (a == "--layers") {
            auto v = value();
            if (!v)
                return v.error();
            auto layers = parseLayers(*v);
            if (!layers)
                return layers.error();
            s.layers = std::move(layers).value();
        } else if (a == "--dtype") {
            auto v = value();
            if (!v)
                return v.error();
            if (*v != "f16" && *v != "f32")
                return Error{"--dtype", "must be f16 or f32, got '" + *v + "'"};
            s.f32 = *v == "f32";
        } else if (a == "--meta") {
            auto v = value();
            if (!v)
                return v.error();
            const auto eq = v->find('=');
            if (eq == std::string::npos || eq == 0)
                return Error{"--meta", "must be KEY=VALUE, got '" + *v + "'"};
            const std::string key = v->substr(0, eq);
            if (s.metadata.count(key))
                return Error{"--meta", "key '" + key + "' is given twice"};
            s.metadata[key] = v->substr(eq + 1);
        } else if (a == "--no-special") {
            s.parseSpecialTokens = false;
        } else if (a == "--quiet") {
            o.quiet = true;
        } else {
            return Error{a, "unknown argument of kvlens capture (see kvlens --help)"};
        }
    }
    if (s.modelDir.empty())
        return Error{"--model", "kvlens capture needs --model DIR"};
    if (s.textFile.empty() == s.tokensFile.empty())
        return Error{"--text", "give exactly one of --text FILE and --tokens FILE.npy"};
    if (o.outFile.empty())
        return Error{"--out", "kvlens capture needs --out FILE.safetensors"};
    const std::filesystem::path out(o.outFile);
    if (out.extension() != ".safetensors")
        return Error{"--out", "must name a .safetensors file, got '" + o.outFile + "'"};
    std::error_code ec;
    if (std::filesystem::is_directory(out, ec))
        return Error{"--out", o.outFile + " is a directory; give a file name"};
    const std::filesystem::path parent = out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
    if (!std::filesystem::is_directory(parent, ec))
        return Error{"--out", "the directory " + parent.string() + " does not exist"};
    if (::access(parent.c_str(), W_OK) != 0)
        return Error{"--out", "the directory " + parent.string() + " cannot be written"};
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
