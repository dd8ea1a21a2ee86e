// SPDX-License-Identifier: GPL-3.0-or-later
// One stream of background computations of which only the newest matters: the work runs on the
// global thread pool, its result comes back on the owner's (GUI) thread and is dropped when a newer
// job has started. The one QFutureWatcher of the widgets: every view's job goes through it.
#pragma once

#include "widgets/job_tracker.h"

#include <QEventLoop>
#include <QFutureWatcher>
#include <QObject>
#include <QPointer>
#include <QTimer>
#include <QtConcurrent/QtConcurrentRun>

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

namespace kvlens::widgets {

/// What a job's work sees (on its pool thread): its id, whether it has been cancelled or
/// superseded (poll it between units of work), and where it reports its progress for the GUI.
template <typename Progress = JobProgress>
struct JobContext {
    quint64 id = 0;
    std::shared_ptr<const std::atomic<bool>> cancelFlag;
    std::shared_ptr<Progress> progress;

    bool cancelled() const { return cancelFlag && cancelFlag->load(); }
};

/// A stream of background jobs returning `T` (default-constructible, copyable: QFuture's rules),
/// reporting progress into a `Progress` (JobProgress or a subclass). Used on the owner's thread:
///
///     BackgroundJob<Rows> m_judge{this};
///     m_judge.start([map](const auto& job) { return computeRows(*map, job.cancelled); },
///                   [this](Rows rows) { m_rows = std::move(rows); redraw(); });
///
/// start() cancels the running job (its flag is set; its result, when it comes, is dropped), so a
/// `done` only ever sees the newest job's result, once. The job's inputs must be captured by value:
/// the work may outlive the owner (its result is then dropped with the owner).
template <typename T, typename Progress = JobProgress>
class BackgroundJob {
public:
    using Context = JobContext<Progress>;

    /// Results are delivered on `owner`'s thread while `owner` lives.
    explicit BackgroundJob(QObject* owner) : m_owner(owner) {}
    ~BackgroundJob() { m_jobs.cancel(); } // the running work owns copies of its inputs; the flag stops it early
    BackgroundJob(const BackgroundJob&) = delete;
    BackgroundJob& operator=(const BackgroundJob&) = delete;

    /// Starts `work(const Context&) -> T` on the global thread pool, cancelling any older job; when it
    /// finishes and is still the newest, `done(T)` runs on the owner's thread. Returns the job's id.
    template <typename Work, typename Done>
    quint64 start(Work work, Done done)
    {
        const quint64 id = m_jobs.start();
        auto progress = std::make_shared<Progress>();
        m_progress = progress;
        const Context context{id, m_jobs.cancelFlag(), progress};
        auto* watcher = new QFutureWatcher<T>(m_owner);
        m_watcher = watcher;
        QObject::connect(watcher, &QFutureWatcherBase::finished, m_owner, [this, watcher, id, done] {
            if (m_watcher == watcher) {
                m_watcher = nullptr;
                stopPolling();
            }
            watcher->deleteLater();
            if (m_jobs.accept(id))
                done(watcher->result());
        });
        watcher->setFuture(QtConcurrent::run([work, context]() -> T { return work(context); }));
        if (m_pollHandler)
            m_poll->start();
        return id;
    }

    /// A result got without a job (computed at once, taken from a cache) replaces whatever runs: the
    /// running job is cancelled and its result will be dropped. Returns the id it counts as.
    quint64 supersede()
    {
        const quint64 id = m_jobs.start();
        m_jobs.accept(id);
        m_watcher = nullptr;
        stopPolling();
        return id;
    }

    /// Cancels the newest job too (its flag is set; its result, if one still comes, is delivered).
    void cancel() { m_jobs.cancel(); }
    /// True when the newest job's result has been delivered (or superseded, or none was started).
    bool settled() const { return m_jobs.settled(); }
    /// True while a started job's result is still to come.
    bool running() const { return m_watcher && !m_jobs.settled(); }
    /// The newest job's id (0 before the first).
    quint64 newest() const { return m_jobs.newest(); }
    /// What the newest job has reported so far (null before the first).
    std::shared_ptr<Progress> progress() const { return m_progress; }

    /// While a job runs, calls `handler(progress)` on the owner's thread every `intervalMs` (the
    /// worker writes its Progress, the GUI reads it: the worker never touches a widget).
    void onProgress(int intervalMs, std::function<void(Progress&)> handler)
    {
        m_pollHandler = std::move(handler);
        if (!m_poll) {
            m_poll = new QTimer(m_owner);
            QObject::connect(m_poll, &QTimer::timeout, m_owner, [this] {
                if (m_pollHandler && m_progress)
                    m_pollHandler(*m_progress);
            });
        }
        m_poll->setInterval(intervalMs);
    }

    /// Sleeps in an event loop until the newest job's result has been delivered, at most `timeoutMs`
    /// (no polling); true when it has. False at once when no job is running and none was delivered.
    bool wait(int timeoutMs)
    {
        if (m_jobs.settled())
            return true;
        QPointer<QFutureWatcher<T>> watcher = m_watcher;
        if (!watcher)
            return false;
        QEventLoop loop;
        QTimer timeout;
        timeout.setSingleShot(true);
        QObject::connect(watcher, &QFutureWatcherBase::finished, &loop, &QEventLoop::quit, Qt::QueuedConnection);
        QObject::connect(&timeout, &QTimer::timeout, &loop, &QEventLoop::quit);
        timeout.start(timeoutMs);
        loop.exec(QEventLoop::ExcludeUserInputEvents);
        return m_jobs.settled();
    }

private:
    void stopPolling()
    {
        if (m_poll)
            m_poll->stop();
    }

    QObject* m_owner;
    JobTracker m_jobs;
    QFutureWatcher<T>* m_watcher = nullptr; ///< watches the newest job while it runs
    std::shared_ptr<Progress> m_progress;
    QTimer* m_poll = nullptr;
    std::function<void(Progress&)> m_pollHandler;
};

} // namespace kvlens::widgets
