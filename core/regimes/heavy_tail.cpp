// SPDX-License-Identifier: GPL-3.0-or-later
// Heavy tails: Student-t coordinates (marginal concentration) or a Student-t scale mixture per vector.
#include "core/regimes/builtin.h"

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
        };
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const double nu = paramNumber(params, "nu");
        const bool marginal = paramText(params, "mode") == "marginal";
        return drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site, Rng& rng) {
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
        });
    }
};

} // namespace

const Regime& heavyTailRegime()
{
    static const HeavyTailRegime regime;
    return regime;
}

} // namespace kvlens
