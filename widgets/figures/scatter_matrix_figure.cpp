// SPDX-License-Identifier: GPL-3.0-or-later
// The 6D error scatter, built from the run's trials without drawing anything.
#include "widgets/figures/scatter_matrix_figure.h"

#include "core/metrics/vector_metrics.h"
#include "widgets/plot_widget.h"

namespace kvlens::widgets {

namespace {

/// The matrix's labels: its panels are too short for the units, which one footnote gives.
const QStringList& shortLabels()
{
    static const QStringList labels = {QStringLiteral("SNR_K"), QStringLiteral("φ_K"), QStringLiteral("SNR_V"),
                                       QStringLiteral("φ_V"),   QStringLiteral("SNR_T"), QStringLiteral("φ_T")};
    return labels;
}

const QString& exactNote()
{
    static const QString note = QStringLiteral("exact paths (SNR ∞: K of V-only, V of K-only) are left out of the panels of their SNR");
    return note;
}

/// Panel `panel`: coordinate xc against yc, a series per budget and scheme; true when a point at
/// the SNR cap was left out.
bool fillPanel(FigureSpec& f, const ResultSet& r, int point, int panel, int xc, int yc, bool legendEntries)
{
    const auto& budgets = r.spec.budgets;
    PanelSpec& p = f.panels[static_cast<std::size_t>(panel)];
    p.x.label = sixDCoordinateLabels()[xc];
    p.y.label = sixDCoordinateLabels()[yc];
    bool exactLeftOut = false;
    for (std::size_t bi = 0; bi < budgets.size(); ++bi)
        for (std::size_t s = 0; s < r.schemes.size(); ++s) {
            SeriesSpec series;
            for (const TrialResult& t : r.trials) {
                if (t.key.point != point || t.key.scheme != static_cast<int>(s) || t.key.budget != budgets[bi])
                    continue;
                const auto v = t.sixD.values();
                const double vx = v[static_cast<std::size_t>(xc)], vy = v[static_cast<std::size_t>(yc)];
                // An exact path's SNR sits at the cap (200 dB): drawn, it would squeeze every
                // other point of that axis into a sliver. Left out of this panel, said below.
                auto capped = [](int c, double value) { return c % 2 == 0 && value >= kSnrCapDb - 1e-6; };
                if (capped(xc, vx) || capped(yc, vy)) {
                    exactLeftOut = true;
                    continue;
                }
                series.x.push_back(vx);
                series.y.push_back(vy);
            }
            if (series.x.isEmpty())
                continue;
            const QColor color = seriesColor(static_cast<int>(s));
            QColor fill = color;
            fill.setAlpha(110);
            series.name = QStringLiteral("%1 n=%2").arg(schemeLabel(&r, static_cast<int>(s))).arg(budgets[bi]);
            series.panel = panel;
            series.line = SeriesSpec::Line::None;
            series.pen = QPen(color);
            series.marker = MarkerStyle{seriesMarker(static_cast<int>(bi)), QPen(color), QBrush(fill), legendEntries ? 6.0 : 4.0};
            series.adaptiveSampling = false;
            series.legend = legendEntries ? 0 : -1;
            f.series.push_back(std::move(series));
        }
    const RangeSpec padded = RangeSpec::data({RangeSpec::linearPad(0.08, 0.08, 1e-9)});
    p.x.range = padded;
    p.y.range = padded;
    return exactLeftOut;
}

/// The 6 x 6 matrix above a legend row: off-diagonal panel (i, j) plots coordinate j against i.
FigureSpec matrixFigure(const ResultSet& r, int point)
{
    FigureSpec f;
    f.grids.push_back(GridSpec{});
    f.panels.assign(36, PanelSpec{});
    LegendSpec& legend = f.legends.front();
    legend.place = LegendSpec::Place::Cell;
    legend.row = 1;
    legend.columns = 6;
    legend.columnsFirst = true;
    f.rowStretch.push_back({1, 0.001});
    bool first = true, exactLeftOut = false;
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
            const int index = i * 6 + j;
            PanelSpec& p = f.panels[static_cast<std::size_t>(index)];
            p.grid = 0;
            p.row = i;
            p.column = j;
            p.autoMargins = margin::kLeft | margin::kBottom;
            // Air above the top row and right of the last column, where the outer tick labels reach.
            // (top and right are not auto margins: they take the margins' values.)
            p.minimumMargins = QMargins(2, 2, 2, 2);
            p.margins = QMargins(2, i == 0 ? 10 : 2, j == 5 ? 10 : 2, 2);
            p.x.tickLabels = i == 5;
            p.y.tickLabels = j == 0;
            // Small panels: three ticks at most per axis.
            p.x.tickCount = p.y.tickCount = 3;
            if (i == j) {
                ItemSpec label;
                label.panel = index;
                label.xRatio = label.yRatio = true;
                label.a = QPointF(0.5, 0.5);
                label.text = shortLabels()[i];
                f.items.push_back(label);
                p.x.tickMarks = p.y.tickMarks = false;
                continue;
            }
            exactLeftOut = fillPanel(f, r, point, index, j, i, first) || exactLeftOut;
            first = false;
            if (i != 5)
                f.panels[static_cast<std::size_t>(index)].x.label.clear();
            if (j != 0)
                f.panels[static_cast<std::size_t>(index)].y.label.clear();
        }
    // The diagonal's corner panels carry the outer axes of the first row (SNR_K) and the last column
    // (phi_T): give them that coordinate's range (from a neighbour) and their tick labels.
    f.panels[0].y.range = RangeSpec::sameAs(1, Side::Left);
    f.panels[0].y.tickMarks = f.panels[0].y.tickLabels = true;
    f.panels[35].x.range = RangeSpec::sameAs(29, Side::Bottom);
    f.panels[35].x.tickMarks = f.panels[35].x.tickLabels = true;
    // Label the outer row and column with their coordinates.
    for (int k = 0; k < 6; ++k) {
        f.panels[static_cast<std::size_t>(30 + k)].x.label = shortLabels()[k];
        f.panels[static_cast<std::size_t>(k * 6)].y.label = shortLabels()[k];
    }
    f.addFootnote(QStringLiteral("SNR in dB, φ (direction error) in radians") + (exactLeftOut ? QStringLiteral("; ") + exactNote() : QString()));
    // Schemes sharing a path share its coordinates: in those panels their points lie on each other.
    noteCoincidences(f, QStringLiteral("points identical in some panels, drawn as rings: "), false);
    return f;
}

} // namespace

const QStringList& sixDCoordinateLabels()
{
    static const QStringList labels = {QStringLiteral("SNR_K (dB)"), QStringLiteral("φ_K (rad)"),
                                       QStringLiteral("SNR_V (dB)"), QStringLiteral("φ_V (rad)"),
                                       QStringLiteral("SNR_T (dB)"), QStringLiteral("φ_T (rad)")};
    return labels;
}

FigureSpec scatterMatrixFigure(const ViewData& data, int point, bool matrix, int xCoordinate, int yCoordinate)
{
    if (data.empty()) {
        FigureSpec f;
        f.panels[0].x.label = sixDCoordinateLabels().value(xCoordinate);
        f.panels[0].y.label = sixDCoordinateLabels().value(yCoordinate);
        return f;
    }
    if (matrix)
        return matrixFigure(*data.results, point);
    FigureSpec f;
    if (fillPanel(f, *data.results, point, 0, xCoordinate, yCoordinate, true))
        f.addFootnote(exactNote());
    noteCoincidences(f, QStringLiteral("identical points, drawn as rings: "));
    return f;
}

} // namespace kvlens::widgets
