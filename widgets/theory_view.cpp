// SPDX-License-Identifier: GPL-3.0-or-later
// Theory view: scatter of measured vs predicted variance, and the ratio table.
#include "widgets/theory_view.h"

#include "core/io/csv.h"
#include "widgets/figures/basic_figures.h"

#include <QTableWidget>

#include <cmath>
#include <numbers>

namespace kvlens::widgets {

namespace {

const char* const kHeaders[] = {"scheme", "n", "d_eff K; V", "Var(ŝ−s) measured", "predicted", "measured / predicted",
                                "QJL / residual ignored (π/2 = 1.571)", "vs n-bit scalar (2π = 6.283)",
                                "Jensen σ²/2", "log E[exp(ŝ−s)]"};

const char* const kTooltips[] = {
    "Scheme.", "Bit budget.",
    // One sentence over two lines (the parentheses tell Clang the concatenation is meant).
    ("SpectralQuant's effective dimension (first seed): the participation ratio (Σλ)²/Σλ² and the spectral-gap "
     "rule's cut; the starred one decided how many eigen-coordinates are modelled."),
    "Variance of the key path's score error over all (query, key) pairs.",
    "Closed-form prediction from the codebook distortion (n/a for quantizers without one).",
    "How well the isotropic-error theory holds for this data (1 = exactly).",
    "Score-error variance with the QJL correction over that of ignoring the residual: about π/2 = 1.571.",
    "Score-error variance of (n−1)-bit scalar + 1-bit QJL over the n-bit scalar key path: about 2π = 6.283.",
    "Log inflation of the softmax weights predicted by Jensen for zero-mean noise of this variance.",
    "Measured log-mean of exp(score error): the actual inflation of the unnormalized weights."};

QString fmt(double v)
{
    return std::isfinite(v) ? QString::number(v, 'g', 4) : QStringLiteral("n/a");
}

/// "8 (PR 7.9, gap 8*)": both estimates of d_eff, the one used starred.
QString deffText(const EffectiveDimension& e)
{
    if (!e.valid())
        return QStringLiteral("–");
    return QStringLiteral("%1 (PR %2%3, gap %4%5)")
        .arg(e.used)
        .arg(e.participationRatio, 0, 'f', 1)
        .arg(e.byGap ? QString() : QStringLiteral("*"))
        .arg(e.gapRule)
        .arg(e.byGap ? QStringLiteral("*") : QString());
}

} // namespace

TheoryView::TheoryView(QWidget* parent)
    : ResultView(parent)
{
    QStringList headers, tooltips;
    for (std::size_t c = 0; c < std::size(kHeaders); ++c) {
        headers << QString::fromUtf8(kHeaders[c]);
        tooltips << QString::fromUtf8(kTooltips[c]);
    }
    m_table = addTable(headers, tooltips);
    splitBelowPlot({m_table}, {3, 2});
    setToolTip(viewDescription());
}

QString TheoryView::viewDescription() const
{
    return QStringLiteral("Measured against predicted variance of the score error: QJL on keys costs about π/2 over "
                          "ignoring the residual and about 2π over the n-bit scalar, and softmax inflates weights by "
                          "exp(σ²/2).");
}

QString TheoryView::dataCsv() const
{
    if (data().empty() || !data().figures)
        return QString();
    CsvWriter csv({"point", "scheme", "budget", "measured_var", "predicted_var", "measured_over_predicted", "qjl_over_base",
                   "over_scalar", "scalar_partner", "jensen_predicted", "jensen_measured"});
    for (const TheoryRow& t : data().figures->theory) {
        csv.add(t.point).add(schemeName(t.scheme).toStdString()).add(t.budget).add(t.measured).add(t.predicted)
            .add(t.measured / t.predicted).add(t.qjlOverBase).add(t.overScalar)
            .add(t.scalarPartner >= 0 ? schemeName(t.scalarPartner).toStdString() : std::string())
            .add(t.jensenPredicted).add(t.jensenMeasured);
        csv.endRow();
    }
    return QString::fromStdString(csv.text());
}

void TheoryView::redraw()
{
    showFigure(theoryFigure(data(), currentPoint()));
    m_table->setRowCount(0);
    if (data().empty() || !data().figures)
        return;
    const auto& theory = data().figures->theory;
    std::vector<const TheoryRow*> rows;
    for (const TheoryRow& t : theory)
        if (t.point == currentPoint())
            rows.push_back(&t);
    m_table->setRowCount(static_cast<int>(rows.size()));
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
        const TheoryRow& t = *rows[static_cast<std::size_t>(i)];
        const TrialResult* first = data().results->find(t.point, t.scheme, t.budget, 0);
        const bool spectral = first && (first->deffK.valid() || first->deffV.valid());
        const QString values[] = {schemeName(t.scheme), QString::number(t.budget),
                                  spectral ? QStringLiteral("%1; %2").arg(deffText(first->deffK), deffText(first->deffV))
                                           : QStringLiteral("–"),
                                  fmt(t.measured), fmt(t.predicted),
                                  fmt(t.measured / t.predicted), fmt(t.qjlOverBase),
                                  t.scalarPartner >= 0 ? QStringLiteral("%1 (vs %2)").arg(fmt(t.overScalar),
                                                                                         schemeName(t.scalarPartner))
                                                       : QStringLiteral("n/a"),
                                  fmt(t.jensenPredicted), fmt(t.jensenMeasured)};
        for (int c = 0; c < m_table->columnCount(); ++c)
            m_table->setItem(i, c, new QTableWidgetItem(values[c]));
    }
}

} // namespace kvlens::widgets
