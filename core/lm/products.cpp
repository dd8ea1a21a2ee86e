// SPDX-License-Identifier: GPL-3.0-or-later
// Products of activations by stored weights, a panel of rows converted to float32 at a time.
#include "core/lm/products.h"

#include <algorithm>

namespace kvlens::lm {

namespace {

using Index = Eigen::Index;
using ConstRef = Eigen::Ref<const RowMatrixXf>;

/// A worker's float32 copy of the weight rows it multiplies by (reused across products and panels).
std::vector<float>& panelBuffer()
{
    thread_local std::vector<float> buffer;
    return buffer;
}

/// Columns [c0, c0 + nc) of out = a w^T (+ bias), converting w's rows a panel at a time.
void productColumns(const ConstRef& a, const WeightMatrix& w, const RowVectorXf& bias, RowMatrixXf& out, Index c0,
                    Index nc)
{
    const Index k = w.cols();
    const Index step = std::uint64_t(nc) * std::uint64_t(k) * sizeof(float) <= kWholeRangeBytes ? nc : Index(panelRows(k));
    for (Index p0 = c0; p0 < c0 + nc; p0 += step) {
        const Index rows = std::min(step, c0 + nc - p0);
        const float* data = w.directFloat(p0, rows);
        if (!data) {
            std::vector<float>& buffer = panelBuffer();
            buffer.resize(static_cast<std::size_t>(rows * k));
            w.toFloat(p0, rows, buffer.data());
            data = buffer.data();
        }
        const Eigen::Map<const RowMatrixXf> panel(data, rows, k);
        auto block = out.middleCols(p0, rows);
        block.noalias() = a * panel.transpose();
        if (bias.size())
            block.rowwise() += bias.segment(p0, rows);
    }
}

} // namespace

void forRanges(TaskPool& pool, Index n, const std::function<void(Index, Index)>& fn)
{
    const Index parts = std::min<Index>(pool.size(), std::max<Index>(1, n));
    const Index step = (n + parts - 1) / parts;
    pool.run(static_cast<int>(parts), [&](int i) {
        const Index begin = i * step, end = std::min(n, begin + step);
        if (begin < end)
            fn(begin, end);
    });
}

void matmulT(TaskPool& pool, const ConstRef& a, const WeightMatrix& w, const RowVectorXf& bias, RowMatrixXf& out)
{
    const Index m = a.rows(), n = w.rows();
    out.resize(m, n);
    const int p = pool.size();
    const double flops = 2.0 * double(m) * double(n) * double(a.cols());
    if (p == 1 || flops < 4e6) {
        productColumns(a, w, bias, out, 0, n);
        return;
    }
    if (n >= 64 * Index(p)) {
        // Column ranges rounded to 16 so every worker's block starts on a cache line.
        const Index chunk = ((n + p - 1) / p + 15) / 16 * 16;
        const int tasks = static_cast<int>((n + chunk - 1) / chunk);
        pool.run(tasks, [&](int i) {
            const Index c0 = Index(i) * chunk;
            productColumns(a, w, bias, out, c0, std::min(chunk, n - c0));
        });
        return;
    }
    RowMatrixXf dense;
    const float* direct = w.directFloat(0, n);
    if (!direct)
        dense = w.toDense();
    const Eigen::Map<const RowMatrixXf> whole(direct ? direct : dense.data(), n, w.cols());
    forRanges(pool, m, [&](Index r0, Index r1) {
        auto block = out.middleRows(r0, r1 - r0);
        block.noalias() = a.middleRows(r0, r1 - r0) * whole.transpose();
        if (bias.size())
            block.rowwise() += bias;
    });
}

std::int64_t panelRows(std::int64_t cols)
{
    const auto fit = static_cast<std::int64_t>(kPanelBytes / sizeof(float)) / std::max<std::int64_t>(1, cols);
    return std::max<std::int64_t>(16, fit / 16 * 16);
}

} // namespace kvlens::lm
