// SPDX-License-Identifier: GPL-3.0-or-later
// OpenCL backend: host orchestration of the kernels; data stays on the device within a stage.
#include "gpu/opencl_backend.h"

#include "core/attention/attention.h"
#include "core/common/fp16.h"
#include "gpu/opencl_context.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <numbers>
#include <thread>
#include <vector>

namespace kvlens::gpu {

namespace {

std::size_t roundUp(std::size_t value, std::size_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

int formatCode(ScalarFormat f)
{
    return f == ScalarFormat::Fp16 ? 0 : f == ScalarFormat::Bf16 ? 1 : 2;
}

} // namespace

struct OpenClBackend::Impl {
    std::shared_ptr<OpenClContext> ctx;
    std::mutex mutex;
    std::string fallback;  // first OpenCL error that made a stage fall back
    int fallbacks = 0;
    std::string cpuStages; // stages without kernels that ran on the CPU

    /// What each calling thread owns: its command queue and kernel objects (OpenCL contexts
    /// and programs are thread-safe; kernel arguments are not). Two trials run at once so that
    /// one's host-side work (data, metrics) overlaps the other's kernels.
    struct PerThread {
        cl::CommandQueue queue;
        std::map<std::pair<int, std::string>, cl::Kernel> kernels;
        PerThread() { livePerThread.fetch_add(1); }
        ~PerThread() { livePerThread.fetch_sub(1); }
        PerThread(const PerThread&) = delete;
        PerThread& operator=(const PerThread&) = delete;
    };
    /// Every thread's state, owned here so that destroying the backend frees every queue and
    /// kernel (and with them the last references to the context). Shared with the threads'
    /// exit hooks, which erase a thread's entry when it ends first (a run's workers do; the
    /// window's worker thread outlives many runs of one pooled backend).
    struct ThreadStates {
        std::mutex mutex;
        std::map<std::thread::id, std::unique_ptr<PerThread>> states;
    };
    std::shared_ptr<ThreadStates> threads = std::make_shared<ThreadStates>();
    /// Never reused, so a thread's one-entry cache below cannot mistake a new backend for a dead one.
    std::uint64_t id = nextId();
    static std::uint64_t nextId()
    {
        static std::atomic<std::uint64_t> counter{0};
        return ++counter;
    }
    static inline std::atomic<std::size_t> livePerThread{0};

    /// Runs at a thread's exit: drops that thread's state in every backend still alive.
    struct ThreadExit {
        std::vector<std::weak_ptr<ThreadStates>> used;
        ~ThreadExit()
        {
            const auto me = std::this_thread::get_id();
            for (const auto& weak : used)
                if (const auto owner = weak.lock()) {
                    std::unique_ptr<PerThread> mine;
                    {
                        const std::lock_guard lock(owner->mutex);
                        if (const auto it = owner->states.find(me); it != owner->states.end()) {
                            mine = std::move(it->second);
                            owner->states.erase(it);
                        }
                    }
                    // Released outside the lock: OpenCL calls need not serialize other threads.
                }
        }
    };

    PerThread& local()
    {
        // Every launch asks for the queue: a thread remembers the last backend it used, which
        // stays valid until the thread ends or the backend (whose id is never reused) goes.
        struct Last {
            std::uint64_t id = 0;
            PerThread* state = nullptr;
        };
        thread_local Last last;
        if (last.id == id)
            return *last.state;
        PerThread* state = nullptr;
        bool created = false;
        {
            const std::lock_guard lock(threads->mutex);
            auto& slot = threads->states[std::this_thread::get_id()];
            if (!slot) {
                auto fresh = std::make_unique<PerThread>();
                try {
                    fresh->queue = cl::CommandQueue(ctx->context(), ctx->device());
                } catch (...) {
                    threads->states.erase(std::this_thread::get_id());
                    throw;
                }
                slot = std::move(fresh);
                created = true;
            }
            state = slot.get();
        }
        if (created) {
            thread_local ThreadExit exitHook;
            std::erase_if(exitHook.used, [](const std::weak_ptr<ThreadStates>& w) { return w.expired(); });
            exitHook.used.push_back(threads);
        }
        last = {id, state};
        return *state;
    }

    /// Frees every thread's state (the destructor's work: threads that used the backend may outlive it).
    void releaseThreads()
    {
        std::map<std::thread::id, std::unique_ptr<PerThread>> states;
        {
            const std::lock_guard lock(threads->mutex);
            states.swap(threads->states);
        }
    }

    std::size_t threadStateCount() const
    {
        const std::lock_guard lock(threads->mutex);
        return threads->states.size();
    }

    cl::Context& context() { return ctx->context(); }
    cl::CommandQueue& queue() { return local().queue; }
    bool gpu() const { return ctx->style() == KernelStyle::Gpu; }

    /// A device buffer holding a copy of host data, copied before this returns (the host
    /// data may be a temporary); never zero-sized, which OpenCL forbids.
    template <class T>
    cl::Buffer upload(const T* data, std::size_t count, cl_mem_flags flags = CL_MEM_READ_ONLY)
    {
        if (count == 0)
            return cl::Buffer(context(), flags, 4);
        return cl::Buffer(context(), flags | CL_MEM_COPY_HOST_PTR, count * sizeof(T), const_cast<T*>(data));
    }
    cl::Buffer scratch(std::size_t bytes) { return cl::Buffer(context(), CL_MEM_READ_WRITE, std::max<std::size_t>(bytes, 4)); }
    template <class T>
    void download(const cl::Buffer& buffer, T* data, std::size_t count)
    {
        if (count > 0)
            queue().enqueueReadBuffer(buffer, CL_TRUE, 0, count * sizeof(T), data);
    }

    cl::Program program(const std::vector<std::string>& files, const std::string& defines)
    {
        auto p = ctx->program(files, defines);
        if (!p)
            throw cl::Error(CL_BUILD_PROGRAM_FAILURE, p.error().text().c_str());
        return *p;
    }
    cl::Program quantizeProgram(int dim) { return program({"quantize"}, "-DDIM=" + std::to_string(dim)); }
    cl::Program mainProgram() { return program({"gemm", "qjl", "attention"}, ""); }

