// SPDX-License-Identifier: GPL-3.0-or-later
// The compute backend interface (design section 8): what the CPU oracle and OpenCL implement.
#pragma once

#include "core/common/types.h"
#include "core/metrics/query_metrics.h"
#include "core/quant/path.h"

#include <string>
#include <vector>

namespace kvlens {

/// The numeric stages of a trial. Data, random signs and sketch matrices are drawn on the
/// host and passed in (PathPlan), so every backend sees identical inputs. Implementations
/// must allow concurrency() calls at once from different threads.
class ComputeBackend {
public:
    virtual ~ComputeBackend() = default;

    /// "cpu", "opencl: <device>", ...
    virtual std::string name() const = 0;
    /// How many trials may run at the same time on this backend.
    virtual int concurrency() const = 0;

    /// One path through the codec engine (core/quant/path.h) on this backend's primitives, and
    /// (when queries are given) the cache's score estimates. See encodePath for the contract.
    virtual PathResult encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x,
                                  const RowMatrixXf* queries) = 0;

    /// scores = scale * Q K^T.
    virtual void scores(const Eigen::Ref<const RowMatrixXf>& queries, const Eigen::Ref<const RowMatrixXf>& keys,
                        float scale, RowMatrixXf& out) = 0;

    /// probs = softmax(scores) row-wise, logSumExp per row, output = probs * values.
    virtual void attend(const RowMatrixXf& scores, const Eigen::Ref<const RowMatrixXf>& values, RowMatrixXf& probs,
                        std::vector<double>& logSumExp, RowMatrixXf& output) = 0;

    /// Per-query metric reductions (KL, recall, argmax shift, Fisher, A^2, entropy).
    virtual QueryMetrics queryMetrics(const AttentionPair& attention, std::span<const float> valueError2,
                                      int topK) = 0;
};

/// The CPU backend: Eigen and the core quantizers; concurrency = hardware threads.
class CpuBackend final : public ComputeBackend {
public:
    explicit CpuBackend(int threads = 0);
    std::string name() const override { return "cpu"; }
    int concurrency() const override { return m_threads; }
    PathResult encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x,
                          const RowMatrixXf* queries) override;
    void scores(const Eigen::Ref<const RowMatrixXf>& queries, const Eigen::Ref<const RowMatrixXf>& keys, float scale,
                RowMatrixXf& out) override;
    void attend(const RowMatrixXf& scores, const Eigen::Ref<const RowMatrixXf>& values, RowMatrixXf& probs,
                std::vector<double>& logSumExp, RowMatrixXf& output) override;
    QueryMetrics queryMetrics(const AttentionPair& attention, std::span<const float> valueError2, int topK) override;

private:
    int m_threads;
};

} // namespace kvlens
