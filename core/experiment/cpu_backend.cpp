// SPDX-License-Identifier: GPL-3.0-or-later
// CPU backend: each stage is the core reference implementation; parallelism is across trials.
#include "core/experiment/backend.h"

#include "core/attention/attention.h"

#include <algorithm>
#include <thread>

namespace kvlens {

CpuBackend::CpuBackend(int threads)
    : m_threads(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency()))
{
}

PathResult CpuBackend::encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x,
                                  const RowMatrixXf* queries)
{
    return encodePathCpu(plan, x, queries);
}

void CpuBackend::scores(const Eigen::Ref<const RowMatrixXf>& queries, const Eigen::Ref<const RowMatrixXf>& keys,
                        float scale, RowMatrixXf& out)
{
    attentionScores(queries, keys, scale, out);
}

void CpuBackend::attend(const RowMatrixXf& scores, const Eigen::Ref<const RowMatrixXf>& values, RowMatrixXf& probs,
                        std::vector<double>& logSumExp, RowMatrixXf& output)
{
    softmaxRows(scores, probs, &logSumExp);
    attentionOutput(probs, values, output);
}

QueryMetrics CpuBackend::queryMetrics(const AttentionPair& attention, std::span<const float> valueError2, int topK)
{
    return kvlens::queryMetrics(attention, valueError2, topK);
}

} // namespace kvlens
