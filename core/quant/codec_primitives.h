// SPDX-License-Identifier: GPL-3.0-or-later
// The numeric primitives codec parts are built from, behind one interface: the CPU implements every
// one, a device (OpenCL) those on its allow-list. The composition of parts lives in the engine
// (core/quant/path.cpp), never in a backend.
#pragma once

#include "core/common/types.h"
#include "core/quant/lloyd_max.h"
#include "core/quant/norm_quantizer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvlens {

/// A matrix held by a backend (host memory for the CPU, a device buffer for OpenCL). Row-major,
/// float32. Opaque: only the primitives that made it read it.
class DeviceMatrix {
public:
    virtual ~DeviceMatrix() = default;
    virtual int rows() const = 0;
    virtual int cols() const = 0;
    /// The host matrix itself when the backend keeps and owns it in host memory (the CPU), else null.
    virtual RowMatrixXf* host() { return nullptr; }
    /// Read access to rows in host memory (owned, or a view of the caller's rows), else nothing.
    using HostRows = Eigen::Map<const RowMatrixXf, 0, Eigen::OuterStride<>>;
    virtual std::optional<HostRows> hostRows() const { return std::nullopt; }
};
using Mat = std::shared_ptr<DeviceMatrix>;

/// What a QJL sketch of residual rows produced on a backend.
struct SketchCodes {
    Mat signs;                 ///< n x m, +-1
    std::vector<float> norms;  ///< n stored residual norms (host copy)
    Mat deviceNorms;           ///< the same on the backend (may be null on the CPU)
    Mat deviceSketch;          ///< the sketch matrix S on the backend, kept for the reconstruction and estimates (may be null)
    int saturated = 0;         ///< norms that hit their format's ceiling
};

/// The primitives. Names are the allow-list's entries.
enum class Primitive {
    Rotate,            ///< signed Walsh-Hadamard rotation and its inverse
    NormCodebook,      ///< norm + codebook quantize and dequantize of rows
    RotateNormCodebook,///< the two fused (no rotated copy kept unless asked)
    Gemm,              ///< a b^T times a scale
    Elementwise,       ///< subtract, a += s b, a *= s, copy
    Sketch,            ///< QJL: sign(S r) and |r|, the reconstruction and the inner-product estimator
};

class CodecPrimitives {
public:
    virtual ~CodecPrimitives() = default;
    virtual std::string name() const = 0;
    /// The allow-list: true when this backend runs `p`; a part needing another primitive runs on
    /// the CPU's primitives (its inputs downloaded, its output uploaded), and the run says so.
    virtual bool offers(Primitive p) const = 0;

    virtual Mat upload(const Eigen::Ref<const RowMatrixXf>& x) = 0;
    /// x for reading only, valid while x lives: the CPU does not copy it; a device uploads it.
    virtual Mat view(const Eigen::Ref<const RowMatrixXf>& x) { return upload(x); }
    virtual void download(const Mat& m, RowMatrixXf& out) = 0;
    virtual Mat copy(const Mat& m) = 0;

    /// Rows of x (n x d) rotated by H D [x, 0] / sqrt(dim), dim = signs.size(); and back to d.
    virtual Mat rotate(const Mat& x, const std::vector<float>& signs) = 0;
    virtual Mat unrotate(const Mat& y, const std::vector<float>& signs, int d) = 0;
    /// Each row's norm stored in `format` and its direction on the codebook's levels, decoded.
    virtual Mat normCodebook(const Mat& x, const Codebook& codebook, ScalarFormat format, int& saturated) = 0;
    /// rotate then normCodebook in one pass; `rotated` (when given) receives the rotated rows.
    virtual Mat rotateNormCodebook(const Mat& x, const std::vector<float>& signs, const Codebook& codebook,
                                   ScalarFormat format, int& saturated, Mat* rotated) = 0;
    /// scale * a b^T (a: n x k, b: m x k).
    virtual Mat gemmNT(const Mat& a, const Mat& b, float scale) = 0;
    virtual Mat subtract(const Mat& a, const Mat& b) = 0;
    /// a += s b.
    virtual void axpy(Mat& a, const Mat& b, float s) = 0;
    virtual void scale(Mat& a, float s) = 0;
    /// QJL (core/quant/qjl.h) with sketch matrix S (m x dim) on residual rows r (n x dim).
    virtual SketchCodes sketch(const Mat& residual, const RowMatrixXf& S, ScalarFormat format) = 0;
    /// The unbiased reconstruction sqrt(pi/2)/m |r| S^T sign(S r), n x dim.
    virtual Mat sketchReconstruct(const SketchCodes& codes, const RowMatrixXf& S) = 0;
    /// The inner-product estimates sqrt(pi/2)/m |r_j| <S q_i, sign(S r_j)>, nq x n.
    virtual Mat sketchInnerProducts(const Mat& queries, const SketchCodes& codes, const RowMatrixXf& S) = 0;
    /// x += the reconstruction (a device may fuse the two; by default sketchReconstruct then axpy).
    virtual void addSketchReconstruction(Mat& x, const SketchCodes& codes, const RowMatrixXf& S)
    {
        axpy(x, sketchReconstruct(codes, S), 1.0f);
    }
    /// scores += scale * the estimates (by default sketchInnerProducts then axpy).
    virtual void addSketchInnerProducts(Mat& scores, const Mat& queries, const SketchCodes& codes, const RowMatrixXf& S,
                                        float scale)
    {
        axpy(scores, sketchInnerProducts(queries, codes, S), scale);
    }
};

/// The CPU's primitives (every one), on host matrices; the oracle every device is compared with.
CodecPrimitives& cpuPrimitives();

/// A host matrix as a Mat of the CPU primitives (moved in, no copy).
Mat hostMat(RowMatrixXf m);

} // namespace kvlens
