// SPDX-License-Identifier: GPL-3.0-or-later
// The teaching figure of a run: its one-query chain for the run's first pair of schemes.
#pragma once

#include "core/common/result.h"
#include "core/metrics/teaching.h"
#include "core/spec/spec.h"

namespace kvlens {

/// The teaching configuration that shows a run's first scheme pair on its own data law: the
/// run's regime and parameters (its first grid point), d, N (capped at the teaching limit),
/// score scale, engine and first seed, the first budget, and the first two schemes the teaching
/// chain can draw (named, data-oblivious). Fails, saying why, when the run reads its data from
/// files (imported or model regimes) or has fewer than two such schemes.
Result<TeachingConfig> teachingConfigForRun(const ExperimentSpec& spec);

} // namespace kvlens
