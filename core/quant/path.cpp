// SPDX-License-Identifier: GPL-3.0-or-later
// Path planning (random parts from named streams), bit accounting, and the CPU path encoder.
#include "core/quant/path.h"

#include "core/quant/norm_quantizer.h"
#include "core/quant/qjl.h"
#include "core/quant/wht.h"
#include "core/rng/random_matrix.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace kvlens {

namespace {

/// The eigen-analysis of `rows`, from the group's cache when there is one.
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

/// SpectralQuant: eigenbasis, d_eff, bit allocation and per-coordinate empirical codebooks.
void planSpectral(PathPlan& plan, const PlanInputs& inputs, EngineKind engine, std::uint64_t seed, bool keys)
{
    const PathConfig& config = plan.config;
    assert(inputs.calibration && inputs.calibration->rows() > 0 && "SpectralQuant needs a calibration set");
    const int d = plan.d;
    plan.spectrum = spectrumOf(*inputs.calibration, config.gapThreshold,
                               inputs.spectrumCache ? &inputs.spectrumCache[0] : nullptr);
    const SpectralAnalysis& a = *plan.spectrum;
    // The gap rule's d_eff depends on the threshold; recompute it (cheap) so that a cached
    // analysis serves schemes with different thresholds.
    const int gapDeff = gapRuleDeff(a.eigenvalues, config.gapThreshold);
    plan.gapDeff = gapDeff;
    plan.deff = config.deffRule == DeffRule::Gap
                    ? gapDeff
                    : std::clamp(static_cast<int>(std::lround(a.participationRatio)), 1, d);
    plan.eigenbasis = a.basis.cast<float>();

    // Budget: bits * d for the whole vector; a selective QJL sketch (m sign bits) comes out of it.
    int total = plan.bits * d;
    if (config.residual == ResidualKind::Qjl) {
        const int m = config.qjlDim > 0 ? config.qjlDim : plan.deff;
        Rng rng(engine, seed, keys ? Stream::KeySketch : Stream::ValueSketch);
        plan.sketch = config.qjlSketch == QjlSketchKind::Orthogonal ? QjlSketch::drawOrthogonalMatrix(m, plan.deff, rng)
                                                                    : QjlSketch::drawMatrix(m, plan.deff, rng);
        total -= m;
    }
    // The tail floor: every coordinate past d_eff keeps tailBits (less if the budget cannot pay).
    const int tailCount = d - plan.deff;
    const int tailBits = tailCount > 0 ? std::clamp(config.tailBits, 0, std::max(0, total / std::max(1, tailCount))) : 0;
    const int lead = std::max(0, total - tailBits * tailCount);
    std::vector<double> leadVariances(a.eigenvalues.begin(), a.eigenvalues.begin() + plan.deff);
    std::vector<int> leadBits = config.allocation == Allocation::WaterFilling ? waterFillBits(leadVariances, lead)
                                                                             : uniformBits(plan.deff, lead);
    plan.coordBits.assign(static_cast<std::size_t>(d), tailBits);
    std::copy(leadBits.begin(), leadBits.end(), plan.coordBits.begin());
    // The lead coordinates saturate at 8 bits; what they cannot use goes to the tail (on top of
    // its floor) rather than being wasted, by the same allocation rule.
    int spent = 0;
    for (int b : plan.coordBits)
        spent += b;
    const int leftover = total - spent;
    if (leftover > 0 && tailCount > 0 && tailBits < 8) {
        std::vector<double> tailVariances(a.eigenvalues.begin() + plan.deff, a.eigenvalues.end());
        for (double& v : tailVariances)
            v = std::ldexp(v, -2 * tailBits); // residual distortion after the floor's bits
        const std::vector<int> extra = config.allocation == Allocation::WaterFilling
                                           ? waterFillBits(tailVariances, leftover, 8 - tailBits)
                                           : uniformBits(tailCount, leftover, 8 - tailBits);
        for (int i = 0; i < tailCount; ++i)
            plan.coordBits[static_cast<std::size_t>(plan.deff + i)] += extra[static_cast<std::size_t>(i)];
    }

    // Codebooks, in absolute units (no norm is stored): one empirical Lloyd-Max shape for the
    // lead coordinates and one for the tail, each fitted to that group's calibration samples
    // standardized per coordinate and pooled, then moved to each coordinate's mean and spread.
    // A separate fit per coordinate overfits: ~10^3 calibration rows over 256 levels left the
    // 8-bit lead coordinates 10-40x above the Lloyd-Max ideal, a floor no budget lowered.
    const RowMatrixXf y = *inputs.calibration * plan.eigenbasis;
    const Eigen::Index rows = std::max<Eigen::Index>(1, y.rows());
    std::vector<double> sds(static_cast<std::size_t>(d));
    plan.coordCodebooks.assign(static_cast<std::size_t>(d), nullptr);
    plan.coordMeans.assign(static_cast<std::size_t>(d), 0.0f);
    for (int i = 0; i < d; ++i) {
        const double mean = y.col(i).cast<double>().sum() / static_cast<double>(rows);
        const double meanSquare = y.col(i).cast<double>().squaredNorm() / static_cast<double>(rows);
        sds[static_cast<std::size_t>(i)] = std::sqrt(std::max(0.0, meanSquare - mean * mean));
        plan.coordMeans[static_cast<std::size_t>(i)] = static_cast<float>(mean);
    }
    constexpr Eigen::Index maxPooled = 1 << 16; // plenty for 256 cells; keeps the fit fast
    auto fitGroup = [&](int first, int last) {
        std::vector<float> pooled;
        const Eigen::Index total = static_cast<Eigen::Index>(last - first) * y.rows();
        const Eigen::Index stride = std::max<Eigen::Index>(1, (total + maxPooled - 1) / maxPooled);
        for (Eigen::Index k = 0; k < total; k += stride) {
            const auto i = static_cast<std::size_t>(first + k / y.rows());
            if (sds[i] > 0.0)
                pooled.push_back(static_cast<float>((y(k % y.rows(), static_cast<Eigen::Index>(i)) - plan.coordMeans[i]) / sds[i]));
        }
        std::map<int, Codebook> shapes; // one fit per bit width used in the group
        for (int i = first; i < last; ++i) {
            const int b = plan.coordBits[static_cast<std::size_t>(i)];
            if (b <= 0)
                continue;
            auto it = shapes.find(b);
            if (it == shapes.end())
            {
                const auto gaussian = cachedCodebook(CodebookLaw::Gaussian, 0, b);
                LloydOptions options;
                options.initialLevels = gaussian->levels; // the pooled samples are standardized
                it = shapes.emplace(b, pooled.size() >= 2 ? designEmpiricalCodebook(pooled, b, 0, options) : *gaussian)
                         .first;
            }
            plan.coordCodebooks[static_cast<std::size_t>(i)] = std::make_shared<const Codebook>(
                affineCodebook(it->second, plan.coordMeans[static_cast<std::size_t>(i)], sds[static_cast<std::size_t>(i)]));
        }
    };
    fitGroup(0, plan.deff);
    fitGroup(plan.deff, d);
}

} // namespace

PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const RowMatrixXf* calibration,
                  EngineKind engine, std::uint64_t seed)
{
    PlanInputs inputs;
    inputs.calibration = calibration;
    return planPath(config, budget, d, site, inputs, engine, seed);
}

PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const PlanInputs& inputs,
                  EngineKind engine, std::uint64_t seed)
{
    PathPlan plan;
    plan.config = config;
    plan.d = d;
    plan.bits = config.bits.at(budget);
    plan.scoreScale = 1.0f / std::sqrt(static_cast<float>(d));
    const bool keys = site == PathSite::Keys;
    if (!config.codec.empty()) {
        const CodecKind* kind = findCodec(config.codec);
        assert(kind && "planPath: validateScheme checks codec names");
        plan.dim = d;
        plan.codec = kind->plan(CodecContext{config, budget, plan.bits, d, site, inputs, engine, seed});
        return plan;
    }
    if (config.rotation == Rotation::Wht || config.rotation == Rotation::WhtPermuted) {
        plan.dim = static_cast<int>(paddedDimension(static_cast<std::size_t>(d)));
        Rng rng(engine, seed, keys ? Stream::KeySigns : Stream::ValueSigns);
        plan.signs = randomSigns(static_cast<std::size_t>(plan.dim), rng);
        if (config.rotation == Rotation::WhtPermuted) {
            // Fisher-Yates over the d original coordinates, after the signs (the signs stay TQ's).
            plan.permutation.resize(static_cast<std::size_t>(d));
            std::iota(plan.permutation.begin(), plan.permutation.end(), 0);
            for (int i = d - 1; i > 0; --i)
                std::swap(plan.permutation[static_cast<std::size_t>(i)],
                          plan.permutation[static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(i) + 1))]);
        }
    } else {
        plan.dim = d;
    }
    switch (config.quantizer) {
    case QuantizerKind::LloydBeta:
        plan.codebook = cachedCodebook(CodebookLaw::Beta, std::max(plan.dim, 3), plan.bits);
        break;
    case QuantizerKind::LloydGauss:
        plan.codebook = cachedCodebook(CodebookLaw::Gaussian, plan.dim, plan.bits);
        break;
    case QuantizerKind::LloydEmpirical: {
        assert(inputs.calibration && inputs.calibration->rows() > 0 && "empirical codebooks need a calibration set");
        RowMatrixXf rotated;
        if (!plan.signs.empty())
            rotateRows(*inputs.calibration, plan.signs, rotated);
        const RowMatrixXf& cal = plan.signs.empty() ? *inputs.calibration : rotated;
        plan.codebook = std::make_shared<const Codebook>(
            NormQuantizer::trainEmpirical(cal, plan.bits, config.normFormat).codebook());
        break;
    }
    case QuantizerKind::Uniform:
        plan.uniform.bits = plan.bits;
        plan.uniform.groupSize = config.groupSize;
        plan.uniform.axis = config.axis;
        plan.uniform.fullPrecisionWindow = config.window;
        plan.uniform.scaleFormat = config.normFormat;
        break;
    case QuantizerKind::Spectral:
        planSpectral(plan, inputs, engine, seed, keys);
        return plan; // the selective sketch is part of the spectral plan
    }
    if (config.residual == ResidualKind::Qjl) {
        const int m = config.qjlDim > 0 ? config.qjlDim : d;
        Rng rng(engine, seed, keys ? Stream::KeySketch : Stream::ValueSketch);
        plan.sketch = config.qjlSketch == QjlSketchKind::Orthogonal ? QjlSketch::drawOrthogonalMatrix(m, plan.dim, rng)
                                                                    : QjlSketch::drawMatrix(m, plan.dim, rng);
    }
    if (config.residual == ResidualKind::HeadQ) {
        const int r = config.headqRank;
        if (config.headqControl == HeadqControl::RandomBasis) {
            Rng rng(engine, seed, Stream::SchemeExtra, 1);
            plan.headqBasis = randomOrthonormal(d, r, rng).cast<float>();
        } else {
            assert(inputs.calibrationQueries && inputs.calibrationQueries->rows() > 0
                   && "HeadQ needs calibration queries");
            const auto spectrum = spectrumOf(*inputs.calibrationQueries, config.gapThreshold,
                                             inputs.spectrumCache ? &inputs.spectrumCache[1] : nullptr);
            plan.headqBasis = spectrum->basis.leftCols(r).cast<float>();
        }
    }
    return plan;
}

