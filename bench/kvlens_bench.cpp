// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens-bench: per-stage and end-to-end timings of each backend, as ratios to SGEMM and memcpy
// measured in the same run (absolute numbers drift on a shared machine; ratios survive).
#include "bench/bench_util.h"
#include "core/analysis/comparison.h"

#include "core/attention/attention.h"
#include "core/analysis/proxies.h"
#include "core/experiment/runner.h"
#include "core/experiment/trial_cache.h"
#include "core/spec/spec_json.h"
#include "core/quant/norm_quantizer.h"
#include "core/quant/path.h"
#include "core/quant/qjl.h"
#include "core/quant/wht.h"
#include "gpu/opencl_backend.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <cstring>
#include <string>

using namespace kvlens;
using namespace kvlens::bench;

namespace {

RowMatrixXf gaussian(int rows, int cols, std::uint64_t seed)
{
    Rng rng(EngineKind::Pcg64, seed);
    RowMatrixXf m(rows, cols);
    rng.fillNormal(m.data(), static_cast<std::size_t>(m.size()));
    return m;
}

/// FLOPs of one run of a spec's GEMM-like work (scores, P V, QJL sketches, estimates,
/// reconstructions, the exact attention once per seed): the compute floor.
double experimentFlops(const ExperimentSpec& spec)
{
    const double n = spec.tokens, q = spec.queries, d = spec.d;
    double flops = spec.seedCount * 4.0 * q * n * d; // exact scores and P V per seed
    for (const auto& s : spec.schemes) {
        for (int budget : spec.budgets) {
            double t = 4.0 * q * n * d; // estimated scores and P V^
            for (const PathConfig* p : {&s.key, &s.value}) {
                const double m = projectionColumns(*p, spec.d);
                if (m == 0)
                    continue;
                const double dp = planPath(*p, budget, spec.d, PathSite::Keys, PlanInputs{}, spec.engine, 0).dim;
                t += 2.0 * 2.0 * n * m * dp; // sketch and reconstruction
                if (p == &s.key)
                    t += 2.0 * q * m * dp + 2.0 * q * n * m; // S q and the estimate
            }
            flops += t * spec.seedCount;
        }
    }
    return flops;
}

ExperimentSpec largeSpec()
{
    return *specFromJson(R"({"name": "large", "d": 1024, "tokens": 4096, "queries": 256, "schemes": ["KQV", "QKQV"],
                            "budgets": [4], "seeds": {"count": 2}})");
}

/// The work of the PyTorch TurboQuant reimplementation's pipeline: its "MSE" scheme (WHT +
/// Lloyd-Max on K and V: TQ-KV) and its "prod" scheme (QJL on the keys: TQ-QKV), d = 128,
/// N = 1024, Q = 64, n = 2, 3, 4, 8 seeds: 48 trials.
constexpr const char* kPeerSpec = R"({"name": "peer shape", "d": 128, "tokens": 1024, "queries": 64,
    "schemes": ["TQ-KV", "TQ-QKV"], "budgets": [2, 3, 4], "seeds": {"first": 1, "count": 8}})";

int peerShape(int threads)
{
    const ExperimentSpec spec = *normalizeSpec(*specFromJson(kPeerSpec));
    for (int t : {1, threads}) {
        CpuBackend backend(t);
        const double ms = medianMs([&] { (void)runExperiment(spec, backend); }, 7, 1);
        std::printf("peer shape (%lld trials: TQ-KV = the peer's MSE, TQ-QKV = its prod; d 128, N 1024, Q 64, n 2-4, "
                    "8 seeds), %d thread%s: %.1f ms, %.2f ms per trial\n",
                    spec.trialCount(), t, t == 1 ? "" : "s", ms, ms / static_cast<double>(spec.trialCount()));
    }
    std::printf("the same run headless: kvlens --batch SPEC --out DIR with SPEC =\n%s\n", kPeerSpec);
    return 0;
}

/// Paper scale: d 1024, N 4096, Q 256, KQV and QKQV at n = 2, 3, 4, `seeds` seeds (24 trials at 4).
ExperimentSpec paperSpec(int seeds)
{
    ExperimentSpec spec = *specFromJson(R"({"name": "paper scale", "d": 1024, "tokens": 4096, "queries": 256,
                                           "schemes": ["KQV", "QKQV"], "budgets": [2, 3, 4]})");
    spec.seedCount = seeds;
    return *normalizeSpec(spec);
}

