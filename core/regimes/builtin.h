// SPDX-License-Identifier: GPL-3.0-or-later
// The built-in synthetic regimes (design section 3) and the helper they share to draw a dataset.
#pragma once

#include "core/regimes/regime.h"

#include <functional>
#include <vector>

namespace kvlens {

/// The three tensor families a law is drawn for.
enum class Site { Keys, Values, Queries };

/// Draws rows x d samples of the law at `site` into `out`.
using RowLaw = std::function<void(RowMatrixXf& out, int rows, Site site, Rng& rng)>;

/// Draws keys, values and queries (and, if shape.calibration > 0, the calibration sets) from
/// `law`, each set from its own named stream of `seed`, so adding one set never changes another.
Dataset drawDataset(const DataShape& shape, EngineKind engine, std::uint64_t seed, const RowLaw& law);

const Regime& gaussianRegime();
const Regime& heavyTailRegime();
const Regime& lowRankRegime();
const Regime& spectralDecayRegime();
const Regime& outlierChannelsRegime();
const Regime& kvSubspaceRegime();
const Regime& focusedRegime();

std::vector<const Regime*> builtinRegimes();

} // namespace kvlens
