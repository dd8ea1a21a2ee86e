// SPDX-License-Identifier: GPL-3.0-or-later
// Trial scheduling in four stages (plan, draw inputs, compute, collect): groups of trials sharing one
// draw run on worker threads in GridShape's draw order; results land in walk order.
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

namespace {

/// Plan: the grid, the chosen trials and draw groups (with a filter), the threads, and the memory
/// check, all before any data is read or drawn.
struct RunPlan {
    std::vector<ExperimentSpec> pointSpecs;
    GridShape grid;
    bool all = true;                  ///< no filter: every trial
    std::vector<long long> chosen;    ///< with a filter: chosen walk indices, ascending
    std::vector<long long> groups;    ///< with a filter: draw groups (point * seeds + seed) needed, ascending
    std::vector<long long> chosenPerPoint;
    long long groupCount = 0;
    long long total = 0;              ///< trials the run computes or reuses
    int threads = 1;
    const Regime* fixedRegime = nullptr; ///< a seed-independent (imported) regime, read once per point
    bool resident = true;             ///< its inputs are held for the whole run

    /// The draw group's (point, seed) of draw-group number `next`.
    TrialSlot group(long long next) const
    {
        const long long g = all ? next : groups[static_cast<std::size_t>(next)];
        return grid.fromDrawIndex(g * grid.budgets * grid.schemes);
    }
    /// Where a trial lands among the results: its walk index, or its rank among the chosen (-1: not chosen).
    long long position(long long walkIndex) const
    {
        if (all)
            return walkIndex;
        const auto it = std::lower_bound(chosen.begin(), chosen.end(), walkIndex);
        return it != chosen.end() && *it == walkIndex ? static_cast<long long>(it - chosen.begin()) : -1;
    }
};

Error overLimit(const MemoryEstimate& e, int inFlight, double limit)
{
    return Error{"memory_limit_mb", "this run needs about " + megabytes(e.totalBytes()) + " (" + std::to_string(inFlight)
                                        + " trial groups in flight of " + megabytes(e.perGroupBytes) + " each, plus "
                                        + megabytes(e.resultBytes) + " of results and inputs and "
                                        + megabytes(e.analysisBytes) + " for the comparisons after the trials), above "
                                        "the limit of " + megabytes(limit)
                                        + "; reduce d, tokens, queries, seeds or schemes"};
}

/// Returns the plan, nothing (cancelled while sizing inputs), or the reason the run is refused.
Result<std::optional<RunPlan>> planRun(const ExperimentSpec& spec, const ComputeBackend& backend, Progress* progress,
                                       const TrialFilter& filter)
{
    RunPlan plan;
    plan.grid = GridShape(spec);
    const GridShape& grid = plan.grid;
    const int points = static_cast<int>(grid.points);
    plan.pointSpecs.reserve(static_cast<std::size_t>(points));
    for (int p = 0; p < points; ++p)
        plan.pointSpecs.push_back(spec.pointSpec(p));

    const double limit = spec.memoryLimitMb > 0.0 ? spec.memoryLimitMb * 1e6 : 0.5 * physicalMemoryBytes();
    plan.all = !filter;
    if (!plan.all) {
        // From counts alone, before the chosen trials are listed: a shard of a 1e10-trial spec is
        // refused here instead of failing to allocate its list (16 bytes a chosen trial).
        MemoryEstimate bound = estimateMemory(spec, std::max(1, backend.concurrency()));
        const double share = std::clamp(filter.fraction, 0.0, 1.0);
        bound.resultBytes = bound.resultBytes * share + 16.0 * share * static_cast<double>(spec.trialCount());
        if (limit > 0.0 && bound.totalBytes() > limit)
            return overLimit(bound, bound.concurrency, limit);
        // The chosen slots in walk order and the draw groups they need: memory proportional to them.
        plan.chosenPerPoint.assign(static_cast<std::size_t>(points), 0);
        for (long long i = 0; i < grid.total(); ++i) {
            const TrialSlot t = grid.fromWalkIndex(i);
            if (!filter(t))
                continue;
            plan.chosen.push_back(i);
            plan.groups.push_back(static_cast<long long>(t.point) * grid.seeds + t.seedIndex);
            ++plan.chosenPerPoint[static_cast<std::size_t>(t.point)];
        }
        std::sort(plan.groups.begin(), plan.groups.end());
        plan.groups.erase(std::unique(plan.groups.begin(), plan.groups.end()), plan.groups.end());
    }
    plan.groupCount = plan.all ? grid.points * grid.seeds : static_cast<long long>(plan.groups.size());
    plan.total = plan.all ? spec.trialCount() : static_cast<long long>(plan.chosen.size());
    plan.threads = static_cast<int>(std::max<long long>(1, std::min<long long>(backend.concurrency(), plan.groupCount)));

    MemoryEstimate estimate = estimateMemory(spec, plan.threads);
    if (!plan.all) {
        // Only the chosen trials' results are kept.
        estimate.resultBytes = 0.0;
        for (int p = 0; p < points; ++p) {
            const ExperimentSpec& ps = plan.pointSpecs[static_cast<std::size_t>(p)];
            estimate.resultBytes += estimatePoint(ps, plan.threads).resultBytes
                                    * static_cast<double>(plan.chosenPerPoint[static_cast<std::size_t>(p)])
                                    / static_cast<double>(std::max<long long>(1, ps.trialCount()));
        }
    }
    // Imported inputs: resident for the whole run when they fit residentInputLimit(), else per point.
    plan.fixedRegime = findRegime(spec.regime);
    if (plan.fixedRegime && !plan.fixedRegime->seedIndependent())
        plan.fixedRegime = nullptr;
    double inputSum = 0.0, inputMax = 0.0;
    if (plan.fixedRegime)
        for (int p = 0; p < points; ++p) {
            if (progress && p % 256 == 255 && progress->cancelled())
                return std::optional<RunPlan>{};
            const ExperimentSpec& ps = plan.pointSpecs[static_cast<std::size_t>(p)];
            const double b = plan.fixedRegime->inputBytes(ps.regimeParams, DataShape{ps.d, ps.tokens, ps.queries,
                                                                                      ps.calibrationRows()});
            inputSum += b;
            inputMax = std::max(inputMax, b);
        }
    plan.resident = inputSum <= residentInputLimit();
    if (!plan.resident && plan.all) // estimateMemory counted every point's inputs as held for the run
        estimate.resultBytes += static_cast<double>(plan.threads) * inputMax - inputSum;
    if (limit > 0.0 && estimate.totalBytes() > limit)
        return overLimit(estimate, plan.threads, limit);
    return std::optional<RunPlan>(std::move(plan));
}

/// Draw (the inputs' side): a seed-independent regime's data, read once per grid point before any
/// trial runs and hashed (so every shard computes the same hash); held for the run when resident,
/// else read again per point while its trials run and checked against the first read's hash.
class PointInputs {
public:
    PointInputs(const ExperimentSpec& spec, const RunPlan& plan) : m_spec(spec), m_plan(plan) {}

