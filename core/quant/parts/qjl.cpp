// SPDX-License-Identifier: GPL-3.0-or-later
// Residual qjl: a 1-bit Johnson-Lindenstrauss sketch of what the quantizer left (m sign bits and the
// residual's norm), read back as the unbiased inner-product estimator on scores and as a
// reconstruction of the residual.
#include "core/quant/part_support.h"

#include "core/quant/qjl.h"

#include <cmath>
#include <numbers>

namespace kvlens::parts {

namespace {

class QjlPlan final : public ResidualPlan {
public:
    QjlPlan(RowMatrixXf sketch, ScalarFormat format, bool mse, bool orthogonal, bool wholeRow)
        : m_sketch(std::move(sketch)), m_format(format), m_mse(mse), m_orthogonal(orthogonal), m_wholeRow(wholeRow)
    {
    }

    /// The sketch of a leading part of the coordinates (SpectralQuant's d_eff) slices columns:
    /// that runs on the CPU; the whole stored row runs wherever the primitives are offered.
    bool runsOn(const CodecPrimitives& prims) const override
    {
        return &prims == &cpuPrimitives()
               || (m_wholeRow && prims.offers(Primitive::Sketch) && prims.offers(Primitive::Elementwise) && prims.offers(Primitive::Gemm));
    }

    void apply(ResidualIO& io) const override
    {
        CodecPrimitives& p = io.prims;
        const int lead = static_cast<int>(m_sketch.cols());
        if (lead < io.stored->cols()) {
            applyLeading(io, lead);
            return;
        }
        SketchCodes codes;
        {
            const Mat residual = p.subtract(io.stored, io.xHat); // released once sketched
            codes = p.sketch(residual, m_sketch, m_format);
        }
        io.saturated += codes.saturated;
        if (m_mse) {
            Mat rHat = p.sketchReconstruct(codes, m_sketch);
            p.scale(rHat, shrinkage());
            p.axpy(io.xHat, rHat, 1.0f);
        } else {
            p.addSketchReconstruction(io.xHat, codes, m_sketch);
        }
        if (io.queries && io.scores) {
            if (io.baseScores)
                *io.baseScores = p.copy(*io.scores);
            p.addSketchInnerProducts(*io.scores, io.queries, codes, m_sketch, io.scoreScale);
        }
    }
    double bitsPerVector() const override { return static_cast<double>(m_sketch.rows()) + scalarFormatBits(m_format); }
    int projectionColumns() const override { return static_cast<int>(m_sketch.rows()); }
    std::optional<double> scoreVarianceFactor(int dim) const override
    {
        return (std::numbers::pi / 2.0 - 1.0 / dim) / static_cast<double>(m_sketch.rows());
    }
    int boundaryDecisions(const RowMatrixXf& stored, const RowMatrixXf& xHat, double margin) const override
    {
        if (m_sketch.cols() != stored.cols())
            return 0; // a selective (leading-coordinates) sketch is not modelled
        const RowMatrixXf residual = stored - xHat;
        const RowMatrixXf projections = residual * m_sketch.transpose();
        int count = 0;
        for (Eigen::Index r = 0; r < projections.rows(); ++r) {
            const double rNorm = residual.row(r).norm();
            for (Eigen::Index i = 0; i < projections.cols(); ++i)
                if (std::abs(projections(r, i)) < margin * rNorm * m_sketch.row(i).norm())
                    ++count;
        }
        return count;
    }

private:
    float shrinkage() const
    {
        return static_cast<float>(QjlSketch::mseShrinkage(static_cast<int>(m_sketch.rows()), static_cast<int>(m_sketch.cols()),
                                                          m_orthogonal));
    }

    /// The sketch of the first `lead` coordinates of the residual (the tail is scored by its
    /// dequantized dot product), on host matrices.
    void applyLeading(ResidualIO& io, int lead) const
    {
        RowMatrixXf& xHat = *io.xHat->host();
        const auto y = *io.stored->hostRows();
        const QjlSketch sketch(m_sketch, m_format);
        const RowMatrixXf residual = y.leftCols(lead) - xHat.leftCols(lead);
        QjlCodes codes;
        RowMatrixXf signs, rHat;
        sketch.encode(residual, codes, signs);
        io.saturated += codes.saturatedNorms;
        sketch.reconstruct(signs, codes.norms, rHat);
        if (m_mse)
            rHat *= shrinkage();
        if (io.queries && io.scores) {
            RowMatrixXf& scores = *(*io.scores)->host();
            if (io.baseScores)
                *io.baseScores = hostMat(scores);
            RowMatrixXf correction;
            sketch.estimateInnerProducts(io.queries->hostRows()->leftCols(lead), signs, codes.norms, correction);
            scores += io.scoreScale * correction;
        }
        xHat.leftCols(lead) += rHat;
    }

    RowMatrixXf m_sketch;
    ScalarFormat m_format;
    bool m_mse, m_orthogonal;
    bool m_wholeRow; ///< the sketch covers every stored coordinate
};

} // namespace

std::vector<PartKind> qjlParts()
{
    PartKind k;
    k.name = "qjl";
    k.role = PartRole::Residual;
    k.description = "A 1-bit QJL sketch of the residual (m sign bits and its norm): scores get the unbiased estimator "
                    "sqrt(pi/2)/m |r| <S q, sign(S r)>, the row gets sqrt(pi/2)/m |r| S^T sign(S r) (or its MSE-shrunk form).";
    k.options = {integer("m", 0, 1 << 20, 0, "Sketch rows; 0 means m = d (one bit per coordinate), d_eff under SpectralQuant."),
                 choice("sketch", {"gaussian", "orthogonal"}, "gaussian",
                        "i.i.d. N(0, 1) entries, or blocks of orthogonal rows of norm sqrt(dim)."),
                 choice("reconstruction", {"unbiased", "mse"}, "unbiased",
                        "unbiased: E r^ = r; mse: shrunk by 1/(1 + e) to minimize the expected squared error."),
                 scalarFormat("norm", "Storage format of the residual's norm.")};
    k.projectionColumns = [](const CodecPart& p, int d) { return p.integer("m") > 0 ? p.integer("m") : d; };
    k.validate = [](const CodecPart& p, const PathConfig&, int, int d, const std::string& field) -> Status {
        if (p.integer("m") > 16 * d)
            return Error{field + ".m", "must be in [0, 16 d] = [0, " + std::to_string(16 * d) + "] (0 means m = d), got "
                                           + std::to_string(p.integer("m"))};
        return Ok{};
    };
    k.planResidual = [](const CodecPart& p, PlanContext& c) -> std::shared_ptr<const ResidualPlan> {
        const int cols = c.leadDims > 0 ? c.leadDims : c.dim;
        const int m = p.integer("m") > 0 ? p.integer("m") : (c.leadDims > 0 ? c.leadDims : c.d);
        const bool orthogonal = p.text("sketch") == "orthogonal";
        Rng rng(c.engine, c.seed, sketchStream(c.site));
        RowMatrixXf S = orthogonal ? QjlSketch::drawOrthogonalMatrix(m, cols, rng) : QjlSketch::drawMatrix(m, cols, rng);
        return std::make_shared<QjlPlan>(std::move(S), scalarFormatFromName(p.text("norm")).value_or(ScalarFormat::Fp16),
                                         p.text("reconstruction") == "mse", orthogonal, cols == c.dim);
    };
    return {k};
}

} // namespace kvlens::parts
