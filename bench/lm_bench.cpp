// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens-lm-bench: tokens/s and GFLOP/s of the transformer forward (core/lm) for a GPT-2-small-shaped
// random-weight model and the shipped tiny Llama, against their FLOP floors at the SGEMM rate
// measured in the same run; with --backend opencl, the same forwards on an OpenCL device
// (gpu::OpenClForward) beside them.
#include "bench/bench_util.h"
#include "core/common/memory.h"
#include "core/lm/products.h"
#include "core/lm/transformer.h"
#include "core/rng/rng.h"
#include "gpu/opencl_forward.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

using namespace kvlens;
using namespace kvlens::lm;
using namespace kvlens::bench;

namespace {

void fill(RowMatrixXf& m, Eigen::Index rows, Eigen::Index cols, Rng& rng, double scale)
{
    m.resize(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i)
        m.data()[i] = static_cast<float>((2.0 * rng.uniform() - 1.0) * scale);
}

void fill(RowVectorXf& v, Eigen::Index n, Rng& rng, double scale, double offset = 0.0)
{
    v.resize(n);
    for (Eigen::Index i = 0; i < n; ++i)
        v(i) = static_cast<float>(offset + (2.0 * rng.uniform() - 1.0) * scale);
}

/// GPT-2 small's shape (12 layers, 768 wide, 12 heads, MLP 3072, vocab 50257, 1024 positions),
/// uniform random weights (seed 1).
Transformer gpt2Small(int threads)
{
    ModelConfig c;
    c.source = "random GPT-2 small";
    c.architecture = Architecture::Gpt2;
    c.layers = 12;
    c.hidden = 768;
    c.heads = c.kvHeads = 12;
    c.headDim = 64;
    c.intermediate = 3072;
    c.vocab = 50257;
    c.maxPositions = 1024;
    c.normEps = 1e-5;
    c.tiedEmbeddings = c.qkvBias = c.outBias = true;
    Rng rng(EngineKind::Pcg64, 1);
    ModelWeights w;
    const double s = 0.05;
    fill(w.embed, c.vocab, c.hidden, rng, s);
    fill(w.positions, c.maxPositions, c.hidden, rng, s);
    for (int l = 0; l < c.layers; ++l) {
        LayerWeights lw;
        fill(lw.attnNorm, c.hidden, rng, 0.1, 1.0);
        fill(lw.attnNormBias, c.hidden, rng, 0.1);
        fill(lw.qkv, c.qkvRows(), c.hidden, rng, s);
        fill(lw.qkvBias, c.qkvRows(), rng, s);
        fill(lw.out, c.hidden, c.hidden, rng, s);
        fill(lw.outBias, c.hidden, rng, s);
        fill(lw.mlpNorm, c.hidden, rng, 0.1, 1.0);
        fill(lw.mlpNormBias, c.hidden, rng, 0.1);
        fill(lw.up, c.intermediate, c.hidden, rng, s);
        fill(lw.upBias, c.intermediate, rng, s);
        fill(lw.down, c.hidden, c.intermediate, rng, s);
        fill(lw.downBias, c.hidden, rng, s);
        w.layers.push_back(std::move(lw));
    }
    fill(w.finalNorm, c.hidden, rng, 0.1, 1.0);
    fill(w.finalNormBias, c.hidden, rng, 0.1);
    auto m = Transformer::create(std::move(c), std::move(w), threads);
    if (!m) {
        std::fprintf(stderr, "%s\n", m.error().text().c_str());
        std::exit(1);
    }
    return std::move(*m);
}

/// Returns the keys and values unchanged: the cost of the hook's copies and calls.
class CopyHook : public KvCacheHook {
public:
    bool quantizes(int) const override { return true; }
    void apply(int, int, const RowMatrixXf& k, const RowMatrixXf& v, RowMatrixXf& khat, RowMatrixXf& vhat) const override
    {
        khat = k;
        vhat = v;
    }
};

struct Timing {
    std::string what;
    int tokens = 0;
    double ms = 0.0;
    double flops = 0.0;
    double sgemm = 0.0; ///< GFLOP/s of a 1024^3 SGEMM on the same threads, the better of just before and just after
};

/// Times one forward configuration (median of 5 after a warm-up) and its FLOPs, between two SGEMM
/// measurements: on a shared machine the rate moves within a run, so each figure is set against
/// the machine as it was while that figure was taken.
Timing measure(const char* what, const Transformer& m, const std::vector<std::int32_t>& tokens, const ForwardOptions& o)
{
    const double before = sgemmGflops(1024, m.threads());
    const int t = static_cast<int>(tokens.size());
    const double ms = medianMs(
        [&] {
            auto r = m.forward(tokens, o);
            if (!r) {
                std::fprintf(stderr, "%s\n", r.error().text().c_str());
                std::exit(1);
            }
        },
        5, 1);
    const ModelConfig& c = m.config();
    // Rows before logitsStart skip the output head: 2 hidden vocab FLOPs each.
    const double flops = c.flopsPerToken(t) * t - 2.0 * c.hidden * double(c.vocab) * o.logitsStart;
    return {what, t, ms, flops, std::max(before, sgemmGflops(1024, m.threads()))};
}

/// Peak and current resident set size in bytes (VmHWM, VmRSS of /proc/self/status).
std::pair<std::uint64_t, std::uint64_t> residentBytes()
{
    std::ifstream in("/proc/self/status");
    std::uint64_t peak = 0, now = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmHWM:", 0) == 0)
            peak = std::strtoull(line.c_str() + 6, nullptr, 10) << 10;
        else if (line.rfind("VmRSS:", 0) == 0)
            now = std::strtoull(line.c_str() + 6, nullptr, 10) << 10;
    }
    return {peak, now};
}