namespace {

/// Bits per original coordinate of a path storing `bits`-bit codes over `dim` coordinates
/// of `d`-dimensional vectors (`bits` may be a mean over tokens).
double bitsPerCoordinate(const PathConfig& config, double bits, int dim, int d, int tokens, int qjlRows)
{
    const int normBits = scalarFormatBits(config.normFormat);
    double perVector = 0.0;
    if (config.quantizer == QuantizerKind::Uniform) {
        UniformOptions options;
        options.bits = 0; // overheads only: group parameters and the full-precision window
        options.groupSize = config.groupSize;
        options.axis = config.axis;
        options.fullPrecisionWindow = config.window;
        options.scaleFormat = config.normFormat;
        const double quantRows = std::max(0, tokens - std::min(config.window, tokens));
        perVector = tokens > 0 ? (UniformQuantizer(options).totalBits(tokens, dim) + bits * dim * quantRows) / tokens
                               : 0.0;
    } else {
        perVector = bits * dim + normBits;
    }
    if (config.residual == ResidualKind::Qjl)
        perVector += qjlRows + normBits;
    if (config.residual == ResidualKind::HeadQ)
        perVector += config.headqBits * config.headqRank + 2 * scalarFormatBits(ScalarFormat::Fp16);
    return perVector / d;
}

} // namespace

