// SPDX-License-Identifier: GPL-3.0-or-later
// Control dock: spec <-> widgets, with parameter editors generated from regime descriptions.
#include "widgets/control_panel.h"

#include "core/quant/path.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace kvlens::widgets {

namespace {

QSpinBox* spin(int lo, int hi, int value, const QString& tip, QWidget* parent)
{
    auto* s = new QSpinBox(parent);
    s->setRange(lo, hi);
    s->setValue(value);
    s->setToolTip(tip);
    s->setAccelerated(true);
    s->setKeyboardTracking(false); // typing "1024" is one edit, not four
    return s;
}

} // namespace

ControlPanel::ControlPanel(QWidget* parent)
    : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);

    // Data regime and its parameters.
    auto* regimeGroup = new QGroupBox(QStringLiteral("Data"), this);
    auto* regimeForm = new QFormLayout(regimeGroup);
    m_regime = new QComboBox(regimeGroup);
    for (const Regime* r : allRegimes()) {
        m_regime->addItem(QString::fromUtf8(r->name().data(), static_cast<int>(r->name().size())));
        m_regime->setItemData(m_regime->count() - 1, QString::fromUtf8(r->description().data()), Qt::ToolTipRole);
    }
    m_regime->setToolTip(QStringLiteral("The law keys, values and queries are drawn from."));
    regimeForm->addRow(QStringLiteral("Regime"), m_regime);
    m_params = new QFormLayout;
    regimeForm->addRow(m_params);
    m_regimeNote = new QLabel(regimeGroup);
    m_regimeNote->setWordWrap(true);
    m_regimeNote->setStyleSheet(QStringLiteral("color: #555;"));
    regimeForm->addRow(m_regimeNote);
    using L = SpecLimits;
    m_d = spin(L::kMinD, L::kMaxD, 128, QStringLiteral("Head dimension d (the WHT pads it to a power of two)."), this);
    m_tokens = spin(L::kMinTokens, L::kMaxTokens, 1024, QStringLiteral("N: cached keys and values per trial."), this);
    m_queries = spin(L::kMinQueries, L::kMaxQueries, 64, QStringLiteral("Q: queries per trial."), this);
    m_scoreScale = new QDoubleSpinBox(this);
    m_scoreScale->setRange(0.01, L::kMaxScoreScale);
    m_scoreScale->setDecimals(2);
    m_scoreScale->setValue(1.0);
    m_scoreScale->setStepType(QAbstractSpinBox::AdaptiveDecimalStepType);
    m_scoreScale->setKeyboardTracking(false);
    m_scoreScale->setToolTip(QStringLiteral("Queries are multiplied by this: larger makes attention more peaked."));
    regimeForm->addRow(QStringLiteral("d"), m_d);
    regimeForm->addRow(QStringLiteral("N tokens"), m_tokens);
    regimeForm->addRow(QStringLiteral("Q queries"), m_queries);
    regimeForm->addRow(QStringLiteral("Score scale"), m_scoreScale);
    layout->addWidget(regimeGroup);

    // Schemes and budgets.
    auto* schemeGroup = new QGroupBox(QStringLiteral("Schemes"), this);
    auto* schemeLayout = new QVBoxLayout(schemeGroup);
    m_schemes = new QListWidget(schemeGroup);
    m_schemes->setToolTip(QStringLiteral("Tick the schemes to compare; hover one for its paths and exact bits."));
    m_schemes->setMinimumHeight(170);
    for (const SchemeConfig& s : namedSchemes())
        addSchemeItem(s, false);
    schemeLayout->addWidget(m_schemes);
    auto* budgetRow = new QHBoxLayout;
    budgetRow->addWidget(new QLabel(QStringLiteral("n ="), schemeGroup));
    for (int n = L::kMinBudget; n <= L::kMaxBudget; ++n) {
        auto* box = new QCheckBox(QString::number(n), schemeGroup);
        box->setToolTip(QStringLiteral("Budget of %1 bits per coordinate (before overheads).").arg(n));
        m_budgets.push_back(box);
        budgetRow->addWidget(box);
        connect(box, &QCheckBox::toggled, this, [this] {
            refreshSchemeLabels();
            edited();
        });
    }
    budgetRow->addStretch(1);
    schemeLayout->addLayout(budgetRow);
    layout->addWidget(schemeGroup);

    // Seeds, engine, metrics, backend.
    auto* runGroup = new QGroupBox(QStringLiteral("Run"), this);
    auto* runForm = new QFormLayout(runGroup);
    m_firstSeed = spin(0, 2147483647, 1, QStringLiteral("First seed; trial seeds are first, first + 1, ..."), this);
    m_seedCount = spin(1, L::kMaxSeeds, 8, QStringLiteral("Independent draws per scheme and budget."), this);
    m_rng = new QComboBox(runGroup);
    m_rng->addItems({QStringLiteral("mt19937_64"), QStringLiteral("pcg64")});
    m_rng->setToolTip(QStringLiteral("Random engine; both are reproducible bit for bit on every compiler."));
    m_topK = spin(1, L::kMaxTokens, 5, QStringLiteral("k of the top-k routing recall."), this);
    m_backend = new QComboBox(runGroup);
    m_backend->addItem(QStringLiteral("CPU"), QStringLiteral("cpu"));
    m_backend->setToolTip(QStringLiteral("Where quantization and attention run."));
    runForm->addRow(QStringLiteral("First seed"), m_firstSeed);
    runForm->addRow(QStringLiteral("Seeds"), m_seedCount);
    runForm->addRow(QStringLiteral("RNG"), m_rng);
    runForm->addRow(QStringLiteral("Top-k"), m_topK);
    runForm->addRow(QStringLiteral("Backend"), m_backend);
    layout->addWidget(runGroup);

    auto* buttons = new QHBoxLayout;
    m_run = new QPushButton(QStringLiteral("Run"), this);
    m_run->setToolTip(QStringLiteral("Run the experiment now (Ctrl+R)."));
    m_run->setShortcut(QKeySequence(QStringLiteral("Ctrl+R")));
    m_cancel = new QPushButton(QStringLiteral("Cancel"), this);
    m_cancel->setToolTip(QStringLiteral("Stop the run; finished trials stay drawn (Esc)."));
    m_cancel->setShortcut(QKeySequence(Qt::Key_Escape));
    m_cancel->setEnabled(false);
    m_autoRun = new QCheckBox(QStringLiteral("Run on change"), this);
    m_autoRun->setChecked(true);
    m_autoRun->setToolTip(QStringLiteral("Restart the run shortly after any control changes."));
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    layout->addLayout(buttons);
    layout->addWidget(m_autoRun);
    layout->addStretch(1);

    connect(m_run, &QPushButton::clicked, this, &ControlPanel::runRequested);
    connect(m_cancel, &QPushButton::clicked, this, &ControlPanel::cancelRequested);
    connect(m_regime, &QComboBox::currentIndexChanged, this, [this] {
        rebuildParams({});
        edited();
    });
    for (QSpinBox* s : {m_d, m_tokens, m_queries, m_firstSeed, m_seedCount, m_topK})
        connect(s, &QSpinBox::valueChanged, this, [this] {
            refreshSchemeLabels();
            edited();
        });
    connect(m_scoreScale, &QDoubleSpinBox::valueChanged, this, &ControlPanel::edited);
    connect(m_rng, &QComboBox::currentIndexChanged, this, &ControlPanel::edited);
    connect(m_backend, &QComboBox::currentIndexChanged, this, &ControlPanel::edited);
    connect(m_schemes, &QListWidget::itemChanged, this, &ControlPanel::edited);

    m_hidden = defaultSpec();
    setSpec(m_hidden);
}