    /// Kernel objects are created once per thread and reused (arguments are set at every launch).
    cl::Kernel& kernel(int dim, const char* name)
    {
        auto& kernels = local().kernels;
        auto key = std::make_pair(dim, std::string(name));
        auto it = kernels.find(key);
        if (it == kernels.end())
            it = kernels.emplace(key, cl::Kernel(dim > 0 ? quantizeProgram(dim) : mainProgram(), name)).first;
        return it->second;
    }

    /// Launches a per-row kernel: one work-item per row (CPU style) or a work-group per row.
    void runRows(cl::Kernel& kernel, std::size_t rows, int dim)
    {
        if (gpu()) {
            std::size_t group = 8;
            while (group < 256 && group < static_cast<std::size_t>(dim) / 2)
                group <<= 1;
            queue().enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(rows * group), cl::NDRange(group));
        } else {
            // Each work-item holds a whole vector in private memory, and PoCL lays a work-group's
            // private memory out on one thread's stack: keep a group's share near 64 KiB (a
            // runtime-chosen group of 2048 rows overflowed the stack at d = 128).
            const std::size_t group =
                std::clamp<std::size_t>(65536 / (4 * static_cast<std::size_t>(std::max(dim, 1))), 1, 64);
            queue().enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(roundUp(rows, group)), cl::NDRange(group));
        }
    }

    void run2d(cl::Kernel& kernel, std::size_t x, std::size_t y)
    {
        queue().enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(x, y), cl::NullRange);
    }

    void run1d(cl::Kernel& kernel, std::size_t n)
    {
        queue().enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(roundUp(n, 64)), cl::NDRange(64));
    }

    /// C (M x N) = alpha A (M x K) B^T (N x K), all device buffers with the given strides.
    void gemmNT(int M, int N, int K, const cl::Buffer& a, int lda, const cl::Buffer& b, int ldb, cl::Buffer& c, int ldc,
                float alpha)
    {
        cl::Kernel& k = kernel(0, "gemm_nt");
        k.setArg(0, M);
        k.setArg(1, N);
        k.setArg(2, K);
        k.setArg(3, a);
        k.setArg(4, lda);
        k.setArg(5, b);
        k.setArg(6, ldb);
        k.setArg(7, c);
        k.setArg(8, ldc);
        k.setArg(9, alpha);
        if (gpu())
            queue().enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(roundUp(N, 16), roundUp(M, 16)), cl::NDRange(16, 16));
        else
            run2d(k, (N + 3) / 4, (M + 3) / 4);
    }

    /// C (M x N) = alpha A (M x K) B (K x N). With a long inner dimension (K > M, as in P V
    /// over many tokens) and a B too large for the caches, B is transposed first and the
    /// dot-product kernel used: streaming B once per block of rows measured 6x slower there
    /// (8.7 vs 54 GFLOP/s at 256 x 1024 x 4096); small products skip the extra launch.
    void gemmNN(int M, int N, int K, const cl::Buffer& a, int lda, const cl::Buffer& b, int ldb, cl::Buffer& c, int ldc,
                float alpha)
    {
        if (K > M && ldb == N && static_cast<std::size_t>(K) * N >= (std::size_t{1} << 20)) {
            cl::Buffer bt = scratch(static_cast<std::size_t>(K) * N * sizeof(float));
            cl::Kernel& t = kernel(0, "transpose");
            t.setArg(0, b);
            t.setArg(1, K);
            t.setArg(2, N);
            t.setArg(3, bt);
            run2d(t, static_cast<std::size_t>(N), static_cast<std::size_t>(K));
            gemmNT(M, N, K, a, lda, bt, K, c, ldc, alpha);
            return;
        }
        cl::Kernel& k = kernel(0, "gemm_nn");
        k.setArg(0, M);
        k.setArg(1, N);
        k.setArg(2, K);
        k.setArg(3, a);
        k.setArg(4, lda);
        k.setArg(5, b);
        k.setArg(6, ldb);
        k.setArg(7, c);
        k.setArg(8, ldc);
        k.setArg(9, alpha);
        if (gpu())
            queue().enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(roundUp(N, 16), roundUp(M, 16)), cl::NDRange(16, 16));
        else
            run2d(k, (N + 15) / 16, (M + 3) / 4);
    }

    /// Rotated copies of rows x d host rows, on the device (rows x dim).
    cl::Buffer rotate(const cl::Buffer& x, int rows, int d, const cl::Buffer& signs, int dim)
    {
        cl::Buffer out = scratch(static_cast<std::size_t>(rows) * dim * sizeof(float));
        cl::Kernel& k = kernel(dim, "rotate_rows");
        k.setArg(0, x);
        k.setArg(1, rows);
        k.setArg(2, d);
        k.setArg(3, signs);
        k.setArg(4, 1.0f / std::sqrt(static_cast<float>(dim)));
        k.setArg(5, out);
        runRows(k, static_cast<std::size_t>(rows), dim);
        return out;
    }

    void encode(const cl::Buffer& x, int rows, int d, bool rotate, const cl::Buffer& signs, int dim, const Codebook& cb,
                ScalarFormat format, cl::Buffer& codes, cl::Buffer& norms, cl::Buffer* rotated)
    {
        const cl::Buffer thresholds = upload(cb.thresholdsF.data(), cb.thresholdsF.size());
        cl::Kernel& k = kernel(dim, "encode_rows");
        k.setArg(0, x);
        k.setArg(1, rows);
        k.setArg(2, d);
        k.setArg(3, rotate ? 1 : 0);
        k.setArg(4, signs);
        k.setArg(5, 1.0f / std::sqrt(static_cast<float>(dim)));
        k.setArg(6, thresholds);
        k.setArg(7, static_cast<int>(cb.thresholdsF.size()));
        k.setArg(8, formatCode(format));
        k.setArg(9, codes);
        k.setArg(10, norms);
        k.setArg(11, rotated ? 1 : 0);
        k.setArg(12, rotated ? *rotated : norms); // any valid buffer when unused
        runRows(k, static_cast<std::size_t>(rows), dim);
    }

    void decode(const cl::Buffer& codes, const cl::Buffer& norms, const Codebook& cb, int rows, int dim, cl::Buffer& out)
    {
        const cl::Buffer levels = upload(cb.levelsF.data(), cb.levelsF.size());
        cl::Kernel& k = kernel(dim, "decode_rows");
        k.setArg(0, codes);
        k.setArg(1, norms);
        k.setArg(2, levels);
        k.setArg(3, rows);
        k.setArg(4, out);
        run1d(k, static_cast<std::size_t>(rows) * dim);
    }

    void unrotate(const cl::Buffer& in, int rows, int d, const cl::Buffer& signs, int dim, cl::Buffer& out)
    {
        cl::Kernel& k = kernel(dim, "unrotate_rows");
        k.setArg(0, in);
        k.setArg(1, rows);
        k.setArg(2, d);
        k.setArg(3, signs);
        k.setArg(4, 1.0f / std::sqrt(static_cast<float>(dim)));
        k.setArg(5, out);
        runRows(k, static_cast<std::size_t>(rows), dim);
    }

    /// QJL encode on the device: residual norms, sign bits and +-1 signs (rows x m, in `signs`).
    void qjl(const cl::Buffer& residual, int rows, int dim, const cl::Buffer& sketch, int m, ScalarFormat format,
             cl::Buffer& rnorms, cl::Buffer& signs, cl::Buffer& bits)
    {
        cl::Kernel& norms = kernel(0, "row_norms");
        norms.setArg(0, residual);
        norms.setArg(1, rows);
        norms.setArg(2, dim);
        norms.setArg(3, formatCode(format));
        norms.setArg(4, rnorms);
        run1d(norms, static_cast<std::size_t>(rows));
        gemmNT(rows, m, dim, residual, dim, sketch, dim, signs, m, 1.0f);
        const int words = (m + 31) / 32;
        cl::Kernel& pack = kernel(0, "pack_signs");
        pack.setArg(0, signs);
        pack.setArg(1, rows);
        pack.setArg(2, m);
        pack.setArg(3, words);
        pack.setArg(4, bits);
        run2d(pack, static_cast<std::size_t>(words), static_cast<std::size_t>(rows));
    }

    /// A stage without kernels ran on the CPU (counted once per kind).
    void noteCpuStage(const std::string& stage)
    {
        const std::lock_guard lock(mutex);
        if (cpuStages.find(stage) == std::string::npos)
            cpuStages += (cpuStages.empty() ? "" : ", ") + stage;
    }

    void note(const cl::Error& e, const char* stage)
    {
        const std::lock_guard lock(mutex);
        ++fallbacks;
        if (fallback.empty())
            fallback = std::string(stage) + ": " + e.what() + " " + clErrorText(e.err());
    }
};

