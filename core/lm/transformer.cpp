// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer forward pass: fused projections as threaded matrix products, rotate-half RoPE,
// blocked causal attention reading the cache hook's K/V, and the output head.
#include "core/lm/transformer.h"

#include "core/attention/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

namespace kvlens::lm {

namespace {

using Index = Eigen::Index;
using ConstRef = Eigen::Ref<const RowMatrixXf>;

/// A fixed set of worker threads for one forward: run(n, fn) calls fn(0..n-1) spread over the
/// workers and the calling thread and returns when all are done. Created per forward, so
/// concurrent forwards never share (or wait on) each other's workers.
class TaskPool {
public:
    explicit TaskPool(int threads)
    {
        for (int i = 1; i < threads; ++i)
            m_workers.emplace_back([this] { workerLoop(); });
    }

    ~TaskPool()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_wake.notify_all();
        for (std::thread& t : m_workers)
            t.join();
    }

    TaskPool(const TaskPool&) = delete;
    TaskPool& operator=(const TaskPool&) = delete;

    int size() const { return static_cast<int>(m_workers.size()) + 1; }

    /// fn(i) for i in [0, tasks); rethrows the first exception a task threw.
    void run(int tasks, const std::function<void(int)>& fn)
    {
        if (tasks <= 0)
            return;
        if (tasks == 1 || m_workers.empty()) {
            for (int i = 0; i < tasks; ++i)
                fn(i);
            return;
        }
        {
            std::lock_guard lock(m_mutex);
            m_fn = &fn;
            m_tasks = tasks;
            m_next.store(0);
            m_active = static_cast<int>(m_workers.size());
            m_error = nullptr;
            ++m_generation;
        }
        m_wake.notify_all();
        drain();
        std::unique_lock lock(m_mutex);
        m_done.wait(lock, [this] { return m_active == 0; });
        m_fn = nullptr;
        if (m_error)
            std::rethrow_exception(std::exchange(m_error, nullptr));
    }

private:
    void drain()
    {
        for (int i = m_next.fetch_add(1); i < m_tasks; i = m_next.fetch_add(1)) {
            try {
                (*m_fn)(i);
            } catch (...) {
                std::lock_guard lock(m_mutex);
                if (!m_error)
                    m_error = std::current_exception();
            }
        }
    }

    void workerLoop()
    {
        std::uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock lock(m_mutex);
                m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
                if (m_stop)
                    return;
                seen = m_generation;
            }
            drain();
            std::lock_guard lock(m_mutex);
            if (--m_active == 0)
                m_done.notify_one();
        }
    }

    std::vector<std::thread> m_workers;
    std::mutex m_mutex;
    std::condition_variable m_wake, m_done;
    const std::function<void(int)>* m_fn = nullptr;
    int m_tasks = 0;
    std::atomic<int> m_next{0};
    int m_active = 0;
    std::uint64_t m_generation = 0;
    bool m_stop = false;
    std::exception_ptr m_error;
};

/// fn(begin, end) over [0, n) cut into about one range per worker.
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

/// out = a w^T (+ bias): a [m x k], w [n x k] (nn.Linear layout), out [m x n]. Split by output
/// columns (each worker multiplies by its own rows of w) unless the output is too narrow, then by
/// rows of a. Eigen's own threading is off; it collapses on these tall-skinny shapes anyway.
void matmulT(TaskPool& pool, const ConstRef& a, const RowMatrixXf& w, const RowVectorXf& bias, RowMatrixXf& out)
{
    const Index m = a.rows(), n = w.rows();
    out.resize(m, n);
    const int p = pool.size();
    const double flops = 2.0 * double(m) * double(n) * double(a.cols());
    const auto columns = [&](Index c0, Index nc) {
        auto block = out.middleCols(c0, nc);
        block.noalias() = a * w.middleRows(c0, nc).transpose();
        if (bias.size())
            block.rowwise() += bias.segment(c0, nc);
    };
    if (p == 1 || flops < 4e6) {
        columns(0, n);
        return;
    }
    if (n >= 64 * Index(p)) {
        // Column ranges rounded to 16 so every worker's block starts on a cache line.
        const Index chunk = ((n + p - 1) / p + 15) / 16 * 16;
        const int tasks = static_cast<int>((n + chunk - 1) / chunk);
        pool.run(tasks, [&](int i) {
            const Index c0 = Index(i) * chunk;
            columns(c0, std::min(chunk, n - c0));
        });
        return;
    }
    forRanges(pool, m, [&](Index r0, Index r1) {
        auto block = out.middleRows(r0, r1 - r0);
        block.noalias() = a.middleRows(r0, r1 - r0) * w.transpose();
        if (bias.size())
            block.rowwise() += bias;
    });
}

