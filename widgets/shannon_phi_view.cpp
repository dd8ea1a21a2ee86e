// SPDX-License-Identifier: GPL-3.0-or-later
// Shannon-phi plane view.
#include "widgets/shannon_phi_view.h"

#include "core/metrics/vector_metrics.h"

#include <QComboBox>

#include <algorithm>

namespace kvlens::widgets {

ShannonPhiView::ShannonPhiView(QWidget* parent)
    : ResultView(parent)
{
    m_site = new QComboBox(this);
    m_site->addItems({QStringLiteral("keys K"), QStringLiteral("values V"), QStringLiteral("output T")});
    m_site->setToolTip(QStringLiteral("Which vectors to plot: cached keys, cached values, or attention outputs."));
    m_mode = new QComboBox(this);
    m_mode->addItems({QStringLiteral("per vector"), QStringLiteral("per trial (means)")});
    m_mode->setToolTip(QStringLiteral("Every sampled vector, or one point per trial (the 6D frame's means)."));
    addOption(QStringLiteral("Site:"), m_site);
    addOption(QStringLiteral("Points:"), m_mode);
    setToolTip(viewDescription());
}

QString ShannonPhiView::viewDescription() const
{
    return QStringLiteral("Scale error (SNR in dB, higher is better) against direction error φ (radians, lower is "
                          "better) of each vector: an ideal n-bit code sits near the 6.02·n dB line.");
}

void ShannonPhiView::setSite(Site site)
{
    m_site->setCurrentIndex(static_cast<int>(site));
}

void ShannonPhiView::setPerVector(bool perVector)
{
    m_mode->setCurrentIndex(perVector ? 0 : 1);
}

QString ShannonPhiView::coincidenceNote() const
{
    QStringList lines;
    if (!m_coincidences.isEmpty())
        lines << QStringLiteral("identical points, drawn as rings:") << m_coincidences;
    if (!m_exactClouds.isEmpty()) {
        // One line, shortened: a model run can leave out dozens.
        QStringList shown = m_exactClouds.mid(0, 3);
        if (m_exactClouds.size() > 3)
            shown << QStringLiteral("%1 more").arg(m_exactClouds.size() - 3);
        lines << QStringLiteral("exact on this path (SNR ∞), not drawn: ") + shown.join(QStringLiteral(", "));
    }
    return lines.join(QLatin1Char('\n'));
}

void ShannonPhiView::redraw()
{
    m_plot->resetPlot();
    m_coincidences.clear();
    m_drawOrder.clear();
    m_exactClouds.clear();
    const int site = m_site->currentIndex();
    const bool perVector = m_mode->currentIndex() == 0;
    static const char* names[] = {"K", "V", "T"};
    m_plot->xAxis->setLabel(QStringLiteral("direction error φ_%1 (rad)").arg(QLatin1String(names[site])));
    m_plot->yAxis->setLabel(QStringLiteral("SNR_%1 (dB)").arg(QLatin1String(names[site])));
    if (data().empty()) {
        m_plot->replot();
        return;
    }
    const ResultSet& r = *data().results;
    const auto& budgets = r.spec.budgets;
    struct Cloud {
        int scheme = 0, budgetIndex = 0;
        QString name;
        QVector<double> x, y;
        int coincidesWith = -1; // index of an earlier cloud with exactly the same points
        double spread = 0.0;
    };
    std::vector<Cloud> clouds;
    for (std::size_t s = 0; s < r.schemes.size(); ++s) {
        for (std::size_t bi = 0; bi < budgets.size(); ++bi) {
            Cloud c;
            c.scheme = static_cast<int>(s);
            c.budgetIndex = static_cast<int>(bi);
            c.name = QStringLiteral("%1 n=%2").arg(schemeName(c.scheme)).arg(budgets[bi]);
            for (const TrialResult& t : r.trials) {
                if (t.key.point != currentPoint() || t.key.scheme != c.scheme || t.key.budget != budgets[bi])
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
                m_exactClouds.append(c.name);
                continue;
            }
            c.x = std::move(x);
            c.y = std::move(y);
            clouds.push_back(std::move(c));
        }
    }
    m_coincidences.clear();
    for (std::size_t i = 0; i < clouds.size(); ++i) {
        for (std::size_t j = 0; j < i && clouds[i].coincidesWith < 0; ++j)
            if (clouds[j].coincidesWith < 0 && clouds[j].x == clouds[i].x && clouds[j].y == clouds[i].y)
                clouds[i].coincidesWith = static_cast<int>(j);
        if (clouds[i].coincidesWith >= 0)
            m_coincidences.append(QStringLiteral("%1 = %2").arg(clouds[i].name, clouds[clouds[i].coincidesWith].name));
    }
    // Draw order: the widest cloud at the back, so tight ones are not buried under it; a cloud
    // identical to another is drawn after it, as rings around its points.
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
    m_drawOrder.clear();
    std::vector<QCPGraph*> graphs(clouds.size(), nullptr);
    const double size = perVector ? 3.5 : 7.0;
    for (std::size_t i : order) {
        const Cloud& c = clouds[i];
        // Colour by scheme, darker for a larger budget (the marker shape says the budget too).
        const QColor color = shadeForLevel(seriesColor(c.scheme), c.budgetIndex, static_cast<int>(budgets.size()));
        QCPGraph* g = m_plot->addScatterSeries(c.name, color, seriesShape(c.budgetIndex), size);
        QColor edge = color, fill = color;
        // Dense per-vector clouds: faint markers, so where clouds overlap both show through.
        edge.setAlpha(perVector ? 120 : 255);
        fill.setAlpha(perVector ? 40 : 110);
        if (c.coincidesWith >= 0)
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(color, 1.2), Qt::NoBrush, size + 4.0));
        else
            g->setScatterStyle(QCPScatterStyle(seriesShape(c.budgetIndex), QPen(edge, 0.8), QBrush(fill), size));
        g->setData(c.x, c.y);
        graphs[i] = g;
        m_drawOrder.append(c.name);
    }
    // The legend keeps the scheme-by-budget order whatever the drawing order.
    for (QCPGraph* g : graphs) {
        g->removeFromLegend();
        g->addToLegend();
    }
    finishPlot();
    // Reference lines: an ideal n-bit code gains 6.02 dB per bit (Shannon view).
    const QCPRange xr = m_plot->xAxis->range();
    double yHigh = m_plot->yAxis->range().upper;
    for (int n : budgets) {
        const double db = 6.02 * n;
        auto* line = new QCPItemStraightLine(m_plot);
        line->point1->setCoords(xr.lower, db);
        line->point2->setCoords(xr.upper, db);
        line->setPen(QPen(QColor(0x66, 0x66, 0x66), 0, Qt::DashLine));
        auto* label = new QCPItemText(m_plot);
        // At the right end, where the direction error is largest and the clouds lie well below the lines.
        label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
        label->position->setCoords(xr.upper, db);
        label->setText(QStringLiteral("6.02·%1 dB").arg(n));
        label->setColor(QColor(0x44, 0x44, 0x44));
        yHigh = std::max(yHigh, db + 2.0);
    }
    m_plot->yAxis->setRangeUpper(yHigh);
    m_plot->xAxis->setRangeLower(std::min(0.0, m_plot->xAxis->range().lower));
    if (!m_coincidences.isEmpty() || !m_exactClouds.isEmpty()) {
        auto* note = new QCPItemText(m_plot);
        note->position->setType(QCPItemPosition::ptAxisRectRatio);
        // Bottom left: a small direction error comes with a high SNR, so no vector lies there.
        note->position->setCoords(0.01, 0.98);
        note->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
        note->setTextAlignment(Qt::AlignLeft);
        note->setText(coincidenceNote());
        note->setColor(QColor(0x44, 0x44, 0x44));
    }
    m_plot->placeLegendBelow(static_cast<int>(r.schemes.size()));
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
