// SPDX-License-Identifier: GPL-3.0-or-later
// Control dock: spec <-> widgets, with parameter editors generated from regime descriptions.
#include "widgets/control_panel.h"

#include <map>

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
#include <QValidator>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

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

/// A parameter value as a spin box int: clamped first, since casting a double beyond int is undefined.
int spinValue(double v)
{
    if (!(v >= static_cast<double>(std::numeric_limits<int>::min())))
        return std::numeric_limits<int>::min();
    if (v > static_cast<double>(std::numeric_limits<int>::max()))
        return std::numeric_limits<int>::max();
    return static_cast<int>(v);
}

/// Seeds: decimal integers 0 .. 2^64 - 1, the range a spec accepts; keystrokes that would
/// leave it are refused, and an emptied box falls back to the current seed.
class SeedValidator final : public QValidator {
public:
    SeedValidator(const std::uint64_t* current, QObject* parent)
        : QValidator(parent), m_current(current)
    {
    }

    State validate(QString& input, int&) const override
    {
        if (input.isEmpty())
            return Intermediate;
        for (const QChar c : input)
            if (c < QLatin1Char('0') || c > QLatin1Char('9')) // not isDigit(): that takes other scripts' digits
                return Invalid;
        bool ok = false;
        input.toULongLong(&ok); // false on overflow
        return ok ? Acceptable : Invalid;
    }

    void fixup(QString& input) const override { input = QString::number(*m_current); }

private:
    const std::uint64_t* m_current;
};

} // namespace

ControlPanel::ControlPanel(QWidget* parent)
    : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(buildRegimeGroup());
    layout->addWidget(buildSchemeGroup());
    layout->addWidget(buildRunGroup());
    layout->addWidget(buildRunBar());
    layout->addStretch(1);
    connectControls();
    m_hidden = defaultSpec();
    setSpec(m_hidden);
}

/// The data regime and its parameters.
QGroupBox* ControlPanel::buildRegimeGroup()
{
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
    return regimeGroup;
}

/// The schemes (a filtered list, llama.cpp's K and V cache types) and the budgets.
QGroupBox* ControlPanel::buildSchemeGroup()
{
    using L = SpecLimits;
    auto* schemeGroup = new QGroupBox(QStringLiteral("Schemes"), this);
    auto* schemeLayout = new QVBoxLayout(schemeGroup);
    m_schemes = new QListWidget(schemeGroup);
    m_schemes->setToolTip(QStringLiteral("Tick the schemes to compare; hover one for its paths and exact bits."));
    m_schemes->setMinimumHeight(170);
    for (const SchemeConfig& s : namedSchemes())
        addSchemeItem(s, false);
    // A filter over names and descriptions; ticked schemes always stay listed.
    m_schemeFilter = new QLineEdit(schemeGroup);
    m_schemeFilter->setPlaceholderText(QStringLiteral("Filter schemes (KIVI, TQ, paper C…)"));
    m_schemeFilter->setClearButtonEnabled(true);
    m_schemeFilter->setToolTip(QStringLiteral("Show only schemes whose name or description contains this text; "
                                              "ticked schemes stay listed."));
    connect(m_schemeFilter, &QLineEdit::textChanged, this, &ControlPanel::applySchemeFilter);
    schemeLayout->addWidget(m_schemeFilter);
    schemeLayout->addWidget(m_schemes);
    schemeLayout->addLayout(buildLlamaRow(schemeGroup));
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
    return schemeGroup;
}

/// llama.cpp's cache types, separately on K and V (-ctk / -ctv), added as one scheme "K=q8_0,V=q4_0".
QHBoxLayout* ControlPanel::buildLlamaRow(QWidget* schemeGroup)
{
    auto* llamaRow = new QHBoxLayout;
    llamaRow->addWidget(new QLabel(QStringLiteral("llama.cpp K"), schemeGroup));
    m_llamaK = new QComboBox(schemeGroup);
    m_llamaV = new QComboBox(schemeGroup);
    for (const char* type : {"f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl", "f32"}) {
        m_llamaK->addItem(QString::fromLatin1(type));
        m_llamaV->addItem(QString::fromLatin1(type));
    }
    m_llamaK->setCurrentText(QStringLiteral("q8_0"));
    m_llamaV->setCurrentText(QStringLiteral("q4_0"));
    m_llamaK->setToolTip(QStringLiteral("The key cache's type, as llama.cpp's -ctk sets it (ggml blocks of 32 along head_dim)."));
    m_llamaV->setToolTip(QStringLiteral("The value cache's type, as llama.cpp's -ctv sets it."));
    llamaRow->addWidget(m_llamaK);
    llamaRow->addWidget(new QLabel(QStringLiteral("V"), schemeGroup));
    llamaRow->addWidget(m_llamaV);
    m_addLlama = new QPushButton(QStringLiteral("Add"), schemeGroup);
    m_addLlama->setToolTip(QStringLiteral("Add the scheme K=<type>,V=<type> to the list, ticked."));
    llamaRow->addWidget(m_addLlama);
    llamaRow->addStretch(1);
    connect(m_addLlama, &QPushButton::clicked, this, &ControlPanel::addLlamaScheme);
    return llamaRow;
}