void ControlPanel::edited()
{
    emit specEdited();
}

QCheckBox* ControlPanel::budgetBox(int n) const
{
    const int i = n - SpecLimits::kMinBudget;
    return i >= 0 && i < static_cast<int>(m_budgets.size()) ? m_budgets[static_cast<std::size_t>(i)] : nullptr;
}

QWidget* ControlPanel::paramEditor(const QString& key) const
{
    for (const auto& [desc, widget] : m_paramEditors)
        if (QString::fromStdString(desc.key) == key)
            return widget;
    return nullptr;
}

void ControlPanel::addSchemeItem(const SchemeConfig& scheme, bool checked)
{
    auto* item = new QListWidgetItem(QString::fromStdString(scheme.name), m_schemes);
    item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
    item->setCheckState(checked ? Qt::Checked : Qt::Unchecked);
    m_schemeConfigs.push_back(scheme);
}

void ControlPanel::refreshSchemeLabels()
{
    const QSignalBlocker block(m_schemes);
    std::vector<int> budgets;
    for (int n = SpecLimits::kMinBudget; n <= SpecLimits::kMaxBudget; ++n)
        if (budgetBox(n)->isChecked())
            budgets.push_back(n);
    const int shown = budgets.empty() ? 4 : budgets.back();
    const int d = m_d->value(), tokens = m_tokens->value();
    for (int row = 0; row < m_schemes->count(); ++row) {
        const SchemeConfig& s = m_schemeConfigs[static_cast<std::size_t>(row)];
        auto bits = [&](int n) {
            const double k = pathBitsPerCoordinate(s.key, n, d, tokens);
            const double v = pathBitsPerCoordinate(s.value, n, d, tokens);
            return std::pair{k, v};
        };
        const auto [k, v] = bits(shown);
        QListWidgetItem* item = m_schemes->item(row);
        item->setText(QStringLiteral("%1   K %2 · V %3 bits @ n=%4")
                          .arg(QString::fromStdString(s.name))
                          .arg(k, 0, 'f', 3)
                          .arg(v, 0, 'f', 3)
                          .arg(shown));
        QString tip = QString::fromStdString(s.description) + QStringLiteral("\nExact bits per coordinate (K / V):");
        for (int n : budgets.empty() ? std::vector<int>{shown} : budgets) {
            const auto [bk, bv] = bits(n);
            tip += QStringLiteral("\n  n = %1: %2 / %3").arg(n).arg(bk, 0, 'f', 4).arg(bv, 0, 'f', 4);
        }
        item->setToolTip(tip);
    }
}

