// SPDX-License-Identifier: GPL-3.0-or-later
// Model map view: a whole model's damage as a layers x heads heatmap, and the K-vs-V sensitivity per layer.
#pragma once

#include "widgets/result_view.h"

class QComboBox;
class QCPColorMap;

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
    QString viewId() const override { return QStringLiteral("model_map"); }
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
    double printAspect(double widthInches) const override { return widthInches < 5.0 ? 1.25 : 0.75; }
    /// The metrics offered (map metric names, model_lens.h).
    static QStringList metricKeys();
    /// The value of the current map at (layer, head), NaN if none.
    double cellValue(int layer, int head) const;
    /// The data the map draws (the whole model while one of its cells is studied).
    const ViewData& mapData() const { return m_mapData; }
    /// The advisor panel beside the map (fed the map's run).
    AdvisorPanel* advisor() const { return m_advisor; }
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

    AdvisorPanel* m_advisor = nullptr;
    QComboBox* m_metric = nullptr;
    QComboBox* m_scheme = nullptr;
    QComboBox* m_versus = nullptr;
    QComboBox* m_budget = nullptr;
    QCPColorMap* m_map = nullptr;
    ViewData m_mapData;           ///< the last run with more than one cell: kept while one cell is studied
    int m_selectedLayer = -1, m_selectedHead = -1;
    int m_layers = 0, m_heads = 0;
    std::vector<double> m_values; ///< layer-major, what the map draws
};

} // namespace kvlens::widgets
