// SPDX-License-Identifier: GPL-3.0-or-later
// Power-law spectrum: x ~ N(0, U diag(i^-alpha) U^T), eigenvalues scaled to sum to d.
#include "core/regimes/builtin.h"

#include <cmath>

namespace kvlens {

namespace {

class SpectralDecayRegime final : public Regime {
public:
    std::string_view name() const override { return "spectral_decay"; }
    std::string_view description() const override
    {
        return "Gaussian with covariance U diag(i^-alpha) U^T in a random orthonormal basis U (shared by K, V, Q), "
               "eigenvalues scaled so their sum is d.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = {
            {"alpha", "decay exponent alpha",
             "Eigenvalue i of the covariance is proportional to i^-alpha: 0 is isotropic, larger is more structured.",
             ParamDesc::Kind::Real, 1.0, 0.0, 4.0, false, {}, {}},
        };
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const double alpha = paramNumber(params, "alpha");
        Rng structure(engine, seed, Stream::Structure);
        const Eigen::MatrixXd basis = randomOrthonormal(shape.d, shape.d, structure);
        Eigen::VectorXd lambda(shape.d);
        for (int i = 0; i < shape.d; ++i)
            lambda(i) = std::pow(static_cast<double>(i + 1), -alpha);
        lambda *= shape.d / lambda.sum();
        // x = z diag(sqrt(lambda)) U^T for row vectors z.
        const Eigen::MatrixXf mix = (lambda.cwiseSqrt().asDiagonal() * basis.transpose()).cast<float>();
        return drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site, Rng& rng) {
            RowMatrixXf z;
            fillGaussian(z, rows, shape.d, rng);
            out.noalias() = z * mix;
        });
    }
};

} // namespace

const Regime& spectralDecayRegime()
{
    static const SpectralDecayRegime regime;
    return regime;
}

} // namespace kvlens