void ControlPanel::addLlamaScheme()
{
    const std::string name = "K=" + m_llamaK->currentText().toStdString() + ",V=" + m_llamaV->currentText().toStdString();
    const auto scheme = findScheme(name);
    if (!scheme)
        return;
    int row = -1;
    for (int r = 0; r < m_schemes->count(); ++r)
        if (m_schemeConfigs[static_cast<std::size_t>(r)].name == scheme->name)
            row = r;
    if (row < 0) {
        addSchemeItem(*scheme, true);
        row = m_schemes->count() - 1;
    } else {
        m_schemes->item(row)->setCheckState(Qt::Checked);
    }
    refreshSchemeLabels();
    applySchemeFilter();
    m_schemes->scrollToItem(m_schemes->item(row));
    edited();
}

/// Seeds, engine, metrics, backend.
QGroupBox* ControlPanel::buildRunGroup()
{
    using L = SpecLimits;
    auto* runGroup = new QGroupBox(QStringLiteral("Run"), this);
    auto* runForm = new QFormLayout(runGroup);
    m_firstSeed = new QLineEdit(QString::number(m_seedValue), this);
    m_firstSeed->setValidator(new SeedValidator(&m_seedValue, m_firstSeed));
    m_firstSeed->setToolTip(QStringLiteral("First seed (0 to 2^64 - 1); trial seeds are first, first + 1, ..."));
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
    return runGroup;
}

/// Run, Cancel and "Run on change".
QWidget* ControlPanel::buildRunBar()
{
    m_runBar = new QWidget(this);
    auto* barLayout = new QVBoxLayout(m_runBar);
    barLayout->setContentsMargins(0, 0, 0, 0);
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
    barLayout->addLayout(buttons);
    barLayout->addWidget(m_autoRun);
    return m_runBar;
}

void ControlPanel::connectControls()
{
    connect(m_run, &QPushButton::clicked, this, &ControlPanel::runRequested);
    connect(m_cancel, &QPushButton::clicked, this, &ControlPanel::cancelRequested);
    connect(m_regime, &QComboBox::currentIndexChanged, this, [this] {
        rebuildParams({});
        edited();
    });
    connect(m_firstSeed, &QLineEdit::editingFinished, this, &ControlPanel::commitSeed);
    for (QSpinBox* s : {m_d, m_tokens, m_queries, m_seedCount, m_topK})
        connect(s, &QSpinBox::valueChanged, this, [this] {
            refreshSchemeLabels();
            edited();
        });
    connect(m_scoreScale, &QDoubleSpinBox::valueChanged, this, &ControlPanel::edited);
    connect(m_rng, &QComboBox::currentIndexChanged, this, &ControlPanel::edited);
    connect(m_backend, &QComboBox::currentIndexChanged, this, &ControlPanel::edited);
    connect(m_schemes, &QListWidget::itemChanged, this, &ControlPanel::edited);
}

void ControlPanel::edited()
{
    emit specEdited();
}

