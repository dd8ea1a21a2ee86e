// SPDX-License-Identifier: GPL-3.0-or-later
// Norm-rounding midpoints, codebook thresholds and QJL zero crossings within a margin.
#include "core/experiment/boundary_decisions.h"

#include "core/experiment/backend.h"
#include "core/experiment/trial.h"

namespace kvlens {

int boundaryDecisions(const PathPlan& plan, const RowMatrixXf& x, double margin)
{
    return plan.boundaryDecisions(x, margin);
}

int trialBoundaryDecisions(const ExperimentSpec& spec, const TrialKey& key)
{
    const ExperimentSpec point = spec.pointSpec(key.point);
    CpuBackend cpu(1);
    auto group = prepareTrialGroup(point, key.point, key.seedIndex, cpu);
    if (!group)
        return 0;
    const SchemeConfig& scheme = point.schemes[static_cast<std::size_t>(key.scheme)];
    const Dataset& data = group->data;
    auto rowsOrNull = [](const RowMatrixXf& m) { return m.rows() > 0 ? &m : nullptr; };
    const PlanInputs keyInputs{rowsOrNull(data.calibrationKeys), rowsOrNull(data.calibrationQueries), group->keySpectra};
    const PlanInputs valueInputs{rowsOrNull(data.calibrationValues), rowsOrNull(data.calibrationQueries),
                                 group->valueSpectra};
    const PathPlan keyPlan = planPath(scheme.key, key.budget, point.d, PathSite::Keys, keyInputs, point.engine, group->seed);
    const PathPlan valuePlan =
        planPath(scheme.value, key.budget, point.d, PathSite::Values, valueInputs, point.engine, group->seed);
    return boundaryDecisions(keyPlan, data.keys) + boundaryDecisions(valuePlan, data.values);
}

} // namespace kvlens
