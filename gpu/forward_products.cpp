// SPDX-License-Identifier: GPL-3.0-or-later
// Weight upload in stored types, dequantized panels and the products' GEMM (CLBlast or forward.cl).
#include "gpu/forward_products.h"

#include <algorithm>
#include <cstring>

#ifdef KVLENS_HAVE_CLBLAST
#include <clblast.h>
#endif

namespace kvlens::gpu {

namespace {

std::size_t roundUp(std::size_t value, std::size_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

/// Bytes of one packed row of `cols` values of `type`.
std::uint64_t packedRowBytes(ggml::GgmlType type, std::int64_t cols)
{
    const auto bytes = ggml::rowBytes(type, cols);
    return bytes ? *bytes : 0;
}

/// Logical rows [r0, r0 + n) of `part` as packed stored bytes in logical order: GGUF's row order
/// applied, a Conv1D part (stored [cols x rows]) transposed value by value.
void packRows(const lm::StoredRows& part, std::int64_t r0, std::int64_t n, std::uint8_t* out)
{
    const std::uint64_t row = packedRowBytes(part.type, part.cols);
    if (part.transposed) {
        const std::size_t value = part.rowBytes / static_cast<std::size_t>(part.rows);
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t c = 0; c < part.cols; ++c)
                std::memcpy(out + static_cast<std::size_t>(i) * row + static_cast<std::size_t>(c) * value,
                            part.data + static_cast<std::size_t>(c) * part.rowBytes + static_cast<std::size_t>(r0 + i) * value,
                            value);
        return;
    }
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t stored = part.rowOrder.empty() ? r0 + i : part.rowOrder[static_cast<std::size_t>(r0 + i)];
        std::memcpy(out + static_cast<std::size_t>(i) * row, part.data + static_cast<std::size_t>(stored) * part.rowBytes, row);
    }
}

/// Uploads rows [r0, r0 + n) of `part` into a new buffer, through a bounded staging copy unless the
/// stored rows are already packed and in order.
cl::Buffer uploadRows(cl::Context& context, cl::CommandQueue& queue, const lm::StoredRows& part, std::int64_t r0,
                      std::int64_t n)
{
    const std::uint64_t row = packedRowBytes(part.type, part.cols);
    const std::size_t bytes = static_cast<std::size_t>(row * static_cast<std::uint64_t>(n));
    cl::Buffer buffer(context, CL_MEM_READ_ONLY, std::max<std::size_t>(bytes, 4));
    if (bytes == 0)
        return buffer;
    if (!part.transposed && part.rowOrder.empty() && part.rowBytes == row) {
        queue.enqueueWriteBuffer(buffer, CL_TRUE, 0, bytes, part.data + static_cast<std::size_t>(r0) * row);
        return buffer;
    }
    constexpr std::size_t kStaging = std::size_t{64} << 20;
    const std::int64_t step = std::max<std::int64_t>(1, static_cast<std::int64_t>(kStaging / std::max<std::uint64_t>(row, 1)));
    std::vector<std::uint8_t> staging(static_cast<std::size_t>(row * static_cast<std::uint64_t>(std::min(step, n))));
    for (std::int64_t i = 0; i < n; i += step) {
        const std::int64_t take = std::min(step, n - i);
        packRows(part, r0 + i, take, staging.data());
        queue.enqueueWriteBuffer(buffer, CL_TRUE, static_cast<std::size_t>(static_cast<std::uint64_t>(i) * row),
                                 static_cast<std::size_t>(static_cast<std::uint64_t>(take) * row), staging.data());
    }
    return buffer;
}

std::string dequantKernelName(ggml::GgmlType type)
{
    return "dequant_" + std::string(ggml::ggmlName(type));
}

/// Global work of a dequantizer over `rows` x `cols`: one work-item per 8 values (f16, bf16) or block.
std::size_t dequantItems(ggml::GgmlType type, std::int64_t rows, std::int64_t cols)
{
    const std::uint32_t block = ggml::ggmlTraits(type).blockSize;
    const std::int64_t units = block == 1 ? (cols + 7) / 8 : cols / block;
    return static_cast<std::size_t>(rows * units);
}

/// C (m x n, from cOff, stride ldc) = A (m x k, from aOff, stride lda) B^T (n x k, from bOff, stride ldb).
void gemm(PassResources& pass, ProductEngine engine, int m, int n, int k, const cl::Buffer& a, std::size_t aOff, int lda,
          const cl::Buffer& b, std::size_t bOff, int ldb, cl::Buffer& c, std::size_t cOff, int ldc)
{
#ifdef KVLENS_HAVE_CLBLAST
    if (engine == ProductEngine::ClBlast) {
        cl_command_queue queue = pass.queue()();
        const auto status = clblast::Gemm<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes,
                                                 static_cast<std::size_t>(m), static_cast<std::size_t>(n),
                                                 static_cast<std::size_t>(k), 1.0f, a(), aOff, static_cast<std::size_t>(lda),
                                                 b(), bOff, static_cast<std::size_t>(ldb), 0.0f, c(), cOff,
                                                 static_cast<std::size_t>(ldc), &queue, nullptr);
        if (status != clblast::StatusCode::kSuccess)
            throw cl::Error(static_cast<cl_int>(status), "clblast::Gemm");
        return;
    }
#else
    (void)engine;
#endif
    cl::Kernel& kernel = pass.kernel("matmul_nt");
    int arg = 0;
    kernel.setArg(arg++, m);
    kernel.setArg(arg++, n);
    kernel.setArg(arg++, k);
    kernel.setArg(arg++, a);
    kernel.setArg(arg++, static_cast<cl_ulong>(aOff));
    kernel.setArg(arg++, lda);
    kernel.setArg(arg++, b);
    kernel.setArg(arg++, static_cast<cl_ulong>(bOff));
    kernel.setArg(arg++, ldb);
    kernel.setArg(arg++, c);
    kernel.setArg(arg++, static_cast<cl_ulong>(cOff));
    kernel.setArg(arg++, ldc);
    if (pass.context().style() == KernelStyle::Gpu)
        pass.queue().enqueueNDRangeKernel(kernel, cl::NullRange,
                                          cl::NDRange(roundUp(static_cast<std::size_t>(n), 16), roundUp(static_cast<std::size_t>(m), 16)),
                                          cl::NDRange(16, 16));
    else // 4 x 4 register blocks, work-groups of 8 x 8 blocks: one local size for every shape, so PoCL
         // specializes the kernel once
        pass.queue().enqueueNDRangeKernel(kernel, cl::NullRange,
                                          cl::NDRange(roundUp((static_cast<std::size_t>(n) + 3) / 4, 8),
                                                      roundUp((static_cast<std::size_t>(m) + 3) / 4, 8)),
                                          cl::NDRange(8, 8));
}

} // namespace

