// SPDX-License-Identifier: GPL-3.0-or-later
// Low rank plus noise: x = U z + sigma e with U a d x r orthonormal basis shared by K, V and Q,
// z ~ N(0, diag lambda); U Haar-random, axis-aligned or on random axes; queries in, out of or
// partly in the subspace.
#include "core/regimes/builtin.h"
#include "core/regimes/subspace.h"

#include <cmath>

namespace kvlens {

namespace {

class LowRankRegime final : public Regime {
public:
    std::string_view name() const override { return "low_rank"; }
    std::string_view description() const override
    {
        return "x = U z + sigma e: an r-dimensional subspace U shared by keys, values and queries (Haar-random, "
               "axis-aligned or on random axes), z ~ N(0, diag lambda) with lambda summing to d so the total "
               "variance matches the Gaussian regime, plus isotropic noise; queries may leave the subspace.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = [] {
            std::vector<ParamDesc> d = {
                {"rank", "rank r", "Dimension of the shared subspace the data lives in.", ParamDesc::Kind::Integer, 8,
                 1, 4096, true, {}, {}},
                {"noise", "noise sigma", "Standard deviation of the isotropic noise added to every coordinate.",
                 ParamDesc::Kind::Real, 0.1, 0.0, 10.0, false, {}, {}},
            };
            for (ParamDesc& p : subspaceParams())
                d.push_back(std::move(p));
            return d;
        }();
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const int r = static_cast<int>(paramNumber(params, "rank"));
        const double sigma = paramNumber(params, "noise");
        const SubspaceBasis kind = subspaceBasisFromText(paramText(params, "basis"));
        const std::vector<double> lambda = latentVariances(r, paramNumber(params, "decay"), shape.d);
        const double queryOverlap = paramNumber(params, "query_overlap");
        Rng structure(engine, seed, Stream::Structure);
        const Eigen::MatrixXf basis = subspaceBasis(kind, shape.d, r, structure).cast<float>();
        auto data = drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site site, Rng& rng) {
            if (site == Site::Queries)
                fillQueries(out, rows, basis, lambda, queryOverlap, rng);
            else
                fillSubspace(out, rows, basis, lambda, rng);
            RowMatrixXf noise;
            fillGaussian(noise, rows, shape.d, rng);
            out += static_cast<float>(sigma) * noise;
        });
        if (kind != SubspaceBasis::Haar) {
            data.note = "subspace axes:";
            for (int i = 0; i < r && i < 16; ++i) {
                Eigen::Index axis = 0;
                basis.col(i).cwiseAbs().maxCoeff(&axis);
                data.note += " " + std::to_string(axis);
            }
            if (r > 16)
                data.note += " ...";
        }
        return data;
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