void ControlPanel::commitSeed()
{
    bool ok = false;
    const std::uint64_t seed = m_firstSeed->text().toULongLong(&ok);
    if (!ok) { // the validator admits no such text; restore rather than guess
        m_firstSeed->setText(QString::number(m_seedValue));
        return;
    }
    m_firstSeed->setText(QString::number(seed)); // "007" reads back as 7
    if (seed == m_seedValue)
        return;
    m_seedValue = seed;
    edited();
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
            auto* s = spin(spinValue(p.minValue), spinValue(p.maxValue), spinValue(p.defaultValue), tip, this);
            if (it != values.end() && std::holds_alternative<double>(it->second))
                s->setValue(spinValue(std::get<double>(it->second)));
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

ExperimentSpec ControlPanel::widgetSpec() const
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
    s.firstSeed = m_seedValue;
    s.seedCount = m_seedCount->value();
    s.engine = m_rng->currentIndex() == 1 ? EngineKind::Pcg64 : EngineKind::Mt19937_64;
    s.metrics.topK = m_topK->value();
    std::tie(s.backend, s.device) = boxBackend();
    return s;
}

std::pair<BackendKind, std::string> ControlPanel::boxBackend() const
{
    const QString backend = m_backend->currentData().toString();
    if (backend == QLatin1String("cpu"))
        return {BackendKind::Cpu, ""};
    return {BackendKind::OpenCl, backend.toStdString()};
}

