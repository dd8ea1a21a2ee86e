// SPDX-License-Identifier: GPL-3.0-or-later
// SpectralQuant (paper B): transform eigen (the calibration covariance's eigenbasis) and quantizer
// spectral (d_eff leading coordinates with water-filled or even bits, a tail floor, per-coordinate
// empirical codebooks).
#include "core/quant/part_support.h"

#include "core/quant/lloyd_max.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>

namespace kvlens::parts {

std::shared_ptr<const SpectralAnalysis> spectrumOf(const RowMatrixXf& rows, double gapThreshold,
                                                   std::shared_ptr<const SpectralAnalysis>* cache)
{
    if (cache && *cache)
        return *cache;
    auto analysis = std::make_shared<const SpectralAnalysis>(analyzeSpectrum(rows, gapThreshold));
    if (cache)
        *cache = analysis;
    return analysis;
}

namespace {

/// The threshold the gap rule uses: the spectral quantizer's option (10 without one).
double gapThresholdOf(const PathConfig& config)
{
    return config.quantizer.kind == "spectral" ? config.quantizer.number("gap_threshold") : 10.0;
}

/// y = x E with E the eigenbasis (d x d, columns by descending eigenvalue); back with E^T.
class EigenPlan final : public TransformPlan {
public:
    explicit EigenPlan(Eigen::MatrixXf basis) : m_basis(std::move(basis)) {}
    int outDim() const override { return static_cast<int>(m_basis.cols()); }
    void forward(const Eigen::Ref<const RowMatrixXf>& x, RowMatrixXf& out) const override { out.noalias() = x * m_basis; }
    void inverse(const Eigen::Ref<const RowMatrixXf>& y, RowMatrixXf& out) const override
    {
        out.noalias() = y * m_basis.transpose();
    }

private:
    Eigen::MatrixXf m_basis;
};

class SpectralPlan final : public QuantizerPlan {
public:
    std::vector<int> coordBits;
    std::vector<std::shared_ptr<const Codebook>> coordCodebooks; ///< empirical, absolute units (null: 0 bits)
    std::vector<float> coordMeans;                              ///< reconstruction of 0-bit coordinates
    std::shared_ptr<const SpectralAnalysis> spectrum;
    int deff = 0, gapDeff = 0;
    bool byGap = true;

