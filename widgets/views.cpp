// SPDX-License-Identifier: GPL-3.0-or-later
// The views in tab order: one table, from which the view factory and the list of view ids both come.
#include "widgets/views.h"

#include "widgets/comparison_view.h"
#include "widgets/kl_distribution_view.h"
#include "widgets/model_map_view.h"
#include "widgets/output_view.h"
#include "widgets/rate_distortion_view.h"
#include "widgets/recall_view.h"
#include "widgets/scatter_matrix_view.h"
#include "widgets/shannon_phi_view.h"
#include "widgets/sweep_view.h"
#include "widgets/teaching_view.h"
#include "widgets/theory_view.h"
#include "widgets/validation_view.h"

namespace kvlens::widgets {

namespace {

template <typename View>
ResultView* make(QWidget* parent)
{
    return new View(parent);
}

/// A tab: its id and how createViews makes it (null: the window makes it, as it runs its own work).
struct ViewEntry {
    const char* id;
    ResultView* (*make)(QWidget*);
};

/// Every view, in tab order.
const ViewEntry kViews[] = {
    {ShannonPhiView::kId, make<ShannonPhiView>},
    {ScatterMatrixView::kId, make<ScatterMatrixView>},
    {KlDistributionView::kId, make<KlDistributionView>},
    {RecallView::kId, make<RecallView>},
    {ComparisonView::kId, make<ComparisonView>},
    {TheoryView::kId, make<TheoryView>},
    {SweepView::kId, make<SweepView>},
    {RateDistortionView::kId, make<RateDistortionView>},
    {ModelMapView::kId, make<ModelMapView>},
    {OutputView::kId, nullptr},
    {TeachingView::kId, make<TeachingView>},
    {ValidationView::kId, nullptr},
};

} // namespace

std::vector<ResultView*> createViews(QWidget* parent)
{
    std::vector<ResultView*> views;
    for (const ViewEntry& v : kViews)
        if (v.make)
            views.push_back(v.make(parent));
    return views;
}

QStringList viewIds()
{
    QStringList ids;
    for (const ViewEntry& v : kViews)
        ids << QString::fromLatin1(v.id);
    return ids;
}

} // namespace kvlens::widgets
