// SPDX-License-Identifier: GPL-3.0-or-later
// Rate–distortion view.
#include "widgets/rate_distortion_view.h"

#include "widgets/figures/rate_distortion_figure.h"

#include <QCheckBox>
#include <QComboBox>
#include <QSignalBlocker>


namespace kvlens::widgets {

RateDistortionView::RateDistortionView(QWidget* parent)
    : ResultView(parent)
{
    m_metric = new QComboBox(this);
    m_metric->addItem(QStringLiteral("mean KL(exact ‖ quantized)"), static_cast<int>(DamageMetric::MeanKl));
    m_metric->addItem(QStringLiteral("output error ‖T−T̂‖²/‖T‖²"), static_cast<int>(DamageMetric::OutputError));
    m_metric->setToolTip(QStringLiteral("The damage on y. KL(p‖p̂) sees the keys only (a value error never moves the "
                                        "weights); the output's relative error sees keys and values."));
    m_logY = new QCheckBox(QStringLiteral("log y"), this);
    m_logY->setChecked(true);
    m_logY->setToolTip(QStringLiteral("Logarithmic damage axis (damage spans decades across budgets)."));
    m_pool = new QCheckBox(QStringLiteral("pool grid points"), this);
    m_pool->setToolTip(QStringLiteral("One point per scheme and budget over every grid point (each seed: the mean over "
                                      "the points), as for a whole model's layers and heads; off: the grid point chosen."));
    m_pool->setVisible(false);
    addOption(QStringLiteral("Damage:"), m_metric);
    addOption(QString(), m_logY);
    addOption(QString(), m_pool);
    setToolTip(viewDescription());
}

QString RateDistortionView::viewDescription() const
{
    return QStringLiteral("Schemes at equal bits: each scheme's damage against the exact bits per coordinate it spends "
                          "(K and V, overheads included), one point per nominal budget n: the mean over seeds of each "
                          "seed's mean damage, with a 95% t-interval over seeds (the seed is the unit of replication); "
                          "the grey line is the lower envelope, the points no other point beats on both bits and damage.");
}

QString RateDistortionView::envelopeName()
{
    return rateDistortionEnvelopeName();
}

void RateDistortionView::setMetric(DamageMetric metric)
{
    m_metric->setCurrentIndex(m_metric->findData(static_cast<int>(metric)));
}

void RateDistortionView::setPooled(bool pooled)
{
    m_pool->setChecked(pooled);
}

QString RateDistortionView::dataCsv() const
{
    if (!data().results)
        return QString();
    return QString::fromStdString(rateDistortionCsv(*data().results, m_rd));
}

double RateDistortionView::printAspect(double widthInches) const
{
    // At a single column the legend rows and the notes under the plot need more height.
    return widthInches < 5.0 ? 0.95 : 0.62;
}

void RateDistortionView::redraw()
{
    const auto metric = static_cast<DamageMetric>(m_metric->currentData().toInt());
    m_rd = RateDistortion{};
    RateDistortionChoice choice;
    choice.metric = metric;
    choice.logY = m_logY->isChecked();
    if (!data().empty()) {
        const ResultSet& r = *data().results;
        const bool severalPoints = r.spec.pointCount() > 1;
        if (m_shownRun != &r) {
            // A new run: a model's cells are pooled by default (the whole model), other grids are not.
            m_shownRun = &r;
            const QSignalBlocker block(m_pool);
            m_pool->setChecked(r.spec.regime == "model");
        }
        m_pool->setVisible(severalPoints);
        choice.pooled = severalPoints && m_pool->isChecked();
        choice.point = choice.pooled ? 0 : currentPoint();
        const bool kl = metric == DamageMetric::MeanKl;
        const std::shared_ptr<const RateDistortion> computed = kl ? data().rateDistortionKl : data().rateDistortionOutput;
        m_rd = choice.pooled ? rateDistortionPooled(r, metric) : computed ? *computed : rateDistortion(r, metric);
    }
    showFigure(rateDistortionFigure(data().results.get(), m_rd, choice));
}

} // namespace kvlens::widgets