ExperimentSpec ControlPanel::spec() const
{
    // Controls round and clamp (two decimals, a spin box's range, a device list by index); a
    // control still showing what it showed when the spec was loaded stands for the loaded value,
    // so touching one control never quietly changes another field (and so the data).
    ExperimentSpec s = widgetSpec();
    const ExperimentSpec& loaded = m_hidden;
    const ExperimentSpec& shown = m_shown;
    auto keep = [](auto& field, const auto& shownValue, const auto& loadedValue) {
        if (field == shownValue)
            field = loadedValue;
    };
    keep(s.d, shown.d, loaded.d);
    keep(s.tokens, shown.tokens, loaded.tokens);
    keep(s.queries, shown.queries, loaded.queries);
    keep(s.scoreScale, shown.scoreScale, loaded.scoreScale);
    keep(s.firstSeed, shown.firstSeed, loaded.firstSeed);
    keep(s.seedCount, shown.seedCount, loaded.seedCount);
    keep(s.engine, shown.engine, loaded.engine);
    keep(s.metrics.topK, shown.metrics.topK, loaded.metrics.topK);
    if (s.regime == shown.regime) {
        s.regime = loaded.regime;
        for (auto& [key, value] : s.regimeParams) {
            const auto was = shown.regimeParams.find(key);
            const auto given = loaded.regimeParams.find(key);
            if (was != shown.regimeParams.end() && given != loaded.regimeParams.end())
                keep(value, was->second, given->second);
        }
        // Parameters with no editor (not the regime's) stay for validation to name.
        for (const auto& [key, value] : loaded.regimeParams)
            s.regimeParams.emplace(key, value);
    }
    if (std::tie(s.backend, s.device) == std::tie(shown.backend, shown.device)) {
        s.backend = loaded.backend; // auto, or a device named by a substring of its name
        s.device = loaded.device;
    }
    // Schemes and budgets keep the loaded order (legends, tables, trial order); ones ticked
    // since follow in list order.
    auto names = [](const std::vector<SchemeConfig>& list) {
        std::multiset<std::string> out;
        for (const auto& c : list)
            out.insert(c.name);
        return out;
    };
    if (names(s.schemes) == names(shown.schemes)) {
        s.schemes = loaded.schemes;
    } else {
        std::vector<SchemeConfig> ordered;
        for (const SchemeConfig& l : loaded.schemes)
            for (auto it = s.schemes.begin(); it != s.schemes.end(); ++it)
                if (it->name == l.name) {
                    ordered.push_back(*it);
                    s.schemes.erase(it);
                    break;
                }
        ordered.insert(ordered.end(), s.schemes.begin(), s.schemes.end());
        s.schemes = std::move(ordered);
    }
    if (s.budgets == shown.budgets) {
        s.budgets = loaded.budgets;
    } else {
        std::vector<int> ordered;
        for (int b : loaded.budgets)
            if (std::erase(s.budgets, b) > 0)
                ordered.push_back(b);
        ordered.insert(ordered.end(), s.budgets.begin(), s.budgets.end());
        s.budgets = std::move(ordered);
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
    m_seedValue = spec.firstSeed;
    m_firstSeed->setText(QString::number(m_seedValue));
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
    selectBackend(spec);
    refreshSchemeLabels();
    applySchemeFilter();
    markSwept(spec);
    // The first ticked scheme in view: a preset's choice is never scrolled out of sight.
    for (int row = 0; row < m_schemes->count(); ++row)
        if (m_schemes->item(row)->checkState() == Qt::Checked) {
            m_schemes->scrollToItem(m_schemes->item(row), QAbstractItemView::PositionAtTop);
            break;
        }
    m_shown = widgetSpec();
}

void ControlPanel::markSwept(const ExperimentSpec& spec)
{
    std::map<QWidget*, QString> swept;
    for (const SweepAxis& a : spec.sweep) {
        QWidget* w = nullptr;
        switch (a.parameter) {
        case SweepParameter::D: w = m_d; break;
        case SweepParameter::Tokens: w = m_tokens; break;
        case SweepParameter::Queries: w = m_queries; break;
        case SweepParameter::ScoreScale: w = m_scoreScale; break;
        case SweepParameter::Regime: w = paramEditor(QString::fromStdString(a.regimeKey)); break;
        case SweepParameter::Budget: break;
        }
        QStringList values;
        for (double v : a.values)
            values << QString::number(v, 'g', 6);
        if (w)
            swept[w] = values.join(QStringLiteral(", "));
    }
    std::vector<QWidget*> editors{m_d, m_tokens, m_queries, m_scoreScale};
    for (const auto& [desc, widget] : m_paramEditors)
        editors.push_back(widget);
    for (QWidget* w : editors) {
        // The widget's own tooltip and suffix are kept in properties while it is marked.
        if (!w->property("kvlensTip").isValid())
            w->setProperty("kvlensTip", w->toolTip());
        const auto it = swept.find(w);
        const bool isSwept = it != swept.end();
        w->setEnabled(!isSwept);
        w->setToolTip(isSwept ? QStringLiteral("Swept by the spec over %1: each grid point sets its own value (edit the "
                                               "sweep in the spec file).").arg(it->second)
                              : w->property("kvlensTip").toString());
        auto suffixed = [&](auto* box) {
            if (!box)
                return;
            if (!box->property("kvlensSuffix").isValid())
                box->setProperty("kvlensSuffix", box->suffix());
            box->setSuffix(isSwept ? QStringLiteral("  (swept)") : box->property("kvlensSuffix").toString());
        };
        suffixed(qobject_cast<QSpinBox*>(w));
        suffixed(qobject_cast<QDoubleSpinBox*>(w));
        if (auto* line = qobject_cast<QLineEdit*>(w); line && isSwept)
            line->setPlaceholderText(QStringLiteral("swept"));
    }
}

void ControlPanel::applySchemeFilter()
{
    const QString text = m_schemeFilter ? m_schemeFilter->text().trimmed() : QString();
    for (int row = 0; row < m_schemes->count(); ++row) {
        QListWidgetItem* item = m_schemes->item(row);
        const bool match = text.isEmpty() || item->text().contains(text, Qt::CaseInsensitive)
                           || item->toolTip().contains(text, Qt::CaseInsensitive);
        item->setHidden(!match && item->checkState() != Qt::Checked);
    }
}

void ControlPanel::selectBackend(const ExperimentSpec& spec)
{
    const QSignalBlocker block(m_backend);
    const bool cpu = spec.backend == BackendKind::Cpu;
    int backend = m_backend->findData(cpu ? QStringLiteral("cpu") : QString::fromStdString(spec.device));
    if (backend < 0 && !cpu && m_backend->count() > 1)
        backend = 1; // OpenCL without a listed device: the first one listed
    m_backend->setCurrentIndex(backend >= 0 ? backend : 0);
}

void ControlPanel::setBackends(const QStringList& labels, const QStringList& values)
{
    const QSignalBlocker block(m_backend);
    // A selection the user has not changed since loading follows the loaded spec into the new list.
    const bool untouched = boxBackend() == std::pair(m_shown.backend, m_shown.device);
    const QVariant current = m_backend->currentData();
    m_backend->clear();
    for (int i = 0; i < labels.size() && i < values.size(); ++i)
        m_backend->addItem(labels[i], values[i]);
    if (untouched) {
        selectBackend(m_hidden);
        std::tie(m_shown.backend, m_shown.device) = boxBackend();
        return;
    }
    const int at = m_backend->findData(current);
    m_backend->setCurrentIndex(at >= 0 ? at : 0);
}

QWidget* ControlPanel::takeRunBar()
{
    layout()->removeWidget(m_runBar);
    m_runBar->setParent(nullptr);
    return m_runBar;
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
