// SPDX-License-Identifier: GPL-3.0-or-later
// SGEMM and memcpy baselines measured in the same run as the stages they normalize.
#include "bench/bench_util.h"

#include "core/common/types.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <thread>

namespace kvlens::bench {

double sgemmGflops(int n, int threads)
{
    RowMatrixXf a = RowMatrixXf::Constant(n, n, 0.5f), b = RowMatrixXf::Constant(n, n, 0.25f), c(n, n);
    auto run = [&] {
        std::vector<std::thread> pool;
        const int rows = n / threads;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                const int r0 = t * rows, r1 = t + 1 == threads ? n : r0 + rows;
                c.middleRows(r0, r1 - r0).noalias() = a.middleRows(r0, r1 - r0) * b;
            });
        for (auto& p : pool)
            p.join();
    };
    const double ms = medianMs(run, 5, 1);
    return 2.0 * n * static_cast<double>(n) * n / (ms * 1e6);
}

double memcpyGBps(std::size_t bytes)
{
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    const double ms = medianMs([&] { std::memcpy(dst.data(), src.data(), bytes); }, 7, 2);
    return static_cast<double>(bytes) / (ms * 1e6);
}

double readGBps(std::size_t bytes)
{
    std::vector<float> src(bytes / sizeof(float), 1.0f);
    volatile float sink = 0.0f;
    const double ms = medianMs(
        [&] {
            constexpr int kLanes = 64; // independent partial sums: the loop vectorizes and is not add-latency bound
            float acc[kLanes] = {};
            const std::size_t n = src.size() / kLanes * kLanes;
            for (std::size_t i = 0; i < n; i += kLanes)
                for (int l = 0; l < kLanes; ++l)
                    acc[l] += src[i + static_cast<std::size_t>(l)];
            float total = 0.0f;
            for (float a : acc)
                total += a;
            sink = total;
        },
        7, 2);
    (void)sink;
    return static_cast<double>(src.size() * sizeof(float)) / (ms * 1e6);
}

namespace {

typedef float Vec16 __attribute__((vector_size(64)));

/// 12 independent FMA chains of 16 lanes: enough to cover the FMA latency on two ports.
float fmaChains(long iterations, float seed)
{
    Vec16 a[12];
    for (int i = 0; i < 12; ++i)
        a[i] = Vec16{} + seed * static_cast<float>(i + 1);
    const Vec16 b = Vec16{} + 0.999999f, c = Vec16{} + 1e-7f;
    for (long it = 0; it < iterations; ++it)
        for (auto& x : a)
            x = x * b + c;
    float sum = 0.0f;
    for (const auto& x : a)
        for (int l = 0; l < 16; ++l)
            sum += x[l];
    return sum;
}

} // namespace

/// Pins the calling thread to CPU `cpu` (modulo the CPUs this process may use); false when it cannot.
bool pinToCpu(int cpu)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return false;
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed))
            cpus.push_back(c);
    if (cpus.empty())
        return false;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<std::size_t>(cpu) % cpus.size()], &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

double fmaPeakGflops(int threads)
{
    // Each thread runs its own set of independent FMA chains, pinned to its own CPU, so two threads
    // never share a core's FMA units by the scheduler's choice (a limit measured below what SGEMM
    // achieves is no limit).
    constexpr long kIterations = 20000000;
    std::vector<float> out(static_cast<std::size_t>(threads));
    const double ms = medianMs(
        [&] {
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; ++t)
                pool.emplace_back([&, t] {
                    pinToCpu(t);
                    out[static_cast<std::size_t>(t)] = fmaChains(kIterations, 1e-3f * static_cast<float>(t + 1));
                });
            for (auto& p : pool)
                p.join();
        },
        3, 1);
    return 2.0 * 16.0 * 12.0 * static_cast<double>(kIterations) * threads / (ms * 1e6);
}

} // namespace kvlens::bench