double pathBitsPerCoordinate(const PathPlan& plan, int tokens)
{
    if (plan.codec)
        return plan.codec->bitsPerCoordinate(tokens);
    if (plan.config.quantizer == QuantizerKind::Spectral) {
        double perVector = 0.0;
        for (int b : plan.coordBits)
            perVector += b;
        if (plan.config.residual == ResidualKind::Qjl)
            perVector += plan.sketchRows() + scalarFormatBits(plan.config.normFormat);
        return perVector / plan.d;
    }
    double bits = plan.bits;
    if (!plan.tokenBits.empty()) {
        double sum = 0.0;
        for (int b : plan.tokenBits)
            sum += b;
        bits = sum / static_cast<double>(plan.tokenBits.size());
    }
    return bitsPerCoordinate(plan.config, bits, plan.dim, plan.d, tokens, plan.sketchRows());
}

double pathBitsPerCoordinate(const PathConfig& config, int budget, int d, int tokens)
{
    if (!config.codec.empty()) {
        const CodecKind* kind = findCodec(config.codec);
        return kind ? kind->previewBits(config, budget, d, tokens) : std::numeric_limits<double>::quiet_NaN();
    }
    if (config.quantizer == QuantizerKind::Spectral) {
        // The allocation needs calibration data; the total is the budget, plus the sketch's
        // residual norm (its sign bits come out of the budget).
        return config.bits.at(budget)
               + (config.residual == ResidualKind::Qjl ? scalarFormatBits(config.normFormat) / static_cast<double>(d) : 0.0);
    }
    const bool wht = config.rotation == Rotation::Wht || config.rotation == Rotation::WhtPermuted;
    const int dim = wht ? static_cast<int>(paddedDimension(static_cast<std::size_t>(d))) : d;
    return bitsPerCoordinate(config, config.bits.at(budget), dim, d, tokens, config.qjlDim > 0 ? config.qjlDim : d);
}

