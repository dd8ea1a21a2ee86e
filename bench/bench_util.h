// SPDX-License-Identifier: GPL-3.0-or-later
// Timing helpers for the benchmark: median of repeated runs after a warm-up, and the in-process baselines.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace kvlens::bench {

/// Median wall time in milliseconds of `repeats` runs of `f`, after `warmup` untimed runs.
inline double medianMs(const std::function<void()>& f, int repeats = 7, int warmup = 1)
{
    for (int i = 0; i < warmup; ++i)
        f();
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
        const auto start = std::chrono::steady_clock::now();
        f();
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

/// In-process SGEMM rate (Eigen, C = A B with n x n float matrices), in GFLOP/s, on
/// `threads` threads splitting the rows of A (Eigen's own threading is off in this build).
double sgemmGflops(int n, int threads);

/// memcpy bandwidth in GB/s (bytes copied per second) for a pre-faulted buffer of `bytes`.
double memcpyGBps(std::size_t bytes);

/// Streaming read bandwidth in GB/s: a vectorized sum over a pre-faulted buffer of `bytes`.
double readGBps(std::size_t bytes);

/// Single-precision FMA peak in GFLOP/s on `threads` threads (a short probe: independent
/// vector FMA chains in registers, 2 FLOPs per lane per FMA).
double fmaPeakGflops(int threads);

} // namespace kvlens::bench