/// RMSNorm or LayerNorm of each row of x into out (Llama: x / sqrt(mean(x^2) + eps) w;
/// GPT-2: (x - mean) / sqrt(var + eps) w + b, var the biased variance).
void normRows(TaskPool& pool, const ConstRef& x, const RowVectorXf& w, const RowVectorXf& b, bool layerNorm, double eps,
              RowMatrixXf& out)
{
    out.resize(x.rows(), x.cols());
    const float d = static_cast<float>(x.cols());
    const float e = static_cast<float>(eps);
    forRanges(pool, x.rows(), [&](Index r0, Index r1) {
        for (Index r = r0; r < r1; ++r) {
            if (layerNorm) {
                const float mean = x.row(r).sum() / d;
                out.row(r) = x.row(r).array() - mean;
                const float inv = 1.0f / std::sqrt(out.row(r).squaredNorm() / d + e);
                out.row(r) = (out.row(r).array() * inv) * w.array() + b.array();
            } else {
                const float inv = 1.0f / std::sqrt(x.row(r).squaredNorm() / d + e);
                out.row(r) = (x.row(r).array() * inv) * w.array();
            }
        }
    });
}

struct RopeTables {
    RowMatrixXf cos, sin; ///< [T x headDim/2]
};

/// cos and sin of t inv_freq_i, inv_freq_i = theta^(-2i/headDim), computed in double.
RopeTables ropeTables(int tokens, int headDim, double theta)
{
    const int half = headDim / 2;
    RopeTables r;
    r.cos.resize(tokens, half);
    r.sin.resize(tokens, half);
    for (int i = 0; i < half; ++i) {
        const double invFreq = std::pow(theta, -2.0 * i / headDim);
        for (int t = 0; t < tokens; ++t) {
            const double angle = double(t) * invFreq;
            r.cos(t, i) = static_cast<float>(std::cos(angle));
            r.sin(t, i) = static_cast<float>(std::sin(angle));
        }
    }
    return r;
}

/// Rotates the first `heads` head blocks of every row of qkv (the query heads, then the key heads):
/// Hugging Face's q cos + rotate_half(q) sin, dimension i paired with i + headDim/2.
void applyRope(TaskPool& pool, RowMatrixXf& qkv, int heads, int headDim, const RopeTables& tables)
{
    const int half = headDim / 2;
    forRanges(pool, qkv.rows(), [&](Index r0, Index r1) {
        for (Index t = r0; t < r1; ++t) {
            const float* c = &tables.cos(t, 0);
            const float* s = &tables.sin(t, 0);
            for (int h = 0; h < heads; ++h) {
                float* x = &qkv(t, Index(h) * headDim);
                for (int i = 0; i < half; ++i) {
                    const float a = x[i], b = x[i + half];
                    x[i] = a * c[i] - b * s[i];
                    x[i + half] = b * c[i] + a * s[i];
                }
            }
        }
    });
}

/// Softmax of row `i` of s over its first n entries; the rest set to 0 (the causal mask).
void causalSoftmaxRow(RowMatrixXf& s, Index i, Index n)
{
    auto row = s.row(i).head(n).array();
    const float mx = row.maxCoeff();
    row = (row - mx).exp();
    row /= row.sum();
    s.row(i).tail(s.cols() - n).setZero();
}

std::string shapeOf(const RowMatrixXf& m)
{
    return "[" + std::to_string(m.rows()) + " x " + std::to_string(m.cols()) + "]";
}

/// One forward pass's state.
class Pass {
public:
    Pass(const ModelConfig& c, const ModelWeights& w, const ForwardOptions& o, int threads, int tokens)
        : m_c(c), m_w(w), m_o(o), m_pool(threads), m_t(tokens)
    {
    }