/// Peak resident memory (bytes) of a child process running the paper-scale spec on `backend`
/// (this program re-executed with --peak-memory-child), or 0 when it cannot be measured. The
/// child reports its own VmHWM: the high-water mark of its memory after exec, which getrusage's
/// ru_maxrss is not (Linux carries the forking parent's resident size into it).
double childPeakBytes(const char* backend, const std::string& device)
{
    char self[4096];
    const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0)
        return 0.0;
    self[length] = '\0';
    int fds[2];
    if (pipe(fds) != 0)
        return 0.0;
    const pid_t pid = fork();
    if (pid < 0)
        return 0.0;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        execl(self, "kvlens-bench", "--peak-memory-child", backend, device.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    std::string text;
    char buffer[256];
    for (ssize_t got; (got = read(fds[0], buffer, sizeof buffer)) > 0;)
        text.append(buffer, static_cast<std::size_t>(got));
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 0.0;
    return std::strtod(text.c_str(), nullptr) * 1024.0;
}

/// This process's memory high-water mark in KiB (VmHWM), or 0.
double ownPeakKiB()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmHWM:", 0) == 0)
            return std::strtod(line.c_str() + 6, nullptr);
    return 0.0;
}

int peakMemoryChild(const std::string& backend, const std::string& device, int threads)
{
    const ExperimentSpec spec = paperSpec(4);
    bool ok = false;
    if (backend == "opencl") {
        auto g = gpu::OpenClBackend::create(device);
        if (!g)
            return 1;
        ok = static_cast<bool>(runExperiment(spec, **g));
    } else {
        CpuBackend cpu(threads);
        ok = static_cast<bool>(runExperiment(spec, cpu));
    }
    std::printf("%.0f\n", ownPeakKiB());
    return ok ? 0 : 1;
}

/// One row of the issue's table: what, the time, the same-run limit it is held against, the ratio and the target.
void tableRow(const char* what, const std::string& now, const std::string& against, double ratio, const char* target)
{
    std::printf("  %-52s %-22s %-44s %6.2f  (target %s)\n", what, now.c_str(), against.c_str(), ratio, target);
}

std::string fmt(const char* format, double a, double b = 0.0)
{
    char buffer[160];
    std::snprintf(buffer, sizeof buffer, format, a, b);
    return buffer;
}

void line(const char* stage, double ms, const char* rateUnit, double rate, const char* vsName, double vs)
{
    std::printf("  %-44s %9.3f ms  %8.1f %-7s  %5.2f x %s\n", stage, ms, rate, rateUnit, vs, vsName);
}

} // namespace

