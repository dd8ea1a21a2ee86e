// SPDX-License-Identifier: GPL-3.0-or-later
// run(spec, backend, progress): walks the trials in parallel groups, reports progress, stops on cancel.
#pragma once

#include "core/common/cancel.h"
#include "core/common/result.h"
#include "core/experiment/backend.h"
#include "core/spec/grid.h"
#include "core/spec/result.h"

#include <atomic>
#include <cstdint>
#include <functional>

namespace kvlens {

class TrialCache;

/// How a run talks back: plain C++, so core stays free of Qt. The runner serializes calls
/// (never two at once), but they come from worker threads.
class Progress {
public:
    virtual ~Progress() = default;
    /// After each trial: `done` of `total` trials finished.
    virtual void report(long long done, long long total) { (void)done; (void)total; }
    /// Polled before each trial; true stops the run (trials already started finish).
    virtual bool cancelled() const { return false; }
    /// Each finished trial, for progressive display.
    virtual void trialFinished(const TrialResult& trial) { (void)trial; }
};

/// Estimated peak memory of a run (bytes), from the sizes alone, before anything is allocated.
struct MemoryEstimate {
    double perGroupBytes = 0.0;  ///< data, exact attention and one trial's working buffers
    double resultBytes = 0.0;    ///< everything kept in the ResultSet
    /// The analyses after the trials: the comparison table's rows, and each analysis worker's largest
    /// row (both schemes' per-query KL over every seed with the bootstrap, rank and KS copies of it,
    /// and the energy test's distance matrix of at most kMaxEnergyPoints points a cloud).
    double analysisBytes = 0.0;
    int concurrency = 1;
    double totalBytes() const { return perGroupBytes * concurrency + resultBytes + analysisBytes; }
};
MemoryEstimate estimateMemory(const ExperimentSpec& spec, int concurrency);

/// Physical memory of this machine in bytes (0 if unknown).
double physicalMemoryBytes();

/// Chooses the trials a run computes (a shard of a sweep); empty: every trial. `fraction` is an
/// upper bound on the share of the spec's trials it accepts, so the runner can check the memory
/// a run needs from counts before it lists the chosen trials.
struct TrialFilter {
    TrialFilter() = default;
    template <class F>
    TrialFilter(F f, double acceptedFraction = 1.0) : accept(std::move(f)), fraction(acceptedFraction)
    {
    }
    std::function<bool(const TrialSlot&)> accept;
    double fraction = 1.0;

    explicit operator bool() const { return static_cast<bool>(accept); }
    bool operator()(const TrialSlot& slot) const { return accept(slot); }
};

/// Runs every trial of a normalized spec on `backend` (design section 7). Deterministic: the
/// same spec gives the same results whatever the thread count, and a trial's result does not
/// depend on which other trials run. Refuses, before allocating, a run whose estimate exceeds
/// spec.memoryLimitMb (default: half of physical memory).
/// With a `filter`, only the chosen trials run (each (point, seed) draw is made once, and only
/// where a chosen trial needs it); the ResultSet then holds those trials in walk order,
/// totalTrials counts the chosen trials, and regimeNote is set only when the first draw
/// (point 0, seed slot 0) was made.
/// A seed-independent regime (imported) is read once per grid point before any trial runs, so a
/// file replaced during the run cannot reach part of it; ResultSet::dataHash then hashes what was
/// read, the same for every shard of the spec. When the inputs of all points together exceed
/// residentInputLimit() (a whole model's dump), each point is hashed up front but kept only while
/// its trials run: it is read again when its first draw starts and the run fails, naming the
/// point, if that read's hash differs from the first (the file changed under the run).
/// With a `cache`, a trial whose trialCacheKey is stored there is taken from it instead of being
/// computed (a (point, seed) draw is made only if one of its trials is missing), and every
/// computed trial is stored; ResultSet::reusedTrials counts the hits. Results are the same.
/// Imported inputs up to this many bytes (summed over grid points) stay in memory for the whole
/// run; above it they are read per point as described above. Default 512 MB.
double residentInputLimit();
void setResidentInputLimit(double bytes);

Result<ResultSet> runExperiment(const ExperimentSpec& spec, ComputeBackend& backend, Progress* progress = nullptr,
                                const TrialFilter& filter = {}, TrialCache* cache = nullptr);

/// For a run over files (a seed-independent regime): reads every grid point again, as the run did,
/// and checks its hash against results.pointDataHashes; returns each point's pointScoredHashes
/// value (K, V, Q alone), which a rerun of the same cells with other schemes must reproduce.
/// An error names the first point whose file changed since the run read it (or a read failure).
/// Empty for runs that read no file. Polls `cancel` per point.
Result<std::vector<std::uint64_t>> verifyPointData(const ResultSet& results, const CancelToken& cancel = {});

} // namespace kvlens