    Result<ForwardResult> run(std::span<const std::int32_t> tokens)
    {
        ForwardResult result;
        RowMatrixXf x;
        if (m_o.startLayer > 0) {
            x = *m_o.startHidden;
        } else {
            embed(tokens, x);
        }
        if (!m_c.isGpt2())
            m_rope = ropeTables(m_t, m_c.headDim, m_c.ropeTheta);
        if (m_o.layerInputs)
            m_o.layerInputs->resize(static_cast<std::size_t>(m_c.layers));
        if (m_o.capture.count > 0)
            result.capture.resize(static_cast<std::size_t>(m_c.layers));
        if (m_o.damage)
            allocateDamage();
        for (int layer = m_o.startLayer; layer < m_c.layers; ++layer) {
            if (m_o.cancelled && m_o.cancelled())
                return Error::cancellation();
            if (m_o.layerInputs)
                (*m_o.layerInputs)[static_cast<std::size_t>(layer)] = x;
            if (auto s = decoderLayer(layer, x, result); !s)
                return s.error();
        }
        if (m_o.cancelled && m_o.cancelled())
            return Error::cancellation();
        const Index first = m_o.logitsStart;
        normRows(m_pool, x.bottomRows(m_t - first), m_w.finalNorm, m_w.finalNormBias, m_c.isGpt2(), m_c.normEps, m_h);
        matmulT(m_pool, m_h, m_w.head(), RowVectorXf(), result.logits);
        result.probe = std::move(m_probe);
        result.damage = std::move(m_damage);
        return result;
    }

private:
    void allocateDamage()
    {
        AttentionDamage d;
        d.start = m_o.damage->start;
        d.count = static_cast<int>(m_t) - d.start;
        d.layers = m_c.layers;
        d.heads = m_c.heads;
        d.kvHeads = m_c.kvHeads;
        const auto oracle = static_cast<std::size_t>(d.layers) * d.heads * d.count;
        const auto side = static_cast<std::size_t>(d.layers) * d.kvHeads * d.count;
        d.kl.assign(oracle, 0.0f);
        d.fisher.assign(oracle, 0.0f);
        d.a2.assign(oracle, 0.0f);
        d.outErr.assign(oracle, 0.0f);
        d.relK.assign(side, 0.0f);
        d.relV.assign(side, 0.0f);
        d.calibScoreErr.assign(side, m_o.damage->queryMoments ? 0.0f : std::numeric_limits<float>::quiet_NaN());
        m_damage = std::move(d);
    }

    /// Query t reads the cache for keys [0, cacheEnd(t)): those older than the residual window
    /// (j <= t - R) and in a group its codec completed by t (j < G floor((t + 1) / G)); the rest
    /// exact. Keys and values each have their codec's group.
    Index cacheEnd(Index t, Index group) const
    {
        Index end = group > 1 ? group * ((t + 1) / group) : t + 1;
        if (m_o.residual > 0)
            end = std::min<Index>(end, t - m_o.residual + 1);
        return std::max<Index>(end, 0);
    }

    /// The cache-side damage of KV head g of a hooked layer: per key its squared K and V errors (kept
    /// for the oracle's A^2) and energies, then per scored query their sums over what it reads.
    void cacheSideDamage(int layer, int g)
    {
        AttentionDamage& d = *m_damage;
        const auto gi = static_cast<std::size_t>(g);
        const RowMatrixXf &k = m_k[gi], &v = m_v[gi], &kh = m_kh[gi], &vh = m_vh[gi];
        const RowMatrixXf ek = k - kh;
        std::vector<double>& valueErr = m_valueErr[gi];
        valueErr.assign(static_cast<std::size_t>(m_t), 0.0);
        std::vector<double> keyErr(static_cast<std::size_t>(m_t)), keyEnergy(keyErr.size()), valueEnergy(keyErr.size()),
            scoreErr(keyErr.size(), 0.0);
        const Eigen::MatrixXf* moments = m_o.damage->queryMoments
                                             ? &(*m_o.damage->queryMoments)[static_cast<std::size_t>(layer)][gi]
                                             : nullptr;
        for (Index j = 0; j < m_t; ++j) {
            const auto ju = static_cast<std::size_t>(j);
            keyErr[ju] = ek.row(j).cast<double>().squaredNorm();
            valueErr[ju] = (v.row(j) - vh.row(j)).cast<double>().squaredNorm();
            keyEnergy[ju] = k.row(j).cast<double>().squaredNorm();
            valueEnergy[ju] = v.row(j).cast<double>().squaredNorm();
            if (moments)
                scoreErr[ju] = static_cast<double>(ek.row(j) * (*moments) * ek.row(j).transpose()) / m_c.headDim;
        }
        const Index groupK = std::max(1, m_o.cache->causalGroup(layer, true));
        const Index groupV = std::max(1, m_o.cache->causalGroup(layer, false));
        std::vector<double> sumKeyErr(keyErr.size() + 1, 0.0), sumValueErr = sumKeyErr, sumScoreErr = sumKeyErr,
                                                               sumKeyEnergy = sumKeyErr, sumValueEnergy = sumKeyErr;
        for (std::size_t j = 0; j < keyErr.size(); ++j) {
            sumKeyErr[j + 1] = sumKeyErr[j] + keyErr[j];
            sumValueErr[j + 1] = sumValueErr[j] + valueErr[j];
            sumScoreErr[j + 1] = sumScoreErr[j] + scoreErr[j];
            sumKeyEnergy[j + 1] = sumKeyEnergy[j] + keyEnergy[j];
            sumValueEnergy[j + 1] = sumValueEnergy[j] + valueEnergy[j];
        }
        auto ratio = [](double a, double b) { return b > 0.0 ? a / b : 0.0; };
        const std::size_t base = (static_cast<std::size_t>(layer) * d.kvHeads + gi) * d.count;
        for (int i = 0; i < d.count; ++i) {
            const Index t = d.start + i;
            const auto endK = static_cast<std::size_t>(cacheEnd(t, groupK));
            const auto endV = static_cast<std::size_t>(cacheEnd(t, groupV));
            const auto all = static_cast<std::size_t>(t + 1);
            d.relK[base + i] = static_cast<float>(ratio(sumKeyErr[endK], sumKeyEnergy[all]));
            d.relV[base + i] = static_cast<float>(ratio(sumValueErr[endV], sumValueEnergy[all]));
            if (moments)
                d.calibScoreErr[base + i] = static_cast<float>(sumScoreErr[endK] / static_cast<double>(all));
        }
    }

