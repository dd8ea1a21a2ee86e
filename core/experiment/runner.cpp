// SPDX-License-Identifier: GPL-3.0-or-later
// Trial scheduling: groups of trials sharing one draw run on worker threads; results land in walk order.
#include "core/experiment/runner.h"

#include "core/stats/energy.h"

#include "core/common/memory.h"
#include "core/experiment/shard.h"
#include "core/experiment/trial.h"
#include "core/experiment/trial_cache.h"
#include "core/io/fault.h"
#include "core/quant/wht.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace kvlens {

double physicalMemoryBytes()
{
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long pageSize = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && pageSize > 0 ? static_cast<double>(pages) * static_cast<double>(pageSize) : 0.0;
}

namespace {

MemoryEstimate estimatePoint(const ExperimentSpec& spec, int concurrency)
{
    const double d = spec.d, n = spec.tokens, q = spec.queries, cal = spec.calibrationRows();
    const double dp = static_cast<double>(paddedDimension(static_cast<std::size_t>(spec.d)));
    int maxSketch = 0;
    for (const auto& s : spec.schemes)
        for (const PathConfig* p : {&s.key, &s.value})
            maxSketch = std::max(maxSketch, projectionColumns(*p, spec.d));
    const double m = maxSketch;
    constexpr double f = sizeof(float);
    MemoryEstimate e;
    e.concurrency = std::max(1, concurrency);
    // Group: K, V, Q and calibration sets; exact scores, probabilities and output.
    const double group = f * ((2.0 * n + q) * d + 3.0 * cal * d + 2.0 * q * n + q * d);
    // One trial: rotated input, decoded, residual, reconstruction and unrotated copies of
    // both paths (~6 n x dp each), codes (1 byte), sketch projections and signs (n x m, twice),
    // estimated/base scores and probabilities (3 q x n), and the per-vector error arrays.
    const double trial = f * (6.0 * n * dp + 2.0 * n * m + m * dp + 3.0 * q * n + q * dp + 4.0 * n) + n * dp;
    e.perGroupBytes = group + trial;
    const double perTrialResult = f * 9.0 * q + 2.0 * f * 3.0 * std::min<double>(spec.metrics.sampleCap, std::max(n, q))
                                  + 512.0;
    e.resultBytes = perTrialResult * static_cast<double>(spec.trialCount());
    // Imported tensors: the slices read for the run, held for its whole length.
    if (const Regime* regime = findRegime(spec.regime))
        e.resultBytes += regime->inputBytes(spec.regimeParams, DataShape{spec.d, spec.tokens, spec.queries,
                                                                         spec.calibrationRows()});
    return e;
}

} // namespace

MemoryEstimate estimateMemory(const ExperimentSpec& spec, int concurrency)
{
    // The largest grid point decides the working set; results add up over every point.
    MemoryEstimate total;
    total.concurrency = std::max(1, concurrency);
    double largestQueries = 0.0;
    for (int p = 0; p < spec.pointCount(); ++p) {
        const ExperimentSpec ps = spec.pointSpec(p);
        const MemoryEstimate e = estimatePoint(ps, concurrency);
        total.perGroupBytes = std::max(total.perGroupBytes, e.perGroupBytes);
        total.resultBytes += e.resultBytes;
        largestQueries = std::max(largestQueries, static_cast<double>(ps.queries));
    }
    // The comparison table (analysis/comparison.cpp): 512 bytes a row kept; per worker, the two
    // schemes' pooled KL (seeds x queries each) with ~7 copies of 8 bytes a value (the pooled values,
    // the bootstrap's sorted values, ranks and counts, the rank tests' and KS's copies), and the
    // energy test's pooled distance matrix.
    const double schemes = static_cast<double>(spec.schemes.size());
    const double pairs = spec.comparisons.pairs.empty() ? schemes * (schemes - 1.0) / 2.0
                                                        : static_cast<double>(spec.comparisons.pairs.size());
    const double rows = pairs * static_cast<double>(spec.budgets.size()) * static_cast<double>(spec.pointCount());
    const double values = 2.0 * static_cast<double>(spec.seedCount) * largestQueries;
    const double energyPoints = 2.0 * std::min<double>(spec.seedCount, stats::kMaxEnergyPoints);
    const double workers = std::min<double>(rows, std::max(1u, std::thread::hardware_concurrency()));
    total.analysisBytes = 512.0 * rows + workers * (56.0 * values + 8.0 * energyPoints * energyPoints);
    return total;
}

