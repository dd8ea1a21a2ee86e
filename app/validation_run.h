// SPDX-License-Identifier: GPL-3.0-or-later
// Paper B's validation as three runs, shared by the window and `kvlens --batch --validate`.
#pragma once

#include "app/backend_factory.h"
#include "core/common/result.h"
#include "core/spec/result.h"
#include "core/experiment/runner.h"
#include "core/analysis/validation.h"

#include <functional>
#include <optional>
#include <string>

namespace kvlens::app {

/// What the three runs gave.
struct ValidationRun {
    std::optional<Error> failure;        ///< the reference or the other-RNG run failed (the report is empty)
    bool cancelled = false;              ///< a run was cancelled (the report is empty)
    std::optional<ResultSet> reference;  ///< the CPU run with the spec's RNG
    stats::ValidationReport report;      ///< with implementationNote set when OpenCL did not run
};

/// Runs `spec` on the CPU (the reference), on OpenCL (`device`, or the spec's when empty) with the
/// same RNG, and on the CPU with the other RNG, taking backends from `pool`; `progress(i, label)`
/// gives the Progress of run i = 0, 1, 2 ("reference (cpu)", ...). The comparison counts a trial
/// beyond the tolerance against the implementation only when none of its decisions is on a rounding
/// boundary (trialBoundaryDecisions).
ValidationRun runValidationSet(const ExperimentSpec& spec, const std::string& device, BackendPool& pool, int threads,
                               const std::function<Progress*(int run, const std::string& label)>& progress);

} // namespace kvlens::app