    /// The oracle damage of query rows [i0, rows) of a block (query t = r0 + i): exact scores E and
    /// the cache scores C the pass used (before softmax), the pass's output `out`.
    void oracleDamage(int layer, int head, std::size_t g, Index r0, Index i0, const RowMatrixXf& exact,
                      const RowMatrixXf& cache, const Eigen::Ref<const RowMatrixXf>& out)
    {
        AttentionDamage& d = *m_damage;
        const Index groupV = std::max(1, m_o.cache->causalGroup(layer, false));
        const Index rows = exact.rows();
        const std::size_t base = (static_cast<std::size_t>(layer) * d.heads + static_cast<std::size_t>(head)) * d.count;
        // The exact weights p (float softmax rows) and the exact outputs o = p V as one product.
        RowMatrixXf probs = exact;
        for (Index row = 0; row < rows; ++row)
            causalSoftmaxRow(probs, row, r0 + i0 + row + 1);
        RowMatrixXf o;
        o.noalias() = probs * m_v[g].topRows(exact.cols());
        const Eigen::Map<const Eigen::ArrayXd> valueErr(m_valueErr[g].data(), static_cast<Index>(m_valueErr[g].size()));
        // Sized once for the block's widest row (a resize per row would reallocate).
        Eigen::ArrayXd pAll(exact.cols()), deltaAll(exact.cols());
        Eigen::ArrayXf shiftedAll(exact.cols());
        for (Index row = 0; row < rows; ++row) {
            const Index t = r0 + i0 + row, n = t + 1;
            auto p = pAll.head(n);
            auto delta = deltaAll.head(n);
            auto shifted = shiftedAll.head(n);
            p = probs.row(row).head(n).cast<double>().transpose();
            delta = (cache.row(row).head(n) - exact.row(row).head(n)).cast<double>().transpose();
            const double m1 = (p * delta).sum(), m2 = (p * delta.square()).sum();
            // KL(p || p^): p^_j = p_j exp(delta_j) / Z, so log(p_j / p^_j) = log Z - delta_j and the KL is
            // log Z - m1 = log sum_j p_j exp(delta_j - m1), written with expm1 so a small KL keeps its
            // digits; float's vectorized expm1 unless a shift is large enough to overflow it.
            double kl = 0.0;
            if ((delta - m1).abs().maxCoeff() < 30.0) {
                shifted = (delta - m1).cast<float>();
                kl = std::log1p((p * shifted.expm1().cast<double>()).sum());
            } else {
                kl = std::log((p * (delta - m1).exp()).sum());
            }
            const Index endV = cacheEnd(t, groupV);
            const double a2 = (p.head(endV).square() * valueErr.head(endV)).sum();
            const double energy = o.row(row).cast<double>().squaredNorm();
            const double outErr = (o.row(row) - out.row(i0 + row)).cast<double>().squaredNorm();
            const std::size_t at = base + static_cast<std::size_t>(t - d.start);
            d.kl[at] = static_cast<float>(std::max(0.0, kl));
            d.fisher[at] = static_cast<float>(std::max(0.0, m2 - m1 * m1));
            constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
            d.a2[at] = energy > 0.0 ? static_cast<float>(a2 / energy) : kNaN;
            d.outErr[at] = energy > 0.0 ? static_cast<float>(outErr / energy) : kNaN;
        }
    }

