// SPDX-License-Identifier: GPL-3.0-or-later
// Residual headq (paper C): a side code of the key residual in a rank-r query basis, read back as a
// logit correction; with the wrong-sign and random-basis controls.
#include "core/quant/part_support.h"

#include "core/quant/uniform_quantizer.h"
#include "core/rng/random_matrix.h"

namespace kvlens::parts {

namespace {

/// z = Q_q(U^T (k - k^_base)), U the rank-r basis; the cache reads q.U z^ / sqrt(d) as a correction.
class HeadqPlan final : public ResidualPlan {
public:
    HeadqPlan(Eigen::MatrixXf basis, int bits, float sign) : m_basis(std::move(basis)), m_bits(bits), m_sign(sign) {}

    bool runsOn(const CodecPrimitives& prims) const override { return &prims == &cpuPrimitives(); }

    void apply(ResidualIO& io) const override
    {
        // The stored basis is the original one (headq checks its path has no transform).
        RowMatrixXf& full = *io.xHat->host();
        const RowMatrixXf z = (io.original - full) * m_basis; // n x r
        UniformOptions side;
        side.bits = m_bits;
        side.groupSize = static_cast<int>(z.cols());
        side.axis = UniformAxis::PerToken;
        const UniformQuantizer q(side);
        UniformCodes codes;
        RowMatrixXf zHat;
        q.encode(z, codes);
        q.decode(codes, zHat);
        if (io.queries && io.scores) {
            RowMatrixXf& scores = *(*io.scores)->host();
            if (io.baseScores)
                *io.baseScores = hostMat(scores);
            const RowMatrixXf qu = *io.queries->hostRows() * m_basis; // nq x r
            scores.noalias() += (m_sign * io.scoreScale) * (qu * zHat.transpose());
        }
        full.noalias() += m_sign * (zHat * m_basis.transpose());
    }
    double bitsPerVector() const override
    {
        return static_cast<double>(m_bits) * static_cast<double>(m_basis.cols()) + 2 * scalarFormatBits(ScalarFormat::Fp16);
    }
    int projectionColumns() const override { return static_cast<int>(m_basis.cols()); }

private:
    Eigen::MatrixXf m_basis;
    int m_bits;
    float m_sign;
};

} // namespace

std::vector<PartKind> headqParts()
{
    PartKind k;
    k.name = "headq";
    k.role = PartRole::Residual;
    k.description = "HeadQ: the key residual's coordinates in the rank-r PCA basis of calibration queries, in "
                    "q-bit min-max integers, added back as the logit correction q.U z^ / sqrt(d).";
    k.options = {integer("rank", 1, 16384, 4, "r: the rank of the query basis."),
                 integer("bits", 1, 8, 8, "q: bits per side-code coordinate."),
                 choice("control", {"none", "wrong_sign", "random_basis"}, "none",
                        "Paper C's controls: the correction subtracted, or a random orthonormal basis of the same rank.")};
    // The random-basis control draws the same calibration set as the scheme it controls (it does not
    // read it), so the two see the same trial data.
    k.needsCalibration = [](const CodecPart&) { return true; };
    k.site = PathSite::Keys;
    k.siteReason = "HeadQ corrects scores, so it belongs on the key path";
    k.projectionColumns = [](const CodecPart& p, int) { return p.integer("rank"); };
    k.validate = [](const CodecPart& p, const PathConfig& path, int, int d, const std::string& field) -> Status {
        if (p.integer("rank") > d)
            return Error{field + ".rank", "must be in [1, d] = [1, " + std::to_string(d) + "], got "
                                              + std::to_string(p.integer("rank"))};
        if (!path.transforms.empty())
            return Error{field, "HeadQ corrects the key residual in the original basis: its path takes no transform"};
        if (path.quantizer.kind == "spectral")
            return Error{field, "HeadQ needs a KIVI or Lloyd base, not the spectral quantizer"};
        return Ok{};
    };
    k.planResidual = [](const CodecPart& p, PlanContext& c) -> std::shared_ptr<const ResidualPlan> {
        const int r = p.integer("rank");
        Eigen::MatrixXf basis;
        if (p.text("control") == "random_basis" || !c.inputs.calibrationQueries || c.inputs.calibrationQueries->rows() == 0) {
            Rng rng(c.engine, c.seed, Stream::SchemeExtra, 1);
            basis = randomOrthonormal(c.d, r, rng).cast<float>();
        } else {
            const auto spectrum = spectrumOf(*c.inputs.calibrationQueries, 10.0,
                                             c.inputs.spectrumCache ? &c.inputs.spectrumCache[1] : nullptr);
            basis = spectrum->basis.leftCols(r).cast<float>();
        }
        return std::make_shared<HeadqPlan>(std::move(basis), p.integer("bits"),
                                           p.text("control") == "wrong_sign" ? -1.0f : 1.0f);
    };
    return {k};
}

} // namespace kvlens::parts