/// The forward's own product on `w` (its stored type, panels converted inside) with `rows` random
/// activation rows: GFLOP/s, median of 3 after a warm-up.
double productGflops(const WeightMatrix& w, int rows, int threads)
{
    Rng rng(EngineKind::Pcg64, 5);
    RowMatrixXf a(rows, w.cols());
    for (Eigen::Index i = 0; i < a.size(); ++i)
        a.data()[i] = static_cast<float>(rng.normal());
    RowMatrixXf out;
    const RowVectorXf bias;
    const double ms = medianMs(
        [&] {
            TaskPool pool(threads);
            matmulT(pool, a, w, bias, out);
        },
        3, 1);
    return 2.0 * rows * double(w.rows()) * double(w.cols()) / (ms * 1e6);
}

/// Where --backend opencl runs: the --device request ("" for the default device).
struct OpenClRequest {
    std::string device;
};

/// The --backend opencl row of a model: the device's product rate on layer 0's MLP matrix as stored,
/// the same forward on the device (median of 3 after a warm-up that builds its kernels) against the
/// CPU's `cpuMs`, and the largest relative difference of their logits.
int benchDevice(const Transformer& model, const std::vector<std::int32_t>& tokens, const ForwardOptions& options,
                double cpuMs, const OpenClRequest& request)
{
    const auto t0 = std::chrono::steady_clock::now();
    auto device = gpu::OpenClForward::create(model, request.device);
    if (!device) {
        std::printf("  opencl: %s\n", device.error().text().c_str());
        return 1;
    }
    const double uploadS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  opencl: %s\n    %.0f MiB of weights uploaded in %.1f s\n", (*device)->label().c_str(),
                (*device)->weightBytes() / 1048576.0, uploadS);
    const int ctx = static_cast<int>(tokens.size());
    const auto rate = (*device)->productGflops(ctx, 3);
    if (rate)
        std::printf("    product (layer 0 MLP, %d rows, on the device): %.1f GFLOP/s\n", ctx, *rate);
    Transformer onDevice = model;
    onDevice.setDevice(*device);
    RowMatrixXf logits;
    const double ms = medianMs(
        [&] {
            auto r = onDevice.forward(tokens, options);
            if (!r) {
                std::fprintf(stderr, "%s\n", r.error().text().c_str());
                std::exit(1);
            }
            logits = std::move(r->logits);
        },
        3, 1);
    auto cpu = model.forwardOnCpu(tokens, options);
    const double scale = cpu ? std::max(1e-30f, cpu->logits.cwiseAbs().maxCoeff()) : 1.0;
    const double diff = cpu && cpu->logits.rows() == logits.rows() ? (logits - cpu->logits).cwiseAbs().maxCoeff() / scale : -1.0;
    std::printf("    forward of %d tokens on the device: %.0f ms, %.1f tokens/s (CPU %.1f tokens/s: %.2fx); logits "
                "within %.1e of the CPU's (max |difference| / max |logit|)%s\n",
                ctx, ms, ctx / (ms / 1000.0), ctx / (cpuMs / 1000.0), cpuMs / ms, diff,
                (*device)->fallbacks() > 0 ? "; SOME PASSES FELL BACK TO THE CPU" : "");
    return 0;
}