int main(int argc, char** argv)
{
    int threads = 2;
    std::string device;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc) {
            threads = std::stoi(argv[++i]);
        } else if (a == "--device" && i + 1 < argc) {
            device = argv[++i];
        } else if (a == "--peer-shape") {
            return peerShape(threads);
        } else if (a == "--peak-memory-child" && i + 2 < argc) {
            return peakMemoryChild(argv[i + 1], argv[i + 2], threads);
        } else if (a == "--help" || a == "-h") {
            std::printf("usage: kvlens-bench [--threads N] [--device INDEX|NAME] [--peer-shape]\n"
                        "Per-stage and end-to-end timings of the CPU and OpenCL backends, as ratios to an SGEMM and a\n"
                        "memcpy measured in the same run.\n");
            return 0;
        }
    }
    std::printf("kvlens-bench: medians of >= 5 runs after warm-up\n\n");
    const double gemm1 = sgemmGflops(1024, 1);
    const double gemmN = sgemmGflops(1024, threads);
    const std::size_t copyBytes = 65536ull * 128 * sizeof(float);
    const double copy = memcpyGBps(copyBytes);
    const double read = readGBps(copyBytes);
    const double peak1 = fmaPeakGflops(1), peakN = fmaPeakGflops(threads);
    std::printf("baselines (this run): SGEMM 1024^3 %.1f GFLOP/s on 1 thread, %.1f on %d; memcpy %.1f GB/s, read %.1f GB/s "
                "(32 MiB, pre-faulted); FMA peak %.1f GFLOP/s on 1 thread, %.1f on %d\n\n",
                gemm1, gemmN, threads, copy, read, peak1, peakN, threads);

    double whtMs = 0.0, whtFloorMs = 0.0, attentionRatio = 0.0;
    std::printf("CPU backend stages (1 thread)\n");
    {
        const int n = 65536, d = 128;
        const RowMatrixXf x = gaussian(n, d, 1);
        Rng rng(EngineKind::Pcg64, 2);
        const auto signs = randomSigns(d, rng);
        const NormQuantizer q(cachedCodebook(CodebookLaw::Beta, d, 3));
        NormCodes codes;
        const double ms = medianMs([&] { q.encodeRotated(x, signs, codes); });
        const double bytes = static_cast<double>(n) * d * sizeof(float);
        // Its bytes: the float input read once, one code byte per coordinate and an fp16 norm per row written.
        const double floorMs = bytes / (read * 1e6) + (static_cast<double>(n) * d + 2.0 * n) / (copy * 1e6);
        line("WHT + quantize, N = 65536, d = 128, b = 3", ms, "GB/s", bytes / (ms * 1e6), "its bandwidth floor",
             ms / floorMs);
        whtMs = ms;
        whtFloorMs = floorMs;
    }
    {
        const int n = 4096, d = 1024, m = 1024;
        const RowMatrixXf r = gaussian(n, d, 3);
        Rng rng(EngineKind::Pcg64, 4);
        const QjlSketch sketch(QjlSketch::drawMatrix(m, d, rng));
        QjlCodes codes;
        RowMatrixXf signs;
        const double ms = medianMs([&] { sketch.encode(r, codes, signs); }, 5, 1);
        const double gflops = 2.0 * n * m * static_cast<double>(d) / (ms * 1e6);
        line("QJL sketch, N = 4096, d = m = 1024", ms, "GFLOP/s", gflops, "of SGEMM (1 thread)", gflops / gemm1);
        RowMatrixXf rHat;
        const double msR = medianMs([&] { sketch.reconstruct(signs, codes.norms, rHat); }, 5, 1);
        const double gflopsR = 2.0 * n * m * static_cast<double>(d) / (msR * 1e6);
        line("QJL reconstruction, N = 4096, d = m = 1024", msR, "GFLOP/s", gflopsR, "of SGEMM (1 thread)", gflopsR / gemm1);
    }
    {
        const int nq = 256, n = 4096, d = 1024;
        const RowMatrixXf q = gaussian(nq, d, 5), k = gaussian(n, d, 6), v = gaussian(n, d, 7);
        RowMatrixXf s, p, t;
        std::vector<double> lse;
        const double ms = medianMs([&] {
            attentionScores(q, k, 1.0f / 32.0f, s);
            softmaxRows(s, p, &lse);
            attentionOutput(p, v, t);
        }, 5, 1);
        const double gflops = 4.0 * nq * n * static_cast<double>(d) / (ms * 1e6);
        line("attention Q = 256, N = 4096, d = 1024", ms, "GFLOP/s", gflops, "of SGEMM (1 thread)", gflops / gemm1);
        attentionRatio = gflops / gemm1;
    }

    auto opencl = gpu::OpenClBackend::create(device);
    if (opencl) {
        gpu::OpenClBackend& g = **opencl;
        std::printf("\nOpenCL kernels on %s (%s style; data resident, no transfers; programs built %d, cached %d)\n",
                    g.device().label().c_str(), g.kernelStyle().c_str(), g.buildCounts().first, g.buildCounts().second);
        {
            const int n = 65536, d = 128;
            const RowMatrixXf x = gaussian(n, d, 1);
            Rng rng(EngineKind::Pcg64, 2);
            const auto signs = randomSigns(d, rng);
            const auto cb = cachedCodebook(CodebookLaw::Beta, d, 3);
            const double ms = g.timeEncode(x, signs, *cb, 7).value();
            const double bytes = static_cast<double>(n) * d * sizeof(float);
            line("WHT + quantize, N = 65536, d = 128, b = 3", ms, "GB/s", bytes / (ms * 1e6), "memcpy time",
                 ms / (bytes / (copy * 1e6)));
        }
        {
            const int n = 4096, d = 1024, m = 1024;
            const RowMatrixXf r = gaussian(n, d, 3), s = gaussian(m, d, 4);
            const double ms = g.timeGemmNT(r, s, 5).value();
            const double gflops = 2.0 * n * m * static_cast<double>(d) / (ms * 1e6);
            line("QJL sketch product, N = 4096, d = m = 1024", ms, "GFLOP/s", gflops, "of SGEMM (machine)",
                 gflops / gemmN);
            const RowMatrixXf signs = gaussian(n, m, 5);
            const double msR = g.timeGemmNN(signs, s, 5).value();
            const double gflopsR = 2.0 * n * m * static_cast<double>(d) / (msR * 1e6);
            line("QJL reconstruction product, N = 4096, d = m = 1024", msR, "GFLOP/s", gflopsR, "of SGEMM (machine)",
                 gflopsR / gemmN);
        }
        {
            const int nq = 256, n = 4096, d = 1024;
            const RowMatrixXf q = gaussian(nq, d, 5), k = gaussian(n, d, 6), v = gaussian(n, d, 7);
            const double ms = g.timeAttention(q, k, v, 5).value();
            const double gflops = 4.0 * nq * n * static_cast<double>(d) / (ms * 1e6);
            line("attention Q = 256, N = 4096, d = 1024", ms, "GFLOP/s", gflops, "of SGEMM (machine)", gflops / gemmN);
        }
    } else {
        std::printf("\nOpenCL: not measured (%s)\n", opencl.error().text().c_str());
    }

    std::printf("\nend to end\n");
    double cpuDefaultMs = 0.0, openclDefaultMs = 0.0, defaultFloorMs = 0.0;
    for (const ExperimentSpec& spec : {*normalizeSpec(defaultSpec()), largeSpec()}) {
        const double flops = experimentFlops(spec);
        const double floorMs = flops / (gemmN * 1e6);
        const std::string label = spec.name + " (" + std::to_string(spec.trialCount()) + " trials)";
        CpuBackend backend(threads);
        const double ms = medianMs([&] { (void)runExperiment(spec, backend); }, spec.d > 512 ? 3 : 5, 1);
        if (spec.name == "default") {
            cpuDefaultMs = ms;
            defaultFloorMs = floorMs;
        }
        std::printf("  %-34s cpu    %9.1f ms  %8.1f GFLOP/s  %5.2f x its FLOP floor (%.1f GFLOP at the %d-thread SGEMM rate)\n",
                    label.c_str(), ms, flops / (ms * 1e6), ms / floorMs, flops / 1e9, threads);
        if (opencl) {
            const double msG = medianMs([&] { (void)runExperiment(spec, **opencl); }, spec.d > 512 ? 3 : 5, 1);
            if (spec.name == "default")
                openclDefaultMs = msG;
            std::printf("  %-34s opencl %9.1f ms  %8.1f GFLOP/s  %5.2f x its FLOP floor", label.c_str(), msG,
                        flops / (msG * 1e6), msG / floorMs);
            if (spec.name == "default")
                std::printf(", %.2f x the CPU backend", msG / cpuDefaultMs);
            std::printf("\n");
        }
    }

    // The rows of issue 17's table, each against a limit measured above in this run.
    std::printf("\nthe speed table (each row: this run's time, the same-run limit, the ratio, the target)\n");
    {
        // --batch default: the statistics after the trials (comparison table and proxy study).
        const ExperimentSpec spec = *normalizeSpec(defaultSpec());
        CpuBackend backend(threads);
        const auto results = runExperiment(spec, backend);
        const double statsMs = medianMs(
            [&] {
                (void)stats::compareSchemes(*results);
                (void)stats::proxyStudy(*results);
            },
            3, 1);
        tableRow("--batch default: statistics share", fmt("%.1f ms", statsMs),
                 fmt("of statistics + trials (%.1f ms)", statsMs + cpuDefaultMs), statsMs / (statsMs + cpuDefaultMs),
                 "<= 0.15");
    }
    tableRow("default experiment, trials only (72)", fmt("%.1f ms", cpuDefaultMs),
             fmt("FLOP floor %.2f ms at the 2-thread SGEMM rate", defaultFloorMs), cpuDefaultMs / defaultFloorMs,
             "<= 1.5");
    tableRow("WHT + quantize, N = 65536, d = 128, b = 3 (1 thread)", fmt("%.2f ms", whtMs),
             fmt("bandwidth floor %.2f ms", whtFloorMs), whtMs / whtFloorMs, "<= 1.5");
    tableRow("CPU attention Q = 256, N = 4096, d = 1024 (1 thread)", fmt("%.1f GFLOP/s", attentionRatio * gemm1),
             fmt("SGEMM %.1f GFLOP/s (ratio: rate)", gemm1), attentionRatio, ">= 0.9");
    const ExperimentSpec paper = paperSpec(4);
    const double paperFlops = experimentFlops(paper);
    double paperCpuMs = 0.0;
    {
        CpuBackend backend(threads);
        paperCpuMs = medianMs([&] { (void)runExperiment(paper, backend); }, 1, 0);
        const double floorMs = paperFlops / (0.7 * peakN * 1e6);
        tableRow("paper scale (d 1024, N 4096, Q 256, 24 trials)", fmt("%.2f s", paperCpuMs / 1000.0),
                 fmt("GEMM at 70%% of FMA peak: %.2f s", floorMs / 1000.0), paperCpuMs / floorMs, "<= 1.1");
        std::printf("  %-52s %-22s %-44s %6.2f\n", "  (Eigen SGEMM's share of the FMA peak)", fmt("%.1f GFLOP/s", gemmN).c_str(),
                    fmt("FMA peak %.1f GFLOP/s", peakN).c_str(), gemmN / peakN);
    }
    if (opencl) {
        tableRow("OpenCL (PoCL) vs CPU backend, default", fmt("%.1f ms", openclDefaultMs),
                 fmt("CPU backend %.1f ms (ratio: time)", cpuDefaultMs), openclDefaultMs / cpuDefaultMs, "<= 1");
        const auto built = (*opencl)->buildCounts();
        std::printf("  %-52s programs built %d, loaded from the cache %d\n", "  (OpenCL program cache this run)",
                    built.first, built.second);
    } else {
        std::printf("  %-52s not measured (no OpenCL device)\n", "OpenCL vs CPU backend");
    }
    {
        // auto picks what app::makeBackend measures; here: the same probe, both backends.
        std::printf("  %-52s %s\n", "\"backend\": \"auto\"",
                    opencl ? "measured once per device by the program (see kvlens --batch default --backend auto)"
                           : "no OpenCL device: the CPU backend");
    }
    {
        // The window adding a seed: Seeds 4 -> 5 at paper scale, with the worker's trial cache.
        TrialCache cache(1024.0);
        CpuBackend backend(threads);
        (void)runExperiment(paper, backend, nullptr, {}, &cache);
        const ExperimentSpec five = paperSpec(5);
        const auto start = std::chrono::steady_clock::now();
        const auto added = runExperiment(five, backend, nullptr, {}, &cache);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        const long long computed = static_cast<long long>(added->trials.size()) - added->reusedTrials;
        tableRow("GUI: Seeds 4 -> 5 at paper scale", fmt("%.0f trials computed", static_cast<double>(computed)),
                 fmt("of %.0f; %.2f s vs a fresh run's (ratio: time)", static_cast<double>(five.trialCount()),
                     ms / 1000.0),
                 ms / (paperCpuMs * 5.0 / 4.0), "new trials only: 6 of 30");
    }
    {
        const MemoryEstimate live = estimateMemory(paper, threads);
        const double cpuPeak = childPeakBytes("cpu", device);
        tableRow("peak memory at paper scale, CPU", fmt("%.0f MiB", cpuPeak / 1048576.0),
                 fmt("live data (the run's estimate) %.0f MiB", live.totalBytes() / 1048576.0),
                 cpuPeak / live.totalBytes(), "<= 1.5");
        if (opencl) {
            const double gPeak = childPeakBytes("opencl", device);
            tableRow("peak memory at paper scale, OpenCL", fmt("%.0f MiB", gPeak / 1048576.0),
                     fmt("live data (the run's estimate) %.0f MiB", live.totalBytes() / 1048576.0),
                     gPeak / live.totalBytes(), "<= 1.5");
        }
    }
    return 0;
}