    void roundTrip(const Eigen::Ref<const RowMatrixXf>& y, int, RowMatrixXf& yHat, int&) const override
    {
        const Eigen::Index n = y.rows(), d = y.cols();
        yHat.resize(n, d);
        for (Eigen::Index i = 0; i < d; ++i) {
            const auto& cb = coordCodebooks[static_cast<std::size_t>(i)];
            for (Eigen::Index r = 0; r < n; ++r)
                yHat(r, i) = cb ? cb->decode(cb->encode(y(r, i))) : coordMeans[static_cast<std::size_t>(i)];
        }
    }
    double bits(int tokens, int, double) const override
    {
        double perVector = 0.0;
        for (int b : coordBits)
            perVector += b;
        return perVector * tokens;
    }
    std::vector<int> coordinateBits() const override { return coordBits; }
    PathDimension dimension() const override
    {
        if (!spectrum)
            return {};
        return PathDimension{true, deff, spectrum->participationRatio, gapDeff, byGap};
    }
};

/// The sketch rows a qjl residual of the path takes out of the budget (0 without one).
int sketchRows(const PathConfig& config, int deff)
{
    for (const CodecPart& r : config.residuals)
        if (r.kind == "qjl")
            return r.integer("m") > 0 ? r.integer("m") : deff;
    return 0;
}

std::shared_ptr<const QuantizerPlan> planSpectral(const CodecPart& p, PlanContext& c)
{
    auto plan = std::make_shared<SpectralPlan>();
    const int d = c.d;
    const double threshold = p.number("gap_threshold");
    if (!c.spectrum) { // planned without calibration (a preview): a flat spectrum over the identity
        auto flat = std::make_shared<SpectralAnalysis>();
        flat->basis = Eigen::MatrixXd::Identity(d, d);
        flat->eigenvalues.assign(static_cast<std::size_t>(d), 1.0);
        flat->participationRatio = d;
        flat->gapDeff = d;
        c.spectrum = flat;
    }
    const SpectralAnalysis& a = *c.spectrum;
    plan->spectrum = c.spectrum;
    // The gap rule's d_eff depends on the threshold; recompute it (cheap) so that a cached
    // analysis serves schemes with different thresholds.
    plan->gapDeff = gapRuleDeff(a.eigenvalues, threshold);
    plan->byGap = p.text("deff_rule") == "gap";
    plan->deff = plan->byGap ? plan->gapDeff : std::clamp(static_cast<int>(std::lround(a.participationRatio)), 1, d);
    c.leadDims = plan->deff;

    // Budget: bits * d for the whole vector; a selective QJL sketch (m sign bits) comes out of it.
    int total = c.bits * d - sketchRows(c.config, plan->deff);
    // The tail floor: every coordinate past d_eff keeps tail_bits (less if the budget cannot pay).
    const int tailCount = d - plan->deff;
    const int tailBits =
        tailCount > 0 ? std::clamp(p.integer("tail_bits"), 0, std::max(0, total / std::max(1, tailCount))) : 0;
    const int lead = std::max(0, total - tailBits * tailCount);
    const bool waterFilling = p.text("allocation") == "water_filling";
    std::vector<double> leadVariances(a.eigenvalues.begin(), a.eigenvalues.begin() + plan->deff);
    std::vector<int> leadBits = waterFilling ? waterFillBits(leadVariances, lead) : uniformBits(plan->deff, lead);
    plan->coordBits.assign(static_cast<std::size_t>(d), tailBits);
    std::copy(leadBits.begin(), leadBits.end(), plan->coordBits.begin());
    // The lead coordinates saturate at 8 bits; what they cannot use goes to the tail (on top of
    // its floor) rather than being wasted, by the same allocation rule.
    int spent = 0;
    for (int b : plan->coordBits)
        spent += b;
    const int leftover = total - spent;
    if (leftover > 0 && tailCount > 0 && tailBits < 8) {
        std::vector<double> tailVariances(a.eigenvalues.begin() + plan->deff, a.eigenvalues.end());
        for (double& v : tailVariances)
            v = std::ldexp(v, -2 * tailBits); // residual distortion after the floor's bits
        const std::vector<int> extra = waterFilling ? waterFillBits(tailVariances, leftover, 8 - tailBits)
                                                    : uniformBits(tailCount, leftover, 8 - tailBits);
        for (int i = 0; i < tailCount; ++i)
            plan->coordBits[static_cast<std::size_t>(plan->deff + i)] += extra[static_cast<std::size_t>(i)];
    }

    // Codebooks, in absolute units (no norm is stored): one empirical Lloyd-Max shape for the
    // lead coordinates and one for the tail, each fitted to that group's calibration samples
    // standardized per coordinate and pooled, then moved to each coordinate's mean and spread.
    // A separate fit per coordinate overfits: ~10^3 calibration rows over 256 levels left the
    // 8-bit lead coordinates 10-40x above the Lloyd-Max ideal, a floor no budget lowered.
    plan->coordCodebooks.assign(static_cast<std::size_t>(d), nullptr);
    plan->coordMeans.assign(static_cast<std::size_t>(d), 0.0f);
    const RowMatrixXf* stored = c.storedCalibration ? c.storedCalibration() : nullptr;
    if (!stored || stored->rows() == 0)
        return plan; // a preview: the bits are known, the codebooks are not
    const RowMatrixXf& y = *stored;
    const Eigen::Index rows = std::max<Eigen::Index>(1, y.rows());
    std::vector<double> sds(static_cast<std::size_t>(d));
    for (int i = 0; i < d; ++i) {
        const double mean = y.col(i).cast<double>().sum() / static_cast<double>(rows);
        const double meanSquare = y.col(i).cast<double>().squaredNorm() / static_cast<double>(rows);
        sds[static_cast<std::size_t>(i)] = std::sqrt(std::max(0.0, meanSquare - mean * mean));
        plan->coordMeans[static_cast<std::size_t>(i)] = static_cast<float>(mean);
    }
    constexpr Eigen::Index maxPooled = 1 << 16; // plenty for 256 cells; keeps the fit fast
    auto fitGroup = [&](int first, int last) {
        std::vector<float> pooled;
        const Eigen::Index count = static_cast<Eigen::Index>(last - first) * y.rows();
        const Eigen::Index stride = std::max<Eigen::Index>(1, (count + maxPooled - 1) / maxPooled);
        for (Eigen::Index k = 0; k < count; k += stride) {
            const auto i = static_cast<std::size_t>(first + k / y.rows());
            if (sds[i] > 0.0)
                pooled.push_back(static_cast<float>((y(k % y.rows(), static_cast<Eigen::Index>(i)) - plan->coordMeans[i]) / sds[i]));
        }
        std::map<int, Codebook> shapes; // one fit per bit width used in the group
        for (int i = first; i < last; ++i) {
            const int b = plan->coordBits[static_cast<std::size_t>(i)];
            if (b <= 0)
                continue;
            auto it = shapes.find(b);
            if (it == shapes.end()) {
                const auto gaussian = cachedCodebook(CodebookLaw::Gaussian, 0, b);
                LloydOptions options;
                options.initialLevels = gaussian->levels; // the pooled samples are standardized
                it = shapes.emplace(b, pooled.size() >= 2 ? designEmpiricalCodebook(pooled, b, 0, options) : *gaussian)
                         .first;
            }
            plan->coordCodebooks[static_cast<std::size_t>(i)] = std::make_shared<const Codebook>(
                affineCodebook(it->second, plan->coordMeans[static_cast<std::size_t>(i)], sds[static_cast<std::size_t>(i)]));
        }
    };
    fitGroup(0, plan->deff);
    fitGroup(plan->deff, d);
    return plan;
}

} // namespace

std::vector<PartKind> spectralParts()
{
    PartKind eigen;
    eigen.name = "eigen";
    eigen.role = PartRole::Transform;
    eigen.description = "The eigenbasis of the calibration set's uncentred covariance X^T X / n (SpectralQuant's "
                        "rotation), columns by descending eigenvalue; calibrated per cache.";
    eigen.needsCalibration = [](const CodecPart&) { return true; };
    eigen.validate = [](const CodecPart&, const PathConfig& path, int, int, const std::string& field) -> Status {
        if (path.quantizer.kind != "spectral")
            return Error{field, "the eigen transform and the spectral quantizer go together (SpectralQuant)"};
        return Ok{};
    };
    eigen.planTransform = [](const CodecPart&, PlanContext& c) -> std::shared_ptr<const TransformPlan> {
        const RowMatrixXf* cal = c.inputs.calibration;
        if (!cal || cal->rows() == 0) // a preview: the identity
            return std::make_shared<EigenPlan>(Eigen::MatrixXf::Identity(c.dim, c.dim));
        c.spectrum = spectrumOf(*cal, gapThresholdOf(c.config), c.inputs.spectrumCache ? &c.inputs.spectrumCache[0] : nullptr);
        return std::make_shared<EigenPlan>(c.spectrum->basis.cast<float>());
    };

    PartKind spectral;
    spectral.name = "spectral";
    spectral.role = PartRole::Quantizer;
    spectral.description = "SpectralQuant: in the eigenbasis, d_eff leading coordinates get bits by reverse "
                           "water-filling (or evenly), the tail keeps a floor, each coordinate an empirical Lloyd-Max "
                           "codebook; no norm is stored.";
    spectral.options = {choice("allocation", {"water_filling", "uniform"}, "water_filling",
                               "How the budget spreads over the leading coordinates."),
                        choice("deff_rule", {"gap", "participation"}, "gap",
                               "How d_eff is chosen: the largest eigenvalue gap, or the participation ratio."),
                        real("gap_threshold", 1.0, 1e12, 10.0, "The smallest eigenvalue ratio the gap rule accepts."),
                        integer("tail_bits", 0, 8, 1, "Bits of each coordinate past d_eff (counted in the budget).")};
    spectral.needsCalibration = [](const CodecPart&) { return true; };
    spectral.validate = [](const CodecPart&, const PathConfig& path, int, int, const std::string& field) -> Status {
        if (path.transforms.size() != 1 || path.transforms.front().kind != "eigen")
            return Error{field, "the spectral quantizer works in the eigenbasis: its path's transforms must be [\"eigen\"]"};
        return Ok{};
    };
    spectral.planQuantizer = planSpectral;
    return {eigen, spectral};
}

} // namespace kvlens::parts