namespace {

/// Quantizes rows of `xr` (already in the stored basis) with the plan's quantizer at `bits`.
void quantizeRows(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& xr, int bits, RowMatrixXf& xHat,
                  int& saturated)
{
    if (plan.config.quantizer == QuantizerKind::Uniform) {
        UniformOptions options = plan.uniform;
        options.bits = bits;
        const UniformQuantizer q(options);
        UniformCodes codes;
        q.encode(xr, codes);
        q.decode(codes, xHat);
        return;
    }
    const auto codebook = bits == plan.bits ? plan.codebook
                          : plan.config.quantizer == QuantizerKind::LloydGauss
                              ? cachedCodebook(CodebookLaw::Gaussian, plan.dim, bits)
                              : cachedCodebook(CodebookLaw::Beta, std::max(plan.dim, 3), bits);
    const NormQuantizer q(codebook, plan.config.normFormat);
    NormCodes codes;
    q.encode(xr, codes);
    q.decode(codes, xHat);
    saturated += codes.saturatedNorms;
}

/// Per-token bit widths: rows grouped by width, each group quantized at its width.
void quantizeByToken(const PathPlan& plan, const RowMatrixXf& xr, RowMatrixXf& xHat, int& saturated)
{
    xHat.resize(xr.rows(), xr.cols());
    std::vector<int> widths(plan.tokenBits);
    std::sort(widths.begin(), widths.end());
    widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
    for (int b : widths) {
        std::vector<Eigen::Index> rows;
        for (Eigen::Index r = 0; r < xr.rows(); ++r)
            if (plan.tokenBits[static_cast<std::size_t>(r)] == b)
                rows.push_back(r);
        RowMatrixXf sub(static_cast<Eigen::Index>(rows.size()), xr.cols()), subHat;
        for (std::size_t i = 0; i < rows.size(); ++i)
            sub.row(static_cast<Eigen::Index>(i)) = xr.row(rows[i]);
        quantizeRows(plan, sub, b, subHat, saturated);
        for (std::size_t i = 0; i < rows.size(); ++i)
            xHat.row(rows[i]) = subHat.row(static_cast<Eigen::Index>(i));
    }
}

/// SpectralQuant: per-coordinate codebooks in the eigenbasis; with a residual, a QJL sketch of
/// the leading d_eff coordinates' residual (the tail is scored by its dequantized dot product).
PathResult encodeSpectral(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries)
{
    PathResult out;
    const Eigen::Index n = x.rows(), d = plan.d;
    const RowMatrixXf y = x * plan.eigenbasis; // coordinates in the eigenbasis
    RowMatrixXf yHat(n, d);
    for (Eigen::Index i = 0; i < d; ++i) {
        const auto& cb = plan.coordCodebooks[static_cast<std::size_t>(i)];
        for (Eigen::Index r = 0; r < n; ++r)
            yHat(r, i) = cb ? cb->decode(cb->encode(y(r, i))) : plan.coordMeans[static_cast<std::size_t>(i)];
    }
    RowMatrixXf queriesEigen;
    if (queries) {
        queriesEigen.noalias() = *queries * plan.eigenbasis;
        out.scores.noalias() = queriesEigen * yHat.transpose();
        out.scores *= plan.scoreScale;
    }
    if (plan.config.residual == ResidualKind::Qjl && plan.deff > 0) {
        const Eigen::Index lead = plan.deff;
        const QjlSketch sketch(plan.sketch, plan.config.normFormat);
        const RowMatrixXf residual = y.leftCols(lead) - yHat.leftCols(lead);
        QjlCodes codes;
        RowMatrixXf signs, rHat;
        sketch.encode(residual, codes, signs);
        out.saturatedNorms += codes.saturatedNorms;
        sketch.reconstruct(signs, codes.norms, rHat);
        if (plan.config.qjlReconstruction == QjlReconstruction::Mse)
            rHat *= static_cast<float>(QjlSketch::mseShrinkage(sketch.m(), sketch.dim(),
                                                                plan.config.qjlSketch == QjlSketchKind::Orthogonal));
        if (queries) {
            out.baseScores = out.scores;
            RowMatrixXf correction;
            sketch.estimateInnerProducts(queriesEigen.leftCols(lead), signs, codes.norms, correction);
            out.scores += plan.scoreScale * correction;
        }
        yHat.leftCols(lead) += rHat;
    }
    out.reconstruction.noalias() = yHat * plan.eigenbasis.transpose();
    return out;
}

} // namespace

RowMatrixXf permutedColumns(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x)
{
    if (plan.permutation.empty())
        return x;
    RowMatrixXf out(x.rows(), x.cols());
    for (std::size_t i = 0; i < plan.permutation.size(); ++i)
        out.col(static_cast<Eigen::Index>(i)) = x.col(plan.permutation[i]);
    return out;
}