namespace {

/// A matrix in a device buffer (row-major float32).
class ClMatrix final : public DeviceMatrix {
public:
    ClMatrix(cl::Buffer buffer, int rows, int cols) : buffer(std::move(buffer)), m_rows(rows), m_cols(cols) {}
    int rows() const override { return m_rows; }
    int cols() const override { return m_cols; }
    cl::Buffer buffer;

private:
    int m_rows, m_cols;
};

} // namespace

/// The codec primitives on this device (core/quant/codec_primitives.h). The allow-list is what has
/// kernels: rotation, norm + codebook (fused with the rotation or not), GEMM, element-wise updates and
/// the QJL sketch. Parts built on other primitives (uniform groups, SpectralQuant's per-coordinate
/// codebooks, HeadQ, KVQuant, ggml blocks) run on the CPU's, and the run's label names them. No
/// stage of a codec is restated here: the engine (core/quant/path.cpp) composes the parts.
class OpenClBackend::Primitives final : public CodecPrimitives {
public:
    explicit Primitives(Impl& impl) : I(impl) {}

    std::string name() const override { return "opencl"; }
    bool offers(Primitive p) const override
    {
        switch (p) {
        case Primitive::Rotate:
        case Primitive::NormCodebook:
        case Primitive::RotateNormCodebook:
        case Primitive::Gemm:
        case Primitive::Elementwise:
        case Primitive::Sketch: return true;
        }
        return false;
    }

    Mat upload(const Eigen::Ref<const RowMatrixXf>& x) override
    {
        const RowMatrixXf contiguous = x;
        return make(I.upload(contiguous.data(), static_cast<std::size_t>(contiguous.size()), CL_MEM_READ_WRITE),
                    static_cast<int>(x.rows()), static_cast<int>(x.cols()));
    }
    void download(const Mat& m, RowMatrixXf& out) override
    {
        out.resize(m->rows(), m->cols());
        I.download(buf(m), out.data(), static_cast<std::size_t>(out.size()));
    }
    Mat copy(const Mat& m) override
    {
        const std::size_t bytes = count(m) * sizeof(float);
        cl::Buffer out = I.scratch(bytes);
        if (bytes > 0)
            I.queue().enqueueCopyBuffer(buf(m), out, 0, 0, bytes);
        return make(out, m->rows(), m->cols());
    }

    Mat rotate(const Mat& x, const std::vector<float>& signs) override
    {
        const int dim = static_cast<int>(signs.size());
        const cl::Buffer s = I.upload(signs.data(), signs.size());
        return make(I.rotate(buf(x), x->rows(), x->cols(), s, dim), x->rows(), dim);
    }
    Mat unrotate(const Mat& y, const std::vector<float>& signs, int d) override
    {
        const int dim = static_cast<int>(signs.size());
        const cl::Buffer s = I.upload(signs.data(), signs.size());
        cl::Buffer out = I.scratch(static_cast<std::size_t>(y->rows()) * d * sizeof(float));
        I.unrotate(buf(y), y->rows(), d, s, dim, out);
        return make(out, y->rows(), d);
    }
    Mat normCodebook(const Mat& x, const Codebook& codebook, ScalarFormat format, int& saturated) override
    {
        return encodeDecode(x, nullptr, codebook, format, saturated, nullptr);
    }
    Mat rotateNormCodebook(const Mat& x, const std::vector<float>& signs, const Codebook& codebook, ScalarFormat format,
                           int& saturated, Mat* rotated) override
    {
        return encodeDecode(x, &signs, codebook, format, saturated, rotated);
    }
    Mat gemmNT(const Mat& a, const Mat& b, float scale) override
    {
        const int M = a->rows(), N = b->rows(), K = a->cols();
        cl::Buffer c = I.scratch(static_cast<std::size_t>(M) * N * sizeof(float));
        I.gemmNT(M, N, K, buf(a), K, buf(b), K, c, N, scale);
        return make(c, M, N);
    }
    Mat subtract(const Mat& a, const Mat& b) override
    {
        cl::Buffer r = I.scratch(count(a) * sizeof(float));
        cl::Kernel& k = I.kernel(0, "subtract");
        k.setArg(0, buf(a));
        k.setArg(1, buf(b));
        k.setArg(2, r);
        k.setArg(3, static_cast<int>(count(a)));
        I.run1d(k, count(a));
        return make(r, a->rows(), a->cols());
    }
    void axpy(Mat& a, const Mat& b, float s) override
    {
        cl::Kernel& k = I.kernel(0, "axpy");
        k.setArg(0, buf(a));
        k.setArg(1, buf(b));
        k.setArg(2, s);
        k.setArg(3, static_cast<int>(count(a)));
        I.run1d(k, count(a));
    }
    void scale(Mat& a, float s) override
    {
        cl::Kernel& k = I.kernel(0, "scale_values");
        k.setArg(0, buf(a));
        k.setArg(1, s);
        k.setArg(2, static_cast<int>(count(a)));
        I.run1d(k, count(a));
    }

