// SPDX-License-Identifier: GPL-3.0-or-later
// Paper B's validation: separate implementation differences from seed variance with KS tests.
#pragma once

#include "core/experiment/result.h"
#include "core/stats/p_value.h"

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
    std::string verdict;              ///< "agree", "implementation difference", "seed-dependent"
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
ValidationReport validateRuns(const ResultSet& reference, const ResultSet* implementation, const ResultSet& seed,
                              double tolerance = 1e-4);

/// The report as CSV.
std::string validationCsv(const ResultSet& reference, const ValidationReport& report);
/// The report as aligned text.
std::string validationText(const ResultSet& reference, const ValidationReport& report);

} // namespace kvlens::stats