std::uint64_t DeviceMatrix::bytes() const
{
    std::uint64_t total = 0;
    for (const DeviceSegment& s : segments)
        total += s.rowBytes * static_cast<std::uint64_t>(s.rows);
    return total;
}

std::string DeviceMatrix::typeName() const
{
    std::string out;
    for (const DeviceSegment& s : segments) {
        const std::string name(ggml::ggmlName(s.type));
        if (out.find(name) == std::string::npos)
            out += (out.empty() ? "" : "+") + name;
    }
    return out;
}

std::uint64_t deviceBytes(const lm::WeightMatrix& w)
{
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < w.partCount(); ++i) {
        const lm::StoredRows& p = w.part(i);
        total += packedRowBytes(p.type, p.cols) * static_cast<std::uint64_t>(p.rows);
    }
    return total;
}

DeviceMatrix uploadMatrix(cl::Context& context, cl::CommandQueue& queue, const lm::WeightMatrix& w, std::uint64_t maxAlloc)
{
    DeviceMatrix m;
    m.rows = w.rows();
    m.cols = w.cols();
    std::int64_t first = 0;
    for (std::size_t i = 0; i < w.partCount(); ++i) {
        const lm::StoredRows& part = w.part(i);
        const std::uint64_t row = packedRowBytes(part.type, part.cols);
        const std::int64_t step = std::max<std::int64_t>(1, static_cast<std::int64_t>(maxAlloc / std::max<std::uint64_t>(row, 1)));
        for (std::int64_t r0 = 0; r0 < part.rows; r0 += step) {
            DeviceSegment s;
            s.type = part.type;
            s.firstRow = first + r0;
            s.rows = std::min(step, part.rows - r0);
            s.rowBytes = row;
            s.buffer = uploadRows(context, queue, part, r0, s.rows);
            m.segments.push_back(std::move(s));
        }
        first += part.rows;
    }
    return m;
}

