// SPDX-License-Identifier: GPL-3.0-or-later
// The control dock: every field of an ExperimentSpec as a widget, regime parameters built from their descriptions.
#pragma once

#include "core/spec/spec.h"

#include <QWidget>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QGroupBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;

namespace kvlens::widgets {

/// Edits an ExperimentSpec. The regime's parameter widgets come from its ParamDesc table,
/// so a new regime needs no widget code. Emits specEdited() on any user change (the window
/// debounces it); setSpec() changes nothing observable (signals blocked). A loaded value that
/// a control cannot show exactly (a score scale with more decimals than its box, a backend
/// named by a device substring) is kept until that control is edited, so spec() right after
/// setSpec(s) equals s, and editing one control never changes another field.
class ControlPanel : public QWidget {
    Q_OBJECT
public:
    explicit ControlPanel(QWidget* parent = nullptr);

    /// The spec the controls describe (not yet normalized: the window validates it).
    ExperimentSpec spec() const;
    /// Shows `spec` (custom schemes are added to the scheme list).
    void setSpec(const ExperimentSpec& spec);

    /// Backends offered in the backend box: "cpu" first, then OpenCL devices by label.
    void setBackends(const QStringList& labels, const QStringList& values);

    bool autoRun() const;
    /// Run, Cancel and "Run on change", taken out of the panel (whose scroll area may hide them)
    /// so the caller can keep them always visible; the caller owns the widget.
    QWidget* takeRunBar();
    /// The scheme list's filter box (names and descriptions; ticked schemes always listed).
    QLineEdit* schemeFilter() const { return m_schemeFilter; }
    /// While a run is going: Run disabled, Cancel enabled.
    void setRunning(bool running);

    // Widgets exposed for tests and keyboard-driven scripts.
    QComboBox* regimeBox() const { return m_regime; }
    QSpinBox* dBox() const { return m_d; }
    QSpinBox* tokensBox() const { return m_tokens; }
    QSpinBox* queriesBox() const { return m_queries; }
    QDoubleSpinBox* scoreScaleBox() const { return m_scoreScale; }
    QLineEdit* firstSeedBox() const { return m_firstSeed; }
    QSpinBox* seedCountBox() const { return m_seedCount; }
    QSpinBox* topKBox() const { return m_topK; }
    QComboBox* backendBox() const { return m_backend; }
    QListWidget* schemeList() const { return m_schemes; }
    /// llama.cpp's per-path cache types (-ctk / -ctv) and the button that adds "K=<k>,V=<v>" ticked.
    QComboBox* llamaKeyTypeBox() const { return m_llamaK; }
    QComboBox* llamaValueTypeBox() const { return m_llamaV; }
    QPushButton* addLlamaTypesButton() const { return m_addLlama; }
    QCheckBox* budgetBox(int n) const;
    QWidget* paramEditor(const QString& key) const;
    QPushButton* runButton() const { return m_run; }
    QPushButton* cancelButton() const { return m_cancel; }

signals:
    void specEdited();
    void runRequested();
    void cancelRequested();

private:
    void applySchemeFilter();
    /// Editors of the parameters a spec sweeps: disabled, "(swept)" after the value and the swept
    /// values in the tooltip; the others as they were.
    void markSwept(const ExperimentSpec& spec);
    // The constructor's phases, top to bottom, then the signals.
    QGroupBox* buildRegimeGroup();
    QGroupBox* buildSchemeGroup();
    QHBoxLayout* buildLlamaRow(QWidget* schemeGroup);
    QGroupBox* buildRunGroup();
    QWidget* buildRunBar();
    void connectControls();
    /// Adds (or ticks) the scheme K=<type>,V=<type> of the llama.cpp row.
    void addLlamaScheme();
    void rebuildParams(const RegimeParams& values);
    void refreshSchemeLabels();
    void addSchemeItem(const SchemeConfig& scheme, bool checked);
    void edited();
    void commitSeed();
    /// What the widgets show, before loaded values stand in for untouched controls.
    ExperimentSpec widgetSpec() const;
    /// Selects the backend box entry for `spec` (the first OpenCL device when it names none listed).
    void selectBackend(const ExperimentSpec& spec);
    /// (backend, device) as the backend box's selection means it.
    std::pair<BackendKind, std::string> boxBackend() const;

    QComboBox* m_regime = nullptr;
    QFormLayout* m_params = nullptr;
    QLabel* m_regimeNote = nullptr;
    std::vector<std::pair<ParamDesc, QWidget*>> m_paramEditors;
    QSpinBox* m_d = nullptr;
    QSpinBox* m_tokens = nullptr;
    QSpinBox* m_queries = nullptr;
    QDoubleSpinBox* m_scoreScale = nullptr;
    QLineEdit* m_firstSeed = nullptr;
    std::uint64_t m_seedValue = 1; ///< the exact first seed (any uint64: wider than a spin box)
    QSpinBox* m_seedCount = nullptr;
    QComboBox* m_rng = nullptr;
    QListWidget* m_schemes = nullptr;
    std::vector<SchemeConfig> m_schemeConfigs; ///< parallel to the list rows
    std::vector<QCheckBox*> m_budgets;         ///< n = 2..8
    QSpinBox* m_topK = nullptr;
    QComboBox* m_backend = nullptr;
    QCheckBox* m_autoRun = nullptr;
    QWidget* m_runBar = nullptr;
    QLineEdit* m_schemeFilter = nullptr;
    QComboBox* m_llamaK = nullptr;
    QComboBox* m_llamaV = nullptr;
    QPushButton* m_addLlama = nullptr;
    QPushButton* m_run = nullptr;
    QPushButton* m_cancel = nullptr;
    /// The spec last loaded: fields with no widget (name, comparisons, limits) are carried
    /// through, and its values stand for controls still showing what they showed at loading.
    ExperimentSpec m_hidden;
    ExperimentSpec m_shown; ///< widgetSpec() right after loading: tells edited controls from untouched ones
};

} // namespace kvlens::widgets
