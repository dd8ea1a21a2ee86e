// SPDX-License-Identifier: GPL-3.0-or-later
// What the views are fed: an immutable result set plus everything derived from it off the GUI thread.
#pragma once

#include "core/common/cancel.h"
#include "core/spec/result.h"
#include "core/analysis/figures.h"
#include "core/analysis/comparison.h"
#include "core/analysis/proxies.h"
#include "core/analysis/model_lens.h"
#include "core/analysis/rate_distortion.h"

#include <QMetaType>
#include <QString>

#include <memory>
#include <vector>

namespace kvlens::widgets {

/// One snapshot of a run. All parts are immutable and shared between views; `comparisons`
/// is empty until the run has finished (`partial` is then false).
struct ViewData {
    std::shared_ptr<const ResultSet> results;
    std::shared_ptr<const FigureData> figures;
    std::shared_ptr<const std::vector<stats::ComparisonRow>> comparisons;
    std::shared_ptr<const std::vector<stats::ProxyRow>> proxies; ///< with the comparisons
    std::shared_ptr<const std::vector<MapValue>> modelMap;      ///< a model run's cells (empty otherwise)
    std::shared_ptr<const std::vector<SensitivityRow>> sensitivity; ///< with K-only and V-only
    /// Damage against exact bits (mean KL; the output's relative error), always; a ViewData made
    /// without makeViewData may lack them (the view then computes them from `results`).
    std::shared_ptr<const RateDistortion> rateDistortionKl, rateDistortionOutput;
    bool partial = false;
    /// Finished trials not in `results`: a cancelled run keeps, at each (point, budget), only the
    /// seeds every scheme finished (core's sharedSeedTrials), so that its figures compare schemes
    /// on the same draws; this many were left out.
    long long leftOut = 0;

    bool empty() const { return !results || results->trials.empty(); }
};

/// Builds the full view data of a finished (or partial) result set: figure data always,
/// the comparison table only when `withComparisons`. Runs numerics: call it off the GUI thread.
/// `cancel` is polled inside the comparisons (a newer request supersedes this one: Cancelled is thrown).
ViewData makeViewData(std::shared_ptr<const ResultSet> results, bool withComparisons, const CancelToken& cancel = {});

/// Name of scheme `index` of `results` as figures print it, "?" when there is none.
QString schemeLabel(const ResultSet* results, int index);

} // namespace kvlens::widgets

Q_DECLARE_METATYPE(kvlens::widgets::ViewData)