    void embed(std::span<const std::int32_t> tokens, RowMatrixXf& x) const
    {
        x.resize(m_t, m_c.hidden);
        for (Index t = 0; t < m_t; ++t) {
            x.row(t) = m_w.embed.row(tokens[static_cast<std::size_t>(t)]);
            if (m_c.isGpt2())
                x.row(t) += m_w.positions.row(t);
        }
    }

    Status decoderLayer(int layer, RowMatrixXf& x, ForwardResult& result)
    {
        const LayerWeights& lw = m_w.layers[static_cast<std::size_t>(layer)];
        const bool gpt2 = m_c.isGpt2();
        // Attention block.
        normRows(m_pool, x, lw.attnNorm, lw.attnNormBias, gpt2, m_c.normEps, m_h);
        matmulT(m_pool, m_h, lw.qkv, lw.qkvBias, m_qkv);
        if (!gpt2)
            applyRope(m_pool, m_qkv, m_c.heads + m_c.kvHeads, m_c.headDim, m_rope);
        if (m_o.capture.count > 0
            && (m_o.capture.layers.empty()
                || std::binary_search(m_o.capture.layers.begin(), m_o.capture.layers.end(), layer)))
            captureLayer(result.capture[static_cast<std::size_t>(layer)]);
        if (auto s = attention(layer); !s)
            return s;
        matmulT(m_pool, m_attn, lw.out, lw.outBias, m_tmp);
        x += m_tmp;
        // MLP block.
        normRows(m_pool, x, lw.mlpNorm, lw.mlpNormBias, gpt2, m_c.normEps, m_h);
        matmulT(m_pool, m_h, lw.up, lw.upBias, m_mlp);
        const Index inter = m_c.intermediate;
        m_act.resize(m_t, inter);
        forRanges(m_pool, m_t, [&](Index r0, Index r1) {
            const Index n = r1 - r0;
            if (gpt2) {
                // gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
                const auto u = m_mlp.middleRows(r0, n).array();
                constexpr float kC = 0.7978845608028654f;
                m_act.middleRows(r0, n) = 0.5f * u * (1.0f + (kC * (u + 0.044715f * u * u * u)).tanh());
            } else {
                // SwiGLU: silu(gate) * up, silu(g) = g / (1 + e^-g).
                const auto g = m_mlp.block(r0, 0, n, inter).array();
                const auto up = m_mlp.block(r0, inter, n, inter).array();
                m_act.middleRows(r0, n) = g / (1.0f + (-g).exp()) * up;
            }
        });
        matmulT(m_pool, m_act, lw.down, lw.downBias, m_tmp);
        x += m_tmp;
        return Ok{};
    }

    void captureLayer(LayerCapture& cap) const
    {
        const Index start = m_o.capture.start, count = m_o.capture.count, hd = m_c.headDim;
        const auto take = [&](std::vector<float>& out, int heads, Index firstCol) {
            out.resize(static_cast<std::size_t>(heads * count * hd));
            for (int h = 0; h < heads; ++h)
                for (Index i = 0; i < count; ++i)
                    for (Index j = 0; j < hd; ++j)
                        out[static_cast<std::size_t>((h * count + i) * hd + j)] = m_qkv(start + i, firstCol + h * hd + j);
        };
        take(cap.q, m_c.heads, 0);
        take(cap.k, m_c.kvHeads, Index(m_c.heads) * hd);
        take(cap.v, m_c.kvHeads, Index(m_c.heads + m_c.kvHeads) * hd);
    }

    Status attention(int layer)
    {
        const int kvHeads = m_c.kvHeads, hd = m_c.headDim;
        const bool hooked = m_o.cache && m_o.cache->quantizes(layer);
        m_k.resize(static_cast<std::size_t>(kvHeads));
        m_v.resize(static_cast<std::size_t>(kvHeads));
        m_kh.resize(static_cast<std::size_t>(kvHeads));
        m_vh.resize(static_cast<std::size_t>(kvHeads));
        m_valueErr.resize(static_cast<std::size_t>(kvHeads));
        std::vector<std::string> problems(static_cast<std::size_t>(kvHeads));
        m_pool.run(kvHeads, [&](int g) {
            const auto gi = static_cast<std::size_t>(g);
            m_k[gi] = m_qkv.middleCols(Index(m_c.heads + g) * hd, hd);
            m_v[gi] = m_qkv.middleCols(Index(m_c.heads + kvHeads + g) * hd, hd);
            if (!hooked)
                return;
            m_kh[gi].resize(m_t, hd);
            m_vh[gi].resize(m_t, hd);
            m_o.cache->apply(layer, g, m_k[gi], m_v[gi], m_kh[gi], m_vh[gi]);
            problems[gi] = checkCacheOutput(layer, g);
            if (m_damage && problems[gi].empty())
                cacheSideDamage(layer, g);
        });
        for (const std::string& p : problems)
            if (!p.empty())
                return Error{"cache", p};

        m_attn.resize(m_t, Index(m_c.heads) * hd);
        const Index blocks = (m_t + kAttentionBlock - 1) / kAttentionBlock;
        m_pool.run(static_cast<int>(Index(m_c.heads) * blocks), [&](int task) {
            attentionBlock(layer, static_cast<int>(task / blocks), (task % blocks) * kAttentionBlock, hooked);
        });
        return Ok{};
    }

