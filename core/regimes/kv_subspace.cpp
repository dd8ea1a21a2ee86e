// SPDX-License-Identifier: GPL-3.0-or-later
// Keys and values in two r-dimensional subspaces whose principal angles all have cosine `overlap`.
#include "core/regimes/builtin.h"
#include "core/regimes/subspace.h"

#include <cmath>

namespace kvlens {

namespace {

class KvSubspaceRegime final : public Regime {
public:
    std::string_view name() const override { return "kv_subspace"; }
    std::string_view description() const override
    {
        return "Keys (and queries) in a random r-dimensional subspace U_K, values in U_V = overlap U_K + "
               "sqrt(1 - overlap^2) W with W orthogonal to U_K, so every principal angle has cosine overlap.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = [] {
            std::vector<ParamDesc> d = {
                {"rank", "rank r", "Dimension of the key and of the value subspace.", ParamDesc::Kind::Integer, 8, 1,
                 2048, true, {}, {}},
                {"overlap", "subspace overlap",
                 "Cosine of every principal angle between the key and value subspaces: 1 shares them, 0 makes them "
                 "orthogonal.",
                 ParamDesc::Kind::Real, 0.5, 0.0, 1.0, false, {}, {}},
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
        const double overlap = paramNumber(params, "overlap");
        const double sigma = paramNumber(params, "noise");
        const SubspaceBasis kind = subspaceBasisFromText(paramText(params, "basis"));
        const std::vector<double> lambda = latentVariances(r, paramNumber(params, "decay"), shape.d);
        const double queryOverlap = paramNumber(params, "query_overlap");
        Rng structure(engine, seed, Stream::Structure);
        // 2r orthonormal columns: the first r span U_K, the next r are W, orthogonal to U_K.
        const Eigen::MatrixXd both = subspaceBasis(kind, shape.d, 2 * r, structure);
        const Eigen::MatrixXf keyBasis = both.leftCols(r).cast<float>();
        const Eigen::MatrixXf valueBasis =
            (overlap * both.leftCols(r) + std::sqrt(1.0 - overlap * overlap) * both.rightCols(r)).cast<float>();
        return drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site site, Rng& rng) {
            if (site == Site::Queries)
                fillQueries(out, rows, keyBasis, lambda, queryOverlap, rng);
            else
                fillSubspace(out, rows, site == Site::Values ? valueBasis : keyBasis, lambda, rng);
            RowMatrixXf noise;
            fillGaussian(noise, rows, shape.d, rng);
            out += static_cast<float>(sigma) * noise;
        });
    }

protected:
    Status checkRules(const RegimeParams& params, const DataShape& shape) const override
    {
        if (2 * paramNumber(params, "rank") > shape.d)
            return Error{"regime.rank", "must be in [1, d/2] = [1, " + std::to_string(shape.d / 2)
                                            + "] so the two subspaces fit"};
        return Ok{};
    }
};

} // namespace

const Regime& kvSubspaceRegime()
{
    static const KvSubspaceRegime regime;
    return regime;
}

} // namespace kvlens
