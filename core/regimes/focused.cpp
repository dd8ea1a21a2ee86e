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
               "for a few random target keys t, so those keys score about beta above the rest. Targets come "
               "from a pool of heavy-hitter positions when pool > 0. Calibration queries are aimed at the "
               "evaluation keys (as earlier queries of the same sequence would be), with their own targets.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = {
            {"targets", "targets per query", "How many keys each query is aimed at.", ParamDesc::Kind::Integer, 4, 1,
             256, false, {}, {}},
            {"beta", "sharpness beta",
             "Score margin (in score units) of the target keys over the background: larger is more peaked.",
             ParamDesc::Kind::Real, 8.0, 0.0, 50.0, false, {}, {}},
            {"pool", "heavy-hitter pool",
             "Targets are drawn from this many fixed token positions shared by all queries (0: from every token).",
             ParamDesc::Kind::Integer, 0, 0, 1 << 20, false, {}, {}},
        };
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const int targets = static_cast<int>(paramNumber(params, "targets"));
        const double beta = paramNumber(params, "beta");
        const int poolSize = std::min(static_cast<int>(paramNumber(params, "pool")), shape.tokens);
        // The heavy hitters: a fixed random subset of token positions (every position when pool = 0).
        std::vector<int> pool;
        if (poolSize > 0) {
            Rng rng(engine, seed, Stream::Structure); // index 0; the aims use their stream as index
            std::vector<int> all(static_cast<std::size_t>(shape.tokens));
            for (int j = 0; j < shape.tokens; ++j)
                all[static_cast<std::size_t>(j)] = j;
            for (int j = 0; j < poolSize; ++j) { // partial Fisher-Yates
                const auto k = j + static_cast<int>(rng.below(static_cast<std::uint64_t>(shape.tokens - j)));
                std::swap(all[static_cast<std::size_t>(j)], all[static_cast<std::size_t>(k)]);
            }
            pool.assign(all.begin(), all.begin() + poolSize);
        }
        Dataset data = drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site, Rng& rng) {
            fillGaussian(out, rows, shape.d, rng);
        });
        auto aim = [&](RowMatrixXf& queries, const RowMatrixXf& keys, Stream stream) {
            Rng rng(engine, seed, Stream::Structure, static_cast<std::uint64_t>(stream));
            const int n = pool.empty() ? static_cast<int>(keys.rows()) : static_cast<int>(pool.size());
            const int t = std::min(targets, n);
            const double sqrtD = std::sqrt(static_cast<double>(shape.d));
            std::vector<int> chosen;
            for (Eigen::Index q = 0; q < queries.rows(); ++q) {
                chosen.clear();
                while (static_cast<int>(chosen.size()) < t) {
                    const int pick = static_cast<int>(rng.below(static_cast<std::uint64_t>(n)));
                    const int j = pool.empty() ? pick : pool[static_cast<std::size_t>(pick)];
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
            aim(data.calibrationQueries, data.keys, Stream::CalibrationQueries);
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
