// SPDX-License-Identifier: GPL-3.0-or-later
// The forward's parallel building blocks: a pool of worker threads per forward, and the products of
// activations by weight matrices held in their stored types (converted a panel at a time).
#pragma once

#include "core/common/types.h"
#include "core/lm/weight_matrix.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvlens::lm {

using RowVectorXf = Eigen::Matrix<float, 1, Eigen::Dynamic>;

/// A fixed set of worker threads for one forward: run(n, fn) calls fn(0..n-1) spread over the
/// workers and the calling thread and returns when all are done. Created per forward, so
/// concurrent forwards never share (or wait on) each other's workers.
class TaskPool {
public:
    explicit TaskPool(int threads)
    {
        for (int i = 1; i < threads; ++i)
            m_workers.emplace_back([this] { workerLoop(); });
    }

    ~TaskPool()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_wake.notify_all();
        for (std::thread& t : m_workers)
            t.join();
    }

    TaskPool(const TaskPool&) = delete;
    TaskPool& operator=(const TaskPool&) = delete;

    int size() const { return static_cast<int>(m_workers.size()) + 1; }

    /// fn(i) for i in [0, tasks); rethrows the first exception a task threw.
    void run(int tasks, const std::function<void(int)>& fn)
    {
        if (tasks <= 0)
            return;
        if (tasks == 1 || m_workers.empty()) {
            for (int i = 0; i < tasks; ++i)
                fn(i);
            return;
        }
        {
            std::lock_guard lock(m_mutex);
            m_fn = &fn;
            m_tasks = tasks;
            m_next.store(0);
            m_active = static_cast<int>(m_workers.size());
            m_error = nullptr;
            ++m_generation;
        }
        m_wake.notify_all();
        drain();
        std::unique_lock lock(m_mutex);
        m_done.wait(lock, [this] { return m_active == 0; });
        m_fn = nullptr;
        if (m_error)
            std::rethrow_exception(std::exchange(m_error, nullptr));
    }

private:
    void drain()
    {
        for (int i = m_next.fetch_add(1); i < m_tasks; i = m_next.fetch_add(1)) {
            try {
                (*m_fn)(i);
            } catch (...) {
                std::lock_guard lock(m_mutex);
                if (!m_error)
                    m_error = std::current_exception();
            }
        }
    }

    void workerLoop()
    {
        std::uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock lock(m_mutex);
                m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
                if (m_stop)
                    return;
                seen = m_generation;
            }
            drain();
            std::lock_guard lock(m_mutex);
            if (--m_active == 0)
                m_done.notify_one();
        }
    }

    std::vector<std::thread> m_workers;
    std::mutex m_mutex;
    std::condition_variable m_wake, m_done;
    const std::function<void(int)>* m_fn = nullptr;
    int m_tasks = 0;
    std::atomic<int> m_next{0};
    int m_active = 0;
    std::uint64_t m_generation = 0;
    bool m_stop = false;
    std::exception_ptr m_error;
};

/// fn(begin, end) over [0, n) cut into about one range per worker.
void forRanges(TaskPool& pool, Eigen::Index n, const std::function<void(Eigen::Index, Eigen::Index)>& fn);

/// out = a w^T (+ bias): a [m x k] float32, w [n x k] (nn.Linear layout) in its stored type, out
/// [m x n]. Split by output columns (each worker converts and multiplies its own rows of w, a panel
/// of about kPanelBytes at a time, or its whole range when that fits kWholeRangeBytes) unless the
/// output is too narrow, then by rows of a over one float copy of w. Eigen's own threading is off;
/// it collapses on these tall-skinny shapes anyway. The result depends only on the values of w, not
/// on its stored type or the thread count for a given panel plan.
void matmulT(TaskPool& pool, const Eigen::Ref<const RowMatrixXf>& a, const WeightMatrix& w, const RowVectorXf& bias,
             RowMatrixXf& out);

/// Float32 weights a worker converts at once when its whole column range fits: then the product is
/// one Eigen call per worker, as when the weights were float32 in memory (same blocking, same bits).
inline constexpr std::uint64_t kWholeRangeBytes = 8ull << 20;

/// Float32 weights one worker dequantizes at a time inside a product otherwise: rows of a panel x the
/// matrix's columns stay within this many bytes. Eigen packs the activations [m x k] again for every
/// panel, which costs about 20 / P of the product's time for a panel of P rows (packing at ~10 GB/s
/// against the product at ~100 GFLOP/s): 16 MiB keeps P above 360 for every k up to 11 008 (a 7 B
/// model's MLP), under 6 %; 512 KiB panels (P = 64 at k = 2048) lost a third of the rate.
inline constexpr std::uint64_t kPanelBytes = 16ull << 20;
/// Rows of a panel of a matrix with `cols` columns (a multiple of 16, at least 16).
std::int64_t panelRows(std::int64_t cols);

} // namespace kvlens::lm
