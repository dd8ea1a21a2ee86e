// SPDX-License-Identifier: GPL-3.0-or-later
// Views of an EvalResult and their export as one staged set.
#include "widgets/eval_views.h"

#include <algorithm>

namespace kvlens::widgets {

EvalView::EvalView(QWidget* parent)
    : ResultView(parent)
{
    setPointSelectable(false);
}

void EvalView::setEvalResult(std::shared_ptr<const eval::EvalResult> result, EvalPage page)
{
    m_result = std::move(result);
    m_page = std::move(page);
    redraw();
    updateEmptyState();
}

std::vector<int> EvalView::candidates(const eval::EvalResult& result) const
{
    std::vector<int> all(result.configurations.size());
    for (std::size_t i = 0; i < all.size(); ++i)
        all[i] = static_cast<int>(i);
    return all;
}

std::vector<int> EvalView::shownConfigurations() const
{
    if (!m_result)
        return {};
    return m_page.configurations.empty() ? candidates(*m_result) : m_page.configurations;
}

QString EvalView::emptyText() const
{
    if (!m_result)
        return QStringLiteral("Run kvlens eval to fill this view.");
    if (m_result->configurations.empty() || m_result->scored.empty())
        return QStringLiteral("the evaluation scored no tokens");
    return QString();
}

// ---------------------------------------------------------------------------------------------

EvalKldView::EvalKldView(QWidget* parent)
    : EvalView(parent)
{
    setToolTip(viewDescription());
}

QString EvalKldView::viewDescription() const
{
    return QStringLiteral("How far each scored token's next-token distribution moves when the KV cache is quantized: "
                          "KLD(base ‖ Q) per token, as quantiles per configuration.");
}

double EvalKldView::printAspect(double widthInches) const
{
    const int rows = std::max(1, static_cast<int>(shownConfigurations().size()));
    // An axis, its label, the legend row and two footnote lines, then a row per configuration.
    const double inches = 1.6 + 0.22 * rows + (m_page.title.isEmpty() ? 0.0 : 0.15);
    return std::clamp(inches / widthInches, 0.4, 2.2);
}

void EvalKldView::redraw()
{
    EvalFigure e = evalKldFigure(m_result.get(), shownConfigurations(), m_page.title);
    m_floor = e.floor;
    m_csv = e.csv;
    showFigure(std::move(e.figure));
}

// ---------------------------------------------------------------------------------------------

EvalLayersView::EvalLayersView(QWidget* parent)
    : EvalView(parent)
{
    setToolTip(viewDescription());
}

QString EvalLayersView::viewDescription() const
{
    return QStringLiteral("Which layers matter: the mean KLD when only one layer's cache is quantized (its keys, its "
                          "values, or both), with the 95% interval.");
}

QString EvalLayersView::emptyText() const
{
    if (const QString base = EvalView::emptyText(); !base.isEmpty())
        return base;
    if (m_result->attribution.empty())
        return QStringLiteral("no per-layer attribution in this run (--attribution none)");
    if (m_panels == 0)
        return QStringLiteral("every configuration's per-layer KLD is 0 exactly");
    return QString();
}

std::vector<int> EvalLayersView::candidates(const eval::EvalResult& result) const
{
    return attributedConfigurations(result);
}

double EvalLayersView::printAspect(double widthInches) const
{
    const int panels = std::max(1, m_panels);
    const double panelInches = widthInches < 5.0 ? 1.45 : 1.6;
    const double inches = 0.95 + panelInches * panels;
    return std::clamp(inches / widthInches, 0.5, 2.4);
}

void EvalLayersView::redraw()
{
    EvalFigure e = evalLayersFigure(m_result.get(), shownConfigurations());
    m_panels = e.panels;
    m_csv = e.csv;
    showFigure(std::move(e.figure));
}

// ---------------------------------------------------------------------------------------------

EvalTextView::EvalTextView(QWidget* parent)
    : EvalView(parent)
{
    setToolTip(viewDescription());
}

QString EvalTextView::viewDescription() const
{
    return QStringLiteral("Where in the text the damage falls: each scored token's KLD(base ‖ Q), chunk after chunk, "
                          "with a running mean per configuration.");
}

double EvalTextView::printAspect(double widthInches) const
{
    const int lines = std::max(1, static_cast<int>(shownConfigurations().size()));
    const int legendRows = (lines + 1) / 2;
    const double inches = (widthInches < 5.0 ? 2.4 : 2.7) + 0.16 * legendRows + 0.35 + (m_page.title.isEmpty() ? 0.0 : 0.15);
    return std::clamp(inches / widthInches, 0.45, 1.6);
}

void EvalTextView::redraw()
{
    EvalFigure e = evalTextFigure(m_result.get(), shownConfigurations(), m_page.title);
    m_floor = e.floor;
    m_window = e.window;
    m_csv = e.csv;
    showFigure(std::move(e.figure));
}

// ---------------------------------------------------------------------------------------------

ExportOutcome exportEvalFigures(const eval::EvalResult& result, const QString& dir, const ExportOptions& options,
                                const QByteArray& specJson)
{
    // The views live only inside this call: they may share the caller's result without a copy.
    const std::shared_ptr<const eval::EvalResult> shared(&result, [](const eval::EvalResult*) {});
    std::vector<std::unique_ptr<EvalView>> views;
    auto addPages = [&](auto make, int perPage) {
        std::unique_ptr<EvalView> probe = make();
        const std::vector<EvalPage> pages = evalPages(result, probe->candidates(result), perPage);
        for (const EvalPage& page : pages) {
            std::unique_ptr<EvalView> view = make();
            view->setObjectName(view->viewId() + page.suffix);
            view->resize(900, 650);
            view->setEvalResult(shared, page);
            views.push_back(std::move(view));
        }
    };
    addPages([] { return std::unique_ptr<EvalView>(new EvalKldView); }, 14);
    addPages([] { return std::unique_ptr<EvalView>(new EvalLayersView); }, EvalLayersView::kMaxPanels);
    addPages([] { return std::unique_ptr<EvalView>(new EvalTextView); }, EvalTextView::kMaxLines);
    std::vector<ResultView*> raw;
    for (const auto& v : views)
        raw.push_back(v.get());
    return exportViews(raw, dir, [](const ResultView& v) { return v.objectName(); }, options, specJson);
}

} // namespace kvlens::widgets
