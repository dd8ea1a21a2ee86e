// SPDX-License-Identifier: GPL-3.0-or-later
// The OpenCL compute backend: the ComputeBackend stages as OpenCL 1.2 kernels (no OpenCL types here).
#pragma once

#include "core/common/result.h"
#include "core/experiment/backend.h"
#include "core/quant/norm_quantizer.h"
#include "core/quant/qjl.h"
#include "gpu/device.h"

#include <cstddef>
#include <memory>
#include <string>

namespace kvlens::gpu {

class OpenClContext;

/// Runs a trial's stages on one OpenCL device. Data, signs and sketch matrices come from the
/// host (PathPlan), exactly as for the CPU backend. Any OpenCL failure during a run falls back
/// to the CPU implementation of that stage and is recorded (fallbackNote()), so a run always
/// completes; creating the backend fails instead when the device or the kernels are unusable.
/// Codecs run through the one engine (core/quant/path.h) on this device's primitives; a part
/// whose primitives the device lacks runs on the CPU's, and name() says which.
class OpenClBackend final : public ComputeBackend {
public:
    /// Opens the device `request` names (gpu::selectDevice rules) and builds the kernels.
    static Result<std::unique_ptr<OpenClBackend>> create(const std::string& request = {});
    ~OpenClBackend() override;

    std::string name() const override;
    /// Two trials at a time, each on its own command queue, so host work overlaps kernels.
    int concurrency() const override { return 2; }
    PathResult encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x,
                          const RowMatrixXf* queries) override;
    void scores(const Eigen::Ref<const RowMatrixXf>& queries, const Eigen::Ref<const RowMatrixXf>& keys, float scale,
                RowMatrixXf& out) override;
    void attend(const RowMatrixXf& scores, const Eigen::Ref<const RowMatrixXf>& values, RowMatrixXf& probs,
                std::vector<double>& logSumExp, RowMatrixXf& output) override;
    QueryMetrics queryMetrics(const AttentionPair& attention, std::span<const float> valueError2, int topK) override;

    /// The device's codec primitives (the engine's allow-list; thread-safe).
    CodecPrimitives& primitives();

    const DeviceInfo& device() const;
    /// "CPU" or "GPU": the kernel style in use.
    std::string kernelStyle() const;
    /// Stages that fell back to the CPU during runs, with the first OpenCL error; empty if none.
    std::string fallbackNote() const;
    /// Forgets the stages that fell back so far: a backend reused for a new run reports that run's.
    void resetFallbacks();
    /// Programs built from source and loaded from the disk cache so far.
    std::pair<int, int> buildCounts() const;
    /// Threads holding a command queue and kernels of this backend. A thread's state goes when
    /// the thread ends, and every thread's when the backend is destroyed.
    std::size_t perThreadStateCount() const;
    /// Per-thread states alive in the process, over every backend (for leak tests).
    static std::size_t livePerThreadStates();

    // Single stages, for the agreement tests and the benchmark (errors are returned, not
    // hidden by a fallback). Shapes as the CPU functions they mirror.
    Status rotateRows(const RowMatrixXf& x, const std::vector<float>& signs, RowMatrixXf& out);
    Status encodeRows(const RowMatrixXf& x, const std::vector<float>* signs, const Codebook& codebook,
                      ScalarFormat format, NormCodes& out);
    Status decodeRows(const NormCodes& codes, const Codebook& codebook, RowMatrixXf& out);
    Status unrotateRows(const RowMatrixXf& in, const std::vector<float>& signs, int d, RowMatrixXf& out);
    Status gemmNT(const RowMatrixXf& a, const RowMatrixXf& b, float alpha, RowMatrixXf& c);
    Status gemmNN(const RowMatrixXf& a, const RowMatrixXf& b, float alpha, RowMatrixXf& c);
    Status qjlEncode(const RowMatrixXf& residuals, const RowMatrixXf& sketch, ScalarFormat format, QjlCodes& codes,
                     RowMatrixXf& signs);

    /// Kernel-only timings for the benchmark: inputs are uploaded once, then the stage's kernels
    /// run `repeats` times after a warm-up, each run finished before the next; the median
    /// milliseconds of one run (no host transfers) are returned.
    Result<double> timeEncode(const RowMatrixXf& x, const std::vector<float>& signs, const Codebook& codebook,
                              int repeats);
    Result<double> timeGemmNT(const RowMatrixXf& a, const RowMatrixXf& b, int repeats);
    Result<double> timeGemmNN(const RowMatrixXf& a, const RowMatrixXf& b, int repeats);
    /// Scores, softmax and P V for queries q (nq x d), keys k and values v (n x d).
    Result<double> timeAttention(const RowMatrixXf& q, const RowMatrixXf& k, const RowMatrixXf& v, int repeats);

    struct Impl;
    class Primitives;

private:
    explicit OpenClBackend(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
    std::unique_ptr<Primitives> m_primitives;
};

} // namespace kvlens::gpu