namespace {

std::atomic<double> g_residentInputLimit{512e6};

/// What a point's imported data hashes to, chained from `h` (shapes and bytes of every matrix).
std::uint64_t hashDataset(const Dataset& data, std::uint64_t h)
{
    for (const RowMatrixXf* m : {&data.keys, &data.values, &data.queries, &data.calibrationKeys,
                                 &data.calibrationValues, &data.calibrationQueries}) {
        const std::uint64_t shape[2] = {static_cast<std::uint64_t>(m->rows()), static_cast<std::uint64_t>(m->cols())};
        const std::string_view shapeBytes(reinterpret_cast<const char*>(shape), sizeof shape);
        const std::string_view bytes(reinterpret_cast<const char*>(m->data()),
                                     static_cast<std::size_t>(m->size()) * sizeof(float));
        h = fnv1a64(bytes, fnv1a64(shapeBytes, h));
    }
    return h;
}

/// The scored part alone (K, V, Q): equal for two runs of one cell whatever their calibration rows.
std::uint64_t hashScored(const Dataset& data)
{
    std::uint64_t h = kFnvOffsetBasis;
    for (const RowMatrixXf* m : {&data.keys, &data.values, &data.queries}) {
        const std::uint64_t shape[2] = {static_cast<std::uint64_t>(m->rows()), static_cast<std::uint64_t>(m->cols())};
        h = fnv1a64(std::string_view(reinterpret_cast<const char*>(m->data()), static_cast<std::size_t>(m->size()) * 4),
                    fnv1a64(std::string_view(reinterpret_cast<const char*>(shape), sizeof shape), h));
    }
    return h;
}

/// A point's imported data while its trials run (the lazy mode of runExperiment).
struct LazyPoint {
    std::mutex mutex;
    std::shared_ptr<const Dataset> data;
    long long remainingGroups = 0;
};

std::string megabytes(double bytes)
{
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(bytes < 10e6 ? 1 : 0);
    os << bytes / 1e6 << " MB";
    return os.str();
}

} // namespace

double residentInputLimit()
{
    return g_residentInputLimit.load();
}

void setResidentInputLimit(double bytes)
{
    g_residentInputLimit.store(bytes);
}

