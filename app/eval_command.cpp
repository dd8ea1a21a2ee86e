// SPDX-License-Identifier: GPL-3.0-or-later
#include "app/eval_command.h"

#include "app/batch.h"
#include "app/interrupt.h"
#include "core/analysis/eval_analysis.h"
#include "core/eval/eval_files.h"
#include "core/eval/evaluator.h"
#include "core/io/atomic_file.h"
#include "core/io/file_read.h"
#include "core/io/staged_dir.h"
#include "widgets/eval_views.h"

#include <QDir>
#include <QString>

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

const char* evalUsage()
{
    return "  kvlens eval --model DIR (--text FILE | --tokens FILE.npy) --schemes S,... [--budgets 2,3,4]\n"
           "              [--ctx 512] [--chunks N] [--calibration T] [--seeds FIRST[:COUNT]] [--residual R]\n"
           "              [--attribution none|layers|heads] [--threads N] [--memory-limit MB] [--no-special]\n"
           "              [--no-figures] [--quiet] --out DIR\n"
           "                                       a transformer over text with its KV cache quantized by each\n"
           "                                       scheme: llama.cpp's KLD report per configuration, per-token\n"
           "                                       and per-layer files; or --spec EVAL.json for the options\n";
}

bool isEvalSpecFile(const std::string& path)
{
    auto text = io::readRegularFile(path, io::kMaxSpecBytes);
    return text && isEvalSpecText(*text);
}

namespace {

Result<int> intArgument(const std::string& name, const std::string& text, int lo, int hi)
{
    int v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
        return Error{name, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text + "'"};
    return v;
}

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

Result<EvalOptions> parseEvalArguments(const std::vector<std::string>& args)
{
    EvalOptions o;
    EvalSpec& s = o.spec;
    std::string specPath;
    bool schemesGiven = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> Result<std::string> {
            if (i + 1 >= args.size())
                return Error{a, "needs a value"};
            return args[++i];
        };
        auto integer = [&](int lo, int hi) -> Result<int> {
            auto v = value();
            if (!v)
                return v.error();
            return intArgument(a, *v, lo, hi);
        };
        if (a == "--spec") {
            auto v = value();
            if (!v)
                return v.error();
            specPath = *v;
        } else if (a == "--model" || a == "--text" || a == "--tokens" || a == "--out") {
            auto v = value();
            if (!v)
                return v.error();
            (a == "--model" ? s.modelDir : a == "--text" ? s.textFile : a == "--tokens" ? s.tokensFile : o.outDir) = *v;
        } else if (a == "--schemes") {
            auto v = value();
            if (!v)
                return v.error();
            schemesGiven = true;
            for (const std::string& name : splitList(*v)) {
                auto scheme = findScheme(name);
                if (!scheme)
                    return Error{"--schemes", "unknown scheme '" + name + "' (known: " + schemeNames() + ")"};
                s.schemes.push_back(EvalScheme{*scheme, {}, {}});
            }
        } else if (a == "--budgets") {
            auto v = value();
            if (!v)
                return v.error();
            s.budgets.clear();
            for (const std::string& b : splitList(*v)) {
                auto n = intArgument("--budgets", b, 1, 8);
                if (!n)
                    return n.error();
                s.budgets.push_back(*n);
            }
        } else if (a == "--ctx") {
            auto v = integer(EvalLimits::kMinCtx, EvalLimits::kMaxCtx);
            if (!v)
                return v.error();
            s.ctx = *v;
        } else if (a == "--chunks") {
            auto v = integer(0, EvalLimits::kMaxChunks);
            if (!v)
                return v.error();
            s.chunks = *v;
        } else if (a == "--calibration") {
            auto v = integer(-1, EvalLimits::kMaxCtx * 16);
            if (!v)
                return v.error();
            s.calibrationTokens = *v;
        } else if (a == "--residual") {
            auto v = integer(0, EvalLimits::kMaxCtx);
            if (!v)
                return v.error();
            s.residual = *v;
        } else if (a == "--threads") {
            auto v = integer(0, 1024);
            if (!v)
                return v.error();
            s.threads = *v;
        } else if (a == "--memory-limit") {
            auto v = integer(0, 1 << 30);
            if (!v)
                return v.error();
            s.memoryLimitMb = *v;
        } else if (a == "--seeds") {
            auto v = value();
            if (!v)
                return v.error();
            const auto colon = v->find(':');
            const std::string firstText = v->substr(0, colon);
            std::uint64_t first = 0;
            const auto [ptr, ec] = std::from_chars(firstText.data(), firstText.data() + firstText.size(), first);
            if (ec != std::errc() || ptr != firstText.data() + firstText.size())
                return Error{"--seeds", "must be FIRST or FIRST:COUNT, got '" + *v + "'"};
            s.firstSeed = first;
            if (colon != std::string::npos) {
                auto count = intArgument("--seeds", v->substr(colon + 1), 1, EvalLimits::kMaxSeeds);
                if (!count)
                    return count.error();
                s.seedCount = *count;
            }
        } else if (a == "--attribution") {
            auto v = value();
            if (!v)
                return v.error();
            if (*v == "none")
                s.attribution = Attribution::None;
            else if (*v == "layers")
                s.attribution = Attribution::Layers;
            else if (*v == "heads")
                s.attribution = Attribution::Heads;
            else
                return Error{"--attribution", "must be none, layers or heads, got '" + *v + "'"};
        } else if (a == "--no-special") {
            s.parseSpecialTokens = false;
        } else if (a == "--quiet") {
            o.quiet = true;
        } else if (a == "--no-figures") {
            o.figures = false;
        } else {
            return Error{a, "unknown argument of kvlens eval (see kvlens --help)"};
        }
    }
    if (!specPath.empty()) {
        if (!s.modelDir.empty() || !s.textFile.empty() || !s.tokensFile.empty() || schemesGiven)
            return Error{"--spec", "give the eval spec file or the model options, not both"};
        auto loaded = loadEvalSpecFile(specPath);
        if (!loaded)
            return loaded.error();
        s = std::move(loaded).value();
    }
    if (o.outDir.empty())
        return Error{"--out", "kvlens eval needs --out DIR"};
    if (s.schemes.empty())
        return Error{"--schemes", "choose at least one scheme (known: " + schemeNames() + ")"};
    if (auto ok = checkEvalSpec(s); !ok)
        return ok.error();
    return o;
}

