// SPDX-License-Identifier: GPL-3.0-or-later
// The teaching figure's configuration taken from a run: its regime, sizes and two named schemes.
#include "core/analysis/teaching_pair.h"

#include "core/quant/scheme.h"
#include "core/regimes/regime.h"

#include <algorithm>

namespace kvlens {

Result<TeachingConfig> teachingConfigForRun(const ExperimentSpec& spec)
{
    const ExperimentSpec point = spec.pointCount() > 1 ? spec.pointSpec(0) : spec;
    // A seed-independent regime reads its data from files: there is no law to draw a pair from.
    if (const Regime* regime = findRegime(point.regime); regime && regime->seedIndependent())
        return Error{"regime", "the teaching figure draws its own data; the '" + point.regime +
                                   "' regime reads files, so there is no data law to draw from"};
    TeachingConfig config;
    config.regime = point.regime;
    config.regimeParams = point.regimeParams;
    config.d = point.d;
    config.tokens = std::clamp(point.tokens, 2, 65536);
    config.scoreScale = point.scoreScale;
    config.engine = point.engine;
    config.seed = point.firstSeed;
    if (point.budgets.empty())
        return Error{"budgets", "the run has no budget"};
    config.budget = point.budgets.front();
    int found = 0;
    for (const SchemeConfig& s : point.schemes) {
        const auto named = findScheme(s.name);
        // Only a named scheme is drawn by name; a custom one with a built-in's name would not be this run's.
        if (!named || !(named->key == s.key && named->value == s.value) || needsCalibration(*named))
            continue;
        config.schemes[static_cast<std::size_t>(found++)] = named->name;
        if (found == 2)
            return config;
    }
    return Error{"schemes", "the teaching figure compares two named, data-oblivious schemes; this run has " +
                                std::to_string(found)};
}

} // namespace kvlens
