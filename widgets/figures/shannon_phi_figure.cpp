// SPDX-License-Identifier: GPL-3.0-or-later
// The Shannon-phi plane, built from the run's trials without drawing anything.
#include "widgets/figures/shannon_phi_figure.h"

#include "core/metrics/vector_metrics.h"
#include "widgets/plot_widget.h"

#include <algorithm>

namespace kvlens::widgets {

namespace {

struct Cloud {
    int scheme = 0, budgetIndex = 0;
    QString name;
    QVector<double> x, y;
    int coincidesWith = -1; // index of an earlier cloud with exactly the same points
    double spread = 0.0;
};

/// The clouds of every scheme and budget at `point`, those at the SNR cap left out (named in `exact`).
std::vector<Cloud> collectClouds(const ResultSet& r, int point, int site, bool perVector, QStringList& exact)
{
    std::vector<Cloud> clouds;
    const auto& budgets = r.spec.budgets;
    for (std::size_t s = 0; s < r.schemes.size(); ++s)
        for (std::size_t bi = 0; bi < budgets.size(); ++bi) {
            Cloud c;
            c.scheme = static_cast<int>(s);
            c.budgetIndex = static_cast<int>(bi);
            c.name = QStringLiteral("%1 n=%2").arg(schemeLabel(&r, c.scheme)).arg(budgets[bi]);
            for (const TrialResult& t : r.trials) {
                if (t.key.point != point || t.key.scheme != c.scheme || t.key.budget != budgets[bi])
                    continue;
                if (perVector) {
                    const VectorSamples& v = site == 0 ? t.samplesK : site == 1 ? t.samplesV : t.samplesT;
                    for (std::size_t i = 0; i < v.phi.size(); ++i) {
                        c.x.push_back(v.phi[i]);
                        c.y.push_back(v.snrDb[i]);
                    }
                } else {
                    c.x.push_back(site == 0 ? t.sixD.phiK : site == 1 ? t.sixD.phiV : t.sixD.phiT);
                    c.y.push_back(site == 0 ? t.sixD.snrK : site == 1 ? t.sixD.snrV : t.sixD.snrT);
                }
            }
            if (c.x.isEmpty())
                continue;
            // An exact path sits at the SNR cap: leave the cloud out (named in the note); a cloud
            // with a few exact vectors keeps the rest.
            QVector<double> x, y;
            for (qsizetype i = 0; i < c.x.size(); ++i)
                if (c.y[i] < kSnrCapDb - 1e-6) {
                    x.push_back(c.x[i]);
                    y.push_back(c.y[i]);
                }
            if (x.isEmpty()) {
                exact.append(c.name);
                continue;
            }
            c.x = std::move(x);
            c.y = std::move(y);
            clouds.push_back(std::move(c));
        }
    return clouds;
}

/// Back to front: the widest cloud at the back, so tight ones are not buried under it; a cloud
/// identical to another is drawn after it, as rings around its points.
std::vector<std::size_t> drawingOrder(std::vector<Cloud>& clouds)
{
    auto spreadOf = [](const QVector<double>& v) {
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
        return *hi - *lo;
    };
    double xSpan = 0.0, ySpan = 0.0;
    for (Cloud& c : clouds) {
        xSpan = std::max(xSpan, spreadOf(c.x));
        ySpan = std::max(ySpan, spreadOf(c.y));
    }
    for (Cloud& c : clouds)
        c.spread = (xSpan > 0 ? spreadOf(c.x) / xSpan : 0.0) + (ySpan > 0 ? spreadOf(c.y) / ySpan : 0.0);
    std::vector<std::size_t> order(clouds.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const bool ringA = clouds[a].coincidesWith >= 0, ringB = clouds[b].coincidesWith >= 0;
        if (ringA != ringB)
            return ringB;
        return clouds[a].spread > clouds[b].spread;
    });
    return order;
}

QString noteText(const QStringList& coincidences, const QStringList& exactClouds)
{
    QStringList lines;
    if (!coincidences.isEmpty())
        lines << QStringLiteral("identical points, drawn as rings:") << coincidences;
    if (!exactClouds.isEmpty()) {
        // One line, shortened: a model run can leave out dozens.
        QStringList shown = exactClouds.mid(0, 3);
        if (exactClouds.size() > 3)
            shown << QStringLiteral("%1 more").arg(exactClouds.size() - 3);
        lines << QStringLiteral("exact on this path (SNR ∞), not drawn: ") + shown.join(QStringLiteral(", "));
    }
    return lines.join(QLatin1Char('\n'));
}

} // namespace