namespace {

std::string seconds(double s)
{
    char text[32];
    std::snprintf(text, sizeof text, s < 10 ? "%.1f s" : "%.0f s", s);
    return text;
}

} // namespace

int runEvalCommand(const EvalOptions& options, std::ostream& out, std::ostream& err)
{
    auto staged = io::StagedDirectory::begin(options.outDir);
    if (!staged) {
        err << "kvlens: " << staged.error().text() << "\n";
        return kExitRefused;
    }
    const InterruptScope interrupts;
    const auto started = std::chrono::steady_clock::now();
    auto last = started - std::chrono::seconds(1);
    eval::EvalCallbacks callbacks;
    callbacks.cancelled = [] { return InterruptScope::interrupted(); };
    callbacks.progress = [&](double done, double total, const std::string& stage) {
        if (options.quiet)
            return;
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::milliseconds(100) && done < total)
            return;
        last = now;
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
    auto result = eval::runEval(options.spec, callbacks);
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
    const std::string dir = staged->path();
    int written = 0;
    const auto proxies = eval::outputProxyStudy(*result, options.spec.seed(0) + 90, kProxyResamples);
    const std::string proxiesText = eval::outputProxiesText(proxies);
    for (const auto& [name, text] : {std::pair<std::string, std::string>{"spec.json", evalSpecToJson(options.spec)},
                                     {"eval_summary.csv", eval::summaryCsv(*result)},
                                     {"eval_tokens.csv", eval::tokensCsv(*result)},
                                     {"eval_layers.csv", eval::layersCsv(*result)},
                                     {"eval_proxies.csv", eval::outputProxiesCsv(proxies)},
                                     {"report.txt", eval::reportText(*result) + proxiesText}}) {
        if (auto ok = writeFileAtomic(dir + "/" + name, text); !ok) {
            err << "kvlens: " << ok.error().text() << "\n";
            written = kExitFailed;
            break;
        }
    }
    // The figures go into the staging directory too: a failure leaves DIR as it was.
    int figureFiles = 0;
    std::string skippedNote;
    if (written == 0 && options.figures) {
        const auto outcome = widgets::exportEvalFigures(*result, QDir(QString::fromStdString(dir)).filePath(QStringLiteral("figures")),
                                                        options.figure, QByteArray::fromStdString(evalSpecToJson(options.spec)));
        if (!outcome.ok()) {
            err << "kvlens: " << outcome.error.toStdString() << io::spaceNote(dir) << "\n";
            written = kExitFailed;
        }
        figureFiles = static_cast<int>(outcome.written.size());
        for (const QString& why : outcome.skipped) // a figure with nothing to draw is named, never silently absent
            skippedNote += "no figure: " + why.toStdString() + "\n";
    }
    std::ostringstream report;
    report << eval::reportText(*result) << proxiesText;
    const double tokensPerSecond = result->forwardMs > 0 ? result->forwardTokens / (result->forwardMs / 1000.0) : 0.0;
    report << "\n" << result->configurations.size() << " configurations, " << result->scored.size()
           << " scored tokens each, in " << seconds(result->elapsedMs / 1000.0) << " (forward passes "
           << static_cast<long long>(tokensPerSecond) << " tokens/s)\n";
    report << skippedNote;
    report << "wrote " << options.outDir << "/{spec.json, eval_summary.csv, eval_tokens.csv, eval_layers.csv, eval_proxies.csv, report.txt}";
    if (options.figures)
        report << " and " << figureFiles << " files in " << options.outDir << "/figures";
    report << "\n";
    return finishRun(*staged, written, report.str(), out, err);
}

} // namespace kvlens::app