Result<ResultSet> runExperiment(const ExperimentSpec& spec, ComputeBackend& backend, Progress* progress,
                                const TrialFilter& filter, TrialCache* cache)
{
    const auto start = std::chrono::steady_clock::now();
    retainFreedMemory();
    const int seeds = spec.seedCount;
    const int points = spec.pointCount();
    std::vector<ExperimentSpec> pointSpecs;
    pointSpecs.reserve(static_cast<std::size_t>(points));
    for (int p = 0; p < points; ++p)
        pointSpecs.push_back(spec.pointSpec(p));
    const int budgetCount = static_cast<int>(pointSpecs.front().budgets.size());
    const int schemeCount = static_cast<int>(spec.schemes.size());
    const GridShape grid(spec);
    auto slot = [&](int point, int budgetIndex, int schemeIndex, int seedIndex) {
        return grid.walkIndex(TrialSlot{point, budgetIndex, schemeIndex, seedIndex});
    };

    const double limit = spec.memoryLimitMb > 0.0 ? spec.memoryLimitMb * 1e6 : 0.5 * physicalMemoryBytes();
    auto overLimit = [&](const MemoryEstimate& e, int inFlight) {
        return Error{"memory_limit_mb", "this run needs about " + megabytes(e.totalBytes()) + " ("
                                            + std::to_string(inFlight) + " trial groups in flight of "
                                            + megabytes(e.perGroupBytes) + " each, plus " + megabytes(e.resultBytes)
                                            + " of results and inputs and " + megabytes(e.analysisBytes)
                                            + " for the comparisons after the trials), above the limit of "
                                            + megabytes(limit) + "; reduce d, tokens, queries, seeds or schemes"};
    };
    if (filter) {
        // From counts alone, before the chosen trials are listed: a shard of a 1e10-trial spec is
        // refused here instead of failing to allocate its list (16 bytes a chosen trial).
        MemoryEstimate bound = estimateMemory(spec, std::max(1, backend.concurrency()));
        const double share = std::clamp(filter.fraction, 0.0, 1.0);
        bound.resultBytes = bound.resultBytes * share + 16.0 * share * static_cast<double>(spec.trialCount());
        if (limit > 0.0 && bound.totalBytes() > limit)
            return overLimit(bound, bound.concurrency);
    }

    // With a filter: the chosen slots (ascending walk index), and the groups that need a draw.
    // Memory stays proportional to the chosen trials, not to the whole grid.
    const bool all = !filter;
    std::vector<long long> chosen;
    std::vector<long long> groups; // g = point * seeds + seedIndex, ascending; empty when `all`
    std::vector<long long> chosenPerPoint(static_cast<std::size_t>(points), 0);
    if (!all) {
        for (int p = 0; p < points; ++p)
            for (int b = 0; b < budgetCount; ++b)
                for (int s = 0; s < schemeCount; ++s)
                    for (int k = 0; k < seeds; ++k)
                        if (filter(TrialSlot{p, b, s, k})) {
                            chosen.push_back(slot(p, b, s, k));
                            groups.push_back(static_cast<long long>(p) * seeds + k);
                            ++chosenPerPoint[static_cast<std::size_t>(p)];
                        }
        std::sort(groups.begin(), groups.end());
        groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    }
    const long long groupCount = all ? static_cast<long long>(points) * seeds : static_cast<long long>(groups.size());
    const int threads = static_cast<int>(std::max<long long>(1, std::min<long long>(backend.concurrency(), groupCount)));

    MemoryEstimate estimate = estimateMemory(spec, threads);
    if (!all) {
        // Only the chosen trials' results are kept.
        estimate.resultBytes = 0.0;
        for (int p = 0; p < points; ++p) {
            const ExperimentSpec& ps = pointSpecs[static_cast<std::size_t>(p)];
            estimate.resultBytes += estimatePoint(ps, threads).resultBytes
                                    * static_cast<double>(chosenPerPoint[static_cast<std::size_t>(p)])
                                    / static_cast<double>(std::max<long long>(1, ps.trialCount()));
        }
    }
    // Imported inputs: resident for the whole run when they fit residentInputLimit(), else per point.
    const Regime* fixedRegime = findRegime(spec.regime);
    if (fixedRegime && !fixedRegime->seedIndependent())
        fixedRegime = nullptr;
    double inputSum = 0.0, inputMax = 0.0;
    auto cancelledEarly = [&] {
        ResultSet cancelled;
        cancelled.spec = spec;
        cancelled.schemes = spec.schemes;
        cancelled.cancelled = true;
        return cancelled;
    };
    if (fixedRegime)
        for (int p = 0; p < points; ++p) {
            if (progress && p % 256 == 255 && progress->cancelled())
                return cancelledEarly();
            const ExperimentSpec& ps = pointSpecs[static_cast<std::size_t>(p)];
            const double b = fixedRegime->inputBytes(ps.regimeParams, DataShape{ps.d, ps.tokens, ps.queries,
                                                                                 ps.calibrationRows()});
            inputSum += b;
            inputMax = std::max(inputMax, b);
        }
    const bool resident = inputSum <= residentInputLimit();
    if (!resident && all) // estimateMemory counted every point's inputs as held for the run
        estimate.resultBytes += static_cast<double>(threads) * inputMax - inputSum;
    if (limit > 0.0 && estimate.totalBytes() > limit)
        return overLimit(estimate, threads);

    // Seed-independent (imported) data: read once per grid point, now. Every point is read and
    // hashed (so every shard computes the same hash); only needed ones are kept, and only when resident.
    std::vector<std::shared_ptr<const Dataset>> fixedData(static_cast<std::size_t>(points));
    std::vector<std::uint64_t> pointDataHashes(static_cast<std::size_t>(points), 0);
    std::vector<std::uint64_t> pointScoredHashes(static_cast<std::size_t>(points), 0);
    std::unique_ptr<LazyPoint[]> lazy;
    std::uint64_t dataHash = 0;
    auto readPoint = [&](int p) {
        const ExperimentSpec& ps = pointSpecs[static_cast<std::size_t>(p)];
        return fixedRegime->generate(ps.regimeParams, DataShape{ps.d, ps.tokens, ps.queries, ps.calibrationRows()},
                                     ps.engine, ps.seed(0));
    };
    if (fixedRegime) {
        dataHash = kFnvOffsetBasis;
        for (int p = 0; p < points; ++p) {
            if (progress && p % 16 == 15 && progress->cancelled())
                return cancelledEarly();
            auto data = readPoint(p);
            if (!data)
                return data.error();
            dataHash = hashDataset(*data, dataHash);
            pointDataHashes[static_cast<std::size_t>(p)] = hashDataset(*data, kFnvOffsetBasis);
            pointScoredHashes[static_cast<std::size_t>(p)] = hashScored(*data);
            if (resident && (all || chosenPerPoint[static_cast<std::size_t>(p)] > 0))
                fixedData[static_cast<std::size_t>(p)] = std::make_shared<const Dataset>(std::move(data).value());
        }
        if (!resident) {
            lazy = std::make_unique<LazyPoint[]>(static_cast<std::size_t>(points));
            for (int p = 0; p < points; ++p)
                lazy[static_cast<std::size_t>(p)].remainingGroups = all ? seeds : 0;
            if (!all)
                for (const long long g : groups)
                    ++lazy[static_cast<std::size_t>(g / seeds)].remainingGroups;
        }
        io::faultPoint("inputs-read"); // tests replace the file here: the run must not see it
    }
    // The data of a point for a draw: the resident copy, or (lazy) read and checked against its hash.
    auto acquire = [&](int p) -> Result<std::shared_ptr<const Dataset>> {
        if (!lazy)
            return fixedData[static_cast<std::size_t>(p)];
        LazyPoint& lp = lazy[static_cast<std::size_t>(p)];
        const std::lock_guard lock(lp.mutex);
        if (!lp.data) {
            auto data = readPoint(p);
            if (!data)
                return data.error();
            if (hashDataset(*data, kFnvOffsetBasis) != pointDataHashes[static_cast<std::size_t>(p)])
                return Error{"regime.file", "the input of grid point " + std::to_string(p) + " ("
                                                + spec.pointLabel(p) + ") changed while the run read it; nothing of "
                                                "the changed file was used; rerun on a file that stays put"};
            lp.data = std::make_shared<const Dataset>(std::move(data).value());
        }
        return lp.data;
    };
    auto release = [&](int p) {
        if (!lazy)
            return;
        LazyPoint& lp = lazy[static_cast<std::size_t>(p)];
        const std::lock_guard lock(lp.mutex);
        if (--lp.remainingGroups <= 0)
            lp.data.reset();
    };

    const long long total = all ? spec.trialCount() : static_cast<long long>(chosen.size());
    // Where a trial lands in `slots`: its walk index, or its rank among the chosen ones (-1: not chosen).
    auto position = [&](long long walkIndex) -> long long {
        if (all)
            return walkIndex;
        const auto it = std::lower_bound(chosen.begin(), chosen.end(), walkIndex);
        return it != chosen.end() && *it == walkIndex ? static_cast<long long>(it - chosen.begin()) : -1;
    };

    std::vector<TrialResult> slots(static_cast<std::size_t>(total));
    std::vector<char> filled(static_cast<std::size_t>(total), 0);
    std::mutex mutex; // guards progress calls, the done and reused counters and the first error
    long long done = 0;
    long long reused = 0;
    const std::string backendName = backend.name();
    std::atomic<long long> nextGroup{0};
    std::atomic<bool> stop{false};
    std::optional<Error> failure;
    std::string regimeNote;

    auto isCancelled = [&] {
        if (stop.load())
            return true;
        if (progress) {
            const std::lock_guard lock(mutex);
            if (progress->cancelled()) {
                stop.store(true);
                return true;
            }
        }
        return false;
    };

    auto worker = [&] {
        try {
            for (;;) {
                const long long next = nextGroup.fetch_add(1);
                if (next >= groupCount || isCancelled())
                    return;
                const long long g = all ? next : groups[static_cast<std::size_t>(next)];
                const int point = static_cast<int>(g / seeds);
                const int seedIndex = static_cast<int>(g % seeds);
                const ExperimentSpec& pointSpec = pointSpecs[static_cast<std::size_t>(point)];
                // The draw is made only when a trial of the group is not in the cache.
                std::optional<TrialGroup> group;
                struct Released {
                    std::function<void()> f;
                    ~Released() { f(); }
                } released{[&] { release(point); }};
                auto prepare = [&]() -> bool {
                    if (group)
                        return true;
                    Result<std::shared_ptr<const Dataset>> fixed = std::shared_ptr<const Dataset>{};
                    if (fixedRegime)
                        fixed = acquire(point);
                    Result<TrialGroup> prepared = fixed ? prepareTrialGroup(pointSpec, point, seedIndex, backend,
                                                                            fixed->get())
                                                        : Result<TrialGroup>(fixed.error());
                    if (!prepared) {
                        const std::lock_guard lock(mutex);
                        if (!failure)
                            failure = prepared.error();
                        stop.store(true);
                        return false;
                    }
                    group = std::move(prepared).value();
                    if (point == 0 && seedIndex == 0) {
                        const std::lock_guard lock(mutex);
                        regimeNote = group->data.note;
                    }
                    return true;
                };
                const std::uint64_t seedValue = pointSpec.seed(seedIndex);
                for (int b = 0; b < budgetCount; ++b) {
                    for (int s = 0; s < schemeCount; ++s) {
                        const long long to = position(slot(point, b, s, seedIndex));
                        if (to < 0)
                            continue;
                        if (isCancelled())
                            return;
                        const int budget = pointSpec.budgets[static_cast<std::size_t>(b)];
                        TrialResult trial;
                        std::uint64_t cacheKey = 0;
                        std::optional<TrialCache::Entry> hit;
                        if (cache) {
                            cacheKey = trialCacheKey(pointSpec, pointDataHashes[static_cast<std::size_t>(point)],
                                                     pointSpec.schemes[static_cast<std::size_t>(s)], budget, seedValue,
                                                     backendName);
                            hit = cache->find(cacheKey);
                        }
                        if (hit) {
                            trial = std::move(hit->trial);
                            trial.key = TrialKey{point, s, budget, seedIndex, seedValue};
                            if (point == 0 && seedIndex == 0) {
                                const std::lock_guard lock(mutex);
                                regimeNote = hit->regimeNote;
                            }
                        } else {
                            if (!prepare())
                                return;
                            trial = runTrial(pointSpec, *group, s, budget, backend);
                            if (cache)
                                cache->insert(cacheKey, trial, group->data.note);
                        }
                        const auto at = static_cast<std::size_t>(to);
                        const std::lock_guard lock(mutex);
                        slots[at] = std::move(trial);
                        filled[at] = 1;
                        ++done;
                        if (hit)
                            ++reused;
                        if (progress) {
                            progress->trialFinished(slots[at]);
                            progress->report(done, total);
                        }
                    }
                }
            }
        } catch (const std::exception& e) {
            const std::lock_guard lock(mutex);
            if (!failure)
                failure = Error{"run", std::string("the run failed: ") + e.what()};
            stop.store(true);
        }
    };

    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i)
        pool.emplace_back(worker);
    worker();
    for (auto& t : pool)
        t.join();

    if (failure)
        return *failure;

    ResultSet result;
    result.spec = spec;
    result.schemes = spec.schemes;
    result.totalTrials = total;
    result.backend = backend.name();
    result.regimeNote = regimeNote;
    result.dataHash = dataHash;
    result.pointDataHashes = std::move(pointDataHashes);
    if (fixedRegime)
        result.pointScoredHashes = std::move(pointScoredHashes);
    result.reusedTrials = reused;
    result.cancelled = done < total;
    result.trials.reserve(static_cast<std::size_t>(done));
    for (std::size_t i = 0; i < slots.size(); ++i)
        if (filled[i])
            result.trials.push_back(std::move(slots[i]));
    result.elapsedMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
}

