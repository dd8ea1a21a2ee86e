// SPDX-License-Identifier: GPL-3.0-or-later
// The Output tab: a model run over text with its KV cache quantized by each scheme, the damage per
// configuration (llama.cpp's statistics), the text shaded token by token by its KLD, and the drill
// down from a damaged token to the attention of one head under the exact and the quantized cache.
#pragma once

#include "core/eval/drill_down.h"
#include "core/eval/eval_result.h"
#include "core/lm/transformer.h"
#include "widgets/background_job.h"
#include "widgets/figure_export.h"

#include <QString>
#include <QTimer>
#include <QWidget>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

class QCheckBox;
class QComboBox;
class QGridLayout;
class QLabel;
class QLineEdit;
class QPushButton;
class QScrollArea;
class QSpinBox;
class QSplitter;
class QTableWidget;

namespace kvlens::widgets {

class EvalKldView;
class EvalLayersView;

/// What the output view shows: an evaluation, the display text of every token id of its model,
/// and the model itself (the drill-down runs forward passes on it). Immutable once built.
struct ModelRun {
    std::shared_ptr<const eval::EvalResult> result;
    std::shared_ptr<const std::vector<std::string>> vocab; ///< [token id] -> its bytes
    std::shared_ptr<const lm::Transformer> model;
};

/// A token id as the text view prints it: UTF-8 shown as is, a newline as "↵" (the view breaks the
/// line after it), a tab as "→", other control bytes and invalid UTF-8 as <0xNN>.
QString displayToken(const std::string& bytes);

/// The colour of a KLD on the view's sequential scale (white at or below `floor`, dark red at
/// `top`, log-spaced between).
QColor kldColour(double kld, double floor, double top);

/// The text of a model run, each predicted token shaded by the KLD of its prediction under one
/// configuration (positions of a chunk's first half are context, drawn grey and unshaded, as
/// llama.cpp scores only the second half). Hover: the token, its NLL under both caches, the KLD and
/// the five most likely next tokens under each; click: selects the token (tokenClicked).
class ShadedTextWidget final : public QWidget {
    Q_OBJECT
public:
    explicit ShadedTextWidget(QWidget* parent = nullptr);
    void setRun(const ModelRun& run, int configuration);
    int configuration() const { return m_configuration; }
    /// The scored position (index into EvalResult::scored) drawn at `p`, or -1.
    int scoredAt(QPoint p) const;
    /// Where scored position `scored` is drawn (empty when it is not).
    QRect scoredRect(int scored) const;
    /// The hover text of scored position `scored` (rich text).
    QString hoverText(int scored) const;
    void setSelected(int scored);
    int selected() const { return m_selected; }
    /// The colour scale's ends (KLD in nats): one scale for every configuration of the run.
    double floor() const { return m_floor; }
    double top() const { return m_top; }
    /// Paints the text into `painter` over `width` pixels from chunk `firstChunk` for `chunks`
    /// chunks (the figure export); returns the height used.
    int paintText(QPainter& painter, int width, int firstChunk, int chunks, bool legend) const;

    QSize sizeHint() const override;
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;

signals:
    void tokenClicked(int scored);

protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;
    void resizeEvent(QResizeEvent*) override;

private:
    struct Box {
        QRect rect;
        QString text;
        int scored = -1; ///< -1: context (not scored)
        int chunk = 0;
    };
    /// Lays out chunks [firstChunk, firstChunk + chunks) over `width` with `metrics`; the first
    /// line starts at y = `top`.
    std::vector<Box> layout(int width, const QFontMetrics& metrics, int top, int firstChunk, int chunks) const;
    void relayout();
    /// Sets the minimum height to the laid-out text's.
    void holdEveryToken();
    int legendHeight() const;
    void paintLegend(QPainter& painter, QRect area) const;
    void paintBoxes(QPainter& painter, const std::vector<Box>& boxes) const;