    SketchCodes sketch(const Mat& residual, const RowMatrixXf& S, ScalarFormat format) override
    {
        const int n = residual->rows(), dim = residual->cols(), m = static_cast<int>(S.rows());
        const cl::Buffer sketch = I.upload(S.data(), static_cast<std::size_t>(S.size()));
        cl::Buffer norms = I.scratch(static_cast<std::size_t>(n) * sizeof(float));
        cl::Buffer signs = I.scratch(static_cast<std::size_t>(n) * m * sizeof(float));
        // (uploaded once per path: the reconstruction and the estimates use the same S)
        cl::Buffer bits = I.scratch(static_cast<std::size_t>(n) * ((m + 31) / 32) * sizeof(std::uint32_t));
        I.qjl(buf(residual), n, dim, sketch, m, format, norms, signs, bits);
        SketchCodes out;
        out.signs = make(signs, n, m);
        out.deviceNorms = make(norms, n, 1);
        out.deviceSketch = make(sketch, m, dim);
        out.norms.resize(static_cast<std::size_t>(n));
        I.download(norms, out.norms.data(), out.norms.size());
        if (format == ScalarFormat::Fp16)
            for (float v : out.norms)
                out.saturated += v >= kHalfMax ? 1 : 0;
        return out;
    }
    Mat sketchReconstruct(const SketchCodes& codes, const RowMatrixXf& S) override
    {
        const int n = codes.signs->rows(), m = codes.signs->cols(), dim = static_cast<int>(S.cols());
        const cl::Buffer sketch = sketchOf(codes, S);
        cl::Buffer product = I.scratch(static_cast<std::size_t>(n) * dim * sizeof(float));
        I.gemmNN(n, dim, m, buf(codes.signs), m, sketch, dim, product, dim, 1.0f);
        cl::Buffer out = I.scratch(static_cast<std::size_t>(n) * dim * sizeof(float));
        scaled("scale_rows", out, product, norms(codes), c(m), n, dim);
        return make(out, n, dim);
    }
    Mat sketchInnerProducts(const Mat& queries, const SketchCodes& codes, const RowMatrixXf& S) override
    {
        const int nq = queries->rows(), n = codes.signs->rows(), m = codes.signs->cols(), dim = static_cast<int>(S.cols());
        const cl::Buffer sketch = sketchOf(codes, S);
        cl::Buffer sq = I.scratch(static_cast<std::size_t>(nq) * m * sizeof(float));
        I.gemmNT(nq, m, dim, buf(queries), dim, sketch, dim, sq, m, 1.0f);
        cl::Buffer estimate = I.scratch(static_cast<std::size_t>(nq) * n * sizeof(float));
        I.gemmNT(nq, n, m, sq, m, buf(codes.signs), m, estimate, n, 1.0f);
        cl::Buffer out = I.scratch(static_cast<std::size_t>(nq) * n * sizeof(float));
        scaled("scale_columns", out, estimate, norms(codes), c(m), nq, n);
        return make(out, nq, n);
    }