/// One model at its real size: load (memory-mapped, stored types), the product rate of its MLP
/// matrix, a forward of `ctx` tokens scoring the second half as kvlens eval does, peak RSS against
/// the mapped weights and the memory estimate; with `opencl`, the device's row (benchDevice).
int benchModel(const std::string& path, int ctx, int threads, int runs, const std::optional<OpenClRequest>& opencl)
{
    LoadOptions options;
    options.threads = threads;
    options.contextTokens = ctx;
    options.forwardsInFlight = 1; // the bench runs one forward at a time (an evaluation holds two)
    options.memoryLimitMiB = defaultMemoryLimitMiB();
    const auto t0 = std::chrono::steady_clock::now();
    auto m = Transformer::load(path, options);
    if (!m) {
        std::fprintf(stderr, "%s\n", m.error().text().c_str());
        return 1;
    }
    const double loadS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const ModelConfig& c = m->config();
    const std::uint64_t mapped = m->tensors().storedBytes();
    std::printf("%s\n  %s, weights %s, %.0f MiB mapped; loaded and checked finite in %.1f s\n", path.c_str(),
                c.summary().c_str(), m->tensors().storedTypes().c_str(), mapped / 1048576.0, loadS);
    const double rate = productGflops(m->tensors().layers[0].up, ctx, threads);
    const double sgemm = sgemmGflops(1024, threads);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(ctx));
    Rng rng(EngineKind::Pcg64, 3);
    for (auto& id : tokens)
        id = static_cast<std::int32_t>(rng.nextU64() % static_cast<std::uint64_t>(c.vocab));
    ForwardOptions half;
    half.logitsStart = ctx / 2;
    const double ms = medianMs(
        [&] {
            if (auto r = m->forward(tokens, half); !r) {
                std::fprintf(stderr, "%s\n", r.error().text().c_str());
                std::exit(1);
            }
        },
        runs, runs > 1 ? 1 : 0);
    const double flops = c.flopsPerToken(ctx) * ctx - 2.0 * c.hidden * double(c.vocab) * half.logitsStart;
    const double floorMs = flops / (rate * 1e6);
    const auto [peak, now] = residentBytes();
    std::printf("  product (layer 0 MLP, %d rows, %s): %.1f GFLOP/s (SGEMM 1024^3: %.1f)\n", ctx,
                m->tensors().layers[0].up.typeName().c_str(), rate, sgemm);
    std::printf("  forward of %d tokens: %.0f ms, %.1f tokens/s; floor at the product rate %.0f ms: %.2fx the floor\n",
                ctx, ms, ctx / (ms / 1000.0), floorMs, ms / floorMs);
    std::printf("  peak RSS %.0f MiB = mapped %.0f MiB %+.1f %% (now %.0f MiB)\n", peak / 1048576.0, mapped / 1048576.0,
                100.0 * (double(peak) / double(mapped) - 1.0), now / 1048576.0);
    const MemoryEstimate& e = m->memoryEstimate();
    std::printf("  memory estimate %.0f MiB (mapped %.0f, resident %.0f, one forward %.0f, panels %.0f): peak RSS = %.2fx "
                "the estimate\n",
                e.total() / 1048576.0, e.mappedBytes / 1048576.0, e.residentBytes / 1048576.0, e.activationBytes / 1048576.0,
                e.transientBytes / 1048576.0, double(peak) / double(e.total()));
    if (opencl)
        return benchDevice(*m, tokens, half, ms, *opencl);
    return 0;
}

