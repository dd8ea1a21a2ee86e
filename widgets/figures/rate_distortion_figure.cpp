// SPDX-License-Identifier: GPL-3.0-or-later
// The Rate–distortion figure, built from core's points without drawing anything.
#include "widgets/figures/rate_distortion_figure.h"

#include "widgets/plot_widget.h"
#include "widgets/view_data.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kvlens::widgets {

namespace {

/// What the footnote says about the lines drawn.
struct Drawn {
    std::set<int> seedCounts, budgets;
    QStringList notDrawn;
    bool nAscending = true;
};

/// One line per scheme through its budgets, ascending in bits.
void addSchemeLines(FigureSpec& f, const ResultSet& r, const RateDistortion& rd, const RateDistortionChoice& choice, Drawn& drawn)
{
    const bool kl = choice.metric == DamageMetric::MeanKl;
    const QString zeroText = kl ? QStringLiteral("KL = 0 exactly") : QStringLiteral("error = 0 exactly");
    for (std::size_t s = 0; s < r.schemes.size(); ++s) {
        std::vector<const RateDistortionPoint*> pts;
        for (const RateDistortionPoint& p : rd.points)
            if (p.point == choice.point && p.scheme == static_cast<int>(s))
                pts.push_back(&p);
        if (pts.empty())
            continue;
        std::sort(pts.begin(), pts.end(), [](const RateDistortionPoint* a, const RateDistortionPoint* b) {
            return a->bits != b->bits ? a->bits < b->bits : a->budget < b->budget;
        });
        for (std::size_t i = 1; i < pts.size(); ++i)
            drawn.nAscending = drawn.nAscending && pts[i]->budget > pts[i - 1]->budget;
        SeriesSpec line;
        int zeros = 0;
        for (const RateDistortionPoint* p : pts) {
            if (!p->finite) {
                drawn.notDrawn << QStringLiteral("%1 n=%2").arg(schemeLabel(&r, p->scheme)).arg(p->budget);
                continue;
            }
            if (choice.logY && !(p->damage > 0.0)) {
                ++zeros;
                continue;
            }
            drawn.seedCounts.insert(p->seeds);
            drawn.budgets.insert(p->budget);
            line.x << p->bits;
            line.y << p->damage;
            line.errorMinus << (std::isfinite(p->low) ? std::max(0.0, p->damage - p->low) : 0.0);
            line.errorPlus << (std::isfinite(p->high) ? std::max(0.0, p->high - p->damage) : 0.0);
        }
        line.name = schemeLabel(&r, static_cast<int>(s));
        if (zeros > 0 && line.x.isEmpty())
            line.name += QStringLiteral(": ") + zeroText;
        else if (zeros > 0)
            line.name += QStringLiteral(" (%1 at %2 budgets, not drawn)").arg(zeroText).arg(zeros);
        const QColor color = seriesColor(static_cast<int>(s));
        line.feed = SeriesSpec::Feed::Sorted;
        line.pen = QPen(color, 1.0);
        line.marker = MarkerStyle{seriesMarker(static_cast<int>(s)), QPen(color), QBrush(Qt::white), 6.0};
        line.errorPen = QPen(color, 1.0);
        line.whiskerWidth = 4; // narrower than the marker: a bar on y, not a mark on x
        f.series.push_back(std::move(line));
    }
}

/// What a point and a bar are, and which budget is which point.
QString pointsNote(const Drawn& drawn, const RateDistortion& rd, bool pooled)
{
    QStringList budgets;
    for (int n : drawn.budgets)
        budgets << QString::number(n);
    const std::set<int>& seedCounts = drawn.seedCounts;
    const QString seeds = seedCounts.size() == 1 ? QString::number(*seedCounts.begin())
                          : seedCounts.empty()   ? QStringLiteral("0")
                                                 : QStringLiteral("%1–%2").arg(*seedCounts.begin()).arg(*seedCounts.rbegin());
    const QString order = budgets.size() > 1 && drawn.nAscending
                              ? QStringLiteral("Lines: a scheme at n = %1 (left to right); ").arg(budgets.join(QStringLiteral(", ")))
                              : budgets.size() == 1 ? QStringLiteral("Each scheme at n = %1; ").arg(budgets.front())
                                                    : QString();
    const bool oneSeed = seedCounts.size() == 1 && *seedCounts.begin() == 1;
    const QString scope = pooled ? QStringLiteral("%1 grid points pooled. ").arg(rd.pooledPoints) : QString();
    return scope + order + (oneSeed ? QStringLiteral("one seed: its mean over queries, no interval.")
                                    : QStringLiteral("points: mean of the %1 seeds' means, bars: 95% "
                                                     "t-interval over seeds.").arg(seeds));
}

} // namespace

QString rateDistortionEnvelopeName()
{
    return QStringLiteral("lower envelope");
}

FigureSpec rateDistortionFigure(const ResultSet* results, const RateDistortion& rd, const RateDistortionChoice& choice)
{
    FigureSpec f;
    PanelSpec& panel = f.panels.front();
    const bool kl = choice.metric == DamageMetric::MeanKl;
    panel.x.label = QStringLiteral("exact bits per coordinate (K and V)");
    panel.y.label = kl ? QStringLiteral("mean KL(p‖p̂) (nats)") : QStringLiteral("output error ‖T−T̂‖²/‖T‖²");
    if (!results || results->trials.empty())
        return f;
    const ResultSet& r = *results;
    if (choice.logY)
        panel.y.ticks = AxisSpec::Ticks::LogTuned;
    Drawn drawn;
    addSchemeLines(f, r, rd, choice, drawn);
    noteCoincidences(f, QStringLiteral("identical points, drawn as rings: "));
    // The envelope: a broad grey band under the points (on the grid's layer, below the data),
    // added after the schemes' lines so that passing through their points is not a coincidence.
    SeriesSpec envelope;
    for (int i : rd.envelope(choice.point)) {
        const RateDistortionPoint& p = rd.points[static_cast<std::size_t>(i)];
        if (choice.logY && !(p.damage > 0.0))
            continue; // no place on a log axis (named in its scheme's legend entry)
        envelope.x << p.bits;
        envelope.y << p.damage;
    }
    if (!envelope.x.isEmpty()) {
        envelope.name = rateDistortionEnvelopeName();
        envelope.feed = SeriesSpec::Feed::Sorted;
        envelope.pen = QPen(QColor(0x99, 0x99, 0x99, 110), 5.0, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin);
        envelope.marker = MarkerStyle{Marker::None, QPen(QColor(0x99, 0x99, 0x99)), QBrush(Qt::white), 6.0};
        envelope.underGrid = true;
        f.series.push_back(std::move(envelope));
    }
    clipLogIntervals(f); // intervals reaching 0 on a log axis: a marker, not a bar to the floor
    using R = RangeSpec;
    panel.x.range = R::data({R::linearPad(0.06, 0.06, 0.5)});
    panel.y.range = choice.logY ? R::data({R::logPad(1.6)}) : R::data({R::linearPad(0.0, 0.08, 1e-12), R::atMostLower(0.0)});
    f.legends.front().place = LegendSpec::Place::Below;
    f.legends.front().columns = std::max(1, std::min(3, static_cast<int>(r.schemes.size()) + 1));
    f.below.push_back(BelowRow{0, {}});
    f.addFootnote(pointsNote(drawn, rd, choice.pooled));
    if (!drawn.notDrawn.isEmpty())
        f.addFootnote(QStringLiteral("not drawn (a seed's damage is not finite): ") + drawn.notDrawn.join(QStringLiteral(", ")));
    return f;
}

} // namespace kvlens::widgets
