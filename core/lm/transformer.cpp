// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer forward pass: fused projections as threaded matrix products, rotate-half RoPE,
// blocked causal attention reading the cache hook's K/V, and the output head.
#include "core/lm/transformer.h"

#include "core/attention/attention.h"
#include "core/io/ggml_dot.h"
#include "core/lm/products.h"

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

/// cos and sin of t inv_freq_i, inv_freq_i = theta^(-2i/headDim) scaled as the config's rope
/// scaling says, computed in double.
RopeTables ropeTables(int tokens, const ModelConfig& c)
{
    const std::vector<double> inverse = c.ropeScaling.inverseFrequencies(c.ropeTheta, c.headDim);
    const int half = c.headDim / 2;
    RopeTables r;
    r.cos.resize(tokens, half);
    r.sin.resize(tokens, half);
    for (int i = 0; i < half; ++i) {
        const double invFreq = inverse[static_cast<std::size_t>(i)];
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

/// Softmax of row `i` of s over its entries [lo, n); the rest set to 0 (the causal mask, and the
/// sliding window's when lo > 0).
void causalSoftmaxRow(RowMatrixXf& s, Index i, Index lo, Index n)
{
    auto row = s.row(i).segment(lo, n - lo).array();
    const float mx = row.maxCoeff();
    row = (row - mx).exp();
    row /= row.sum();
    s.row(i).head(lo).setZero();
    s.row(i).tail(s.cols() - n).setZero();
}

std::string shapeOf(const RowMatrixXf& m)
{
    return "[" + std::to_string(m.rows()) + " x " + std::to_string(m.cols()) + "]";
}

/// One forward pass's state.
class Pass {
public:
    Pass(const ModelConfig& c, const ModelTensors& w, const ForwardOptions& o, int threads, int tokens)
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
        if (m_c.arch().positions == PositionKind::Rope)
            m_rope = ropeTables(static_cast<int>(m_t), m_c);
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
        normRows(m_pool, x.bottomRows(m_t - first), m_w.finalNorm, m_w.finalNormBias, layerNorm(), m_c.normEps, m_h);
        matmulT(m_pool, m_h, m_w.head(), RowVectorXf(), result.logits);
        result.probe = std::move(m_probe);
        result.damage = std::move(m_damage);
        return result;
    }

private:
    void allocateDamage() { m_damage = emptyDamage(m_c, *m_o.damage, static_cast<int>(m_t)); }

    /// The first key query t attends to: t - W + 1 with a sliding window of W keys (Mistral), else 0.
    Index windowStart(Index t) const
    {
        return m_c.slidingWindow > 0 ? std::max<Index>(0, t - m_c.slidingWindow + 1) : 0;
    }

    /// Query t reads the cache for keys [0, cacheEnd(t)): those older than the residual window
    /// (j <= t - R) and in a group its codec completed by t (j < G floor((t + 1) / G)); the rest
    /// exact. Keys and values each have their codec's group.
    Index cacheEnd(Index t, Index group) const { return cachedKeys(t, group, m_o.residual); }

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
            // Sums over the keys the query reads: [lo, t] (its window), the cache's below cacheEnd.
            const auto lo = static_cast<std::size_t>(windowStart(t));
            const auto endK = std::max(lo, static_cast<std::size_t>(cacheEnd(t, groupK)));
            const auto endV = std::max(lo, static_cast<std::size_t>(cacheEnd(t, groupV)));
            const auto all = static_cast<std::size_t>(t + 1);
            const auto range = [lo](const std::vector<double>& sum, std::size_t end) { return sum[end] - sum[lo]; };
            d.relK[base + i] = static_cast<float>(ratio(range(sumKeyErr, endK), range(sumKeyEnergy, all)));
            d.relV[base + i] = static_cast<float>(ratio(range(sumValueErr, endV), range(sumValueEnergy, all)));
            if (moments)
                d.calibScoreErr[base + i] = static_cast<float>(range(sumScoreErr, endK) / static_cast<double>(all - lo));
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
            causalSoftmaxRow(probs, row, windowStart(r0 + i0 + row), r0 + i0 + row + 1);
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

    bool layerNorm() const { return m_c.arch().norm == NormKind::Layer; }

    /// Rows of the embedding (dequantized one by one), plus the position table's rows for learned positions.
    void embed(std::span<const std::int32_t> tokens, RowMatrixXf& x)
    {
        x.resize(m_t, m_c.hidden);
        const bool learned = m_c.arch().positions == PositionKind::Learned;
        forRanges(m_pool, m_t, [&](Index r0, Index r1) {
            RowVectorXf position(learned ? m_c.hidden : 0);
            for (Index t = r0; t < r1; ++t) {
                m_w.embed.toFloat(tokens[static_cast<std::size_t>(t)], 1, &x(t, 0));
                if (learned) {
                    m_w.positions.toFloat(t, 1, position.data());
                    x.row(t) += position;
                }
            }
        });
    }

    Status decoderLayer(int layer, RowMatrixXf& x, ForwardResult& result)
    {
        const LayerTensors& lw = m_w.layers[static_cast<std::size_t>(layer)];
        const ArchitectureInfo& arch = m_c.arch();
        // Attention block.
        normRows(m_pool, x, lw.attnNorm, lw.attnNormBias, layerNorm(), m_c.normEps, m_h);
        matmulT(m_pool, m_h, lw.qkv, lw.qkvBias, m_qkv);
        if (arch.positions == PositionKind::Rope)
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
        normRows(m_pool, x, lw.mlpNorm, lw.mlpNormBias, layerNorm(), m_c.normEps, m_h);
        matmulT(m_pool, m_h, lw.up, lw.upBias, m_mlp);
        const Index inter = m_c.intermediate;
        m_act.resize(m_t, inter);
        forRanges(m_pool, m_t, [&](Index r0, Index r1) {
            const Index n = r1 - r0;
            if (arch.mlp == MlpKind::GeluTanh) {
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
        // llama.cpp converts each query row to the key type's vec_dot_type (q8_0 for q8_0 keys, ...)
        // before the product with a quantized K: the scores against cached keys use that query.
        RowMatrixXf converted;
        const std::optional<ggml::GgmlType> conversion = hooked ? m_o.cache->queryConversion(layer, static_cast<int>(g)) : std::nullopt;
        if (conversion) {
            converted.resize(rows, hd);
            for (Index i = 0; i < rows; ++i)
                (void)ggml::convertQueryRow(*conversion, &m_qkv(r0 + i, Index(head) * hd), &converted(i, 0), hd); // the hook's types convert
        }
        const Eigen::Ref<const RowMatrixXf> qCache = conversion ? Eigen::Ref<const RowMatrixXf>(converted)
                                                                : Eigen::Ref<const RowMatrixXf>(q);

        // The product straight into s, then the scale: Eigen evaluates (q k^T) * scale into a
        // column-major temporary and copies it with strided reads, a tenth of a small model's time.
        RowMatrixXf s(rows, r1);
        if (anyExact)
            s.noalias() = q * k.topRows(r1).transpose();
        else
            s.noalias() = qCache * k.topRows(r1).transpose();
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
            sh.noalias() = qCache * m_kh[g].topRows(r1).transpose();
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
            causalSoftmaxRow(s, i, windowStart(r0 + i), r0 + i + 1);
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
            // Keys before a sliding window get no weight: a score of -inf, exp(-inf) = 0 in the softmax.
            const auto outside = static_cast<std::size_t>(windowStart(m_o.probe->position));
            for (std::size_t j = 0; j < outside; ++j)
                probe.exactScores[j] = probe.cacheScores[j] = -std::numeric_limits<float>::infinity();
            probe.exactProbs = softmaxVector(probe.exactScores);
            probe.cacheProbs = softmaxVector(probe.cacheScores);
            m_probe = std::move(probe); // exactly one task matches the probe
        }
    }

    const ModelConfig& m_c;
    const ModelTensors& m_w;
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
    if (t > c.maxChunkTokens())
        return Error{c.source, "'" + c.contextKey + "' = " + std::to_string(c.maxChunkTokens()) + ": a chunk of "
                                   + std::to_string(t) + " tokens needs positions beyond it"};
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

Transformer::Transformer(ModelConfig config, ModelTensors tensors, int threads)
    : m_config(std::move(config)), m_tensors(std::make_shared<const ModelTensors>(std::move(tensors))), m_threads(threads)
{
}

Result<Transformer> Transformer::create(ModelConfig config, ModelWeights weights, int threads)
{
    if (auto s = checkWeightShapes(config, weights); !s)
        return s.error();
    return create(std::move(config), tensorsFromDense(weights), threads);
}

Result<Transformer> Transformer::create(ModelConfig config, ModelTensors tensors, int threads)
{
    if (auto s = checkTensorShapes(config, tensors); !s)
        return s.error();
    if (threads <= 0)
        threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return Transformer(std::move(config), std::move(tensors), threads);
}

Result<Transformer> Transformer::load(const std::string& path, const LoadOptions& options)
{
    auto source = openModelSource(path);
    if (!source)
        return source.error();
    return load(*source, options);
}

Result<Transformer> Transformer::load(const ModelSource& source, const LoadOptions& options)
{
    auto checkpoint = openCheckpoint(source);
    if (!checkpoint)
        return checkpoint.error();
    auto loaded = loadFromCheckpoint(*checkpoint, source.config, options);
    if (!loaded)
        return loaded.error();
    auto model = create(source.config, std::move(loaded->tensors), options.threads);
    if (model) {
        model->m_estimate = loaded->estimate;
        model->m_notes = loaded->notes;
    }
    return model;
}

std::uint64_t Transformer::dataHash() const
{
    std::call_once(m_hash->once, [this] { m_hash->value = hashTensors(*m_tensors); });
    return m_hash->value;
}

ModelWeights Transformer::denseWeights() const
{
    return denseFromTensors(*m_tensors);
}

Result<ForwardResult> Transformer::forward(std::span<const std::int32_t> tokens, const ForwardOptions& options) const
{
    if (auto s = checkOptions(m_config, tokens, options); !s)
        return s.error();
    if (m_device)
        return m_device->forward(*this, tokens, options);
    return forwardOnCpu(tokens, options);
}

AttentionDamage emptyDamage(const ModelConfig& config, const DamageRequest& request, int tokens)
{
    AttentionDamage d;
    d.start = request.start;
    d.count = tokens - d.start;
    d.layers = config.layers;
    d.heads = config.heads;
    d.kvHeads = config.kvHeads;
    const auto oracle = static_cast<std::size_t>(d.layers) * d.heads * d.count;
    const auto side = static_cast<std::size_t>(d.layers) * d.kvHeads * d.count;
    d.kl.assign(oracle, 0.0f);
    d.fisher.assign(oracle, 0.0f);
    d.a2.assign(oracle, 0.0f);
    d.outErr.assign(oracle, 0.0f);
    d.relK.assign(side, 0.0f);
    d.relV.assign(side, 0.0f);
    d.calibScoreErr.assign(side, request.queryMoments ? 0.0f : std::numeric_limits<float>::quiet_NaN());
    return d;
}

Result<ForwardResult> Transformer::forwardOnCpu(std::span<const std::int32_t> tokens, const ForwardOptions& options) const
{
    if (auto s = checkOptions(m_config, tokens, options); !s)
        return s.error();
    try {
        Pass pass(m_config, *m_tensors, options, m_threads, static_cast<int>(tokens.size()));
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