void ControlPanel::rebuildParams(const RegimeParams& values)
{
    while (m_params->rowCount() > 0)
        m_params->removeRow(0);
    m_paramEditors.clear();
    const Regime* regime = findRegime(m_regime->currentText().toStdString());
    if (!regime)
        return;
    m_regimeNote->setText(QString::fromUtf8(regime->description().data()));
    for (const ParamDesc& p : regime->params()) {
        const auto it = values.find(p.key);
        QWidget* editor = nullptr;
        const QString tip = QString::fromStdString(p.tooltip);
        switch (p.kind) {
        case ParamDesc::Kind::Integer: {
            auto* s = spin(static_cast<int>(p.minValue), static_cast<int>(p.maxValue), static_cast<int>(p.defaultValue),
                           tip, this);
            if (it != values.end() && std::holds_alternative<double>(it->second))
                s->setValue(static_cast<int>(std::get<double>(it->second)));
            connect(s, &QSpinBox::valueChanged, this, &ControlPanel::edited);
            editor = s;
            break;
        }
        case ParamDesc::Kind::Real: {
            auto* s = new QDoubleSpinBox(this);
            s->setRange(p.minValue, p.maxValue);
            s->setDecimals(p.maxValue - p.minValue <= 2.0 ? 3 : 2);
            s->setStepType(QAbstractSpinBox::AdaptiveDecimalStepType);
            s->setKeyboardTracking(false);
            s->setValue(p.defaultValue);
            if (it != values.end() && std::holds_alternative<double>(it->second))
                s->setValue(std::get<double>(it->second));
            s->setToolTip(tip);
            connect(s, &QDoubleSpinBox::valueChanged, this, &ControlPanel::edited);
            editor = s;
            break;
        }
        case ParamDesc::Kind::Choice: {
            auto* c = new QComboBox(this);
            for (const auto& choice : p.choices)
                c->addItem(QString::fromStdString(choice));
            c->setCurrentText(QString::fromStdString(p.defaultText));
            if (it != values.end() && std::holds_alternative<std::string>(it->second))
                c->setCurrentText(QString::fromStdString(std::get<std::string>(it->second)));
            c->setToolTip(tip);
            connect(c, &QComboBox::currentIndexChanged, this, &ControlPanel::edited);
            editor = c;
            break;
        }
        case ParamDesc::Kind::Text: {
            auto* e = new QLineEdit(QString::fromStdString(p.defaultText), this);
            if (it != values.end() && std::holds_alternative<std::string>(it->second))
                e->setText(QString::fromStdString(std::get<std::string>(it->second)));
            e->setToolTip(tip);
            connect(e, &QLineEdit::editingFinished, this, &ControlPanel::edited);
            editor = e;
            break;
        }
        }
        m_params->addRow(QString::fromStdString(p.label), editor);
        m_paramEditors.emplace_back(p, editor);
    }
}

