// SPDX-License-Identifier: GPL-3.0-or-later
// KVQuant-DS: KVQuant's dense-and-sparse keys (Hooper et al., "KVQuant: Towards 10 Million
// Context Length LLM Inference with KV Cache Quantization", 2024), as one registered codec.
//
//   - per-channel pre-normalization: each channel is centred and scaled by its calibration
//     mean and standard deviation (the statistics are fp16 constants of the layer);
//   - a non-uniform n-bit codebook (1-D k-means, Lloyd-Max on samples) fitted once on the
//     normalized calibration entries, the calibration outliers left out of the fit;
//   - the largest-magnitude 1% of the normalized entries of the matrix being stored are kept
//     as sparse outliers: an fp16 value and a 16-bit channel index each, in CSR rows with a
//     32-bit row pointer per token. Every one of these is counted in the bits.
//
// Values follow KVQuant's per-token side with KIVI's per-token groups of 32 channels.
#include "core/common/fp16.h"
#include "core/quant/codec.h"
#include "core/quant/lloyd_max.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvlens {

namespace {

constexpr double kOutlierFraction = 0.01; ///< KVQuant's 1% sparse outliers
constexpr int kOutlierBits = 16 + 16;     ///< fp16 value + 16-bit channel index
constexpr int kRowPointerBits = 32;       ///< CSR row pointer per token
constexpr int kChannelStatBits = 2 * 16;  ///< fp16 mean and scale per channel, per matrix

/// How many entries of a tokens x d matrix are stored as outliers.
long long outlierCount(long long tokens, int d)
{
    return static_cast<long long>(std::ceil(kOutlierFraction * static_cast<double>(tokens) * d - 1e-9));
}

double denseSparseBits(int bits, int d, int tokens)
{
    if (tokens <= 0)
        return bits;
    const double perMatrix = static_cast<double>(bits) * tokens * d + static_cast<double>(outlierCount(tokens, d)) * kOutlierBits
                             + static_cast<double>(tokens) * kRowPointerBits + static_cast<double>(d) * kChannelStatBits;
    return perMatrix / (static_cast<double>(tokens) * d);
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

class DenseSparseCodec final : public PathCodec {
public:
    DenseSparseCodec(const CodecContext& c) : m_bits(c.bits), m_d(c.d)
    {
        const int d = c.d;
        m_mean = Eigen::RowVectorXf::Zero(d);
        m_scale = Eigen::RowVectorXf::Ones(d);
        const RowMatrixXf* cal = c.inputs.calibration;
        if (cal && cal->rows() > 0) {
            for (int j = 0; j < d; ++j) {
                const auto col = cal->col(j).cast<double>();
                const double mean = col.mean();
                const double sd = std::sqrt(std::max(0.0, col.squaredNorm() / static_cast<double>(cal->rows()) - mean * mean));
                m_mean(j) = roundToHalf(static_cast<float>(mean));
                m_scale(j) = sd > 0.0 ? roundToHalf(static_cast<float>(sd)) : 1.0f;
            }
            const RowMatrixXf u = normalize(*cal);
            // The fit leaves out what would be stored sparse, so the codebook spends its levels on the dense part.
            std::vector<char> sparse(static_cast<std::size_t>(u.size()), 0);
            for (Eigen::Index i : largestEntries(u, outlierCount(u.rows(), d)))
                sparse[static_cast<std::size_t>(i)] = 1;
            constexpr Eigen::Index maxPooled = 1 << 16;
            const Eigen::Index stride = std::max<Eigen::Index>(1, (u.size() + maxPooled - 1) / maxPooled);
            std::vector<float> pooled;
            for (Eigen::Index i = 0; i < u.size(); i += stride)
                if (!sparse[static_cast<std::size_t>(i)])
                    pooled.push_back(u.data()[i]);
            if (pooled.size() >= 2) {
                LloydOptions options;
                options.initialLevels = cachedCodebook(CodebookLaw::Gaussian, 0, m_bits)->levels;
                m_codebook = std::make_shared<const Codebook>(designEmpiricalCodebook(pooled, m_bits, 0, options));
            }
        }
        if (!m_codebook)
            m_codebook = cachedCodebook(CodebookLaw::Gaussian, 0, m_bits); // N(0, 1): the normalized law
        m_scoreScale = 1.0f / std::sqrt(static_cast<float>(d));
    }

    double bitsPerCoordinate(int tokens) const override { return denseSparseBits(m_bits, m_d, tokens); }

    PathResult encode(const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries) const override
    {
        PathResult out;
        const RowMatrixXf u = normalize(x);
        RowMatrixXf& xHat = out.reconstruction;
        xHat.resize(x.rows(), x.cols());
        for (Eigen::Index r = 0; r < x.rows(); ++r)
            for (Eigen::Index j = 0; j < x.cols(); ++j)
                xHat(r, j) = m_mean(j) + m_scale(j) * m_codebook->levelsF[static_cast<std::size_t>(m_codebook->encode(u(r, j)))];
        for (Eigen::Index i : largestEntries(u, outlierCount(x.rows(), m_d))) {
            const Eigen::Index r = i / x.cols(), j = i % x.cols();
            const float v = roundToHalf(x(r, j));
            out.saturatedNorms += std::isfinite(v) ? 0 : 1; // an outlier past the fp16 range
            xHat(r, j) = std::isfinite(v) ? v : x(r, j);
        }
        if (queries) {
            out.scores.noalias() = *queries * xHat.transpose();
            out.scores *= m_scoreScale;
        }
        return out;
    }

private:
    RowMatrixXf normalize(const Eigen::Ref<const RowMatrixXf>& x) const
    {
        return ((x.rowwise() - m_mean).array().rowwise() / m_scale.array()).matrix();
    }

    int m_bits = 0;
    int m_d = 0;
    Eigen::RowVectorXf m_mean, m_scale;
    std::shared_ptr<const Codebook> m_codebook;
    float m_scoreScale = 1.0f;
};

} // namespace

SchemeExtension kvquantDenseSparseExtension()
{
    SchemeExtension e;
    e.codec.name = "kvquant_ds";
    e.codec.description = "KVQuant dense-and-sparse: per-channel normalization, an n-bit non-uniform codebook fitted "
                          "on calibration data, the largest 1% of entries kept in fp16 as sparse outliers.";
    e.codec.needsCalibration = true;
    e.codec.validate = [](const PathConfig&, int, int d, const std::string& field) -> Status {
        if (d > 1 << 16)
            return Error{field + ".codec", "kvquant_ds stores 16-bit channel indices: d must be at most 65536, got "
                                               + std::to_string(d)};
        return Ok{};
    };
    e.codec.previewBits = [](const PathConfig& config, int budget, int d, int tokens) {
        return denseSparseBits(config.bits.at(budget), d, tokens);
    };
    e.codec.plan = [](const CodecContext& c) -> std::shared_ptr<const PathCodec> {
        return std::make_shared<const DenseSparseCodec>(c);
    };

    PathConfig keys;
    keys.codec = e.codec.name;
    PathConfig values;
    values.quantizer = QuantizerKind::Uniform;
    values.axis = UniformAxis::PerToken;
    values.groupSize = 32;
    e.schemes.push_back(SchemeConfig{
        "KVQuant-DS",
        "KVQuant: keys normalized per channel, an n-bit non-uniform codebook fitted on calibration keys, the largest "
        "1% of entries kept in fp16 as sparse outliers (counted in the bits); per-token KIVI values.",
        keys, values, true});
    return e;
}

} // namespace kvlens
