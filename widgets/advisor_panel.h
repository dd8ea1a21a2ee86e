// SPDX-License-Identifier: GPL-3.0-or-later
// The bit-allocation advisor in the window: beside the Model map, a target average width, the
// objective, the per-layer K/V widths, the Pareto front with the advice and the uniform splits on
// it, and a verdict in one line.
#pragma once

#include "core/analysis/model_lens.h"
#include "core/spec/result.h"
#include "widgets/job_tracker.h"

#include <QFutureWatcher>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QComboBox;
class QLabel;
class QSlider;
class QTableWidget;
class QCustomPlot;

namespace kvlens::widgets {

/// What the panel computes off the GUI thread for one (run, objective): the curves and the front.
struct AdvisorCurves {
    quint64 request = 0;
    QString error; ///< the advisor's refusal (a layer without finite curves; no K-only / V-only)
    std::vector<LayerCurves> curves;
    std::vector<BitAllocation> front;
};

class AdvisorPanel final : public QWidget {
    Q_OBJECT
public:
    explicit AdvisorPanel(QWidget* parent = nullptr);
    ~AdvisorPanel() override;

    /// A model run's results (with K-only and V-only at several budgets); null clears.
    void setResults(std::shared_ptr<const ResultSet> results);
    /// The target average bits per coordinate (snapped to the slider's 0.05 steps).
    void setTarget(double bits);
    double target() const;
    /// The slider's range: the front's cheapest and dearest allocations.
    double minimumTarget() const;
    double maximumTarget() const;
    void setObjective(AdvisorStatistic statistic, AdvisorLoss loss);

    /// Waits (in an event loop) until the curves of the current run and objective are computed.
    bool waitUntilComputed(int timeoutMs);
    const std::vector<BitAllocation>& front() const { return m_front; }
    const std::vector<LayerCurves>& curves() const { return m_curves; }
    /// The advice at the target (the least predicted loss within it), and the best uniform split.
    const std::optional<BitAllocation>& advice() const { return m_advice; }
    const std::optional<BitAllocation>& uniform() const { return m_uniform; }
    QString verdictText() const;
    QTableWidget* table() const { return m_table; }
    QCustomPlot* plot() const { return m_plot; }

signals:
    void adviceChanged();

private:
    void compute();
    void accept(const AdvisorCurves& outcome);
    void updateAdvice();
    void drawFront();

    QComboBox* m_statistic = nullptr;
    QComboBox* m_loss = nullptr;
    QSlider* m_slider = nullptr;
    QLabel* m_targetLabel = nullptr;
    QLabel* m_verdict = nullptr;
    QTableWidget* m_table = nullptr;
    QCustomPlot* m_plot = nullptr;

    std::shared_ptr<const ResultSet> m_results;
    std::vector<LayerCurves> m_curves;
    std::vector<BitAllocation> m_front;
    std::optional<BitAllocation> m_advice, m_uniform;
    QString m_error;
    JobTracker m_jobs;
    QFutureWatcher<AdvisorCurves>* m_watcher = nullptr;
};

} // namespace kvlens::widgets