    void addSketchReconstruction(Mat& x, const SketchCodes& codes, const RowMatrixXf& S) override
    {
        const int n = codes.signs->rows(), m = codes.signs->cols(), dim = static_cast<int>(S.cols());
        const cl::Buffer sketch = sketchOf(codes, S);
        cl::Buffer product = I.scratch(static_cast<std::size_t>(n) * dim * sizeof(float));
        I.gemmNN(n, dim, m, buf(codes.signs), m, sketch, dim, product, dim, 1.0f);
        cl::Kernel& k = I.kernel(0, "add_scaled_rows"); // x += product * (c |r_i|), in place
        k.setArg(0, buf(x));
        k.setArg(1, product);
        k.setArg(2, norms(codes));
        k.setArg(3, c(m));
        k.setArg(4, n);
        k.setArg(5, dim);
        I.run2d(k, static_cast<std::size_t>(dim), static_cast<std::size_t>(n));
    }
    void addSketchInnerProducts(Mat& scores, const Mat& queries, const SketchCodes& codes, const RowMatrixXf& S,
                                float scale) override
    {
        const int nq = queries->rows(), n = codes.signs->rows(), m = codes.signs->cols(), dim = static_cast<int>(S.cols());
        const cl::Buffer sketch = sketchOf(codes, S);
        cl::Buffer sq = I.scratch(static_cast<std::size_t>(nq) * m * sizeof(float));
        I.gemmNT(nq, m, dim, buf(queries), dim, sketch, dim, sq, m, 1.0f);
        cl::Buffer estimate = I.scratch(static_cast<std::size_t>(nq) * n * sizeof(float));
        I.gemmNT(nq, n, m, sq, m, buf(codes.signs), m, estimate, n, 1.0f);
        cl::Kernel& k = I.kernel(0, "add_scaled_columns"); // scores += scale (estimate c |r_j|), in place
        k.setArg(0, buf(scores));
        k.setArg(1, estimate);
        k.setArg(2, norms(codes));
        k.setArg(3, c(m));
        k.setArg(4, scale);
        k.setArg(5, nq);
        k.setArg(6, n);
        I.run2d(k, static_cast<std::size_t>(n), static_cast<std::size_t>(nq));
    }

private:
    static Mat make(cl::Buffer b, int rows, int cols) { return std::make_shared<ClMatrix>(std::move(b), rows, cols); }
    static const cl::Buffer& buf(const Mat& m)
    {
        const auto* cm = dynamic_cast<const ClMatrix*>(m.get());
        if (!cm)
            throw cl::Error(CL_INVALID_MEM_OBJECT, "a host matrix passed to the OpenCL primitives");
        return cm->buffer;
    }
    static std::size_t count(const Mat& m) { return static_cast<std::size_t>(m->rows()) * static_cast<std::size_t>(m->cols()); }
    static float c(int m) { return std::sqrt(std::numbers::pi_v<float> / 2.0f) / static_cast<float>(m); }
    cl::Buffer sketchOf(const SketchCodes& codes, const RowMatrixXf& S)
    {
        return codes.deviceSketch ? buf(codes.deviceSketch) : I.upload(S.data(), static_cast<std::size_t>(S.size()));
    }
    cl::Buffer norms(const SketchCodes& codes)
    {
        return codes.deviceNorms ? buf(codes.deviceNorms) : I.upload(codes.norms.data(), codes.norms.size());
    }
    void scaled(const char* kernelName, cl::Buffer& dst, const cl::Buffer& src, const cl::Buffer& norms, float c, int rows,
                int cols)
    {
        cl::Kernel& k = I.kernel(0, kernelName);
        k.setArg(0, dst);
        k.setArg(1, src);
        k.setArg(2, norms);
        k.setArg(3, c);
        k.setArg(4, rows);
        k.setArg(5, cols);
        I.run2d(k, static_cast<std::size_t>(cols), static_cast<std::size_t>(rows));
    }
    Mat encodeDecode(const Mat& x, const std::vector<float>* signs, const Codebook& codebook, ScalarFormat format,
                     int& saturated, Mat* rotated)
    {
        const int n = x->rows(), d = x->cols();
        const int dim = signs ? static_cast<int>(signs->size()) : d;
        const float one = 1.0f;
        const cl::Buffer s = signs ? I.upload(signs->data(), signs->size()) : I.upload(&one, 1);
        cl::Buffer codes = I.scratch(static_cast<std::size_t>(n) * dim);
        cl::Buffer norms = I.scratch(static_cast<std::size_t>(n) * sizeof(float));
        cl::Buffer rows = I.scratch(rotated ? static_cast<std::size_t>(n) * dim * sizeof(float) : 4);
        I.encode(buf(x), n, d, signs != nullptr, s, dim, codebook, format, codes, norms, rotated ? &rows : nullptr);
        cl::Buffer out = I.scratch(static_cast<std::size_t>(n) * dim * sizeof(float));
        I.decode(codes, norms, codebook, n, dim, out);
        if (rotated)
            *rotated = make(rows, n, dim);
        std::vector<float> stored(static_cast<std::size_t>(n));
        I.download(norms, stored.data(), stored.size());
        if (format == ScalarFormat::Fp16)
            for (float v : stored)
                saturated += v >= kHalfMax ? 1 : 0;
        return make(out, n, dim);
    }

    Impl& I;
};

OpenClBackend::OpenClBackend(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl)), m_primitives(std::make_unique<Primitives>(*m_impl))
{
}

OpenClBackend::~OpenClBackend()
{
    if (m_impl)
        m_impl->releaseThreads();
}

std::size_t OpenClBackend::perThreadStateCount() const
{
    return m_impl->threadStateCount();
}

std::size_t OpenClBackend::livePerThreadStates()
{
    return Impl::livePerThread.load();
}

void OpenClBackend::resetFallbacks()
{
    const std::lock_guard lock(m_impl->mutex);
    m_impl->fallbacks = 0;
    m_impl->fallback.clear();
    m_impl->cpuStages.clear();
}

Result<std::unique_ptr<OpenClBackend>> OpenClBackend::create(const std::string& request)
{
    auto ctx = OpenClContext::create(request);
    if (!ctx)
        return ctx.error();
    auto impl = std::make_unique<Impl>();
    impl->ctx = *ctx;
    // Build the generic program now, so kernel errors surface here (with the build log)
    // rather than as fallbacks during a run.
    if (auto p = impl->ctx->program({"gemm", "qjl", "attention"}, ""); !p)
        return p.error();
    return std::unique_ptr<OpenClBackend>(new OpenClBackend(std::move(impl)));
}

const DeviceInfo& OpenClBackend::device() const
{
    return m_impl->ctx->info();
}

std::string OpenClBackend::kernelStyle() const
{
    return m_impl->gpu() ? "GPU" : "CPU";
}

std::string OpenClBackend::name() const
{
    std::string n = "opencl: " + device().name;
    const std::string note = fallbackNote();
    if (!note.empty())
        n += " (" + note + ")";
    return n;
}

std::string OpenClBackend::fallbackNote() const
{
    const std::lock_guard lock(m_impl->mutex);
    std::string note;
    if (!m_impl->cpuStages.empty())
        note = "on the CPU (no device primitives): " + m_impl->cpuStages;
    if (m_impl->fallbacks > 0)
        note += (note.empty() ? "" : "; ") + std::to_string(m_impl->fallbacks)
                + " stage(s) fell back to the CPU; first: " + m_impl->fallback;
    return note;
}

std::pair<int, int> OpenClBackend::buildCounts() const
{
    const BuildStats s = m_impl->ctx->stats();
    return {s.sourceBuilds, s.cachedLoads};
}

PathResult OpenClBackend::encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x,
                                     const RowMatrixXf* queries)
{
    Impl& I = *m_impl;
    try {
        std::vector<std::string> cpuStages;
        PathResult out = kvlens::encodePath(plan, x, queries, *m_primitives, &cpuStages);
        for (const std::string& stage : cpuStages)
            I.noteCpuStage(stage);
        return out;
    } catch (const cl::Error& e) {
        I.note(e, "encodePath");
        return encodePathCpu(plan, x, queries);
    }
}

CodecPrimitives& OpenClBackend::primitives()
{
    return *m_primitives;
}

