// SPDX-License-Identifier: GPL-3.0-or-later
// The isotropic reference regime: every coordinate i.i.d. N(0, 1).
#include "core/regimes/builtin.h"

namespace kvlens {

namespace {

class GaussianRegime final : public Regime {
public:
    std::string_view name() const override { return "gaussian"; }
    std::string_view description() const override
    {
        return "Keys, values and queries with i.i.d. N(0, 1) coordinates: the isotropic baseline.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> none;
        return none;
    }
    Result<Dataset> generate(const RegimeParams&, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        return drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site, Rng& rng) {
            fillGaussian(out, rows, shape.d, rng);
        });
    }
};

} // namespace

const Regime& gaussianRegime()
{
    static const GaussianRegime regime;
    return regime;
}

} // namespace kvlens