    /// Reads every point; false when cancelled.
    Result<bool> readAll(Progress* progress)
    {
        const int points = static_cast<int>(m_plan.grid.points);
        pointDataHashes.assign(static_cast<std::size_t>(points), 0);
        pointScoredHashes.assign(static_cast<std::size_t>(points), 0);
        if (!m_plan.fixedRegime)
            return true;
        m_fixed.resize(static_cast<std::size_t>(points));
        dataHash = kFnvOffsetBasis;
        for (int p = 0; p < points; ++p) {
            if (progress && p % 16 == 15 && progress->cancelled())
                return false;
            auto data = read(p);
            if (!data)
                return data.error();
            dataHash = hashDataset(*data, dataHash);
            pointDataHashes[static_cast<std::size_t>(p)] = hashDataset(*data, kFnvOffsetBasis);
            pointScoredHashes[static_cast<std::size_t>(p)] = hashScored(*data);
            if (m_plan.resident && (m_plan.all || m_plan.chosenPerPoint[static_cast<std::size_t>(p)] > 0))
                m_fixed[static_cast<std::size_t>(p)] = std::make_shared<const Dataset>(std::move(data).value());
        }
        if (!m_plan.resident) {
            m_lazy = std::make_unique<LazyPoint[]>(static_cast<std::size_t>(points));
            for (int p = 0; p < points; ++p)
                m_lazy[static_cast<std::size_t>(p)].remainingGroups = m_plan.all ? m_plan.grid.seeds : 0;
            if (!m_plan.all)
                for (const long long g : m_plan.groups)
                    ++m_lazy[static_cast<std::size_t>(g / m_plan.grid.seeds)].remainingGroups;
        }
        io::faultPoint("inputs-read"); // tests replace the file here: the run must not see it
        return true;
    }

    /// The data of a point for a draw (null for drawn regimes): the resident copy, or read and checked.
    Result<std::shared_ptr<const Dataset>> acquire(int p)
    {
        if (!m_plan.fixedRegime)
            return std::shared_ptr<const Dataset>{};
        if (!m_lazy)
            return m_fixed[static_cast<std::size_t>(p)];
        LazyPoint& lp = m_lazy[static_cast<std::size_t>(p)];
        const std::lock_guard lock(lp.mutex);
        if (!lp.data) {
            auto data = read(p);
            if (!data)
                return data.error();
            if (hashDataset(*data, kFnvOffsetBasis) != pointDataHashes[static_cast<std::size_t>(p)])
                return Error{"regime.file", "the input of grid point " + std::to_string(p) + " (" + m_spec.pointLabel(p)
                                                + ") changed while the run read it; nothing of the changed file was "
                                                  "used; rerun on a file that stays put"};
            lp.data = std::make_shared<const Dataset>(std::move(data).value());
        }
        return lp.data;
    }