void OpenClBackend::scores(const Eigen::Ref<const RowMatrixXf>& queries, const Eigen::Ref<const RowMatrixXf>& keys,
                           float scale, RowMatrixXf& out)
{
    Impl& I = *m_impl;
    try {
        const RowMatrixXf q = queries, k = keys;
        const int nq = static_cast<int>(q.rows()), n = static_cast<int>(k.rows()), d = static_cast<int>(q.cols());
        const cl::Buffer qb = I.upload(q.data(), static_cast<std::size_t>(q.size()));
        const cl::Buffer kb = I.upload(k.data(), static_cast<std::size_t>(k.size()));
        cl::Buffer s = I.scratch(static_cast<std::size_t>(nq) * n * sizeof(float));
        I.gemmNT(nq, n, d, qb, d, kb, d, s, n, scale);
        out.resize(nq, n);
        I.download(s, out.data(), static_cast<std::size_t>(out.size()));
    } catch (const cl::Error& e) {
        I.note(e, "scores");
        attentionScores(queries, keys, scale, out);
    }
}

void OpenClBackend::attend(const RowMatrixXf& scores, const Eigen::Ref<const RowMatrixXf>& values, RowMatrixXf& probs,
                           std::vector<double>& logSumExp, RowMatrixXf& output)
{
    Impl& I = *m_impl;
    try {
        const RowMatrixXf v = values;
        const int nq = static_cast<int>(scores.rows()), n = static_cast<int>(scores.cols()), d = static_cast<int>(v.cols());
        const cl::Buffer s = I.upload(scores.data(), static_cast<std::size_t>(scores.size()));
        const cl::Buffer vb = I.upload(v.data(), static_cast<std::size_t>(v.size()));
        cl::Buffer p = I.scratch(static_cast<std::size_t>(nq) * n * sizeof(float));
        const std::size_t lseBytes = I.ctx->hasDouble() ? sizeof(double) : sizeof(float);
        cl::Buffer lse = I.scratch(static_cast<std::size_t>(nq) * lseBytes);
        cl::Kernel& softmax = I.kernel(0, "softmax_rows");
        softmax.setArg(0, s);
        softmax.setArg(1, nq);
        softmax.setArg(2, n);
        softmax.setArg(3, p);
        softmax.setArg(4, lse);
        I.run1d(softmax, static_cast<std::size_t>(nq));
        cl::Buffer t = I.scratch(static_cast<std::size_t>(nq) * d * sizeof(float));
        I.gemmNN(nq, d, n, p, n, vb, d, t, d, 1.0f);
        probs.resize(nq, n);
        output.resize(nq, d);
        logSumExp.resize(static_cast<std::size_t>(nq));
        I.download(p, probs.data(), static_cast<std::size_t>(probs.size()));
        I.download(t, output.data(), static_cast<std::size_t>(output.size()));
        if (I.ctx->hasDouble()) {
            I.download(lse, logSumExp.data(), logSumExp.size());
        } else {
            std::vector<float> f(logSumExp.size());
            I.download(lse, f.data(), f.size());
            std::copy(f.begin(), f.end(), logSumExp.begin());
        }
    } catch (const cl::Error& e) {
        I.note(e, "attend");
        softmaxRows(scores, probs, &logSumExp);
        attentionOutput(probs, values, output);
    }
}

QueryMetrics OpenClBackend::queryMetrics(const AttentionPair& a, std::span<const float> valueError2, int topK)
{
    Impl& I = *m_impl;
    constexpr int kMaxTopK = 64; // attention.cl MAX_TOP_K
    if (topK > kMaxTopK)
        return kvlens::queryMetrics(a, valueError2, topK);
    try {
        const int nq = static_cast<int>(a.scores->rows()), n = static_cast<int>(a.scores->cols());
        const std::size_t qn = static_cast<std::size_t>(nq) * n;
        auto lseBuffer = [&](const std::vector<double>& lse) {
            if (I.ctx->hasDouble())
                return I.upload(lse.data(), lse.size());
            std::vector<float> f(lse.begin(), lse.end());
            return I.upload(f.data(), f.size());
        };
        const cl::Buffer s = I.upload(a.scores->data(), qn), p = I.upload(a.probs->data(), qn);
        const cl::Buffer sh = I.upload(a.scoresHat->data(), qn), ph = I.upload(a.probsHat->data(), qn);
        const cl::Buffer lse = lseBuffer(*a.logSumExp), lseHat = lseBuffer(*a.logSumExpHat);
        const cl::Buffer verr = I.upload(valueError2.data(), valueError2.size());
        const std::size_t qf = static_cast<std::size_t>(nq) * sizeof(float);
        cl::Buffer kl = I.scratch(qf), fisher = I.scratch(qf), a2 = I.scratch(qf), entropy = I.scratch(qf),
                   recall = I.scratch(qf), shift = I.scratch(static_cast<std::size_t>(nq));
        cl::Kernel& k = I.kernel(0, "query_metrics");
        int arg = 0;
        for (const cl::Buffer* b : {&s, &p, &lse, &sh, &ph, &lseHat, &verr})
            k.setArg(arg++, *b);
        k.setArg(arg++, nq);
        k.setArg(arg++, n);
        k.setArg(arg++, std::min(topK, n));
        for (cl::Buffer* b : {&kl, &fisher, &a2, &entropy, &shift, &recall})
            k.setArg(arg++, *b);
        I.run1d(k, static_cast<std::size_t>(nq));
        QueryMetrics m;
        const auto q = static_cast<std::size_t>(nq);
        m.kl.resize(q);
        m.fisher.resize(q);
        m.a2.resize(q);
        m.entropy.resize(q);
        m.recall.resize(q);
        m.argmaxShift.resize(q);
        I.download(kl, m.kl.data(), q);
        I.download(fisher, m.fisher.data(), q);
        I.download(a2, m.a2.data(), q);
        I.download(entropy, m.entropy.data(), q);
        I.download(recall, m.recall.data(), q);
        I.download(shift, m.argmaxShift.data(), q);
        if (topK <= 0)
            std::fill(m.recall.begin(), m.recall.end(), 1.0f);
        return m;
    } catch (const cl::Error& e) {
        I.note(e, "queryMetrics");
        return kvlens::queryMetrics(a, valueError2, topK);
    }
}

// --- single stages -------------------------------------------------------------------------

