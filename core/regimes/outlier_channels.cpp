// SPDX-License-Identifier: GPL-3.0-or-later
// Massive activations: Gaussian data with a few fixed channels scaled by gamma.
#include "core/regimes/builtin.h"

#include <algorithm>
#include <numeric>

namespace kvlens {

namespace {

class OutlierChannelsRegime final : public Regime {
public:
    std::string_view name() const override { return "outlier_channels"; }
    std::string_view description() const override
    {
        return "Gaussian data in which c fixed channels (the same for every token) are scaled by gamma, "
               "like the massive activations of real key caches.";
    }
    const std::vector<ParamDesc>& params() const override
    {
        static const std::vector<ParamDesc> descs = {
            {"channels", "outlier channels c", "How many channels carry the outliers.", ParamDesc::Kind::Integer, 4,
             0, 4096, false, {}, {}},
            {"gamma", "outlier scale gamma", "Factor applied to the outlier channels.", ParamDesc::Kind::Real, 20.0,
             1.0, 1000.0, true, {}, {}},
            {"sites", "applies to",
             "Which tensors carry the outlier channels: keys only (as in real models), keys and values, or all three.",
             ParamDesc::Kind::Choice, 0, 0, 0, false, {"keys", "keys_values", "all"}, "keys"},
        };
        return descs;
    }
    Result<Dataset> generate(const RegimeParams& params, const DataShape& shape, EngineKind engine,
                             std::uint64_t seed) const override
    {
        const int c = static_cast<int>(paramNumber(params, "channels"));
        const auto gamma = static_cast<float>(paramNumber(params, "gamma"));
        const std::string& sites = paramText(params, "sites");
        // A partial Fisher-Yates shuffle picks c distinct channels.
        Rng structure(engine, seed, Stream::Structure);
        std::vector<int> order(static_cast<std::size_t>(shape.d));
        std::iota(order.begin(), order.end(), 0);
        for (int i = 0; i < c; ++i) {
            const auto j = i + static_cast<int>(structure.below(static_cast<std::uint64_t>(shape.d - i)));
            std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
        }
        std::vector<int> channels(order.begin(), order.begin() + c);
        std::sort(channels.begin(), channels.end());
        auto scaled = [&](Site site) {
            return site == Site::Keys || (site == Site::Values && sites != "keys") || sites == "all";
        };
        auto data = drawDataset(shape, engine, seed, [&](RowMatrixXf& out, int rows, Site site, Rng& rng) {
            fillGaussian(out, rows, shape.d, rng);
            if (scaled(site))
                for (int ch : channels)
                    out.col(ch) *= gamma;
        });
        data.note = "outlier channels:";
        for (int ch : channels)
            data.note += " " + std::to_string(ch);
        return data;
    }

protected:
    Status checkRules(const RegimeParams& params, const DataShape& shape) const override
    {
        if (paramNumber(params, "channels") > shape.d)
            return Error{"regime.channels", "must be in [0, d] = [0, " + std::to_string(shape.d) + "]"};
        return Ok{};
    }
};

} // namespace

const Regime& outlierChannelsRegime()
{
    static const OutlierChannelsRegime regime;
    return regime;
}

} // namespace kvlens
