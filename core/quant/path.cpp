// SPDX-License-Identifier: GPL-3.0-or-later
// Path planning (random parts from named streams), bit accounting, and the CPU path encoder.
#include "core/quant/path.h"

#include "core/quant/norm_quantizer.h"
#include "core/quant/qjl.h"
#include "core/quant/wht.h"

#include <cassert>
#include <cmath>

namespace kvlens {

PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const RowMatrixXf* calibration,
                  EngineKind engine, std::uint64_t seed)
{
    PathPlan plan;
    plan.config = config;
    plan.d = d;
    plan.bits = config.bits.at(budget);
    plan.scoreScale = 1.0f / std::sqrt(static_cast<float>(d));
    const bool keys = site == PathSite::Keys;
    if (config.rotation == Rotation::Wht) {
        plan.dim = static_cast<int>(paddedDimension(static_cast<std::size_t>(d)));
        Rng rng(engine, seed, keys ? Stream::KeySigns : Stream::ValueSigns);
        plan.signs = randomSigns(static_cast<std::size_t>(plan.dim), rng);
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
        assert(calibration && calibration->rows() > 0 && "empirical codebooks need a calibration set");
        RowMatrixXf rotated;
        if (!plan.signs.empty())
            rotateRows(*calibration, plan.signs, rotated);
        const RowMatrixXf& cal = plan.signs.empty() ? *calibration : rotated;
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
    }
    if (config.residual == ResidualKind::Qjl) {
        const int m = config.qjlDim > 0 ? config.qjlDim : d;
        Rng rng(engine, seed, keys ? Stream::KeySketch : Stream::ValueSketch);
        plan.sketch = QjlSketch::drawMatrix(m, plan.dim, rng);
    }
    return plan;
}

namespace {

/// Bits per original coordinate of a path storing `bits`-bit codes over `dim` coordinates
/// of `d`-dimensional vectors.
double bitsPerCoordinate(const PathConfig& config, int bits, int dim, int d, int tokens)
{
    const int normBits = scalarFormatBits(config.normFormat);
    double perVector = 0.0;
    if (config.quantizer == QuantizerKind::Uniform) {
        UniformOptions options;
        options.bits = bits;
        options.groupSize = config.groupSize;
        options.axis = config.axis;
        options.fullPrecisionWindow = config.window;
        options.scaleFormat = config.normFormat;
        perVector = tokens > 0 ? UniformQuantizer(options).totalBits(tokens, dim) / tokens : 0.0;
    } else {
        perVector = static_cast<double>(bits) * dim + normBits;
    }
    if (config.residual == ResidualKind::Qjl)
        perVector += (config.qjlDim > 0 ? config.qjlDim : d) + normBits;
    return perVector / d;
}

} // namespace

double pathBitsPerCoordinate(const PathPlan& plan, int tokens)
{
    return bitsPerCoordinate(plan.config, plan.bits, plan.dim, plan.d, tokens);
}

double pathBitsPerCoordinate(const PathConfig& config, int budget, int d, int tokens)
{
    const int dim = config.rotation == Rotation::Wht ? static_cast<int>(paddedDimension(static_cast<std::size_t>(d))) : d;
    return bitsPerCoordinate(config, config.bits.at(budget), dim, d, tokens);
}

PathResult encodePathCpu(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries)
{
    assert(x.cols() == plan.d && "encodePathCpu: x must have d columns");
    PathResult out;
    const bool rotated = !plan.signs.empty();
    const bool qjl = plan.config.residual == ResidualKind::Qjl;
    RowMatrixXf xr;   // x in the stored basis, kept only when the residual needs it
    RowMatrixXf xHat; // the dequantized x in the stored basis
    if (plan.config.quantizer == QuantizerKind::Uniform) {
        if (rotated)
            rotateRows(x, plan.signs, xr);
        else
            xr = x;
        const UniformQuantizer q(plan.uniform);
        UniformCodes codes;
        q.encode(xr, codes);
        q.decode(codes, xHat);
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
        full += rHat;
        if (queries) {
            out.baseScores = out.scores;
            RowMatrixXf correction;
            sketch.estimateInnerProducts(queriesRotated, signs, codes.norms, correction);
            out.scores += plan.scoreScale * correction;
        }
    }
    if (rotated)
        unrotateRows(full, plan.signs, static_cast<std::size_t>(plan.d), out.reconstruction);
    else
        out.reconstruction = std::move(full);
    return out;
}

} // namespace kvlens