    /// A draw group of point p is done with its data.
    void release(int p)
    {
        if (!m_lazy)
            return;
        LazyPoint& lp = m_lazy[static_cast<std::size_t>(p)];
        const std::lock_guard lock(lp.mutex);
        if (--lp.remainingGroups <= 0)
            lp.data.reset();
    }

    std::uint64_t dataHash = 0;
    std::vector<std::uint64_t> pointDataHashes, pointScoredHashes;

private:
    Result<Dataset> read(int p) const
    {
        const ExperimentSpec& ps = m_plan.pointSpecs[static_cast<std::size_t>(p)];
        return m_plan.fixedRegime->generate(ps.regimeParams, DataShape{ps.d, ps.tokens, ps.queries, ps.calibrationRows()},
                                            ps.engine, ps.seed(0));
    }

    const ExperimentSpec& m_spec;
    const RunPlan& m_plan;
    std::vector<std::shared_ptr<const Dataset>> m_fixed;
    std::unique_ptr<LazyPoint[]> m_lazy;
};

/// What compute leaves for collect: the trials in their result positions.
struct Computed {
    std::vector<TrialResult> slots;
    std::vector<char> filled;
    long long done = 0, reused = 0;
    std::string regimeNote;
    std::optional<Error> failure;
};

/// Compute: worker threads take draw groups (point, seed) in GridShape's draw order; a group's data
/// set is drawn once, only when one of its trials is not in the cache, and its trials run in draw
/// order (budget, scheme). Results land at their walk positions.
class TrialWorkers {
public:
    TrialWorkers(const RunPlan& plan, PointInputs& inputs, ComputeBackend& backend, Progress* progress,
                 TrialCache* cache)
        : m_plan(plan), m_inputs(inputs), m_backend(backend), m_progress(progress), m_cache(cache),
          m_backendName(backend.name())
    {
        m_out.slots.resize(static_cast<std::size_t>(plan.total));
        m_out.filled.assign(static_cast<std::size_t>(plan.total), 0);
    }

    /// One worker: draw groups until none is left, the run is cancelled or a trial failed.
    void work()
    {
        try {
            for (;;) {
                const long long next = m_nextGroup.fetch_add(1);
                if (next >= m_plan.groupCount || isCancelled() || !runGroup(next))
                    return;
            }
        } catch (const std::exception& e) {
            fail(Error{"run", std::string("the run failed: ") + e.what()});
        }
    }

    Computed take() { return std::move(m_out); }

private:
    /// The trials of draw group `next`; false when the worker must stop.
    bool runGroup(long long next)
    {
        const GridShape& grid = m_plan.grid;
        const TrialSlot first = m_plan.group(next);
        const int point = first.point, seedIndex = first.seedIndex;
        const ExperimentSpec& pointSpec = m_plan.pointSpecs[static_cast<std::size_t>(point)];
        const long long firstDraw = grid.drawIndex(first);
        struct Released {
            PointInputs& inputs;
            int point;
            ~Released() { inputs.release(point); }
        } released{m_inputs, point};
        std::optional<TrialGroup> group; // drawn only when a trial of the group is not cached
        const std::uint64_t seedValue = pointSpec.seed(seedIndex);
        for (long long i = firstDraw; i < firstDraw + grid.budgets * grid.schemes; ++i) {
            const TrialSlot t = grid.fromDrawIndex(i);
            const long long to = m_plan.position(grid.walkIndex(t));
            if (to < 0)
                continue;
            if (isCancelled())
                return false;
            const int budget = pointSpec.budgets[static_cast<std::size_t>(t.budgetIndex)];
            const SchemeConfig& scheme = pointSpec.schemes[static_cast<std::size_t>(t.schemeIndex)];
            std::uint64_t cacheKey = 0;
            std::optional<TrialCache::Entry> hit;
            if (m_cache) {
                cacheKey = trialCacheKey(pointSpec, m_inputs.pointDataHashes[static_cast<std::size_t>(point)], scheme,
                                         budget, seedValue, m_backendName);
                hit = m_cache->find(cacheKey);
            }
            TrialResult trial;
            if (hit) {
                trial = std::move(hit->trial);
                trial.key = TrialKey{point, t.schemeIndex, budget, seedIndex, seedValue};
                if (point == 0 && seedIndex == 0)
                    setRegimeNote(hit->regimeNote);
            } else {
                if (!prepare(group, pointSpec, point, seedIndex))
                    return false;
                trial = runTrial(pointSpec, *group, t.schemeIndex, budget, m_backend);
                if (m_cache)
                    m_cache->insert(cacheKey, trial, group->data.note);
            }
            store(static_cast<std::size_t>(to), std::move(trial), hit.has_value());
        }
        return true;
    }

