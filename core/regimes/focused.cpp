// SPDX-License-Identifier: GPL-3.0-or-later
// Peaked attention: each query is aimed at a few target keys, raising their scores by beta.
#include "core/regimes/builtin.h"

#include <algorithm>
#include <cmath>

namespace kvlens {

namespace {

class FocusedRegime final : public Regime {
public:
    std::string_view name() const override { return "focused"; }
    std::string_view description() const override
    {
        return "Gaussian keys and values; each query is Gaussian noise plus beta * sqrt(d) * k_t / ||k_t||^2 "
               "for a few random target keys t, so those keys score about beta above the rest.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = {
            {"targets", "targets per query", "How many keys each query is aimed at.", ParamDesc::Kind::Integer, 4, 1,
             256, false, {}, {}},
            {"beta", "sharpness beta",
             "Score margin (in score units) of the target keys over the background: larger is more peaked.",
             ParamDesc::Kind::Real, 8.0, 0.0, 50.0, false, {}, {}},
        };
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const int targets = static_cast<int>(paramNumber(params, "targets"));
        const double beta = paramNumber(params, "beta");
        Dataset data = drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site, Rng& rng) {
            fillGaussian(out, rows, shape.d, rng);
        });
        auto aim = [&](RowMatrixXf& queries, const RowMatrixXf& keys, Stream stream) {
            Rng rng(engine, seed, Stream::Structure, static_cast<std::uint64_t>(stream));
            const int n = static_cast<int>(keys.rows());
            const int t = std::min(targets, n);
            const double sqrtD = std::sqrt(static_cast<double>(shape.d));
            std::vector<int> chosen;
            for (Eigen::Index q = 0; q < queries.rows(); ++q) {
                chosen.clear();
                while (static_cast<int>(chosen.size()) < t) {
                    const int j = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
                    if (std::find(chosen.begin(), chosen.end(), j) == chosen.end())
                        chosen.push_back(j);
                }
                for (int j : chosen) {
                    const double norm2 = keys.row(j).squaredNorm();
                    if (norm2 > 0.0)
                        queries.row(q) += static_cast<float>(beta * sqrtD / norm2) * keys.row(j);
                }
            }
        };
        aim(data.queries, data.keys, Stream::Queries);
        if (shape.calibration > 0)
            aim(data.calibrationQueries, data.calibrationKeys, Stream::CalibrationQueries);
        return data;
    }
};

} // namespace

const Regime& focusedRegime()
{
    static const FocusedRegime regime;
    return regime;
}

} // namespace kvlens
