// SPDX-License-Identifier: GPL-3.0-or-later
// View factory.
#include "widgets/views.h"

#include "widgets/comparison_view.h"
#include "widgets/kl_distribution_view.h"
#include "widgets/rate_distortion_view.h"
#include "widgets/recall_view.h"
#include "widgets/scatter_matrix_view.h"
#include "widgets/shannon_phi_view.h"
#include "widgets/model_map_view.h"
#include "widgets/sweep_view.h"
#include "widgets/teaching_view.h"
#include "widgets/theory_view.h"

namespace kvlens::widgets {

std::vector<ResultView*> createViews(QWidget* parent)
{
    return {new ShannonPhiView(parent),     new ScatterMatrixView(parent), new KlDistributionView(parent),
            new RecallView(parent),         new ComparisonView(parent),    new TheoryView(parent),
            new SweepView(parent),          new RateDistortionView(parent), new ModelMapView(parent),
            new TeachingView(parent)};
}

QStringList viewIds()
{
    return {QStringLiteral("shannon_phi"),     QStringLiteral("scatter_6d"), QStringLiteral("kl_distribution"),
            QStringLiteral("routing_recall"),  QStringLiteral("comparisons"), QStringLiteral("theory"),
            QStringLiteral("sweep"),           QStringLiteral("rate_distortion"), QStringLiteral("model_map"),
            QStringLiteral("output"),          QStringLiteral("teaching"),        QStringLiteral("validation")};
}

} // namespace kvlens::widgets
