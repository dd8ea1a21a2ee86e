// SPDX-License-Identifier: GPL-3.0-or-later
// The figures of `kvlens eval`: the per-token KLD distribution, the per-layer attribution and KLD along the text.
#pragma once

#include "core/eval/eval_result.h"
#include "widgets/figure_export.h"
#include "widgets/figures/eval_figures.h"
#include "widgets/result_view.h"

#include <QByteArray>
#include <QString>

#include <memory>
#include <vector>

namespace kvlens::widgets {

/// Base of the views of an evaluation: fed an EvalResult (and the page of it drawn) instead of a
/// ViewData; figureResults() is null, so an export writes the eval spec it is given beside the figure.
class EvalView : public ResultView {
    Q_OBJECT
public:
    explicit EvalView(QWidget* parent = nullptr);

    /// Shows `result` (kept alive by the view); `page` picks the configurations drawn (an empty
    /// list: every one the view can draw).
    void setEvalResult(std::shared_ptr<const eval::EvalResult> result, EvalPage page = {});
    const eval::EvalResult* evalResult() const { return m_result.get(); }
    const EvalPage& page() const { return m_page; }
    /// The configurations this view can draw at all (the attribution view: those with rows).
    virtual std::vector<int> candidates(const eval::EvalResult& result) const;

    QString emptyText() const override;
    /// What is drawn, unclamped (zeros as 0), one row per plotted value.
    QString dataCsv() const override { return m_csv; }

protected:
    /// The page's configurations, or every candidate when the page lists none.
    std::vector<int> shownConfigurations() const;

    std::shared_ptr<const eval::EvalResult> m_result;
    EvalPage m_page;
    QString m_csv;
};

/// Per-token KLD(base || Q) of each configuration as horizontal quantile boxes on a log axis:
/// box p25-p75 with the median, whiskers p5-p95, markers for the mean, p99 and the worst token.
/// A log axis has no place for KLD = 0: such values are drawn at the axis floor, a decade below
/// the smallest positive value, and a footnote says so and which configurations hold zeros.
class EvalKldView final : public EvalView {
    Q_OBJECT
public:
    explicit EvalKldView(QWidget* parent = nullptr);
    QString viewId() const override { return QStringLiteral("eval_kld"); }
    QString viewTitle() const override { return QStringLiteral("KLD per token"); }
    QString viewDescription() const override;
    double printAspect(double widthInches) const override;
    /// Where a KLD of 0 is drawn (the log axis floor) in the current figure; 0 before a result.
    double axisFloor() const { return m_floor; }

protected:
    void redraw() override;

private:
    double m_floor = 0.0;
};

/// Per-layer attribution of each configuration with attribution rows: bars of the mean KLD with
/// only that layer's cache quantized (K only, V only, both), whiskers its 95% interval
/// (AttributionRow::kldLow / kldHigh), one panel per configuration. Configurations whose every
/// layer costs exactly 0 (an identity scheme) are named in a footnote instead of drawn.
class EvalLayersView final : public EvalView {
    Q_OBJECT
public:
    explicit EvalLayersView(QWidget* parent = nullptr);
    QString viewId() const override { return QStringLiteral("eval_layers"); }
    QString viewTitle() const override { return QStringLiteral("Per-layer attribution"); }
    QString viewDescription() const override;
    QString emptyText() const override;
    double printAspect(double widthInches) const override;
    std::vector<int> candidates(const eval::EvalResult& result) const override;
    /// Panels drawn in the current figure.
    int panelCount() const { return m_panels; }

    /// At most this many panels in one figure (evalPages splits the rest).
    static constexpr int kMaxPanels = 4;

protected:
    void redraw() override;

private:
    int m_panels = 0;
};

/// KLD along the text: per scored token (x, chunk after chunk) its KLD (log y) as faint dots, and
/// a running mean over a few tokens (inside each chunk) as a line per configuration; dotted lines
/// mark chunk boundaries. Values below the axis floor (the pooled 1st percentile's decade), zeros
/// included, are drawn at it and the footnote says how many; identity configurations (every KLD 0)
/// are named instead of drawn.
class EvalTextView final : public EvalView {
    Q_OBJECT
public:
    explicit EvalTextView(QWidget* parent = nullptr);
    QString viewId() const override { return QStringLiteral("eval_text"); }
    QString viewTitle() const override { return QStringLiteral("KLD along the text"); }
    QString viewDescription() const override;
    double printAspect(double widthInches) const override;
    double axisFloor() const { return m_floor; }
    /// Tokens in the running mean's window (odd; centred, cut at chunk edges).
    int window() const { return m_window; }

    static constexpr int kMaxLines = 6;

protected:
    void redraw() override;

private:
    double m_floor = 0.0;
    int m_window = 1;
};

/// Exports every figure of an evaluation into `dir` as one set (exportViews: staged, then renamed):
/// eval_kld, eval_layers and eval_text, each as .pdf/.svg/.png (per `options`) with its data as
/// .csv and `specJson` (the eval spec) as .spec.json; a run with too many configurations for one
/// figure gets one per budget (eval_kld_n3, ...: evalPages). A figure with nothing to draw (no
/// attribution rows) is listed in `skipped`.
ExportOutcome exportEvalFigures(const eval::EvalResult& result, const QString& dir, const ExportOptions& options,
                                const QByteArray& specJson);

} // namespace kvlens::widgets
