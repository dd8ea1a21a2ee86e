// SPDX-License-Identifier: GPL-3.0-or-later
// One stream of background jobs of which only the newest matters: the window's runs, the
// teaching tab's computations (and the coming model map). Starting a job cancels the older
// ones; a result is recognised as stale by its id. Used on one (the GUI) thread; the cancel
// state it hands out is read from any thread.
#pragma once

#include <QtGlobal>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace kvlens::widgets {

class JobTracker {
public:
    /// Starts a job and returns its id; every older job is cancelled from now on.
    quint64 start()
    {
        m_flag->store(true);
        m_flag = std::make_shared<std::atomic<bool>>(false);
        m_newest = m_generation->fetch_add(1) + 1;
        return m_newest;
    }
    /// Cancels the newest job too (its result, if one still comes, is the newest's: newest() is unchanged).
    void cancel()
    {
        m_flag->store(true);
        m_generation->fetch_add(1);
    }
    /// The newest job started (it may have been cancelled since).
    quint64 newest() const { return m_newest; }
    /// True for the newest job's id: results of any other are stale.
    bool isNewest(quint64 id) const { return id == m_newest; }
    /// Takes the newest job's result once: false for a stale or an already taken one.
    bool accept(quint64 id)
    {
        if (id != m_newest || id <= m_accepted)
            return false;
        m_accepted = id;
        return true;
    }
    /// True when the newest job's result was taken (or no job was started).
    bool settled() const { return m_accepted == m_newest; }
    /// The counter a worker compares its job id with: the job is cancelled once they differ.
    std::shared_ptr<const std::atomic<quint64>> generation() const { return m_generation; }
    /// The newest job's cancel flag, for code that polls a bool (set when the job is superseded or cancelled).
    std::shared_ptr<const std::atomic<bool>> cancelFlag() const { return m_flag; }

private:
    std::shared_ptr<std::atomic<quint64>> m_generation = std::make_shared<std::atomic<quint64>>(0);
    std::shared_ptr<std::atomic<bool>> m_flag = std::make_shared<std::atomic<bool>>(false);
    quint64 m_newest = 0;
    quint64 m_accepted = 0;
};

/// What a background job has done so far: its worker writes (set, setStage) from any thread, and
/// a timer on the GUI thread reads a snapshot, so the worker never touches a widget.
class JobProgress {
public:
    struct Snapshot {
        double done = 0.0, total = 0.0; ///< work units (total 0: not known yet)
        std::string stage;
    };
    /// The signature of eval::EvalCallbacks::progress.
    void set(double done, double total, const std::string& stage)
    {
        std::lock_guard lock(m_mutex);
        m_snapshot = Snapshot{done, total, stage};
    }
    void setStage(const std::string& stage)
    {
        std::lock_guard lock(m_mutex);
        m_snapshot.stage = stage;
    }
    Snapshot snapshot() const
    {
        std::lock_guard lock(m_mutex);
        return m_snapshot;
    }

protected:
    mutable std::mutex m_mutex;

private:
    Snapshot m_snapshot;
};

} // namespace kvlens::widgets
