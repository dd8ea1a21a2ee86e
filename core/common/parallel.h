// SPDX-License-Identifier: GPL-3.0-or-later
// One parallel loop over independent jobs whose exceptions reach the caller instead of std::terminate.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kvlens {

/// Calls job(i) for i in [0, count) on up to `workers` threads (the calling thread included), each
/// i exactly once, results landing wherever job writes them (so they do not depend on the thread
/// count). The first exception a job throws (bad_alloc, Cancelled, ...) stops the other threads
/// from taking new jobs and is rethrown here after every thread has joined: an exception escaping
/// a std::thread would call std::terminate.
template <class Job>
void parallelFor(std::size_t count, unsigned workers, Job&& job)
{
    workers = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(count, workers)));
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr first;
    std::mutex mutex;
    auto work = [&] {
        try {
            for (std::size_t i = next++; i < count && !failed.load(); i = next++)
                job(i);
        } catch (...) {
            const std::lock_guard lock(mutex);
            if (!first)
                first = std::current_exception();
            failed.store(true);
        }
    };
    std::vector<std::thread> threads;
    try {
        for (unsigned t = 1; t < workers; ++t)
            threads.emplace_back(work);
    } catch (...) { // no thread could be started: the caller's thread does the rest
    }
    work();
    for (std::thread& t : threads)
        t.join();
    if (first)
        std::rethrow_exception(first);
}

/// The worker count for CPU-bound analyses: the hardware's, at least 1.
inline unsigned analysisWorkers()
{
    return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace kvlens
