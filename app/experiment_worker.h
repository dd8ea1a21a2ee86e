// SPDX-License-Identifier: GPL-3.0-or-later
// Runs experiments on a worker thread; results cross to the GUI as immutable snapshots through queued signals.
#pragma once

#include "app/backend_factory.h"
#include "core/experiment/trial_cache.h"
#include "core/spec/spec.h"
#include "widgets/validation_view.h"
#include "widgets/view_data.h"

#include <QObject>
#include <QString>

#include <atomic>
#include <memory>
#include <string>

Q_DECLARE_METATYPE(kvlens::ExperimentSpec)

namespace kvlens::app {

/// Lives on a QThread owned by the main window. A request carries an id; the window bumps a
/// shared generation counter to cancel, so a newer request stops the older run within one
/// trial and stale results are recognised by their id.
class ExperimentWorker : public QObject {
    Q_OBJECT
public:
    explicit ExperimentWorker(std::shared_ptr<const std::atomic<quint64>> generation, QObject* parent = nullptr);

    /// Minimum time between partial snapshots, in milliseconds.
    static constexpr int kSnapshotIntervalMs = 200;

    /// The backends runs have used, kept for the worker's (the window's) lifetime. Touch it on
    /// the worker's thread, or from another while no request is in flight (tests).
    const BackendPool& backends() const { return m_backends; }
    /// Finished trials of this session's runs (thread-safe): an edit computes only new trials.
    TrialCache& trialCache() { return m_cache; }
    /// The cache's default size: an eighth of physical memory, at most 1 GB.
    static double defaultCacheMb();

public slots:
    /// Runs `spec` (already normalized) unless `id` is already stale.
    void run(quint64 id, const kvlens::ExperimentSpec& spec);
    /// Paper B's validation of `spec`: CPU reference, OpenCL with the same RNG, CPU with the
    /// other RNG, then the KS comparison (three runs, cancellable like run()).
    void validate(quint64 id, const kvlens::ExperimentSpec& spec);

signals:
    void started(quint64 id, const QString& backend, qint64 totalTrials);
    void progress(quint64 id, qint64 done, qint64 total);
    /// A snapshot of the finished trials (no comparisons yet).
    void partial(quint64 id, const kvlens::widgets::ViewData& data);
    /// The final data (with comparisons), or an error; `cancelled` when the run was stopped.
    void finished(quint64 id, const kvlens::widgets::ViewData& data, const QString& error, bool cancelled,
                  double elapsedMs);
    /// A validation's report, or an error ("cancelled" when superseded).
    void validationFinished(quint64 id, const kvlens::widgets::ValidationData& data, const QString& error);
    /// After each run, before finished(): the trial cache's use and limit.
    void cacheChanged(quint64 id, double usedMb, double limitMb, qint64 entries);

private:
    std::shared_ptr<const std::atomic<quint64>> m_generation;
    std::string m_reportedAuto;     ///< the last "auto" choice told on stderr
    std::string m_reportedFallback; ///< the last OpenCL fallback reason told on stderr (once per reason)
    BackendPool m_backends;         ///< one backend per kind and device: edits rerun without reopening OpenCL
    TrialCache m_cache{defaultCacheMb()};
};

/// Registers the metatypes the worker's queued signals carry (call once before connecting).
void registerWorkerTypes();

} // namespace kvlens::app
