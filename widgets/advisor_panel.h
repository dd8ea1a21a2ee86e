// SPDX-License-Identifier: GPL-3.0-or-later
// The bit-allocation advisor in the window: beside the Model map, a target average width, the
// objective, the per-layer K/V widths, the Pareto front with the advice and the uniform splits on
// it, and a verdict in one line.
#pragma once

#include "core/analysis/model_lens.h"
#include "core/spec/result.h"
#include "widgets/background_job.h"

#include <QElapsedTimer>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QComboBox;
class QPushButton;
class QTimer;
class QLabel;
class QSlider;
class QTableWidget;
class QCustomPlot;

namespace kvlens::widgets {

/// What the panel computes off the GUI thread for one (run, objective): the curves and the front.
struct AdvisorCurves {
    QString error; ///< the advisor's refusal (a layer without finite curves; no K-only / V-only)
    std::vector<LayerCurves> curves;
    std::vector<BitAllocation> front;
};

/// The advice measured end to end (kvlens eval of claims::adviceCheckSpec: the advice, the best
/// uniform split, TQ-KV at n = 2 and 3, llama.cpp's K/V pairs), computed off the GUI thread.
struct AdviceMeasurement {
    QString error;
    bool cancelled = false;
    BitAllocation advice;            ///< the advice that was measured
    std::optional<BitAllocation> uniform;
    QString source;                  ///< "MODEL on TEXT"
    int chunks = 0;
    struct Row {
        QString name;
        double bits = 0.0;                       ///< mean of K and V bits per coordinate
        double kld = 0.0, low = 0.0, high = 0.0; ///< mean KLD and its 95% interval over chunks
    };
    std::vector<Row> rows;           ///< every configuration, in the spec's order
    int adviceRow = -1, uniformRow = -1;
    /// The best uniform split's mean KLD over the advice's, paired by chunk (NaN without a uniform split).
    double ratio = 0.0, ratioLow = 0.0, ratioHigh = 0.0;
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

    /// The model folder and text the measured check runs on (the Output tab's); empty disables it.
    void setModelSource(const QString& modelDir, const QString& textFile);
    /// Runs the current advice end to end (chunks 0: every chunk of the text); progress, ETA and
    /// cancel on the panel. A new advice or run discards the measurement.
    void measure(int chunks = 0);
    void cancelMeasurement();
    bool measuring() const { return m_measuring; }
    /// Waits (in an event loop) until no measurement is running.
    bool waitUntilMeasured(int timeoutMs);
    const std::optional<AdviceMeasurement>& measurement() const { return m_measurement; }
    /// The measured line under the verdict (empty before a measurement).
    QString measuredText() const;
    /// Every measured configuration, one per line (the measured line's tooltip).
    QString measuredDetails() const;
    QPushButton* measureButton() const { return m_measureButton; }

signals:
    void adviceChanged();
    /// A measurement ended: measured, failed or cancelled.
    void measurementFinished();

private:
    void compute();
    void accept(const AdvisorCurves& outcome);
    void updateAdvice();
    void drawFront();
    void acceptMeasurement(const AdviceMeasurement& m);
    void pollMeasurement(const JobProgress& progress);
    void discardMeasurement();
    void updateMeasureButton();

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
    BackgroundJob<AdvisorCurves> m_jobs{this};

    QPushButton* m_measureButton = nullptr;
    QLabel* m_measured = nullptr;
    QString m_modelDir, m_textFile;
    BackgroundJob<AdviceMeasurement> m_measureJobs{this};
    bool m_measuring = false;
    std::optional<AdviceMeasurement> m_measurement;
    std::optional<BitAllocation> m_measuredAdvice; ///< the advice being measured or measured
    QElapsedTimer m_measureClock;
    QString m_measureStatus; ///< progress, "cancelled", or an error while no measurement is shown
};

} // namespace kvlens::widgets