    ModelRun m_run;
    int m_configuration = 0;
    int m_selected = -1;
    double m_floor = 1e-6, m_top = 1.0;
    std::vector<Box> m_boxes;
};

/// One token's attention in one head as a strip under the text (bertviz-like): for every key of
/// its context the exact weight (grey) and the quantized one (orange) as bars, the change below
/// (gained green, lost red), the keys of the largest weights labelled with their tokens.
class AttentionStripWidget final : public QWidget {
    Q_OBJECT
public:
    explicit AttentionStripWidget(QWidget* parent = nullptr);
    void setAttention(std::optional<eval::TokenAttention> attention, std::shared_ptr<const std::vector<std::string>> vocab);
    const std::optional<eval::TokenAttention>& attention() const { return m_attention; }
    /// The keys labelled (largest exact or quantized weight first), at most kLabels.
    std::vector<int> labelledKeys() const;
    static constexpr int kLabels = 6;
    QSize sizeHint() const override { return {600, 170}; }
    QSize minimumSizeHint() const override { return {200, 120}; }

protected:
    void paintEvent(QPaintEvent*) override;

private:
    std::optional<eval::TokenAttention> m_attention;
    std::shared_ptr<const std::vector<std::string>> m_vocab;
};

/// The Output tab. Runs a model evaluation on a pool thread (progressive by chunk, cancellable;
/// each configuration's result is cached, so changing one scheme recomputes only that one), and
/// shows the statistics table, the KLD distribution, the per-layer attribution, the shaded text
/// and the drill-down of the clicked token.
class OutputView final : public QWidget {
    Q_OBJECT
public:
    explicit OutputView(QWidget* parent = nullptr);
    ~OutputView() override;
    /// The tab's id (`--view output`): views.cpp lists the views by it.
    static constexpr const char* kId = "output";

    /// The run's inputs as controls show them; defaults: the shipped model and its held-out text.
    void setDefaults(const QString& modelDir, const QString& textFile);
    void setModelDir(const QString& dir);
    void setTextFile(const QString& file);
    void setSchemes(const QString& commaSeparated);
    void setBudgets(const QString& commaSeparated);
    void setChunks(int chunks);
    void setContext(int ctx);
    /// The eval spec of the controls as JSON (kvlens eval --spec reads it), or the error.
    QString specJson(QString* error = nullptr) const;

    /// Starts a run of the controls' spec (configurations cached from earlier runs are reused).
    void startRun();
    void cancelRun();
    bool isRunning() const { return m_running; }
    /// Waits (in an event loop) until no run and no drill-down is pending, at most `timeoutMs`.
    bool waitUntilIdle(int timeoutMs);

    /// Shows `run` as if it had been computed (tests, a loaded result).
    void setModelRun(const ModelRun& run);
    const ModelRun& modelRun() const { return m_run; }
    /// The configuration shading the text and probed by the drill-down.
    void setConfiguration(int configuration);
    int configuration() const;
    /// Makes scored position `scored` the drill-down's query (as a click on it does) and probes it.
    void selectToken(int scored);
    /// The drill-down's head: `layer` < 0 finds the one whose attention changed most.
    void setDrillHead(int layer, int head);

    ShadedTextWidget* text() const { return m_text; }
    AttentionStripWidget* strip() const { return m_strip; }
    /// The scroll area around the shaded text.
    QScrollArea* textScroll() const { return m_scroll; }
    QTableWidget* table() const { return m_table; }
    EvalKldView* kldView() const { return m_kld; }
    EvalLayersView* layersView() const { return m_layers; }
    QString statusText() const;
    /// Configurations computed (not taken from the cache) by the last run.
    int lastComputed() const { return m_lastComputed; }

    /// Exports the shaded text as a figure (PDF, vector text) `widthInches` wide, chunks
    /// [firstChunk, firstChunk + chunks), with its colour bar; false with `error` on failure.
    bool exportShadedText(const QString& pdfPath, double widthInches, int firstChunk, int chunks, QString* error) const;

    /// Exports the run into `dir`: the eval figures (exportEvalFigures: KLD distribution, per-layer
    /// attribution, KLD along the text, each with data and spec) and the shaded text of the first two
    /// chunks as eval_text_shaded.pdf at options.widthInches. A partial run is refused.
    ExportOutcome exportRun(const QString& dir, const ExportOptions& options) const;

    /// The model folder and text of the form (trimmed), what a run would read.
    QString modelDir() const;
    QString textFile() const;

signals:
    /// The model folder or the text file of the form changed.
    void sourceChanged();
    /// A run finished (error empty) or failed; `cancelled` when stopped.
    void runFinished(const QString& error, bool cancelled);
    /// The drill-down finished for the selected token.
    void probed(const QString& error);

private:
    /// A run's progress and the newest partial result, which pollProgress takes once.
    class Progress : public JobProgress {
    public:
        void setPartial(std::shared_ptr<const eval::EvalResult> partial)
        {
            std::lock_guard lock(m_mutex);
            m_partial = std::move(partial);
        }
        std::shared_ptr<const eval::EvalResult> takePartial()
        {
            std::lock_guard lock(m_mutex);
            return std::exchange(m_partial, nullptr);
        }

