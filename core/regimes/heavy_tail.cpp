// SPDX-License-Identifier: GPL-3.0-or-later
// Heavy tails: Student-t coordinates (marginal concentration) or a Student-t scale mixture per vector.
#include "core/common/math_policy.h"
#include "core/regimes/builtin.h"

#include <boost/math/distributions/students_t.hpp>

#include <cmath>

namespace kvlens {

namespace {

class HeavyTailRegime final : public Regime {
public:
    std::string_view name() const override { return "heavy_tail"; }
    std::string_view description() const override
    {
        return "Student-t data: i.i.d. t(nu) coordinates (a few coordinates dominate a vector), or a "
               "Gaussian vector times one t-distributed scale per vector.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = {
            {"nu", "degrees of freedom nu", "Tail weight: smaller nu means heavier tails (nu <= 2 has infinite variance).",
             ParamDesc::Kind::Real, 3.0, 1.05, 100.0, true, {}, {}},
            {"mode", "mode",
             "marginal: every coordinate i.i.d. Student-t; vector: one t-distributed scale per vector "
             "(multivariate t).",
             ParamDesc::Kind::Choice, 0, 0, 0, false, {"marginal", "vector"}, "marginal"},
            {"standardize", "standardize",
             "true: coordinates scaled to unit variance (nu > 2), or to the median absolute deviation of N(0, 1) "
             "(nu <= 2, where the variance is infinite), so heavy tails compare with Gaussian data at matched scale.",
             ParamDesc::Kind::Choice, 0, 0, 0, false, {"false", "true"}, "false"},
        };
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const double nu = paramNumber(params, "nu");
        const bool marginal = paramText(params, "mode") == "marginal";
        const double unit = paramText(params, "standardize") == "true" ? standardScale(nu) : 1.0;
        auto data = drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site, Rng& rng) {
            out.resize(rows, shape.d);
            for (int r = 0; r < rows; ++r) {
                if (marginal) {
                    for (int c = 0; c < shape.d; ++c)
                        out(r, c) = static_cast<float>(rng.studentT(nu));
                } else {
                    const double scale = std::sqrt(nu / rng.chiSquare(nu));
                    for (int c = 0; c < shape.d; ++c)
                        out(r, c) = static_cast<float>(scale * rng.normal());
                }
            }
            if (unit != 1.0)
                out *= static_cast<float>(unit);
        });
        if (unit != 1.0)
            data.note = "standardized: x " + std::to_string(unit);
        return data;
    }

    /// The factor that standardizes a t(nu) coordinate (both modes have t(nu) marginals):
    /// 1 / sqrt(nu / (nu - 2)) for nu > 2; for nu <= 2, MAD(N(0, 1)) / MAD(t(nu)) =
    /// Phi^-1(3/4) / t_nu^-1(3/4), which matches the median absolute deviation instead.
    static double standardScale(double nu)
    {
        if (nu > 2.0)
            return std::sqrt((nu - 2.0) / nu);
        constexpr double madNormal = 0.67448975019608174; // Phi^-1(0.75)
        return madNormal / boost::math::quantile(boost::math::students_t_distribution<double, MathPolicy>(nu), 0.75);
    }
};

} // namespace

const Regime& heavyTailRegime()
{
    static const HeavyTailRegime regime;
    return regime;
}

} // namespace kvlens