    /// Draws the group's data set (once); false when that failed.
    bool prepare(std::optional<TrialGroup>& group, const ExperimentSpec& pointSpec, int point, int seedIndex)
    {
        if (group)
            return true;
        auto fixed = m_inputs.acquire(point);
        Result<TrialGroup> prepared = fixed ? prepareTrialGroup(pointSpec, point, seedIndex, m_backend, fixed->get())
                                            : Result<TrialGroup>(fixed.error());
        if (!prepared) {
            fail(prepared.error());
            return false;
        }
        group = std::move(prepared).value();
        if (point == 0 && seedIndex == 0)
            setRegimeNote(group->data.note);
        return true;
    }

    /// A finished trial at its result position, counted and reported.
    void store(std::size_t at, TrialResult&& trial, bool reused)
    {
        const std::lock_guard lock(m_mutex);
        m_out.slots[at] = std::move(trial);
        m_out.filled[at] = 1;
        ++m_out.done;
        if (reused)
            ++m_out.reused;
        if (m_progress) {
            m_progress->trialFinished(m_out.slots[at]);
            m_progress->report(m_out.done, m_plan.total);
        }
    }

    void setRegimeNote(const std::string& note)
    {
        const std::lock_guard lock(m_mutex);
        m_out.regimeNote = note;
    }

    void fail(Error e)
    {
        const std::lock_guard lock(m_mutex);
        if (!m_out.failure)
            m_out.failure = std::move(e);
        m_stop.store(true);
    }

    bool isCancelled()
    {
        if (m_stop.load())
            return true;
        if (m_progress) {
            const std::lock_guard lock(m_mutex);
            if (m_progress->cancelled()) {
                m_stop.store(true);
                return true;
            }
        }
        return false;
    }

    const RunPlan& m_plan;
    PointInputs& m_inputs;
    ComputeBackend& m_backend;
    Progress* m_progress;
    TrialCache* m_cache;
    const std::string m_backendName;
    Computed m_out;
    std::mutex m_mutex; ///< guards progress calls, the counters, the note and the first failure
    std::atomic<long long> m_nextGroup{0};
    std::atomic<bool> m_stop{false};
};

Computed computeTrials(const RunPlan& plan, PointInputs& inputs, ComputeBackend& backend, Progress* progress,
                       TrialCache* cache)
{
    TrialWorkers workers(plan, inputs, backend, progress, cache);
    std::vector<std::thread> pool;
    for (int i = 1; i < plan.threads; ++i)
        pool.emplace_back([&workers] { workers.work(); });
    workers.work();
    for (auto& t : pool)
        t.join();
    return workers.take();
}

/// Collect: the finished trials in walk order, with what the run read and where it computed.
ResultSet collect(const ExperimentSpec& spec, const RunPlan& plan, PointInputs& inputs, Computed&& computed,
                  const ComputeBackend& backend)
{
    ResultSet result;
    result.spec = spec;
    result.schemes = spec.schemes;
    result.totalTrials = plan.total;
    result.backend = backend.name();
    result.regimeNote = computed.regimeNote;
    result.dataHash = inputs.dataHash;
    result.pointDataHashes = std::move(inputs.pointDataHashes);
    if (plan.fixedRegime)
        result.pointScoredHashes = std::move(inputs.pointScoredHashes);
    result.reusedTrials = computed.reused;
    result.cancelled = computed.done < plan.total;
    result.trials.reserve(static_cast<std::size_t>(computed.done));
    for (std::size_t i = 0; i < computed.slots.size(); ++i)
        if (computed.filled[i])
            result.trials.push_back(std::move(computed.slots[i]));
    return result;
}

} // namespace

Result<ResultSet> runExperiment(const ExperimentSpec& spec, ComputeBackend& backend, Progress* progress,
                                const TrialFilter& filter, TrialCache* cache)
{
    const auto start = std::chrono::steady_clock::now();
    retainFreedMemory();
    auto cancelledEarly = [&] {
        ResultSet cancelled;
        cancelled.spec = spec;
        cancelled.schemes = spec.schemes;
        cancelled.cancelled = true;
        return cancelled;
    };
    auto planned = planRun(spec, backend, progress, filter);
    if (!planned)
        return planned.error();
    if (!*planned)
        return cancelledEarly();
    const RunPlan& plan = **planned;
    PointInputs inputs(spec, plan);
    auto read = inputs.readAll(progress);
    if (!read)
        return read.error();
    if (!*read)
        return cancelledEarly();
    Computed computed = computeTrials(plan, inputs, backend, progress, cache);
    if (computed.failure)
        return *computed.failure;
    ResultSet result = collect(spec, plan, inputs, std::move(computed), backend);
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