const char* productEngineName(ProductEngine engine)
{
    return engine == ProductEngine::ClBlast ? "CLBlast" : "own kernel";
}

bool haveClBlast()
{
#ifdef KVLENS_HAVE_CLBLAST
    return true;
#else
    return false;
#endif
}

PassResources::PassResources(OpenClContext& ctx, const cl::Program& program)
    : m_ctx(ctx), m_program(program), m_queue(ctx.context(), ctx.device())
{
}

cl::Kernel& PassResources::kernel(const std::string& name)
{
    auto it = m_kernels.find(name);
    if (it == m_kernels.end())
        it = m_kernels.emplace(name, cl::Kernel(m_program, name.c_str())).first;
    return it->second;
}

cl::Buffer& PassResources::scratch(const std::string& name, std::size_t bytes)
{
    bytes = std::max<std::size_t>(bytes, 4);
    auto& slot = m_buffers[name];
    if (slot.first < bytes) {
        slot.second = cl::Buffer(); // the old one goes first: never two at their peak
        slot.second = cl::Buffer(m_ctx.context(), CL_MEM_READ_WRITE, bytes);
        slot.first = bytes;
    }
    return slot.second;
}

void launch1d(PassResources& pass, cl::Kernel& kernel, std::size_t n, std::size_t group)
{
    pass.queue().enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(roundUp(std::max<std::size_t>(n, 1), group)),
                                      cl::NDRange(group));
}

void multiplyTransposed(PassResources& pass, ProductEngine engine, const cl::Buffer& a, std::size_t aOff, int m, int lda,
                        const DeviceMatrix& w, cl::Buffer& out, std::size_t cOff, int ldc)
{
    const int k = static_cast<int>(w.cols);
    for (const DeviceSegment& s : w.segments) {
        if (s.type == ggml::GgmlType::F32) {
            gemm(pass, engine, m, static_cast<int>(s.rows), k, a, aOff, lda, s.buffer, 0, k, out,
                 cOff + static_cast<std::size_t>(s.firstRow), ldc);
            continue;
        }
        const std::int64_t step = std::max<std::int64_t>(16, static_cast<std::int64_t>(kPanelFloats / std::max(k, 1)));
        const std::int64_t panelRows = std::min(step, s.rows);
        cl::Buffer& panel = pass.scratch("panel", static_cast<std::size_t>(panelRows) * static_cast<std::size_t>(k) * sizeof(float));
        cl::Kernel& dequant = pass.kernel(dequantKernelName(s.type));
        for (std::int64_t p0 = 0; p0 < s.rows; p0 += step) {
            const int rows = static_cast<int>(std::min(step, s.rows - p0));
            dequant.setArg(0, s.buffer);
            dequant.setArg(1, static_cast<cl_ulong>(static_cast<std::uint64_t>(p0) * s.rowBytes));
            dequant.setArg(2, static_cast<cl_ulong>(s.rowBytes));
            dequant.setArg(3, rows);
            dequant.setArg(4, k);
            dequant.setArg(5, panel);
            launch1d(pass, dequant, dequantItems(s.type, rows, k));
            gemm(pass, engine, m, rows, k, a, aOff, lda, panel, 0, k, out,
                 cOff + static_cast<std::size_t>(s.firstRow + p0), ldc);
        }
    }
}

} // namespace kvlens::gpu
