// SPDX-License-Identifier: GPL-3.0-or-later
// SGEMM and memcpy baselines measured in the same run as the stages they normalize.
#include "bench/bench_util.h"

#include "core/common/types.h"

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

} // namespace kvlens::bench
