// SPDX-License-Identifier: GPL-3.0-or-later
// Experiment worker: a Progress adapter that snapshots finished trials and polls the generation counter.
#include "app/experiment_worker.h"

#include "app/backend_factory.h"
#include "app/validation_run.h"
#include "core/analysis/coverage.h"
#include "core/experiment/runner.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <vector>

namespace kvlens::app {

namespace {

/// Collects finished trials and emits throttled snapshots; cancelled once the window has
/// moved on to a newer request.
class WorkerProgress final : public Progress {
public:
    WorkerProgress(ExperimentWorker& worker, quint64 id, const ExperimentSpec& spec, const std::atomic<quint64>& generation)
        : m_worker(worker), m_id(id), m_spec(spec), m_generation(generation)
    {
    }

    bool cancelled() const override { return m_generation.load() != m_id; }

    void trialFinished(const TrialResult& trial) override { m_trials.push_back(trial); }

    void report(long long done, long long total) override
    {
        emit m_worker.progress(m_id, done, total);
        const auto now = std::chrono::steady_clock::now();
        // A snapshot copies the finished trials and rebuilds the figure data (O(trials)), inside the
        // runner's progress lock; waiting at least twice as long as the last one took keeps that
        // under a third of the run however many trials there are (200 ms apart at the least).
        const auto interval = std::max<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(ExperimentWorker::kSnapshotIntervalMs), 2 * m_lastSnapshotCost);
        if (done < total && now - m_lastSnapshot < interval)
            return;
        m_lastSnapshot = now;
        if (done == total || cancelled())
            return; // the final data follows
        auto snapshot = std::make_shared<ResultSet>();
        snapshot->spec = m_spec;
        snapshot->schemes = m_spec.schemes;
        snapshot->trials = m_trials;
        snapshot->totalTrials = total;
        emit m_worker.partial(m_id, widgets::makeViewData(std::move(snapshot), false));
        m_lastSnapshotCost = std::chrono::steady_clock::now() - now;
    }

private:
    ExperimentWorker& m_worker;
    quint64 m_id;
    const ExperimentSpec& m_spec;
    const std::atomic<quint64>& m_generation;
    std::vector<TrialResult> m_trials;
    std::chrono::steady_clock::time_point m_lastSnapshot = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration m_lastSnapshotCost{};
};

} // namespace

void registerWorkerTypes()
{
    qRegisterMetaType<kvlens::ExperimentSpec>("kvlens::ExperimentSpec");
    qRegisterMetaType<kvlens::widgets::ViewData>("kvlens::widgets::ViewData");
    qRegisterMetaType<kvlens::widgets::ValidationData>("kvlens::widgets::ValidationData");
}

ExperimentWorker::ExperimentWorker(std::shared_ptr<const std::atomic<quint64>> generation, QObject* parent)
    : QObject(parent), m_generation(std::move(generation))
{
}

double ExperimentWorker::defaultCacheMb()
{
    const double physical = physicalMemoryBytes();
    return physical > 0.0 ? std::min(1024.0, physical / 8.0 / 1e6) : 256.0;
}

