// SPDX-License-Identifier: GPL-3.0-or-later
// Model map view: a whole model's damage as a layers x heads heatmap, and the K-vs-V sensitivity per layer.
#pragma once

#include "core/analysis/eval_analysis.h"
#include "widgets/figures/model_map_figure.h"
#include "widgets/background_job.h"

#include "widgets/result_view.h"

class QComboBox;
class QLabel;

namespace kvlens::widgets {

class AdvisorPanel;

/// For a model run (regime "model" with layers and heads as grid axes): a heatmap of layers x
/// heads for a metric at a scheme and budget, or the log10 ratio of two schemes; beside it, per
/// layer, the output error with only K quantized against only V quantized. Hovering a cell reads
/// out its numbers; clicking it emits cellActivated.
class ModelMapView final : public ResultView {
    Q_OBJECT
public:
    explicit ModelMapView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "model_map";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Model map"); }
    QString viewDescription() const override;
    QString emptyText() const override;

    /// The cells drawn, long format: layer, head, scheme, versus, budget, metric, value, unit (the
    /// metric's, or "log10 ratio" against another scheme), colour ("log10 value" where the
    /// colours are log10 of the value).
    QString dataCsv() const override;
    /// The colour bar's label: the quantity coloured (log10 of it, or log10 of a ratio), its unit,
    /// the scheme(s) and the budget: "log10 mean KL (nats), K-only, n = 2".
    QString colourLabel() const;
    /// The whole model's run, also while one of its cells is studied (the figure shows every cell).
    std::shared_ptr<const ResultSet> figureResults() const override;
    QString noFigureReason() const override;
    /// Taller than the default at a single column: the colour bar's label runs along the map's
    /// height, and the sensitivity panel needs its own.
    double printAspect(double widthInches) const override
    {
        return widthInches < 5.0 ? (m_eval ? 1.4 : 1.25) : 0.75; // the judgement's footnote needs its lines
    }
    /// At a single column the end-to-end attribution is left out (a footnote says so): beside the
    /// map and its colour bar it would squeeze all three below legibility.
    void beginPrint(double widthInches) override;
    void endPrint() override;
    /// Waits for the judgement against the output (its footnote is part of the figure).
    bool waitUntilDrawn(int timeoutMs = 30000) override;
    /// The metrics offered (map metric names, model_lens.h).
    static QStringList metricKeys();
    /// The value of the current map at (layer, head), NaN if none.
    double cellValue(int layer, int head) const;
    /// The data the map draws (the whole model while one of its cells is studied).
    const ViewData& mapData() const { return m_mapData; }
    /// The advisor panel beside the map (fed the map's run).
    AdvisorPanel* advisor() const { return m_advisor; }
    /// The end-to-end truth beside the map: an evaluation of the same model (the Output tab's run)
    /// with per-layer attribution. Drawn beside the heatmap on its layer axis (KLD with only that
    /// layer's K, V or both quantized, 95% intervals) for the map's scheme and budget, and judged:
    /// the attention-level measure whose Spearman rho with the attribution is highest is named
    /// (eval::outputVsAttention, computed off the GUI thread). Ignored (and said so) when the
    /// evaluation has another layer count. Null clears it.
    void setEvaluation(std::shared_ptr<const eval::EvalResult> evaluation);
    /// Attribution points drawn beside the map (0 when none).
    int attributionPoints() const { return m_attributionPoints; }
    /// The rows of the map judged against the evaluation for the map's scheme (empty until computed).
    const std::vector<eval::OutputVsAttention>& outputRows() const { return m_rows; }
    /// The verdict line under the map ("…: score-error variance predicts the output best, rho = …").
    QString predictsText() const;
    /// True while the judgement is being computed.
    bool judging() const { return !m_judgeJobs.settled(); }
    /// Acts as a click on the cell (tests).
    void activateCell(int layer, int head);
    /// The read-out of a cell (what hovering shows).
    QString cellText(int layer, int head) const;
    /// Where cell (layer, head) is drawn, in the plot's pixels (tests hover there); (-1, -1) when not drawn.
    QPoint cellCenter(int layer, int head) const;

signals:
    /// A cell was clicked: make (layer, head) the current experiment.
    void cellActivated(int layer, int head);

protected:
    void redraw() override;
    void mousePressEvent(QMouseEvent* event) override;

private:
    bool cellAt(const QPoint& pos, int& layer, int& head) const;
    /// Starts the judgement for the current scheme when its inputs changed.
    void judge();
    /// Lists the run's schemes and budgets in the boxes, keeping the choice.
    void refreshChoices(const ResultSet& results);
    /// What the boxes choose, as the figure takes it.
    ModelMapChoice choice() const;

    AdvisorPanel* m_advisor = nullptr;
    QComboBox* m_metric = nullptr;
    QComboBox* m_scheme = nullptr;
    QComboBox* m_versus = nullptr;
    QComboBox* m_budget = nullptr;
    bool m_hasMap = false;
    ViewData m_mapData;           ///< the last run with more than one cell: kept while one cell is studied
    int m_selectedLayer = -1, m_selectedHead = -1;
    int m_layers = 0, m_heads = 0;
    std::vector<double> m_values; ///< layer-major, what the map draws
    std::shared_ptr<const eval::EvalResult> m_eval;
    QLabel* m_predicts = nullptr;
    std::vector<eval::OutputVsAttention> m_rows;
    QString m_judgeKey;     ///< the inputs m_rows (or the job running) belong to
    QString m_judgeNote;    ///< why there is no judgement (empty when there is one or no evaluation)
    BackgroundJob<std::vector<eval::OutputVsAttention>> m_judgeJobs{this};
    int m_attributionPoints = 0;
    bool m_narrowPrint = false;
};

} // namespace kvlens::widgets