namespace {

template <class F>
Status guarded(F&& f)
{
    try {
        f();
        return Ok{};
    } catch (const cl::Error& e) {
        return Error{"OpenCL", std::string(e.what()) + " " + clErrorText(e.err())};
    }
}

} // namespace

Status OpenClBackend::rotateRows(const RowMatrixXf& x, const std::vector<float>& signs, RowMatrixXf& out)
{
    return guarded([&] {
        Impl& I = *m_impl;
        const int rows = static_cast<int>(x.rows()), d = static_cast<int>(x.cols()), dim = static_cast<int>(signs.size());
        const cl::Buffer xb = I.upload(x.data(), static_cast<std::size_t>(x.size()));
        const cl::Buffer sb = I.upload(signs.data(), signs.size());
        const cl::Buffer r = I.rotate(xb, rows, d, sb, dim);
        out.resize(rows, dim);
        I.download(r, out.data(), static_cast<std::size_t>(out.size()));
    });
}

Status OpenClBackend::encodeRows(const RowMatrixXf& x, const std::vector<float>* signs, const Codebook& codebook,
                                 ScalarFormat format, NormCodes& out)
{
    return guarded([&] {
        Impl& I = *m_impl;
        const int rows = static_cast<int>(x.rows()), d = static_cast<int>(x.cols());
        const bool rotate = signs && !signs->empty();
        const int dim = rotate ? static_cast<int>(signs->size()) : d;
        const cl::Buffer xb = I.upload(x.data(), static_cast<std::size_t>(x.size()));
        const std::vector<float> none(1, 1.0f);
        const cl::Buffer sb = I.upload(rotate ? signs->data() : none.data(), rotate ? signs->size() : 1);
        cl::Buffer codes = I.scratch(static_cast<std::size_t>(rows) * dim);
        cl::Buffer norms = I.scratch(static_cast<std::size_t>(rows) * sizeof(float));
        I.encode(xb, rows, d, rotate, sb, dim, codebook, format, codes, norms, nullptr);
        out.codes.resize(rows, dim);
        out.norms.resize(static_cast<std::size_t>(rows));
        I.download(codes, out.codes.data(), static_cast<std::size_t>(out.codes.size()));
        I.download(norms, out.norms.data(), out.norms.size());
        out.saturatedNorms = 0;
        if (format == ScalarFormat::Fp16)
            for (float v : out.norms)
                out.saturatedNorms += v >= kHalfMax ? 1 : 0;
    });
}

Status OpenClBackend::decodeRows(const NormCodes& codes, const Codebook& codebook, RowMatrixXf& out)
{
    return guarded([&] {
        Impl& I = *m_impl;
        const int rows = static_cast<int>(codes.codes.rows()), dim = static_cast<int>(codes.codes.cols());
        const cl::Buffer c = I.upload(codes.codes.data(), static_cast<std::size_t>(codes.codes.size()));
        const cl::Buffer n = I.upload(codes.norms.data(), codes.norms.size());
        cl::Buffer o = I.scratch(static_cast<std::size_t>(rows) * dim * sizeof(float));
        I.decode(c, n, codebook, rows, dim, o);
        out.resize(rows, dim);
        I.download(o, out.data(), static_cast<std::size_t>(out.size()));
    });
}

Status OpenClBackend::unrotateRows(const RowMatrixXf& in, const std::vector<float>& signs, int d, RowMatrixXf& out)
{
    return guarded([&] {
        Impl& I = *m_impl;
        const int rows = static_cast<int>(in.rows()), dim = static_cast<int>(signs.size());
        const cl::Buffer ib = I.upload(in.data(), static_cast<std::size_t>(in.size()));
        const cl::Buffer sb = I.upload(signs.data(), signs.size());
        cl::Buffer o = I.scratch(static_cast<std::size_t>(rows) * d * sizeof(float));
        I.unrotate(ib, rows, d, sb, dim, o);
        out.resize(rows, d);
        I.download(o, out.data(), static_cast<std::size_t>(out.size()));
    });
}

Status OpenClBackend::gemmNT(const RowMatrixXf& a, const RowMatrixXf& b, float alpha, RowMatrixXf& c)
{
    return guarded([&] {
        Impl& I = *m_impl;
        const int M = static_cast<int>(a.rows()), N = static_cast<int>(b.rows()), K = static_cast<int>(a.cols());
        const cl::Buffer ab = I.upload(a.data(), static_cast<std::size_t>(a.size()));
        const cl::Buffer bb = I.upload(b.data(), static_cast<std::size_t>(b.size()));
        cl::Buffer cb = I.scratch(static_cast<std::size_t>(M) * N * sizeof(float));
        I.gemmNT(M, N, K, ab, K, bb, K, cb, N, alpha);
        c.resize(M, N);
        I.download(cb, c.data(), static_cast<std::size_t>(c.size()));
    });
}

Status OpenClBackend::gemmNN(const RowMatrixXf& a, const RowMatrixXf& b, float alpha, RowMatrixXf& c)
{
    return guarded([&] {
        Impl& I = *m_impl;
        const int M = static_cast<int>(a.rows()), K = static_cast<int>(a.cols()), N = static_cast<int>(b.cols());
        const cl::Buffer ab = I.upload(a.data(), static_cast<std::size_t>(a.size()));
        const cl::Buffer bb = I.upload(b.data(), static_cast<std::size_t>(b.size()));
        cl::Buffer cb = I.scratch(static_cast<std::size_t>(M) * N * sizeof(float));
        I.gemmNN(M, N, K, ab, K, bb, N, cb, N, alpha);
        c.resize(M, N);
        I.download(cb, c.data(), static_cast<std::size_t>(c.size()));
    });
}