    private:
        std::shared_ptr<const eval::EvalResult> m_partial;
    };
    struct Outcome {
        QString error;
        bool cancelled = false;
        std::shared_ptr<const eval::EvalResult> result; ///< the configurations computed by this run
        std::shared_ptr<const lm::Transformer> model;
        std::shared_ptr<const std::vector<std::string>> vocab;
        std::string modelDir;
    };
    struct ProbeOutcome {
        QString error;
        std::optional<eval::TokenAttention> attention;
    };
    struct CachedConfiguration {
        EvalScheme scheme;
        eval::ConfigurationResult result;
        std::vector<eval::AttributionRow> rows;
    };

    std::string cachePrefix(const EvalSpec& spec) const;
    /// The user's spec assembled from the cache (and `extra`, a run's result not cached yet): every
    /// configuration of `spec` found, in spec order; null when the base or one is missing.
    std::shared_ptr<const eval::EvalResult> assemble(const EvalSpec& spec, const eval::EvalResult* extra) const;
    void store(const eval::EvalResult& computed);
    void accept(const Outcome& outcome);
    void acceptProbe(const ProbeOutcome& outcome);
    void pollProgress(Progress& progress);
    /// The model folder loaded by an earlier run (kept between runs), as a run's work takes it.
    struct LoadedModel {
        std::string dir;
        std::shared_ptr<const lm::Transformer> model;
        std::shared_ptr<const std::vector<std::string>> vocab;
    };
    /// A run's work (on a pool thread): loads the model unless `loaded` is it, reads and tokenizes the
    /// text, evaluates `missing` with progress and partial results into `job`.
    static Outcome runModel(const EvalSpec& missing, const LoadedModel& loaded, const JobContext<Progress>& job);
    // The constructor's phases: the run's form, the plots, the shaded text, the drill-down, the signals.
    QGridLayout* buildForm();
    void buildPlots(QSplitter* split);
    void buildTextPane(QSplitter* split);
    void buildDrillPane(QSplitter* split);
    void connectControls();
    void display(std::shared_ptr<const eval::EvalResult> result);
    void fillTable();
    void fillConfigurations();
    void probe();
    void updateStatus();

    QLineEdit* m_model = nullptr;
    QLineEdit* m_textFile = nullptr;
    QLineEdit* m_schemes = nullptr;
    QLineEdit* m_budgets = nullptr;
    QSpinBox* m_chunks = nullptr;
    QSpinBox* m_ctx = nullptr;
    QPushButton* m_runButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QLabel* m_status = nullptr;
    QTableWidget* m_table = nullptr;
    EvalKldView* m_kld = nullptr;
    EvalLayersView* m_layers = nullptr;
    QComboBox* m_configurationBox = nullptr;
    QLabel* m_legend = nullptr;
    QScrollArea* m_scroll = nullptr;
    ShadedTextWidget* m_text = nullptr;
    QSpinBox* m_layer = nullptr;
    QSpinBox* m_head = nullptr;
    QCheckBox* m_mostChanged = nullptr;
    QLabel* m_drillStatus = nullptr;
    AttentionStripWidget* m_strip = nullptr;

    ModelRun m_run;
    EvalSpec m_runningSpec;
    BackgroundJob<Outcome, Progress> m_jobs{this};
    BackgroundJob<ProbeOutcome> m_probes{this};
    bool m_running = false;
    int m_lastComputed = 0;
    QString m_error;
    QString m_stage;
    // The cache: the reference part of a run (scored tokens, top-5, calibration) per prefix, and
    // each configuration per prefix + scheme + budget. The loaded model is kept per folder.
    std::map<std::string, std::shared_ptr<const eval::EvalResult>> m_bases;
    std::map<std::string, CachedConfiguration> m_cache;
    std::string m_loadedDir;
    std::shared_ptr<const lm::Transformer> m_loadedModel;
    std::shared_ptr<const std::vector<std::string>> m_loadedVocab;
};

} // namespace kvlens::widgets
