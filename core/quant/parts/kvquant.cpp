// SPDX-License-Identifier: GPL-3.0-or-later
// Quantizer kvquant: KVQuant's dense-and-sparse keys (Hooper et al., "KVQuant: Towards 10 Million
// Context Length LLM Inference with KV Cache Quantization", 2024), and the scheme KVQuant-DS.
//
//   - per-channel pre-normalization: each channel centred and scaled by its calibration mean and
//     standard deviation (fp16 constants of the layer; core/quant/channel_stats.h);
//   - a non-uniform n-bit codebook (1-D k-means, Lloyd-Max on samples) fitted once on the
//     normalized calibration entries, the calibration outliers left out of the fit;
//   - the largest-magnitude fraction (1% by default) of the normalized entries encoded together
//     kept as sparse outliers: the original value in fp16 and a 16-bit channel index each, in CSR
//     rows with a 32-bit row pointer per token. Every one of these is counted in the bits.
//
// The outliers are chosen among the entries encoded together: the whole matrix in the attention
// experiments' whole-matrix setting, each group of `group` tokens when the cache is written causally.
// The normalization lives inside the quantizer (not the channel_norm transform) because the outliers
// are stored in the original basis, as KVQuant adds its sparse matrix to the dequantized dense one.
#include "core/quant/part_support.h"

#include "core/common/fp16.h"
#include "core/quant/channel_stats.h"
#include "core/quant/lloyd_max.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvlens::parts {

namespace {

constexpr int kOutlierBits = 16 + 16;    ///< fp16 value + 16-bit channel index
constexpr int kRowPointerBits = 32;      ///< CSR row pointer per token

/// How many entries of a tokens x d matrix are stored as outliers.
long long outlierCount(double fraction, long long tokens, int d)
{
    return static_cast<long long>(std::ceil(fraction * static_cast<double>(tokens) * d - 1e-9));
}

/// Indices (row-major) of the `count` largest |u|, ties to the lower index: deterministic.
std::vector<Eigen::Index> largestEntries(const RowMatrixXf& u, long long count)
{
    std::vector<Eigen::Index> order(static_cast<std::size_t>(u.size()));
    std::iota(order.begin(), order.end(), Eigen::Index{0});
    count = std::clamp<long long>(count, 0, static_cast<long long>(order.size()));
    const float* a = u.data();
    auto larger = [a](Eigen::Index i, Eigen::Index j) {
        const float ai = std::abs(a[i]), aj = std::abs(a[j]);
        return ai > aj || (ai == aj && i < j);
    };
    std::nth_element(order.begin(), order.begin() + count, order.end(), larger);
    order.resize(static_cast<std::size_t>(count));
    return order;
}

class KvquantPlan final : public QuantizerPlan {
public:
    KvquantPlan(const PlanContext& c, double fraction, int group) : m_fraction(fraction), m_group(group)
    {
        const RowMatrixXf* cal = c.storedCalibration ? c.storedCalibration() : nullptr;
        m_stats = cal && cal->rows() > 0 ? ChannelStats::of(*cal) : ChannelStats::identity(c.dim);
        if (cal && cal->rows() > 0) {
            const RowMatrixXf u = m_stats.normalize(*cal);
            // The fit leaves out what would be stored sparse, so the codebook spends its levels on the dense part.
            std::vector<char> sparse(static_cast<std::size_t>(u.size()), 0);
            for (Eigen::Index i : largestEntries(u, outlierCount(m_fraction, u.rows(), c.dim)))
                sparse[static_cast<std::size_t>(i)] = 1;
            constexpr Eigen::Index maxPooled = 1 << 16;
            const Eigen::Index stride = std::max<Eigen::Index>(1, (u.size() + maxPooled - 1) / maxPooled);
            std::vector<float> pooled;
            for (Eigen::Index i = 0; i < u.size(); i += stride)
                if (!sparse[static_cast<std::size_t>(i)])
                    pooled.push_back(u.data()[i]);
            if (pooled.size() >= 2) {
                LloydOptions options;
                options.initialLevels = cachedCodebook(CodebookLaw::Gaussian, 0, c.bits)->levels;
                m_codebook = std::make_shared<const Codebook>(designEmpiricalCodebook(pooled, c.bits, 0, options));
            }
        }
        if (!m_codebook)
            m_codebook = cachedCodebook(CodebookLaw::Gaussian, 0, c.bits); // N(0, 1): the normalized law
    }