void print(const Timing& r)
{
    const double sgemm = r.sgemm;
    const double gflops = r.flops / (r.ms * 1e6);
    const double floorMs = r.flops / (sgemm * 1e6);
    std::printf("  %-40s %7.1f ms %7.0f tokens/s %6.1f GFLOP/s = %3.0f%% of SGEMM %5.1f (floor %.1f ms, %.0f tokens/s)\n",
                r.what.c_str(), r.ms, r.tokens / (r.ms / 1000.0), gflops, 100.0 * gflops / sgemm, sgemm, floorMs,
                r.tokens / (floorMs / 1000.0));
}

} // namespace

int main(int argc, char** argv)
{
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::string models = KVLENS_MODELS_DIR;
    std::vector<std::string> modelPaths;
    std::string backend = "cpu", device;
    int ctx = 512, runs = 3;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc)
            threads = std::max(1, std::atoi(argv[++i]));
        else if (a == "--models" && i + 1 < argc)
            models = argv[++i];
        else if (a == "--model" && i + 1 < argc)
            modelPaths.push_back(argv[++i]);
        else if (a == "--ctx" && i + 1 < argc)
            ctx = std::max(4, std::atoi(argv[++i]));
        else if (a == "--runs" && i + 1 < argc)
            runs = std::max(1, std::atoi(argv[++i]));
        else if (a == "--backend" && i + 1 < argc && (std::string(argv[i + 1]) == "cpu" || std::string(argv[i + 1]) == "opencl"))
            backend = argv[++i];
        else if (a == "--device" && i + 1 < argc)
            device = argv[++i];
        else {
            std::printf("usage: kvlens-lm-bench [--threads N] [--models DIR] [--backend cpu|opencl] [--device D]\n"
                        "                       [--model PATH [--ctx N] [--runs N]]...\n"
                        "Tokens/s and GFLOP/s of one 512-token forward, against the FLOP floor at the SGEMM rate of this run.\n"
                        "--model: a model folder or GGUF file at its real size: load time, the product rate of its\n"
                        "stored type, a forward of --ctx tokens against the floor at that rate, peak RSS against the\n"
                        "mapped weights and the memory estimate (scripts/make_large_model.py writes random-weight ones);\n"
                        "--runs: forwards timed, their median (default 3, after a warm-up; 1: no warm-up).\n"
                        "--backend opencl (--device: an index or a name substring; implies opencl): each model's forward\n"
                        "also on the OpenCL device, with its product rate and the agreement of its logits.\n");
            return a == "--help" || a == "-h" ? 0 : 2;
        }
    }
    std::optional<OpenClRequest> opencl;
    if (backend == "opencl" || !device.empty())
        opencl = OpenClRequest{device};
    if (!modelPaths.empty()) {
        retainFreedMemory();
        for (const std::string& path : modelPaths)
            if (const int status = benchModel(path, ctx, threads, runs, opencl); status != 0)
                return status;
        return 0;
    }
    // A forward allocates its activations afresh (the logits alone are T x vocab floats); reusing
    // freed heap spares the first-touch page faults, as the experiment runner does.
    retainFreedMemory();
    std::printf("kvlens-lm-bench: medians of 5 forwards after a warm-up, %d threads; each against a 1024^3 SGEMM on\n"
                "the same threads measured just before and just after it (the better of the two)\n\n", threads);

    std::vector<Timing> gpt2, tiny;
    std::string gpt2Line, tinyLine;
    {
        const Transformer m = gpt2Small(threads);
        std::vector<std::int32_t> tokens(512);
        Rng rng(EngineKind::Pcg64, 2);
        for (auto& id : tokens)
            id = static_cast<std::int32_t>(rng.nextU64() % 50257);
        char line[256];
        std::snprintf(line, sizeof line,
                      "GPT-2-small-shaped, random weights: %lld non-embedding parameters, %.3f GFLOP per token at T = 512",
                      static_cast<long long>(m.config().nonEmbeddingParameters()), m.config().flopsPerToken(512) / 1e9);
        gpt2Line = line;
        gpt2.push_back(measure("512 tokens, all logits", m, tokens, {}));
        ForwardOptions half;
        half.logitsStart = 256;
        gpt2.push_back(measure("512 tokens, logits of the second half", m, tokens, half));
        CopyHook hook;
        half.cache = &hook;
        gpt2.push_back(measure("  ... with a copying cache hook", m, tokens, half));
        half.damage = DamageRequest{256, nullptr};
        gpt2.push_back(measure("  ... and the proxies' damage, second half", m, tokens, half));
        half.damage.reset();
        half.residual = 128;
        gpt2.push_back(measure("  ... and a residual window of 128", m, tokens, half));
    }
    {
        LoadOptions options;
        options.threads = threads;
        auto m = Transformer::load(models + "/tiny-llama", options);
        if (m) {
            std::ifstream held(models + "/tiny-llama/heldout.txt", std::ios::binary);
            std::vector<std::int32_t> tokens;
            for (char ch; tokens.size() < 512 && held.get(ch);)
                tokens.push_back(static_cast<unsigned char>(ch));
            char line[256];
            std::snprintf(line, sizeof line, "tiny-llama (%s): %lld non-embedding parameters, %.4f GFLOP per token at T = 512",
                          m->config().summary().c_str(), static_cast<long long>(m->config().nonEmbeddingParameters()),
                          m->config().flopsPerToken(512) / 1e9);
            tinyLine = line;
            tiny.push_back(measure("512 bytes of heldout.txt, all logits", *m, tokens, {}));
            ForwardOptions half;
            half.logitsStart = 256;
            CopyHook hook;
            half.cache = &hook;
            tiny.push_back(measure("  second half's logits, copying cache hook", *m, tokens, half));
            half.damage = DamageRequest{256, nullptr};
            tiny.push_back(measure("  ... and the proxies' damage, second half", *m, tokens, half));
            const std::vector<std::int32_t> first(tokens.begin(), tokens.begin() + 128);
            tiny.push_back(measure("128 bytes, all logits", *m, first, {}));
        } else {
            tinyLine = "(shipped model not found: " + m.error().text() + ")";
        }
    }
    std::printf("%s\n", gpt2Line.c_str());
    for (const Timing& t : gpt2)
        print(t);
    std::printf("\n%s\n", tinyLine.c_str());
    for (const Timing& t : tiny)
        print(t);
    if (!opencl)
        return 0;
    // The same models' forwards on the OpenCL device, against the CPU rows above.
    std::printf("\nOn OpenCL (--backend opencl):\nGPT-2-small-shaped, 512 tokens, logits of the second half\n");
    {
        const Transformer m = gpt2Small(threads);
        std::vector<std::int32_t> tokens(512);
        Rng rng(EngineKind::Pcg64, 2);
        for (auto& id : tokens)
            id = static_cast<std::int32_t>(rng.nextU64() % 50257);
        ForwardOptions half;
        half.logitsStart = 256;
        if (const int status = benchDevice(m, tokens, half, gpt2[1].ms, *opencl); status != 0)
            return status;
    }
    LoadOptions options;
    options.threads = threads;
    if (auto m = Transformer::load(models + "/tiny-llama", options); m && !tiny.empty()) {
        std::ifstream held(models + "/tiny-llama/heldout.txt", std::ios::binary);
        std::vector<std::int32_t> tokens;
        for (char ch; tokens.size() < 512 && held.get(ch);)
            tokens.push_back(static_cast<unsigned char>(ch));
        std::printf("tiny-llama, 512 bytes of heldout.txt, all logits\n");
        return benchDevice(*m, tokens, {}, tiny[0].ms, *opencl);
    }
    return 0;
}