    std::string checkCacheOutput(int layer, int g) const
    {
        const auto gi = static_cast<std::size_t>(g);
        const std::string where = "layer " + std::to_string(layer) + ", KV head " + std::to_string(g);
        for (const RowMatrixXf* m : {&m_kh[gi], &m_vh[gi]}) {
            const char* what = m == &m_kh[gi] ? "khat" : "vhat";
            if (m->rows() != m_t || m->cols() != m_c.headDim)
                return std::string("the cache hook returned ") + what + " of shape " + shapeOf(*m) + " for " + where
                       + "; expected [" + std::to_string(m_t) + " x " + std::to_string(m_c.headDim) + "]";
            for (Index r = 0; r < m->rows(); ++r)
                if (!m->row(r).allFinite())
                    return std::string("the cache hook returned a non-finite ") + what + " value for " + where + ", row "
                           + std::to_string(r);
        }
        return {};
    }

    /// Queries [r0, r0 + kAttentionBlock) of query head `head` against keys [0, r1).
    void attentionBlock(int layer, int head, Index r0, bool hooked)
    {
        const int hd = m_c.headDim;
        const Index r1 = std::min<Index>(m_t, r0 + kAttentionBlock), rows = r1 - r0;
        const auto g = static_cast<std::size_t>(head / (m_c.heads / m_c.kvHeads));
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        const auto q = m_qkv.block(r0, Index(head) * hd, rows, hd);
        const Index residual = m_o.residual;
        const Index groupK = hooked ? std::max(1, m_o.cache->causalGroup(layer, true)) : 1;
        const Index groupV = hooked ? std::max(1, m_o.cache->causalGroup(layer, false)) : 1;
        // cacheEnd grows with t: the block's last query reads the most cached keys.
        const bool anyHat = hooked && (cacheEnd(r1 - 1, groupK) > 0 || cacheEnd(r1 - 1, groupV) > 0);
        const bool anyExact = !hooked || residual > 0 || groupK > 1 || groupV > 1;
        const RowMatrixXf& k = anyExact ? m_k[g] : m_kh[g];
        const RowMatrixXf& v = anyExact ? m_v[g] : m_vh[g];

        // The product straight into s, then the scale: Eigen evaluates (q k^T) * scale into a
        // column-major temporary and copies it with strided reads, a tenth of a small model's time.
        RowMatrixXf s(rows, r1);
        s.noalias() = q * k.topRows(r1).transpose();
        s *= scale;
        // The damage of the block's queries at or after the damage start: their exact scores now,
        // their cache scores before the softmax.
        const Index damageFrom = hooked && m_damage ? std::max<Index>(0, m_damage->start - r0) : rows;
        RowMatrixXf exactScores, cacheScores;
        if (damageFrom < rows) {
            exactScores.noalias() = q.bottomRows(rows - damageFrom) * m_k[g].topRows(r1).transpose();
            exactScores *= scale;
        }
        const bool probing = m_o.probe && m_o.probe->layer == layer && m_o.probe->head == head
                             && m_o.probe->position >= r0 && m_o.probe->position < r1;
        std::vector<float> exactRow;
        if (probing) {
            const Index t = m_o.probe->position;
            if (anyExact) {
                const auto row = s.row(t - r0).head(t + 1);
                exactRow.assign(row.data(), row.data() + row.size());
            } else {
                RowMatrixXf e = q.row(t - r0) * m_k[g].topRows(t + 1).transpose();
                e *= scale;
                exactRow.assign(e.data(), e.data() + e.size());
            }
        }
        RowMatrixXf hatProbs;
        if (anyHat && anyExact) {
            // Mixed: exact scores inside the residual window, the cache's for older keys.
            RowMatrixXf sh(rows, r1);
            sh.noalias() = q * m_kh[g].topRows(r1).transpose();
            sh *= scale;
            for (Index i = 0; i < rows; ++i) {
                const Index old = cacheEnd(r0 + i, groupK); // keys [0, old) read the cache
                if (old > 0)
                    s.row(i).head(old) = sh.row(i).head(old);
            }
        }
        std::vector<float> cacheRow;
        if (probing) {
            const Index t = m_o.probe->position;
            const auto row = s.row(t - r0).head(t + 1);
            cacheRow.assign(row.data(), row.data() + row.size());
        }
        if (damageFrom < rows)
            cacheScores = s.bottomRows(rows - damageFrom);
        for (Index i = 0; i < rows; ++i)
            causalSoftmaxRow(s, i, r0 + i + 1);
        auto out = m_attn.block(r0, Index(head) * hd, rows, hd);
        if (anyHat && anyExact) {
            hatProbs = RowMatrixXf::Zero(rows, r1);
            for (Index i = 0; i < rows; ++i) {
                const Index old = cacheEnd(r0 + i, groupV);
                if (old > 0) {
                    hatProbs.row(i).head(old) = s.row(i).head(old);
                    s.row(i).head(old).setZero();
                }
            }
            out.noalias() = s * v.topRows(r1);
            out.noalias() += hatProbs * m_vh[g].topRows(r1);
        } else {
            out.noalias() = s * v.topRows(r1);
        }
        if (damageFrom < rows)
            oracleDamage(layer, head, g, r0, damageFrom, exactScores, cacheScores, out);
        if (probing) {
            AttentionProbe probe;
            probe.request = *m_o.probe;
            probe.kvHead = static_cast<int>(g);
            probe.exactScores = std::move(exactRow);
            probe.cacheScores = std::move(cacheRow);
            probe.exactProbs = softmaxVector(probe.exactScores);
            probe.cacheProbs = softmaxVector(probe.cacheScores);
            m_probe = std::move(probe); // exactly one task matches the probe
        }
    }