ExperimentSpec ControlPanel::spec() const
{
    ExperimentSpec s = m_hidden;
    s.regime = m_regime->currentText().toStdString();
    s.regimeParams.clear();
    for (const auto& [p, widget] : m_paramEditors) {
        if (auto* sp = qobject_cast<QSpinBox*>(widget))
            s.regimeParams[p.key] = static_cast<double>(sp->value());
        else if (auto* dsp = qobject_cast<QDoubleSpinBox*>(widget))
            s.regimeParams[p.key] = dsp->value();
        else if (auto* c = qobject_cast<QComboBox*>(widget))
            s.regimeParams[p.key] = c->currentText().toStdString();
        else if (auto* e = qobject_cast<QLineEdit*>(widget))
            s.regimeParams[p.key] = e->text().toStdString();
    }
    s.d = m_d->value();
    s.tokens = m_tokens->value();
    s.queries = m_queries->value();
    s.scoreScale = m_scoreScale->value();
    s.schemes.clear();
    for (int row = 0; row < m_schemes->count(); ++row)
        if (m_schemes->item(row)->checkState() == Qt::Checked)
            s.schemes.push_back(m_schemeConfigs[static_cast<std::size_t>(row)]);
    s.budgets.clear();
    for (int n = SpecLimits::kMinBudget; n <= SpecLimits::kMaxBudget; ++n)
        if (budgetBox(n)->isChecked())
            s.budgets.push_back(n);
    s.firstSeed = static_cast<std::uint64_t>(m_firstSeed->value());
    s.seedCount = m_seedCount->value();
    s.engine = m_rng->currentIndex() == 1 ? EngineKind::Pcg64 : EngineKind::Mt19937_64;
    s.metrics.topK = m_topK->value();
    const QString backend = m_backend->currentData().toString();
    if (backend == QLatin1String("cpu")) {
        s.backend = "cpu";
        s.device.clear();
    } else {
        s.backend = "opencl";
        s.device = backend.toStdString();
    }
    // Comparison pairs must name chosen schemes; drop the ones that are no longer ticked.
    std::erase_if(s.comparisons.pairs, [&](const auto& pair) {
        auto chosen = [&](const std::string& name) {
            return std::any_of(s.schemes.begin(), s.schemes.end(), [&](const SchemeConfig& c) { return c.name == name; });
        };
        return !chosen(pair.first) || !chosen(pair.second);
    });
    return s;
}

void ControlPanel::setSpec(const ExperimentSpec& spec)
{
    // Loading a spec is not an edit: specEdited() is blocked, and so is the regime box, whose
    // change handler would otherwise reset the parameters to their defaults.
    const QSignalBlocker self(this);
    const QSignalBlocker regime(m_regime);
    m_hidden = spec;
    m_regime->setCurrentText(QString::fromStdString(spec.regime));
    rebuildParams(spec.regimeParams);
    m_d->setValue(spec.d);
    m_tokens->setValue(spec.tokens);
    m_queries->setValue(spec.queries);
    m_scoreScale->setValue(spec.scoreScale);
    m_firstSeed->setValue(static_cast<int>(std::min<std::uint64_t>(spec.firstSeed, 2147483647ULL)));
    m_seedCount->setValue(spec.seedCount);
    m_rng->setCurrentIndex(spec.engine == EngineKind::Pcg64 ? 1 : 0);
    m_topK->setValue(spec.metrics.topK);
    for (int n = SpecLimits::kMinBudget; n <= SpecLimits::kMaxBudget; ++n)
        budgetBox(n)->setChecked(std::find(spec.budgets.begin(), spec.budgets.end(), n) != spec.budgets.end());
    // Schemes: built-ins by name; custom ones are appended (replacing an older one of the same name).
    for (int row = 0; row < m_schemes->count(); ++row)
        m_schemes->item(row)->setCheckState(Qt::Unchecked);
    for (const SchemeConfig& s : spec.schemes) {
        int row = -1;
        for (int r = 0; r < m_schemes->count(); ++r)
            if (m_schemeConfigs[static_cast<std::size_t>(r)].name == s.name)
                row = r;
        if (row < 0) {
            addSchemeItem(s, true);
        } else {
            m_schemeConfigs[static_cast<std::size_t>(row)] = s;
            m_schemes->item(row)->setCheckState(Qt::Checked);
        }
    }
    int backend = m_backend->findData(spec.backend == "cpu" ? QStringLiteral("cpu") : QString::fromStdString(spec.device));
    if (backend < 0 && spec.backend != "cpu" && m_backend->count() > 1)
        backend = 1; // OpenCL without a named device: the first one listed
    m_backend->setCurrentIndex(backend >= 0 ? backend : 0);
    refreshSchemeLabels();
}

void ControlPanel::setBackends(const QStringList& labels, const QStringList& values)
{
    const QSignalBlocker block(m_backend);
    const QVariant current = m_backend->currentData();
    m_backend->clear();
    for (int i = 0; i < labels.size() && i < values.size(); ++i)
        m_backend->addItem(labels[i], values[i]);
    const int at = m_backend->findData(current);
    m_backend->setCurrentIndex(at >= 0 ? at : 0);
}

bool ControlPanel::autoRun() const
{
    return m_autoRun->isChecked();
}

void ControlPanel::setRunning(bool running)
{
    m_cancel->setEnabled(running);
}

} // namespace kvlens::widgets
