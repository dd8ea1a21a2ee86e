// SPDX-License-Identifier: GPL-3.0-or-later
// Shannon-phi plane view.
#include "widgets/shannon_phi_view.h"

#include "widgets/figures/shannon_phi_figure.h"

#include <QComboBox>

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
    return m_note;
}

void ShannonPhiView::redraw()
{
    ShannonPhiFigure f = shannonPhiFigure(data(), currentPoint(), m_site->currentIndex(), m_mode->currentIndex() == 0);
    m_coincidences = f.coincidences;
    m_drawOrder = f.drawOrder;
    m_exactClouds = f.exactClouds;
    m_note = f.note;
    showFigure(std::move(f.figure));
}

} // namespace kvlens::widgets