ShannonPhiFigure shannonPhiFigure(const ViewData& data, int point, int site, bool perVector)
{
    ShannonPhiFigure out;
    FigureSpec& f = out.figure;
    static const char* names[] = {"K", "V", "T"};
    site = std::clamp(site, 0, 2);
    f.panels[0].x.label = QStringLiteral("direction error φ_%1 (rad)").arg(QLatin1String(names[site]));
    f.panels[0].y.label = QStringLiteral("SNR_%1 (dB)").arg(QLatin1String(names[site]));
    if (data.empty())
        return out;
    const ResultSet& r = *data.results;
    const auto& budgets = r.spec.budgets;
    std::vector<Cloud> clouds = collectClouds(r, point, site, perVector, out.exactClouds);
    for (std::size_t i = 0; i < clouds.size(); ++i) {
        for (std::size_t j = 0; j < i && clouds[i].coincidesWith < 0; ++j)
            if (clouds[j].coincidesWith < 0 && clouds[j].x == clouds[i].x && clouds[j].y == clouds[i].y)
                clouds[i].coincidesWith = static_cast<int>(j);
        if (clouds[i].coincidesWith >= 0)
            out.coincidences.append(QStringLiteral("%1 = %2").arg(clouds[i].name, clouds[clouds[i].coincidesWith].name));
    }
    const double size = perVector ? 3.5 : 7.0;
    std::vector<int> seriesOf(clouds.size(), -1);
    for (std::size_t i : drawingOrder(clouds)) {
        const Cloud& c = clouds[i];
        // Colour by scheme, darker for a larger budget (the marker shape says the budget too).
        const QColor color = shadeForLevel(seriesColor(c.scheme), c.budgetIndex, static_cast<int>(budgets.size()));
        SeriesSpec s;
        s.name = c.name;
        s.line = SeriesSpec::Line::None;
        s.pen = QPen(color);
        s.adaptiveSampling = false; // dense clouds must show every point, live and in exports
        QColor edge = color, fill = color;
        // Dense per-vector clouds: faint markers, so where clouds overlap both show through.
        edge.setAlpha(perVector ? 120 : 255);
        fill.setAlpha(perVector ? 40 : 110);
        s.marker = c.coincidesWith >= 0
                       ? MarkerStyle{Marker::Circle, QPen(color, 1.2), QBrush(Qt::NoBrush), size + 4.0}
                       : MarkerStyle{seriesMarker(c.budgetIndex), QPen(edge, 0.8), QBrush(fill), size};
        s.x = c.x;
        s.y = c.y;
        seriesOf[i] = static_cast<int>(f.series.size());
        f.series.push_back(std::move(s));
        out.drawOrder.append(c.name);
    }
    // The legend keeps the scheme-by-budget order whatever the drawing order.
    f.legends[0].entries.assign(seriesOf.begin(), seriesOf.end());
    double topLine = -INFINITY;
    for (int n : budgets) {
        // Reference lines: an ideal n-bit code gains 6.02 dB per bit (Shannon view).
        const double db = 6.02 * n;
        ItemSpec line;
        line.kind = ItemSpec::Kind::StraightLine;
        line.a = QPointF(0.0, db);
        line.b = QPointF(1.0, db);
        line.pen = QPen(QColor(0x66, 0x66, 0x66), 0, Qt::DashLine);
        f.items.push_back(line);
        ItemSpec label;
        // At the right end, where the direction error is largest and the clouds lie well below the lines.
        label.xRatio = true;
        label.a = QPointF(1.0, db);
        label.align = Qt::AlignRight | Qt::AlignBottom;
        label.text = QStringLiteral("6.02·%1 dB").arg(n);
        label.color = QColor(0x44, 0x44, 0x44);
        f.items.push_back(label);
        topLine = std::max(topLine, db + 2.0);
    }
    using R = RangeSpec;
    f.panels[0].x.range = R::data({R::logPad(1.15), R::linearPad(0.04, 0.04), R::atMostLower(0.0)});
    f.panels[0].y.range = R::data({R::logPad(1.15), R::linearPad(0.04, 0.04)});
    if (!budgets.empty())
        f.panels[0].y.range.steps.push_back(R::atLeastUpper(topLine));
    out.note = noteText(out.coincidences, out.exactClouds);
    if (!out.note.isEmpty()) {
        ItemSpec note;
        note.xRatio = note.yRatio = true;
        // Bottom left: a small direction error comes with a high SNR, so no vector lies there.
        note.a = QPointF(0.01, 0.98);
        note.align = Qt::AlignLeft | Qt::AlignBottom;
        note.textAlign = Qt::AlignLeft;
        note.text = out.note;
        note.color = QColor(0x44, 0x44, 0x44);
        f.items.push_back(note);
    }
    f.legends[0].place = LegendSpec::Place::Below;
    f.legends[0].columns = static_cast<int>(r.schemes.size());
    f.below.push_back(BelowRow{0, {}});
    return out;
}

} // namespace kvlens::widgets
