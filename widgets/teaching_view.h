// SPDX-License-Identifier: GPL-3.0-or-later
// Teaching view: the K-V asymmetry on one query, score noise -> softmax -> KL -> output, revealed a stage at a time.
#pragma once

#include "core/metrics/teaching.h"
#include "widgets/figures/teaching_figure.h"
#include "widgets/background_job.h"
#include "widgets/result_view.h"

#include <QStringList>
#include <QTimer>

#include <atomic>
#include <memory>

class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;
class QTableWidget;

namespace kvlens::widgets {

/// What a background computation hands back (default-constructible, as QFuture wants).
struct TeachingOutcome {
    std::shared_ptr<const TeachingResult> result;
    QString error;
};

/// One query under KQV and QKQV: histograms of the score error ds_j with their variances, the
/// top tokens' weights p against p^, Jensen's exp(sigma^2/2) against the measured mean weight
/// inflation, KL(p||p^), the output error of each scheme, and a value-path panel (the same noise
/// on values averages out like 1/sqrt(N_eff); the attention mass that noise on keys moves does
/// not). Sliders set the budget n and the score scale; Back/Next reveal the chain one stage at a
/// time with a two-sentence caption. The numbers come from core/metrics/teaching on a thread-pool
/// thread (QtConcurrent); a newer request cancels the older one and stale results are dropped.
/// The view draws its own data (gaussian keys by default), not the experiment's result set.
class TeachingView final : public ResultView {
    Q_OBJECT
public:
    /// The chain's stages, in the order Next reveals them.
    enum Stage { ScoreNoise = 0, Softmax, Kl, Output, StageCount };
    /// The figure's panels.
    enum Panel { ScoreHistogram = 0, TopWeights, Jensen, KlPanel, OutputPanel, ValuePath, PanelCount };

    explicit TeachingView(QWidget* parent = nullptr);
    ~TeachingView() override;

    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "teaching";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Teaching"); }
    QString viewDescription() const override;
    QString emptyText() const override;
    /// Every number of the current result (histograms, weights, sweep), one per row.
    QString dataCsv() const override;
    /// Finishes a pending (or debounced) computation and draws it.
    bool waitUntilDrawn(int timeoutMs = 30000) override;

    int stage() const { return m_stage; }
    /// Shows stages 0..stage (clamped).
    void setStage(int stage);
    /// The current stage's two-sentence caption.
    QString caption() const;
    /// The caption of every stage, in order.
    static QStringList stageCaptions();
    /// Stage at which a panel is revealed.
    static int panelStage(Panel panel);
    /// Data points drawn in a panel (0 while the panel is not yet revealed).
    int panelPointCount(Panel panel) const;
    /// The axis rect of a panel (present at every stage; empty until revealed).
    QCPAxisRect* panelRect(Panel panel) const;

    QSlider* budgetSlider() const { return m_budget; }
    QSlider* scaleSlider() const { return m_scale; }
    QPushButton* nextButton() const { return m_next; }
    QPushButton* backButton() const { return m_back; }
    QComboBox* stageBox() const { return m_stageBox; }
    QTableWidget* metricsTable() const { return m_table; }
    /// The configuration the sliders describe (on the run's data law after setRunConfig).
    TeachingConfig config() const;
    /// Draws `base` (a run's regime, d, N, scheme pair, engine; teachingConfigForRun) from now
    /// on: the budget and seed sliders move to its budget and seed (a seed beyond 2^31 − 1 is clamped), the score-scale slider to the
    /// nearest step, and the base's own scale is kept until that slider is moved. Recomputes.
    void setRunConfig(const TeachingConfig& base);
    /// The result drawn (null before the first one arrives).
    std::shared_ptr<const TeachingResult> result() const { return m_result; }
    /// Why the last computation failed (empty when it did not).
    QString error() const { return m_error; }
    /// True while a computation is pending or running.
    bool isComputing() const;
    /// Requests issued so far (each slider move after the debounce is one).
    quint64 requestCount() const { return m_jobs.newest(); }

    /// Score scale of a slider position (0.25 steps from 0.25 to 4).
    static double scaleAt(int position) { return 0.25 * position; }

    /// Below this export width the six panels re-flow into two columns of three rows.
    static constexpr double kWidePrintInches = kTeachingWidePrintInches;
    void beginPrint(double widthInches) override;
    void endPrint() override;
    double printAspect(double widthInches) const override;

signals:
    /// A result was drawn (emitted once per accepted request).
    void computed(quint64 request);

protected:
    void redraw() override;

private:
    void scheduleCompute();
    void startCompute();
    void accept(const TeachingOutcome& outcome);
    void updateLabels();
    void fillTable();

    QSlider* m_budget = nullptr;
    QSlider* m_scale = nullptr;
    QLabel* m_budgetLabel = nullptr;
    QLabel* m_scaleLabel = nullptr;
    QSpinBox* m_seed = nullptr;
    QPushButton* m_back = nullptr;
    QPushButton* m_next = nullptr;
    QComboBox* m_stageBox = nullptr;
    QLabel* m_caption = nullptr;
    QLabel* m_status = nullptr;
    QTableWidget* m_table = nullptr;
    QTimer m_debounce;

    int m_stage = ScoreNoise;
    double m_printInches = 0.0; ///< the export width while exporting, 0 live
    TeachingConfig m_base;       ///< what the sliders do not set
    int m_baseScalePosition = -1; ///< the scale slider's position when m_base's scale was set
    BackgroundJob<TeachingOutcome> m_jobs{this}; ///< the newest request, its cancel flag, the result drawn
    std::shared_ptr<const TeachingResult> m_result;
    QString m_error;
};

} // namespace kvlens::widgets