void ExperimentWorker::run(quint64 id, const kvlens::ExperimentSpec& spec)
{
    if (m_generation->load() != id)
        return; // superseded before it started
    BackendChoice& backend = m_backends.get(spec);
    // "auto" says it chose (the measurement is in the tooltip's place: stderr, once per session).
    emit started(id, QString::fromStdString(backend.note.empty() ? backend.label : backend.label + " (auto)"),
                 spec.trialCount());
    if (!backend.note.empty() && backend.note != m_reportedAuto) {
        std::cerr << "kvlens: " << backend.note << std::endl;
        m_reportedAuto = backend.note;
    }
    WorkerProgress progress(*this, id, spec, *m_generation);
    const auto start = std::chrono::steady_clock::now();
    Result<ResultSet> result = runExperiment(spec, *backend.backend, &progress, {}, &m_cache);
    emit cacheChanged(id, m_cache.bytes() / 1e6, m_cache.limitMb(), static_cast<qint64>(m_cache.size()));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!result) {
        emit finished(id, widgets::ViewData{}, QString::fromStdString(result.error().text()), false, ms);
        return;
    }
    result->backend = backend.label;
    if (!backend.warning.empty()) {
        // Exports carry the spec as run: "cpu (fallback: <reason>)".
        result->spec.backend = BackendKind::Cpu;
        result->spec.fallback = backend.warning;
        if (spec.backend == BackendKind::OpenCl && backend.warning != m_reportedFallback) {
            std::cerr << "kvlens: OpenCL unavailable, running on the CPU backend: " << backend.warning << std::endl;
            m_reportedFallback = backend.warning;
        }
    }
    const bool cancelled = result->cancelled;
    long long leftOut = 0;
    if (cancelled) {
        // A cancelled run is drawn (and exported) on the seeds every scheme finished at each
        // (point, budget): no figure compares schemes on different draws. The other finished
        // trials stay in the trial cache, so a rerun does not compute them again.
        ResultSet kept = sharedSeedTrials(*result);
        leftOut = static_cast<long long>(result->trials.size() - kept.trials.size());
        *result = std::move(kept);
    }
    const bool complete = static_cast<long long>(result->trials.size()) == result->totalTrials;
    auto shared = std::make_shared<const ResultSet>(std::move(result).value());
    // The comparison table needs the whole run; a cancelled run shows what finished without it.
    // A newer request stops the comparisons too: its result would be dropped anyway.
    const CancelToken superseded([generation = m_generation, id] { return generation->load() != id; });
    widgets::ViewData data;
    try {
        data = widgets::makeViewData(std::move(shared), complete, superseded);
        data.leftOut = leftOut;
    } catch (const Cancelled&) {
        return;
    } catch (const std::exception& e) { // bad_alloc in the analyses: say so, never terminate
        emit finished(id, widgets::ViewData{}, QStringLiteral("the analysis of the results failed: %1").arg(e.what()),
                      false, ms);
        return;
    }
    emit finished(id, data, QString(), cancelled, ms);
}

void ExperimentWorker::validate(quint64 id, const kvlens::ExperimentSpec& spec)
{
    if (m_generation->load() != id)
        return;
    // Three plain runs; progress is reported over all of them.
    class Relay final : public Progress {
    public:
        Relay(ExperimentWorker& w, quint64 id, const std::atomic<quint64>& generation, long long offset, long long total)
            : m_worker(w), m_id(id), m_generation(generation), m_offset(offset), m_total(total)
        {
        }
        bool cancelled() const override { return m_generation.load() != m_id; }
        void report(long long done, long long) override { emit m_worker.progress(m_id, m_offset + done, m_total); }

    private:
        ExperimentWorker& m_worker;
        quint64 m_id;
        const std::atomic<quint64>& m_generation;
        long long m_offset, m_total;
    };
    const long long each = spec.trialCount();
    emit started(id, QStringLiteral("validation"), 3 * each);
    std::optional<Relay> relay;
    ValidationRun run = runValidationSet(spec, {}, m_backends, 0, [&](int index, const std::string&) -> Progress* {
        relay.emplace(*this, id, *m_generation, index * each, 3 * each);
        return &*relay;
    });
    if (run.cancelled || m_generation->load() != id) {
        emit validationFinished(id, widgets::ValidationData{}, QStringLiteral("cancelled"));
        return;
    }
    if (run.failure) {
        emit validationFinished(id, widgets::ValidationData{}, QString::fromStdString(run.failure->text()));
        return;
    }
    auto report = std::make_shared<stats::ValidationReport>(std::move(run.report));
    widgets::ValidationData data;
    data.reference = std::make_shared<const ResultSet>(std::move(*run.reference));
    data.report = std::move(report);
    emit validationFinished(id, data, QString());
}

} // namespace kvlens::app
