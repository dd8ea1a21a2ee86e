// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens-bench: per-stage and end-to-end timings of each backend, as ratios to SGEMM and memcpy
// measured in the same run (absolute numbers drift on a shared machine; ratios survive).
#include "bench/bench_util.h"
#include "core/analysis/comparison.h"

#include "core/attention/attention.h"
#include "core/experiment/runner.h"
#include "core/model/spec_json.h"
#include "core/quant/norm_quantizer.h"
#include "core/quant/path.h"
#include "core/quant/qjl.h"
#include "core/quant/wht.h"
#include "gpu/opencl_backend.h"

#include <cstdio>
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
            (void)budget;
            double t = 4.0 * q * n * d; // estimated scores and P V^
            for (const PathConfig* p : {&s.key, &s.value}) {
                if (p->residual != ResidualKind::Qjl)
                    continue;
                const double m = p->qjlDim > 0 ? p->qjlDim : d;
                const double dp = p->rotation == Rotation::Wht ? static_cast<double>(paddedDimension(spec.d)) : d;
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
        } else if (a == "--help" || a == "-h") {
            std::printf("usage: kvlens-bench [--threads N] [--device INDEX|NAME]\n"
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
    std::printf("baselines (this run): SGEMM 1024^3 %.1f GFLOP/s on 1 thread, %.1f on %d; memcpy %.1f GB/s (32 MiB)\n\n",
                gemm1, gemmN, threads, copy);

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
        const double copyMs = bytes / (copy * 1e6);
        line("WHT + quantize, N = 65536, d = 128, b = 3", ms, "GB/s", bytes / (ms * 1e6), "memcpy time", ms / copyMs);
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
    double cpuDefaultMs = 0.0;
    for (const ExperimentSpec& spec : {*normalizeSpec(defaultSpec()), largeSpec()}) {
        const double flops = experimentFlops(spec);
        const double floorMs = flops / (gemmN * 1e6);
        const std::string label = spec.name + " (" + std::to_string(spec.trialCount()) + " trials)";
        CpuBackend backend(threads);
        const double ms = medianMs([&] { (void)runExperiment(spec, backend); }, spec.d > 512 ? 3 : 5, 1);
        if (spec.name == "default")
            cpuDefaultMs = ms;
        std::printf("  %-34s cpu    %9.1f ms  %8.1f GFLOP/s  %5.2f x its FLOP floor (%.1f GFLOP at the %d-thread SGEMM rate)\n",
                    label.c_str(), ms, flops / (ms * 1e6), ms / floorMs, flops / 1e9, threads);
        if (opencl) {
            const double msG = medianMs([&] { (void)runExperiment(spec, **opencl); }, spec.d > 512 ? 3 : 5, 1);
            std::printf("  %-34s opencl %9.1f ms  %8.1f GFLOP/s  %5.2f x its FLOP floor", label.c_str(), msG,
                        flops / (msG * 1e6), msG / floorMs);
            if (spec.name == "default")
                std::printf(", %.2f x the CPU backend", msG / cpuDefaultMs);
            std::printf("\n");
        }
    }

    // The comparison table's bootstrap and permutation statistics, after the trials: their share
    // of a --batch run of the default experiment (target: at most 15%).
    {
        const ExperimentSpec spec = *normalizeSpec(defaultSpec());
        CpuBackend backend(threads);
        const auto results = runExperiment(spec, backend);
        if (results) {
            const double ms = medianMs([&] { (void)stats::compareSchemes(*results); }, 3, 1);
            std::printf("\nstatistics\n");
            std::printf("  %-44s %9.3f ms  %5.1f%% of trials + statistics (%.1f ms of trials)\n",
                        "comparison table of the default run", ms, 100.0 * ms / (ms + cpuDefaultMs), cpuDefaultMs);
        }
    }
    return 0;
}
