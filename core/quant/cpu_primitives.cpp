// SPDX-License-Identifier: GPL-3.0-or-later
// The CPU's codec primitives: host matrices and the core kernels (WHT, norm quantizer, QJL).
#include "core/quant/codec_primitives.h"

#include "core/quant/qjl.h"
#include "core/quant/wht.h"

#include <cassert>

namespace kvlens {

namespace {

class HostMatrix final : public DeviceMatrix {
public:
    explicit HostMatrix(RowMatrixXf m) : m_m(std::move(m)) {}
    int rows() const override { return static_cast<int>(m_m.rows()); }
    int cols() const override { return static_cast<int>(m_m.cols()); }
    RowMatrixXf* host() override { return &m_m; }

private:
    RowMatrixXf m_m;
};

RowMatrixXf& h(const Mat& m)
{
    RowMatrixXf* p = m->host();
    assert(p && "CPU primitives take host matrices only");
    return *p;
}

class CpuPrimitives final : public CodecPrimitives {
public:
    std::string name() const override { return "cpu"; }
    bool offers(Primitive) const override { return true; }

    Mat upload(const Eigen::Ref<const RowMatrixXf>& x) override { return hostMat(x); }
    void download(const Mat& m, RowMatrixXf& out) override { out = h(m); }
    Mat copy(const Mat& m) override { return hostMat(h(m)); }

    Mat rotate(const Mat& x, const std::vector<float>& signs) override
    {
        RowMatrixXf out;
        rotateRows(h(x), signs, out);
        return hostMat(std::move(out));
    }
    Mat unrotate(const Mat& y, const std::vector<float>& signs, int d) override
    {
        RowMatrixXf out;
        unrotateRows(h(y), signs, static_cast<std::size_t>(d), out);
        return hostMat(std::move(out));
    }
    Mat normCodebook(const Mat& x, const Codebook& codebook, ScalarFormat format, int& saturated) override
    {
        const NormQuantizer q(std::shared_ptr<const Codebook>(&codebook, [](const Codebook*) {}), format);
        NormCodes codes;
        RowMatrixXf out;
        q.encode(h(x), codes);
        q.decode(codes, out);
        saturated += codes.saturatedNorms;
        return hostMat(std::move(out));
    }
    Mat rotateNormCodebook(const Mat& x, const std::vector<float>& signs, const Codebook& codebook, ScalarFormat format,
                           int& saturated, Mat* rotated) override
    {
        const NormQuantizer q(std::shared_ptr<const Codebook>(&codebook, [](const Codebook*) {}), format);
        NormCodes codes;
        RowMatrixXf out, rows;
        q.encodeRotated(h(x), signs, codes, rotated ? &rows : nullptr); // fused: no rotated copy unless asked
        q.decode(codes, out);
        saturated += codes.saturatedNorms;
        if (rotated)
            *rotated = hostMat(std::move(rows));
        return hostMat(std::move(out));
    }
    Mat gemmNT(const Mat& a, const Mat& b, float s) override
    {
        RowMatrixXf out;
        out.noalias() = h(a) * h(b).transpose();
        out *= s;
        return hostMat(std::move(out));
    }
    Mat subtract(const Mat& a, const Mat& b) override { return hostMat(h(a) - h(b)); }
    void axpy(Mat& a, const Mat& b, float s) override
    {
        if (s == 1.0f)
            h(a) += h(b);
        else
            h(a) += s * h(b);
    }
    void scale(Mat& a, float s) override { h(a) *= s; }

    SketchCodes sketch(const Mat& residual, const RowMatrixXf& S, ScalarFormat format) override
    {
        const QjlSketch sketch(S, format);
        QjlCodes codes;
        RowMatrixXf signs;
        sketch.encode(h(residual), codes, signs);
        SketchCodes out;
        out.signs = hostMat(std::move(signs));
        out.norms = std::move(codes.norms);
        out.saturated = codes.saturatedNorms;
        return out;
    }
    Mat sketchReconstruct(const SketchCodes& codes, const RowMatrixXf& S) override
    {
        const QjlSketch sketch(S);
        RowMatrixXf out;
        sketch.reconstruct(h(codes.signs), codes.norms, out);
        return hostMat(std::move(out));
    }
    Mat sketchInnerProducts(const Mat& queries, const SketchCodes& codes, const RowMatrixXf& S) override
    {
        const QjlSketch sketch(S);
        RowMatrixXf out;
        sketch.estimateInnerProducts(h(queries), h(codes.signs), codes.norms, out);
        return hostMat(std::move(out));
    }
};

} // namespace

Mat hostMat(RowMatrixXf m)
{
    return std::make_shared<HostMatrix>(std::move(m));
}

CodecPrimitives& cpuPrimitives()
{
    static CpuPrimitives prims;
    return prims;
}

} // namespace kvlens