    const ModelConfig& m_c;
    const ModelWeights& m_w;
    const ForwardOptions& m_o;
    TaskPool m_pool;
    Index m_t;
    RopeTables m_rope;
    RowMatrixXf m_h, m_qkv, m_attn, m_tmp, m_mlp, m_act;
    std::vector<RowMatrixXf> m_k, m_v, m_kh, m_vh;
    std::vector<std::vector<double>> m_valueErr; ///< [kvHead][key]: ||v_j - v^_j||^2, with damage requested
    std::optional<AttentionProbe> m_probe;
    std::optional<AttentionDamage> m_damage;
};

Status checkOptions(const ModelConfig& c, std::span<const std::int32_t> tokens, const ForwardOptions& o)
{
    const auto t = static_cast<std::int64_t>(tokens.size());
    if (t == 0)
        return Error{"tokens", "no tokens: a chunk needs at least one"};
    if (t > c.maxChunkTokens()) {
        if (c.slidingWindow > 0 && t > c.slidingWindow)
            return Error{c.source, "'sliding_window' = " + std::to_string(c.slidingWindow) + ": a chunk of "
                                       + std::to_string(t) + " tokens would need sliding-window attention, which is "
                                         "not implemented (use chunks of at most "
                                       + std::to_string(c.slidingWindow) + " tokens)"};
        return Error{c.source, "'" + std::string(c.isGpt2() ? "n_positions" : "max_position_embeddings") + "' = "
                                   + std::to_string(c.maxChunkTokens()) + ": a chunk of " + std::to_string(t)
                                   + " tokens needs positions beyond it"};
    }
    for (std::size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] < 0 || tokens[i] >= c.vocab)
            return Error{"tokens[" + std::to_string(i) + "]", "id " + std::to_string(tokens[i])
                                                                  + " is outside the vocabulary [0, "
                                                                  + std::to_string(c.vocab - 1) + "]"};
    if (o.residual < 0)
        return Error{"residual", "must be >= 0 (0: every key read from the cache); got " + std::to_string(o.residual)};
    if (o.logitsStart < 0 || o.logitsStart >= t)
        return Error{"logitsStart", "must be in [0, " + std::to_string(t - 1) + "]; got " + std::to_string(o.logitsStart)};
    if (o.startLayer < 0 || o.startLayer > c.layers)
        return Error{"startLayer", "must be in [0, " + std::to_string(c.layers) + "]; got " + std::to_string(o.startLayer)};
    if (o.startLayer > 0) {
        if (!o.startHidden)
            return Error{"startHidden", "is needed to start at layer " + std::to_string(o.startLayer)};
        if (o.startHidden->rows() != t || o.startHidden->cols() != c.hidden)
            return Error{"startHidden", "has shape " + shapeOf(*o.startHidden) + "; expected [" + std::to_string(t) + " x "
                                            + std::to_string(c.hidden) + "]"};
        if (!o.startHidden->allFinite())
            return Error{"startHidden", "holds a non-finite value"};
    }
    if (o.capture.count < 0 || o.capture.start < 0 || o.capture.start + std::int64_t(o.capture.count) > t)
        return Error{"capture", "positions [" + std::to_string(o.capture.start) + ", +" + std::to_string(o.capture.count)
                                    + ") must lie inside the chunk's " + std::to_string(t) + " tokens"};
    for (std::size_t i = 0; i < o.capture.layers.size(); ++i) {
        const int l = o.capture.layers[i];
        if (l < o.startLayer || l >= c.layers || (i > 0 && l <= o.capture.layers[i - 1]))
            return Error{"capture", "layers[" + std::to_string(i) + "] = " + std::to_string(l) + " must be in ["
                                        + std::to_string(o.startLayer) + ", " + std::to_string(c.layers - 1)
                                        + "] and above the layer before it"};
    }
    if (o.probe) {
        const ProbeRequest& p = *o.probe;
        if (p.layer < o.startLayer || p.layer >= c.layers)
            return Error{"probe", "layer " + std::to_string(p.layer) + " must be in [" + std::to_string(o.startLayer)
                                      + ", " + std::to_string(c.layers - 1) + "]"};
        if (p.head < 0 || p.head >= c.heads)
            return Error{"probe", "head " + std::to_string(p.head) + " must be in [0, " + std::to_string(c.heads - 1) + "]"};
        if (p.position < 0 || p.position >= t)
            return Error{"probe", "position " + std::to_string(p.position) + " must be in [0, " + std::to_string(t - 1)
                                      + "]"};
    }
    if (o.damage) {
        const DamageRequest& d = *o.damage;
        if (d.start < 0 || d.start >= t)
            return Error{"damage", "start " + std::to_string(d.start) + " must be in [0, " + std::to_string(t - 1) + "]"};
        if (d.queryMoments) {
            const auto& m = *d.queryMoments;
            bool ok = m.size() == static_cast<std::size_t>(c.layers);
            for (std::size_t l = 0; ok && l < m.size(); ++l) {
                ok = m[l].size() == static_cast<std::size_t>(c.kvHeads);
                for (std::size_t g = 0; ok && g < m[l].size(); ++g)
                    ok = m[l][g].rows() == c.headDim && m[l][g].cols() == c.headDim && m[l][g].allFinite();
            }
            if (!ok)
                return Error{"damage", "queryMoments must hold a finite [" + std::to_string(c.headDim) + " x "
                                           + std::to_string(c.headDim) + "] matrix per layer (" + std::to_string(c.layers)
                                           + ") and KV head (" + std::to_string(c.kvHeads) + ")"};
        }
    }
    return Ok{};
}

} // namespace