    void roundTrip(const Eigen::Ref<const RowMatrixXf>& x, int, RowMatrixXf& xHat, int& saturated) const override
    {
        const RowMatrixXf u = m_stats.normalize(x);
        RowMatrixXf levels(u.rows(), u.cols());
        for (Eigen::Index r = 0; r < u.rows(); ++r)
            for (Eigen::Index j = 0; j < u.cols(); ++j)
                levels(r, j) = m_codebook->levelsF[static_cast<std::size_t>(m_codebook->encode(u(r, j)))];
        xHat = m_stats.denormalize(levels);
        for (Eigen::Index i : largestEntries(u, outlierCount(m_fraction, x.rows(), static_cast<int>(x.cols())))) {
            const Eigen::Index r = i / x.cols(), j = i % x.cols();
            const float v = roundToHalf(x(r, j));
            saturated += std::isfinite(v) ? 0 : 1; // an outlier past the fp16 range
            xHat(r, j) = std::isfinite(v) ? v : x(r, j);
        }
    }
    double bits(int tokens, int dim, double meanBits) const override
    {
        if (tokens <= 0)
            return 0.0;
        return meanBits * tokens * dim + static_cast<double>(outlierCount(m_fraction, tokens, dim)) * kOutlierBits
               + static_cast<double>(tokens) * kRowPointerBits + m_stats.bits();
    }
    int causalGroup() const override { return m_group; }

private:
    double m_fraction;
    int m_group;
    ChannelStats m_stats;
    std::shared_ptr<const Codebook> m_codebook;
};

} // namespace

std::vector<PartKind> kvquantParts()
{
    PartKind k;
    k.name = "kvquant";
    k.role = PartRole::Quantizer;
    k.description = "KVQuant dense-and-sparse: per-channel normalization, an n-bit non-uniform codebook fitted on "
                    "calibration data, the largest entries kept in fp16 as sparse outliers (all counted in the bits).";
    k.options = {real("outlier_fraction", 0.0, 0.5, 0.01,
                      "Fraction of the entries encoded together kept as fp16 sparse outliers (KVQuant: 1%)."),
                 integer("group", 1, 1 << 20, 128,
                         "Tokens whose outliers are chosen together when the cache is written causally.")};
    k.needsCalibration = [](const CodecPart&) { return true; };
    k.validate = [](const CodecPart&, const PathConfig&, int, int d, const std::string& field) -> Status {
        if (d > 1 << 16)
            return Error{field, "kvquant stores 16-bit channel indices: d must be at most 65536, got " + std::to_string(d)};
        return Ok{};
    };
    k.planQuantizer = [](const CodecPart& p, PlanContext& c) -> std::shared_ptr<const QuantizerPlan> {
        return std::make_shared<KvquantPlan>(c, p.number("outlier_fraction"), p.integer("group"));
    };

    PathConfig keys;
    keys.quantizer = part("kvquant");
    PathConfig values;
    values.quantizer = part("uniform", {{"axis", std::string("per_token")}, {"group", 32.0}});
    k.schemes.push_back(SchemeConfig{
        "KVQuant-DS",
        "KVQuant: keys normalized per channel, an n-bit non-uniform codebook fitted on calibration keys, the largest "
        "1% of entries kept in fp16 as sparse outliers (counted in the bits); per-token KIVI values.",
        keys, values, true});
    return {k};
}

} // namespace kvlens::parts
