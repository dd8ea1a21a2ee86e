// SPDX-License-Identifier: GPL-3.0-or-later
// Registry order of the built-in regimes and the shared dataset drawing.
#include "core/regimes/builtin.h"

#include "core/regimes/model_dump.h"

#include "core/regimes/imported.h"

namespace kvlens {

Dataset drawDataset(const DataShape& shape, EngineKind engine, std::uint64_t seed, const RowLaw& law)
{
    Dataset data;
    auto draw = [&](RowMatrixXf& out, int rows, Site site, Stream stream) {
        Rng rng(engine, seed, stream);
        law(out, rows, site, rng);
    };
    draw(data.keys, shape.tokens, Site::Keys, Stream::Keys);
    draw(data.values, shape.tokens, Site::Values, Stream::Values);
    draw(data.queries, shape.queries, Site::Queries, Stream::Queries);
    if (shape.calibration > 0) {
        draw(data.calibrationKeys, shape.calibration, Site::Keys, Stream::CalibrationKeys);
        draw(data.calibrationValues, shape.calibration, Site::Values, Stream::CalibrationValues);
        draw(data.calibrationQueries, shape.calibration, Site::Queries, Stream::CalibrationQueries);
    }
    return data;
}

std::vector<const Regime*> builtinRegimes()
{
    return {&gaussianRegime(),       &heavyTailRegime(),  &lowRankRegime(), &spectralDecayRegime(),
            &outlierChannelsRegime(), &kvSubspaceRegime(), &focusedRegime(), &importedRegime(),
            &modelRegime()};
}

} // namespace kvlens
