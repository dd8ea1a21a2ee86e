// SPDX-License-Identifier: GPL-3.0-or-later
// Paper B's validation: separate implementation differences from seed variance with KS tests.
#pragma once

#include "core/spec/result.h"
#include "core/stats/p_value.h"

#include <functional>
#include <string>
#include <vector>

namespace kvlens::stats {

/// One metric of one (point, scheme, budget), compared across the three runs of a validation:
/// the reference (CPU backend, the spec's RNG), the same spec on the other backend (same RNG:
/// the same draws, so any difference is the implementation's), and the CPU backend with the
/// other RNG (different draws: differences are seed variance and must not be significant).
struct ValidationRow {
    int point = 0, scheme = 0, budget = 0;
    std::string metric;               ///< "kl_mean", "recall", "snr_k", ..., per trial
    int trials = 0;
    double implMaxRelDiff = 0.0;      ///< max over paired trials of |a - b| / max(|a|, tiny)
    double implKsD = 0.0;
    PValue implKsP;
    double seedKsD = 0.0;
    PValue seedKsP;
    /// Paired trials beyond the tolerance whose quantization has a decision on a boundary
    /// (trialBoundaryDecisions > 0): there the two backends may rightly decide apart.
    int boundaryTrials = 0;
    std::string verdict;              ///< "agree", "agree (boundary decision)", "implementation difference", "seed-dependent"
};

struct ValidationReport {
    std::string referenceLabel, implementationLabel, seedLabel; ///< what each run was ("cpu, mt19937_64", ...)
    bool implementationRan = false;   ///< false when the other backend was unavailable
    std::string implementationNote;   ///< why not, or the fallback note
    double tolerance = 1e-4;          ///< relative agreement required of the same-RNG pair
    std::vector<ValidationRow> rows;

    /// Rows whose verdict is "implementation difference".
    int implementationDifferences() const;
};

/// Compares the runs (reference and seed must come from the same spec but for the RNG;
/// `implementation` may be null when the other backend could not run).
/// `boundaryDecisions` (may be empty) counts a reference trial's decisions within float rounding of a
/// boundary (trialBoundaryDecisions): a pair beyond the tolerance is an implementation difference
/// only when its trial has none, since a norm on an fp16 rounding midpoint or a QJL projection at
/// zero may round either way in a correct implementation, and then moves that trial's metrics.
ValidationReport validateRuns(const ResultSet& reference, const ResultSet* implementation, const ResultSet& seed,
                              double tolerance = 1e-4,
                              const std::function<int(const TrialResult&)>& boundaryDecisions = {});

/// The report as CSV.
std::string validationCsv(const ResultSet& reference, const ValidationReport& report);
/// The report as aligned text.
std::string validationText(const ResultSet& reference, const ValidationReport& report);

} // namespace kvlens::stats
