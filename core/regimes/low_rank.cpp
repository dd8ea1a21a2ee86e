// SPDX-License-Identifier: GPL-3.0-or-later
// Low rank plus noise: x = U z + sigma e with U a random d x r orthonormal basis shared by K, V and Q.
#include "core/regimes/builtin.h"

#include <cmath>

namespace kvlens {

namespace {

class LowRankRegime final : public Regime {
public:
    std::string_view name() const override { return "low_rank"; }
    std::string_view description() const override
    {
        return "x = U z + sigma e: a random r-dimensional subspace U shared by keys, values and queries, "
               "z ~ N(0, (d/r) I) so the total variance matches the Gaussian regime, plus isotropic noise.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = {
            {"rank", "rank r", "Dimension of the shared subspace the data lives in.", ParamDesc::Kind::Integer, 8, 1,
             4096, true, {}, {}},
            {"noise", "noise sigma", "Standard deviation of the isotropic noise added to every coordinate.",
             ParamDesc::Kind::Real, 0.1, 0.0, 10.0, false, {}, {}},
        };
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const int r = static_cast<int>(paramNumber(params, "rank"));
        const double sigma = paramNumber(params, "noise");
        Rng structure(engine, seed, Stream::Structure);
        const Eigen::MatrixXf basis = randomOrthonormal(shape.d, r, structure).cast<float>();
        const float zScale = static_cast<float>(std::sqrt(static_cast<double>(shape.d) / r));
        return drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site, Rng& rng) {
            RowMatrixXf z;
            fillGaussian(z, rows, r, rng);
            RowMatrixXf noise;
            fillGaussian(noise, rows, shape.d, rng);
            out.noalias() = (zScale * z) * basis.transpose();
            out += static_cast<float>(sigma) * noise;
        });
    }

protected:
    Status checkRules(const RegimeParams& params, const DataShape& shape) const override
    {
        if (paramNumber(params, "rank") > shape.d)
            return Error{"regime.rank", "must be in [1, d] = [1, " + std::to_string(shape.d) + "]"};
        return Ok{};
    }
};

} // namespace

const Regime& lowRankRegime()
{
    static const LowRankRegime regime;
    return regime;
}

} // namespace kvlens