Result<std::vector<std::uint64_t>> verifyPointData(const ResultSet& results, const CancelToken& cancel)
{
    const ExperimentSpec& spec = results.spec;
    const Regime* regime = findRegime(spec.regime);
    if (!regime || !regime->seedIndependent() || results.dataHash == 0)
        return std::vector<std::uint64_t>{};
    const int points = spec.pointCount();
    if (static_cast<int>(results.pointDataHashes.size()) != points)
        return Error{"regime.file", "the run's per-point data hashes are missing: its inputs cannot be checked"};
    std::vector<std::uint64_t> scored(static_cast<std::size_t>(points), 0);
    for (int p = 0; p < points; ++p) {
        cancel.check();
        const ExperimentSpec ps = spec.pointSpec(p);
        auto data = regime->generate(ps.regimeParams, DataShape{ps.d, ps.tokens, ps.queries, ps.calibrationRows()},
                                     ps.engine, ps.seed(0));
        if (!data)
            return data.error();
        if (hashDataset(*data, kFnvOffsetBasis) != results.pointDataHashes[static_cast<std::size_t>(p)])
            return Error{"regime.file", "the input of grid point " + std::to_string(p) + " (" + spec.pointLabel(p)
                                            + ") is not what the run read (its data hash changed): the file was "
                                              "replaced or rewritten since; rerun on a file that stays put"};
        scored[static_cast<std::size_t>(p)] = hashScored(*data);
    }
    return scored;
}

} // namespace kvlens