Transformer::Transformer(ModelConfig config, ModelWeights weights, int threads)
    : m_config(std::move(config)), m_weights(std::move(weights)), m_threads(threads)
{
}

Result<Transformer> Transformer::create(ModelConfig config, ModelWeights weights, int threads)
{
    if (auto s = checkWeightShapes(config, weights); !s)
        return s.error();
    if (threads <= 0)
        threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return Transformer(std::move(config), std::move(weights), threads);
}

Result<Transformer> Transformer::load(const std::string& dir, const LoadOptions& options)
{
    auto config = loadHfConfig(dir);
    if (!config)
        return config.error();
    auto weights = loadWeights(dir, *config, options);
    if (!weights)
        return weights.error();
    return create(std::move(*config), std::move(*weights), options.threads);
}

Result<ForwardResult> Transformer::forward(std::span<const std::int32_t> tokens, const ForwardOptions& options) const
{
    if (auto s = checkOptions(m_config, tokens, options); !s)
        return s.error();
    try {
        Pass pass(m_config, m_weights, options, m_threads, static_cast<int>(tokens.size()));
        return pass.run(tokens);
    } catch (const std::bad_alloc&) {
        return Error{m_config.source, "out of memory in a forward of " + std::to_string(tokens.size()) + " tokens"};
    } catch (const std::system_error& e) {
        return Error{m_config.source, std::string("cannot start worker threads: ") + e.what()};
    } catch (const std::exception& e) {
        // Only the cache hook (the caller's code) can throw anything else.
        return Error{"cache", std::string("the forward stopped on an exception: ") + e.what()};
    }
}

} // namespace kvlens::lm