PathResult encodePathCpu(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries)
{
    assert(x.cols() == plan.d && "encodePathCpu: x must have d columns");
    if (plan.codec)
        return plan.codec->encode(x, queries);
    if (!plan.permutation.empty()) {
        // Keys and queries permuted alike leave every dot product as it is; the reconstruction
        // goes back to the original order.
        PathPlan unpermuted = plan;
        unpermuted.permutation.clear();
        const RowMatrixXf xp = permutedColumns(plan, x);
        RowMatrixXf qp;
        if (queries)
            qp = permutedColumns(plan, *queries);
        PathResult out = encodePathCpu(unpermuted, xp, queries ? &qp : nullptr);
        RowMatrixXf back(out.reconstruction.rows(), out.reconstruction.cols());
        for (std::size_t i = 0; i < plan.permutation.size(); ++i)
            back.col(plan.permutation[i]) = out.reconstruction.col(static_cast<Eigen::Index>(i));
        out.reconstruction = std::move(back);
        return out;
    }
    if (plan.config.quantizer == QuantizerKind::Spectral)
        return encodeSpectral(plan, x, queries);
    PathResult out;
    const bool rotated = !plan.signs.empty();
    const bool qjl = plan.config.residual == ResidualKind::Qjl;
    RowMatrixXf xr;   // x in the stored basis, kept only when the residual needs it
    RowMatrixXf xHat; // the dequantized x in the stored basis
    if (!plan.tokenBits.empty()) {
        if (rotated)
            rotateRows(x, plan.signs, xr);
        else
            xr = x;
        quantizeByToken(plan, xr, xHat, out.saturatedNorms);
    } else if (plan.config.quantizer == QuantizerKind::Uniform) {
        if (rotated)
            rotateRows(x, plan.signs, xr);
        else
            xr = x;
        quantizeRows(plan, xr, plan.bits, xHat, out.saturatedNorms);
    } else {
        const NormQuantizer q(plan.codebook, plan.config.normFormat);
        NormCodes codes;
        if (rotated) {
            q.encodeRotated(x, plan.signs, codes, qjl ? &xr : nullptr); // fused: no rotated copy unless needed
        } else {
            q.encode(x, codes);
            if (qjl)
                xr = x;
        }
        q.decode(codes, xHat);
        out.saturatedNorms += codes.saturatedNorms;
    }

    RowMatrixXf queriesRotated;
    if (queries) {
        if (rotated)
            rotateRows(*queries, plan.signs, queriesRotated);
        else
            queriesRotated = *queries;
        out.scores.noalias() = queriesRotated * xHat.transpose();
        out.scores *= plan.scoreScale;
    }

    RowMatrixXf full = xHat;
    if (qjl) {
        const QjlSketch sketch(plan.sketch, plan.config.normFormat);
        const RowMatrixXf residual = xr - xHat;
        QjlCodes codes;
        RowMatrixXf signs;
        sketch.encode(residual, codes, signs);
        out.saturatedNorms += codes.saturatedNorms;
        RowMatrixXf rHat;
        sketch.reconstruct(signs, codes.norms, rHat);
        if (plan.config.qjlReconstruction == QjlReconstruction::Mse)
            rHat *= static_cast<float>(QjlSketch::mseShrinkage(sketch.m(), sketch.dim(),
                                                                plan.config.qjlSketch == QjlSketchKind::Orthogonal));
        full += rHat;
        if (queries) {
            out.baseScores = out.scores;
            RowMatrixXf correction;
            sketch.estimateInnerProducts(queriesRotated, signs, codes.norms, correction);
            out.scores += plan.scoreScale * correction;
        }
    }
    if (plan.config.residual == ResidualKind::HeadQ) {
        // HeadQ (paper C): side code z = Q_q(U^T e) of the residual e = k - k^_base in the query
        // basis U (rotation is none, so the stored basis is the original one); the cache reads
        // it back as a logit correction q.U z^ / sqrt(d).
        const RowMatrixXf z = (x - full) * plan.headqBasis; // n x r
        UniformOptions side;
        side.bits = plan.config.headqBits;
        side.groupSize = static_cast<int>(z.cols());
        side.axis = UniformAxis::PerToken;
        const UniformQuantizer q(side);
        UniformCodes codes;
        RowMatrixXf zHat;
        q.encode(z, codes);
        q.decode(codes, zHat);
        const float sign = plan.config.headqControl == HeadqControl::WrongSign ? -1.0f : 1.0f;
        if (queries) {
            out.baseScores = out.scores;
            const RowMatrixXf qu = *queries * plan.headqBasis; // nq x r
            out.scores.noalias() += (sign * plan.scoreScale) * (qu * zHat.transpose());
        }
        full.noalias() += sign * (zHat * plan.headqBasis.transpose());
    }
    if (rotated)
        unrotateRows(full, plan.signs, static_cast<std::size_t>(plan.d), out.reconstruction);
    else
        out.reconstruction = std::move(full);
    return out;
}

} // namespace kvlens
