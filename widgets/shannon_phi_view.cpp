// SPDX-License-Identifier: GPL-3.0-or-later
// Shannon-phi plane view.
#include "widgets/shannon_phi_view.h"

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

void ShannonPhiView::redraw()
{
    m_plot->resetPlot();
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
    for (std::size_t bi = 0; bi < budgets.size(); ++bi) {
        for (std::size_t s = 0; s < r.schemes.size(); ++s) {
            QVector<double> x, y;
            for (const TrialResult& t : r.trials) {
                if (t.key.point != currentPoint() || t.key.scheme != static_cast<int>(s) || t.key.budget != budgets[bi])
                    continue;
                if (perVector) {
                    const VectorSamples& v = site == 0 ? t.samplesK : site == 1 ? t.samplesV : t.samplesT;
                    for (std::size_t i = 0; i < v.phi.size(); ++i) {
                        x.push_back(v.phi[i]);
                        y.push_back(v.snrDb[i]);
                    }
                } else {
                    x.push_back(site == 0 ? t.sixD.phiK : site == 1 ? t.sixD.phiV : t.sixD.phiT);
                    y.push_back(site == 0 ? t.sixD.snrK : site == 1 ? t.sixD.snrV : t.sixD.snrT);
                }
            }
            if (x.isEmpty())
                continue;
            QCPGraph* g = m_plot->addScatterSeries(
                QStringLiteral("%1 n=%2").arg(schemeName(static_cast<int>(s))).arg(budgets[bi]),
                seriesColor(static_cast<int>(s)), seriesShape(static_cast<int>(bi)), perVector ? 3.5 : 7.0);
            g->setData(x, y);
        }
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
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
        label->position->setCoords(xr.lower, db);
        label->setText(QStringLiteral("6.02·%1 dB").arg(n));
        label->setColor(QColor(0x44, 0x44, 0x44));
        yHigh = std::max(yHigh, db + 2.0);
    }
    m_plot->yAxis->setRangeUpper(yHigh);
    m_plot->xAxis->setRangeLower(std::min(0.0, m_plot->xAxis->range().lower));
    m_plot->placeLegendBelow(static_cast<int>(r.schemes.size()));
    m_plot->applyPaperStyle(m_plot->font().pointSizeF());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace kvlens::widgets