Status OpenClBackend::qjlEncode(const RowMatrixXf& residuals, const RowMatrixXf& sketch, ScalarFormat format,
                                QjlCodes& codes, RowMatrixXf& signs)
{
    return guarded([&] {
        Impl& I = *m_impl;
        const int n = static_cast<int>(residuals.rows()), dim = static_cast<int>(residuals.cols());
        const int m = static_cast<int>(sketch.rows());
        const cl::Buffer rb = I.upload(residuals.data(), static_cast<std::size_t>(residuals.size()));
        const cl::Buffer sb = I.upload(sketch.data(), static_cast<std::size_t>(sketch.size()));
        const int words = (m + 31) / 32;
        cl::Buffer norms = I.scratch(static_cast<std::size_t>(n) * sizeof(float));
        cl::Buffer signBuf = I.scratch(static_cast<std::size_t>(n) * m * sizeof(float));
        cl::Buffer bits = I.scratch(static_cast<std::size_t>(n) * words * sizeof(std::uint32_t));
        I.qjl(rb, n, dim, sb, m, format, norms, signBuf, bits);
        codes.rows = n;
        codes.m = m;
        codes.wordsPerRow = words;
        codes.signs.resize(static_cast<std::size_t>(n) * words);
        codes.norms.resize(static_cast<std::size_t>(n));
        signs.resize(n, m);
        I.download(bits, codes.signs.data(), codes.signs.size());
        I.download(norms, codes.norms.data(), codes.norms.size());
        I.download(signBuf, signs.data(), static_cast<std::size_t>(signs.size()));
    });
}

// --- kernel-only timings ---------------------------------------------------------------------

namespace {

Result<double> medianOfRuns(const std::function<void()>& launch, cl::CommandQueue& queue, int repeats)
{
    try {
        launch(); // warm-up: first launches pay for kernel specialisation
        queue.finish();
        std::vector<double> times;
        for (int i = 0; i < std::max(1, repeats); ++i) {
            const auto start = std::chrono::steady_clock::now();
            launch();
            queue.finish();
            times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(times.begin(), times.end());
        return times[times.size() / 2];
    } catch (const cl::Error& e) {
        return Error{"OpenCL", std::string(e.what()) + " " + clErrorText(e.err())};
    }
}

} // namespace

Result<double> OpenClBackend::timeEncode(const RowMatrixXf& x, const std::vector<float>& signs,
                                         const Codebook& codebook, int repeats)
{
    Impl& I = *m_impl;
    try {
        const int rows = static_cast<int>(x.rows()), d = static_cast<int>(x.cols()), dim = static_cast<int>(signs.size());
        const cl::Buffer xb = I.upload(x.data(), static_cast<std::size_t>(x.size()));
        const cl::Buffer sb = I.upload(signs.data(), signs.size());
        cl::Buffer codes = I.scratch(static_cast<std::size_t>(rows) * dim);
        cl::Buffer norms = I.scratch(static_cast<std::size_t>(rows) * sizeof(float));
        return medianOfRuns([&] { I.encode(xb, rows, d, true, sb, dim, codebook, ScalarFormat::Fp16, codes, norms, nullptr); },
                            I.queue(), repeats);
    } catch (const cl::Error& e) {
        return Error{"OpenCL", std::string(e.what()) + " " + clErrorText(e.err())};
    }
}

Result<double> OpenClBackend::timeGemmNT(const RowMatrixXf& a, const RowMatrixXf& b, int repeats)
{
    Impl& I = *m_impl;
    try {
        const int M = static_cast<int>(a.rows()), N = static_cast<int>(b.rows()), K = static_cast<int>(a.cols());
        const cl::Buffer ab = I.upload(a.data(), static_cast<std::size_t>(a.size()));
        const cl::Buffer bb = I.upload(b.data(), static_cast<std::size_t>(b.size()));
        cl::Buffer cb = I.scratch(static_cast<std::size_t>(M) * N * sizeof(float));
        return medianOfRuns([&] { I.gemmNT(M, N, K, ab, K, bb, K, cb, N, 1.0f); }, I.queue(), repeats);
    } catch (const cl::Error& e) {
        return Error{"OpenCL", std::string(e.what()) + " " + clErrorText(e.err())};
    }
}

Result<double> OpenClBackend::timeGemmNN(const RowMatrixXf& a, const RowMatrixXf& b, int repeats)
{
    Impl& I = *m_impl;
    try {
        const int M = static_cast<int>(a.rows()), K = static_cast<int>(a.cols()), N = static_cast<int>(b.cols());
        const cl::Buffer ab = I.upload(a.data(), static_cast<std::size_t>(a.size()));
        const cl::Buffer bb = I.upload(b.data(), static_cast<std::size_t>(b.size()));
        cl::Buffer cb = I.scratch(static_cast<std::size_t>(M) * N * sizeof(float));
        return medianOfRuns([&] { I.gemmNN(M, N, K, ab, K, bb, N, cb, N, 1.0f); }, I.queue(), repeats);
    } catch (const cl::Error& e) {
        return Error{"OpenCL", std::string(e.what()) + " " + clErrorText(e.err())};
    }
}

Result<double> OpenClBackend::timeAttention(const RowMatrixXf& q, const RowMatrixXf& k, const RowMatrixXf& v,
                                            int repeats)
{
    Impl& I = *m_impl;
    try {
        const int nq = static_cast<int>(q.rows()), n = static_cast<int>(k.rows()), d = static_cast<int>(q.cols());
        const cl::Buffer qb = I.upload(q.data(), static_cast<std::size_t>(q.size()));
        const cl::Buffer kb = I.upload(k.data(), static_cast<std::size_t>(k.size()));
        const cl::Buffer vb = I.upload(v.data(), static_cast<std::size_t>(v.size()));
        cl::Buffer s = I.scratch(static_cast<std::size_t>(nq) * n * sizeof(float));
        cl::Buffer p = I.scratch(static_cast<std::size_t>(nq) * n * sizeof(float));
        cl::Buffer lse = I.scratch(static_cast<std::size_t>(nq) * sizeof(double));
        cl::Buffer t = I.scratch(static_cast<std::size_t>(nq) * d * sizeof(float));
        return medianOfRuns(
            [&] {
                I.gemmNT(nq, n, d, qb, d, kb, d, s, n, 1.0f / std::sqrt(static_cast<float>(d)));
                cl::Kernel& softmax = I.kernel(0, "softmax_rows");
                softmax.setArg(0, s);
                softmax.setArg(1, nq);
                softmax.setArg(2, n);
                softmax.setArg(3, p);
                softmax.setArg(4, lse);
                I.run1d(softmax, static_cast<std::size_t>(nq));
                I.gemmNN(nq, d, n, p, n, vb, d, t, d, 1.0f);
            },
            I.queue(), repeats);
    } catch (const cl::Error& e) {
        return Error{"OpenCL", std::string(e.what()) + " " + clErrorText(e.err())};
    }
}

} // namespace kvlens::gpu
