// SPDX-License-Identifier: GPL-3.0-or-later
// A model's weight matrices on an OpenCL device in their stored types, and the forward's products
// over them (activations times a weight matrix transposed): CLBlast's SGEMM or the own kernel, on
// float32 panels the device dequantizes from the stored bytes. Internal to gpu/ (OpenCL types).
#pragma once

#include "core/lm/weight_matrix.h"
#include "gpu/opencl_context.h"

#include <CL/opencl.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvlens::gpu {

/// Rows [firstRow, firstRow + rows) of a logical weight matrix on the device, stored as `type`:
/// contiguous rows of `rowBytes` bytes (Conv1D parts transposed and GGUF's q/k rows put in logical
/// order when uploaded), one buffer per segment.
struct DeviceSegment {
    ggml::GgmlType type = ggml::GgmlType::F32;
    std::int64_t firstRow = 0, rows = 0;
    std::uint64_t rowBytes = 0;
    cl::Buffer buffer;
};

/// A weight matrix [rows x cols] on the device, as its stored parts are.
struct DeviceMatrix {
    std::int64_t rows = 0, cols = 0;
    std::vector<DeviceSegment> segments;
    std::uint64_t bytes() const;
    /// The stored types ("bf16", "q4_K+q6_K").
    std::string typeName() const;
};

/// Bytes `w` takes on the device (its parts packed: ggml::rowBytes of each row).
std::uint64_t deviceBytes(const lm::WeightMatrix& w);

/// Uploads every part of `w` in its stored type through `queue` (blocking). A part larger than
/// `maxAlloc` bytes is split by rows. Throws cl::Error.
DeviceMatrix uploadMatrix(cl::Context& context, cl::CommandQueue& queue, const lm::WeightMatrix& w,
                          std::uint64_t maxAlloc);

/// What runs the products.
enum class ProductEngine {
    ClBlast, ///< clblast::Gemm (CLBlast's tuned SGEMM) on the float32 panels
    Kernel,  ///< forward.cl's matmul_nt
};

/// "CLBlast" or "own kernel".
const char* productEngineName(ProductEngine engine);

/// Whether this build links CLBlast.
bool haveClBlast();

/// What one forward pass holds on the device: its in-order command queue, its kernel objects (a
/// kernel's arguments belong to the object, so a pass owns its own) and scratch buffers, grown as
/// needed and kept for the next pass that takes these resources.
class PassResources {
public:
    PassResources(OpenClContext& ctx, const cl::Program& program);

    cl::CommandQueue& queue() { return m_queue; }
    cl::Kernel& kernel(const std::string& name);
    /// A device buffer of at least `bytes` bytes (never zero-sized), kept under `name`.
    cl::Buffer& scratch(const std::string& name, std::size_t bytes);
    OpenClContext& context() { return m_ctx; }

private:
    OpenClContext& m_ctx;
    cl::Program m_program;
    cl::CommandQueue m_queue;
    std::map<std::string, cl::Kernel> m_kernels;
    std::map<std::string, std::pair<std::size_t, cl::Buffer>> m_buffers;
};

/// Float32 values of a dequantized panel: rows of a stored matrix converted at once stay within this
/// (at least 16 rows).
inline constexpr std::size_t kPanelFloats = std::size_t{16} << 20;

/// out[:, cOff ..] = a w^T: a is m x w.cols (row stride lda, from element aOff), out m x w.rows (row
/// stride ldc, from element cOff). F32 segments multiply as stored; every other segment is
/// dequantized a panel of rows at a time into float32 scratch on the device first. Enqueued on the
/// pass's queue (not finished). Throws cl::Error.
void multiplyTransposed(PassResources& pass, ProductEngine engine, const cl::Buffer& a, std::size_t aOff, int m,
                        int lda, const DeviceMatrix& w, cl::Buffer& out, std::size_t cOff, int ldc);

/// The 1D launch of an element-wise kernel over n items: work-groups of 64.
void launch1d(PassResources& pass, cl::Kernel& kernel, std::size_t n, std::size_t group = 64);

} // namespace kvlens::gpu
