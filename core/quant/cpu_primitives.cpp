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
    std::optional<HostRows> hostRows() const override
    {
        return HostRows(m_m.data(), m_m.rows(), m_m.cols(), Eigen::OuterStride<>(m_m.cols()));
    }

private:
    RowMatrixXf m_m;
};

/// The caller's rows, read in place (the engine's input and queries: no copy on the CPU).
class HostView final : public DeviceMatrix {
public:
    explicit HostView(const Eigen::Ref<const RowMatrixXf>& x)
        : m_rows(x.data(), x.rows(), x.cols(), Eigen::OuterStride<>(x.outerStride()))
    {
    }
    int rows() const override { return static_cast<int>(m_rows.rows()); }
    int cols() const override { return static_cast<int>(m_rows.cols()); }
    std::optional<HostRows> hostRows() const override { return m_rows; }

private:
    HostRows m_rows;
};

/// A matrix to modify in place: CPU matrices the primitives made.
RowMatrixXf& h(const Mat& m)
{
    RowMatrixXf* p = m->host();
    assert(p && "CPU primitives modify host matrices only");
    return *p;
}

/// A matrix to read: owned or a view.
DeviceMatrix::HostRows in(const Mat& m)
{
    auto rows = m->hostRows();
    assert(rows && "CPU primitives take host matrices only");
    return *rows;
}

class CpuPrimitives final : public CodecPrimitives {
public:
    std::string name() const override { return "cpu"; }
    bool offers(Primitive) const override { return true; }

    Mat upload(const Eigen::Ref<const RowMatrixXf>& x) override { return hostMat(x); }
    Mat view(const Eigen::Ref<const RowMatrixXf>& x) override { return std::make_shared<HostView>(x); }
    void download(const Mat& m, RowMatrixXf& out) override { out = in(m); }
    Mat copy(const Mat& m) override { return hostMat(in(m)); }

    Mat rotate(const Mat& x, const std::vector<float>& signs) override
    {
        RowMatrixXf out;
        rotateRows(in(x), signs, out);
        return hostMat(std::move(out));
    }
    Mat unrotate(const Mat& y, const std::vector<float>& signs, int d) override
    {
        RowMatrixXf out;
        unrotateRows(in(y), signs, static_cast<std::size_t>(d), out);
        return hostMat(std::move(out));
    }
    Mat normCodebook(const Mat& x, const Codebook& codebook, ScalarFormat format, int& saturated) override
    {
        const NormQuantizer q(std::shared_ptr<const Codebook>(&codebook, [](const Codebook*) {}), format);
        NormCodes codes;
        RowMatrixXf out;
        q.encode(in(x), codes);
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
        q.encodeRotated(in(x), signs, codes, rotated ? &rows : nullptr); // fused: no rotated copy unless asked
        q.decode(codes, out);
        saturated += codes.saturatedNorms;
        if (rotated)
            *rotated = hostMat(std::move(rows));
        return hostMat(std::move(out));
    }
    Mat gemmNT(const Mat& a, const Mat& b, float s) override
    {
        RowMatrixXf out;
        out.noalias() = in(a) * in(b).transpose();
        out *= s;
        return hostMat(std::move(out));
    }
    Mat subtract(const Mat& a, const Mat& b) override { return hostMat(in(a) - in(b)); }
    void axpy(Mat& a, const Mat& b, float s) override
    {
        if (s == 1.0f)
            h(a) += in(b);
        else
            h(a) += s * in(b);
    }
    void scale(Mat& a, float s) override { h(a) *= s; }

    SketchCodes sketch(const Mat& residual, const RowMatrixXf& S, ScalarFormat format) override
    {
        const QjlSketch sketch(S, format);
        QjlCodes codes;
        RowMatrixXf signs;
        sketch.encode(in(residual), codes, signs);
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
        sketch.estimateInnerProducts(in(queries), h(codes.signs), codes.norms, out);
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
