// SPDX-License-Identifier: GPL-3.0-or-later
// The forward pass on an OpenCL device: weights uploaded once, each pass's layers enqueued on its own
// queue, the KV cache hook run on the host between the projection and attention of a hooked layer.
#include "gpu/opencl_forward.h"

#include "core/attention/attention.h"
#include "core/lm/products.h"
#include "gpu/forward_products.h"
#include "gpu/opencl_context.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <optional>

namespace kvlens::gpu {

namespace {

using Index = Eigen::Index;

std::size_t roundUp(std::size_t value, std::size_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

std::string mib(std::uint64_t bytes)
{
    return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

/// A float vector on the device (a 4-byte placeholder when empty: OpenCL has no empty buffers).
struct DeviceVector {
    cl::Buffer buffer;
    bool present = false;
};

DeviceVector uploadVector(cl::Context& context, const lm::RowVectorXf& v)
{
    DeviceVector d;
    d.present = v.size() > 0;
    const float zero = 0.0f;
    d.buffer = cl::Buffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                          d.present ? static_cast<std::size_t>(v.size()) * sizeof(float) : sizeof(float),
                          const_cast<float*>(d.present ? v.data() : &zero));
    return d;
}

/// Which engine runs the products: KVLENS_FORWARD_PRODUCTS (clblast | kernel) when set; else CLBlast on
/// GPUs and the own kernel on CPU devices. Measured on PoCL 3.1 (2 cores, AMD EPYC): see README's
/// "The forward on OpenCL".
Result<ProductEngine> chooseEngine(const OpenClContext& ctx)
{
    if (const char* forced = std::getenv("KVLENS_FORWARD_PRODUCTS"); forced && *forced) {
        const std::string f = forced;
        if (f == "kernel")
            return ProductEngine::Kernel;
        if (f == "clblast") {
            if (!haveClBlast())
                return Error{"KVLENS_FORWARD_PRODUCTS", "clblast: this build has no CLBlast (scripts/deps.sh installs libclblast-dev)"};
            return ProductEngine::ClBlast;
        }
        return Error{"KVLENS_FORWARD_PRODUCTS", "must be clblast or kernel, got '" + f + "'"};
    }
    return ctx.style() == KernelStyle::Gpu && haveClBlast() ? ProductEngine::ClBlast : ProductEngine::Kernel;
}

} // namespace

struct OpenClForward::Impl {
    std::shared_ptr<OpenClContext> ctx;
    cl::Program program;
    ProductEngine engine = ProductEngine::Kernel;
    lm::ModelConfig config;
    const lm::ModelTensors* tensors = nullptr; ///< whose weights these are (identity only)
    struct Layer {
        DeviceMatrix qkv, out, up, down;
        DeviceVector attnNorm, attnNormBias, qkvBias, outBias, mlpNorm, mlpNormBias, upBias, downBias;
    };
    std::vector<Layer> layers;
    DeviceMatrix head;
    DeviceVector finalNorm, finalNormBias;
    std::uint64_t bytes = 0;
    std::string types; ///< the matrices' stored types

    mutable std::mutex mutex;
    mutable std::vector<std::unique_ptr<PassResources>> idle;
    mutable int fallbacks = 0;
    mutable std::string firstFallback;

    bool gpu() const { return ctx->style() == KernelStyle::Gpu; }

    /// A pass's resources: an idle set, or a new one.
    std::unique_ptr<PassResources> take() const
    {
        {
            const std::lock_guard lock(mutex);
            if (!idle.empty()) {
                auto r = std::move(idle.back());
                idle.pop_back();
                return r;
            }
        }
        return std::make_unique<PassResources>(*ctx, program);
    }
    void give(std::unique_ptr<PassResources> r) const
    {
        const std::lock_guard lock(mutex);
        idle.push_back(std::move(r));
    }
};

namespace {

/// One forward pass on the device (the CPU pass's phases, core/lm/transformer.cpp, enqueued).
class DevicePass {
public:
    DevicePass(const OpenClForward::Impl& d, PassResources& r, const lm::Transformer& model, const lm::ForwardOptions& o,
               int tokens)
        : m_d(d), m_r(r), m_model(model), m_c(d.config), m_o(o), m_t(tokens),
          m_qd(static_cast<std::size_t>(m_c.heads) * m_c.headDim), m_kvd(static_cast<std::size_t>(m_c.kvHeads) * m_c.headDim)
    {
    }

    Result<lm::ForwardResult> run(std::span<const std::int32_t> tokens)
    {
        lm::ForwardResult result;
        start(tokens);
        if (m_o.layerInputs)
            m_o.layerInputs->resize(static_cast<std::size_t>(m_c.layers));
        if (m_o.capture.count > 0)
            result.capture.resize(static_cast<std::size_t>(m_c.layers));
        for (int layer = m_o.startLayer; layer < m_c.layers; ++layer) {
            if (m_o.cancelled && m_o.cancelled())
                return Error::cancellation();
            if (m_o.layerInputs)
                download("x", (*m_o.layerInputs)[static_cast<std::size_t>(layer)], m_t, m_c.hidden);
            if (auto s = decoderLayer(layer, result); !s)
                return s.error();
        }
        if (m_o.cancelled && m_o.cancelled())
            return Error::cancellation();
        logits(result);
        finishDamage(result);
        return result;
    }

private:
    // --- buffers and launches ------------------------------------------------------------------------

    cl::Buffer& buffer(const char* name, std::size_t floats) { return m_r.scratch(name, floats * sizeof(float)); }

    void download(const char* name, RowMatrixXf& out, Index rows, Index cols, std::size_t offsetFloats = 0)
    {
        out.resize(rows, cols);
        if (out.size() > 0)
            m_r.queue().enqueueReadBuffer(buffer(name, 0), CL_TRUE, offsetFloats * sizeof(float),
                                          static_cast<std::size_t>(out.size()) * sizeof(float), out.data());
    }

    void upload(cl::Buffer& to, const void* data, std::size_t bytes)
    {
        if (bytes > 0)
            m_r.queue().enqueueWriteBuffer(to, CL_TRUE, 0, bytes, data);
    }

    void launch(cl::Kernel& k, const cl::NDRange& global, const cl::NDRange& local)
    {
        m_r.queue().enqueueNDRangeKernel(k, cl::NullRange, global, local);
    }

    template <class... Args>
    cl::Kernel& args(const char* name, const Args&... values)
    {
        cl::Kernel& k = m_r.kernel(name);
        cl_uint i = 0;
        (k.setArg(i++, values), ...);
        return k;
    }

    // --- phases --------------------------------------------------------------------------------------

    /// The state entering the first layer (embedding rows gathered on the host, or startHidden), the
    /// rotary tables, the damage's buffers.
    void start(std::span<const std::int32_t> tokens)
    {
        RowMatrixXf x;
        if (m_o.startLayer > 0) {
            x = *m_o.startHidden;
        } else {
            const lm::ModelTensors& w = m_model.tensors();
            x.resize(m_t, m_c.hidden);
            const bool learned = m_c.arch().positions == lm::PositionKind::Learned;
            lm::RowVectorXf position(learned ? m_c.hidden : 0);
            for (Index t = 0; t < m_t; ++t) {
                w.embed.toFloat(tokens[static_cast<std::size_t>(t)], 1, &x(t, 0));
                if (learned) {
                    w.positions.toFloat(t, 1, position.data());
                    x.row(t) += position;
                }
            }
        }
        upload(buffer("x", static_cast<std::size_t>(x.size())), x.data(), static_cast<std::size_t>(x.size()) * sizeof(float));
        if (m_c.arch().positions == lm::PositionKind::Rope)
            ropeTables();
        if (m_o.damage)
            allocateDamage();
    }

    /// cos and sin of t inv_freq_i in double, stored as float (the CPU pass's tables).
    void ropeTables()
    {
        const std::vector<double> inverse = m_c.ropeScaling.inverseFrequencies(m_c.ropeTheta, m_c.headDim);
        const int half = m_c.headDim / 2;
        std::vector<float> c(static_cast<std::size_t>(m_t) * half), s(c.size());
        for (Index t = 0; t < m_t; ++t)
            for (int i = 0; i < half; ++i) {
                const double angle = double(t) * inverse[static_cast<std::size_t>(i)];
                c[static_cast<std::size_t>(t) * half + i] = static_cast<float>(std::cos(angle));
                s[static_cast<std::size_t>(t) * half + i] = static_cast<float>(std::sin(angle));
            }
        upload(buffer("cos", c.size()), c.data(), c.size() * sizeof(float));
        upload(buffer("sin", s.size()), s.data(), s.size() * sizeof(float));
    }

    void allocateDamage()
    {
        lm::AttentionDamage d = lm::emptyDamage(m_c, *m_o.damage, static_cast<int>(m_t));
        const auto oracle = static_cast<std::size_t>(d.layers) * d.heads * d.count;
        for (const char* name : {"dkl", "dfisher", "da2", "dout"}) {
            const float zero = 0.0f;
            m_r.queue().enqueueFillBuffer(buffer(name, oracle), zero, 0, oracle * sizeof(float));
        }
        m_damage = std::move(d);
    }

    Status decoderLayer(int layer, lm::ForwardResult& result)
    {
        const auto& lw = m_d.layers[static_cast<std::size_t>(layer)];
        const Index qkvRows = m_c.qkvRows();
        norm(buffer("x", 0), 0, m_t, lw.attnNorm, lw.attnNormBias, buffer("h", static_cast<std::size_t>(m_t) * m_c.hidden));
        product(buffer("h", 0), m_t, lw.qkv, lw.qkvBias, buffer("qkv", static_cast<std::size_t>(m_t * qkvRows)));
        if (m_c.arch().positions == lm::PositionKind::Rope)
            rope();
        if (m_o.capture.count > 0
            && (m_o.capture.layers.empty()
                || std::binary_search(m_o.capture.layers.begin(), m_o.capture.layers.end(), layer)))
            capture(result.capture[static_cast<std::size_t>(layer)]);
        if (auto s = attention(layer); !s)
            return s;
        product(buffer("attn", 0), m_t, lw.out, lw.outBias, buffer("tmp", static_cast<std::size_t>(m_t) * m_c.hidden));
        addInto("x", "tmp", static_cast<std::size_t>(m_t) * m_c.hidden);
        mlp(lw);
        return Ok{};
    }

    /// RMSNorm or LayerNorm of rows first .. first + rows - 1 of x into out.
    void norm(cl::Buffer& x, int first, Index rows, const DeviceVector& w, const DeviceVector& b, cl::Buffer& out)
    {
        const int layerNorm = m_c.arch().norm == lm::NormKind::Layer ? 1 : 0;
        cl::Kernel& k = args("norm_rows", x, first, static_cast<int>(rows), m_c.hidden, w.buffer, b.buffer, layerNorm,
                             static_cast<float>(m_c.normEps), out);
        if (m_d.gpu())
            launch(k, cl::NDRange(static_cast<std::size_t>(rows) * kNormGroup), cl::NDRange(kNormGroup));
        else
            launch(k, cl::NDRange(roundUp(static_cast<std::size_t>(rows), 64)), cl::NDRange(64));
    }

    /// out = a w^T (+ bias), a rows x w.cols.
    void product(cl::Buffer& a, Index rows, const DeviceMatrix& w, const DeviceVector& bias, cl::Buffer& out)
    {
        multiplyTransposed(m_r, m_d.engine, a, 0, static_cast<int>(rows), static_cast<int>(w.cols), w, out, 0,
                           static_cast<int>(w.rows));
        if (bias.present) {
            cl::Kernel& k = args("add_bias", out, static_cast<int>(rows), static_cast<int>(w.rows), static_cast<int>(w.rows),
                                 bias.buffer);
            launch1d(m_r, k, static_cast<std::size_t>(rows) * static_cast<std::size_t>(w.rows));
        }
    }

    void addInto(const char* x, const char* t, std::size_t n)
    {
        cl::Kernel& k = args("add_into", buffer(x, 0), buffer(t, 0), static_cast<int>(n));
        launch1d(m_r, k, n);
    }

    void rope()
    {
        const int heads = m_c.heads + m_c.kvHeads, half = m_c.headDim / 2;
        cl::Kernel& k = args("rope", buffer("qkv", 0), static_cast<int>(m_t), m_c.qkvRows(), heads, half, buffer("cos", 0),
                             buffer("sin", 0));
        if (m_d.gpu())
            launch(k, cl::NDRange(roundUp(static_cast<std::size_t>(heads) * half, 64), static_cast<std::size_t>(m_t)),
                   cl::NDRange(64, 1));
        else
            launch(k, cl::NDRange(static_cast<std::size_t>(heads), roundUp(static_cast<std::size_t>(m_t), 64)), cl::NDRange(1, 64));
    }

    /// The MLP block: norm, up (gate|up), activation, down, residual.
    void mlp(const OpenClForward::Impl::Layer& lw)
    {
        const std::size_t t = static_cast<std::size_t>(m_t), inter = static_cast<std::size_t>(m_c.intermediate);
        norm(buffer("x", 0), 0, m_t, lw.mlpNorm, lw.mlpNormBias, buffer("h", 0));
        product(buffer("h", 0), m_t, lw.up, lw.upBias, buffer("mlp", t * static_cast<std::size_t>(lw.up.rows)));
        cl::Buffer& act = buffer("act", t * inter);
        if (m_c.arch().mlp == lm::MlpKind::GeluTanh)
            launch1d(m_r, args("gelu_tanh", buffer("mlp", 0), static_cast<int>(t * inter), act), t * inter);
        else
            launch1d(m_r, args("swiglu", buffer("mlp", 0), static_cast<int>(t), static_cast<int>(inter), act), t * inter);
        product(act, m_t, lw.down, lw.downBias, buffer("tmp", 0));
        addInto("x", "tmp", t * static_cast<std::size_t>(m_c.hidden));
    }

    /// The capture's positions of q, k (after RoPE) and v, token-major per head (the CPU pass's layout).
    void capture(lm::LayerCapture& cap)
    {
        const Index start = m_o.capture.start, count = m_o.capture.count, hd = m_c.headDim, qkvRows = m_c.qkvRows();
        RowMatrixXf rows;
        download("qkv", rows, count, qkvRows, static_cast<std::size_t>(start * qkvRows));
        const auto take = [&](std::vector<float>& out, int heads, Index firstCol) {
            out.resize(static_cast<std::size_t>(heads * count * hd));
            for (int h = 0; h < heads; ++h)
                for (Index i = 0; i < count; ++i)
                    for (Index j = 0; j < hd; ++j)
                        out[static_cast<std::size_t>((h * count + i) * hd + j)] = rows(i, firstCol + h * hd + j);
        };
        take(cap.q, m_c.heads, 0);
        take(cap.k, m_c.kvHeads, Index(m_c.heads) * hd);
        take(cap.v, m_c.kvHeads, Index(m_c.heads + m_c.kvHeads) * hd);
    }

    // --- attention -----------------------------------------------------------------------------------

    Status attention(int layer)
    {
        const bool hooked = m_o.cache && m_o.cache->quantizes(layer);
        const int groupK = hooked ? std::max(1, m_o.cache->causalGroup(layer, true)) : 1;
        const int groupV = hooked ? std::max(1, m_o.cache->causalGroup(layer, false)) : 1;
        const std::size_t t = static_cast<std::size_t>(m_t);
        buffer("attn", t * m_qd);
        const bool converted = hooked && convertQueries(layer);
        if (hooked)
            if (auto s = applyHook(layer); !s)
                return s;
        const bool damage = hooked && m_damage.has_value();
        // Score buffers of a group of heads stay within kScoreFloats each.
        const int group = static_cast<int>(std::clamp<std::size_t>(kScoreFloats / (t * t), 1, static_cast<std::size_t>(m_c.heads)));
        for (int h0 = 0; h0 < m_c.heads; h0 += group)
            attendHeads(layer, h0, std::min(group, m_c.heads - h0), hooked, converted, groupK, groupV, damage);
        return Ok{};
    }

    /// The hook's query conversion of each KV head's queries into "qc" (false: none converts).
    bool convertQueries(int layer)
    {
        std::vector<cl_int> types(static_cast<std::size_t>(m_c.kvHeads), 0);
        bool any = false;
        for (int g = 0; g < m_c.kvHeads; ++g) {
            const auto type = m_o.cache->queryConversion(layer, g);
            if (!type || *type == ggml::GgmlType::F32)
                continue;
            types[static_cast<std::size_t>(g)] = *type == ggml::GgmlType::F16 ? 2 : *type == ggml::GgmlType::BF16 ? 3 : 1;
            any = true;
        }
        if (!any)
            return false;
        cl::Buffer& typeBuffer = m_r.scratch("types", types.size() * sizeof(cl_int));
        upload(typeBuffer, types.data(), types.size() * sizeof(cl_int));
        const int blocks = (m_c.headDim + 31) / 32;
        cl::Kernel& k = args("convert_queries", buffer("qkv", 0), m_c.qkvRows(), static_cast<int>(m_t), m_c.heads,
                             m_c.heads / m_c.kvHeads, m_c.headDim, typeBuffer,
                             buffer("qc", static_cast<std::size_t>(m_t) * m_qd));
        launch(k, cl::NDRange(static_cast<std::size_t>(m_c.heads) * blocks, roundUp(static_cast<std::size_t>(m_t), 64)),
               cl::NDRange(1, 64));
        return true;
    }

    /// K and V of the layer down, the hook on each KV head (spread over the model's threads), its
    /// output checked, the cache-side damage, khat and vhat up into "kvh".
    Status applyHook(int layer)
    {
        const std::size_t t = static_cast<std::size_t>(m_t), width = 2 * m_kvd, hd = static_cast<std::size_t>(m_c.headDim);
        std::vector<float> kv(t * width);
        const std::array<std::size_t, 3> origin{m_qd * sizeof(float), 0, 0}, host{0, 0, 0},
            region{width * sizeof(float), t, 1};
        m_r.queue().enqueueReadBufferRect(buffer("qkv", 0), CL_TRUE, origin, host, region,
                                          static_cast<std::size_t>(m_c.qkvRows()) * sizeof(float), 0, width * sizeof(float), 0,
                                          kv.data());
        const auto kvHeads = static_cast<std::size_t>(m_c.kvHeads);
        m_k.resize(kvHeads);
        m_v.resize(kvHeads);
        m_kh.resize(kvHeads);
        m_vh.resize(kvHeads);
        m_valueErr.resize(kvHeads);
        std::vector<std::string> problems(kvHeads);
        lm::TaskPool pool(m_model.threads());
        pool.run(m_c.kvHeads, [&](int g) {
            const auto gi = static_cast<std::size_t>(g);
            m_k[gi].resize(m_t, m_c.headDim);
            m_v[gi].resize(m_t, m_c.headDim);
            for (std::size_t r = 0; r < t; ++r)
                for (std::size_t j = 0; j < hd; ++j) {
                    m_k[gi](static_cast<Index>(r), static_cast<Index>(j)) = kv[r * width + gi * hd + j];
                    m_v[gi](static_cast<Index>(r), static_cast<Index>(j)) = kv[r * width + m_kvd + gi * hd + j];
                }
            m_kh[gi].resize(m_t, m_c.headDim);
            m_vh[gi].resize(m_t, m_c.headDim);
            m_o.cache->apply(layer, g, m_k[gi], m_v[gi], m_kh[gi], m_vh[gi]);
            problems[gi] = checkCacheOutput(layer, g);
            if (m_damage && problems[gi].empty())
                cacheSideDamage(layer, g);
        });
        for (const std::string& p : problems)
            if (!p.empty())
                return Error{"cache", p};
        for (std::size_t g = 0; g < kvHeads; ++g)
            for (std::size_t r = 0; r < t; ++r)
                for (std::size_t j = 0; j < hd; ++j) {
                    kv[r * width + g * hd + j] = m_kh[g](static_cast<Index>(r), static_cast<Index>(j));
                    kv[r * width + m_kvd + g * hd + j] = m_vh[g](static_cast<Index>(r), static_cast<Index>(j));
                }
        upload(buffer("kvh", kv.size()), kv.data(), kv.size() * sizeof(float));
        if (m_damage)
            uploadValueErrors();
        return Ok{};
    }

    std::string checkCacheOutput(int layer, int g) const
    {
        const auto gi = static_cast<std::size_t>(g);
        const std::string where = "layer " + std::to_string(layer) + ", KV head " + std::to_string(g);
        for (const RowMatrixXf* m : {&m_kh[gi], &m_vh[gi]}) {
            const char* what = m == &m_kh[gi] ? "khat" : "vhat";
            if (m->rows() != m_t || m->cols() != m_c.headDim)
                return std::string("the cache hook returned ") + what + " of shape [" + std::to_string(m->rows()) + " x "
                       + std::to_string(m->cols()) + "] for " + where + "; expected [" + std::to_string(m_t) + " x "
                       + std::to_string(m_c.headDim) + "]";
            for (Index r = 0; r < m->rows(); ++r)
                if (!m->row(r).allFinite())
                    return std::string("the cache hook returned a non-finite ") + what + " value for " + where + ", row "
                           + std::to_string(r);
        }
        return {};
    }

    /// Queries t..: the relative key and value errors of what each reads and the calibration-weighted
    /// score error, as the CPU pass computes them (core/lm/transformer.cpp cacheSideDamage); the
    /// per-key value errors stay for the oracle's A^2.
    void cacheSideDamage(int layer, int g)
    {
        lm::AttentionDamage& d = *m_damage;
        const auto gi = static_cast<std::size_t>(g);
        const RowMatrixXf &k = m_k[gi], &v = m_v[gi], &kh = m_kh[gi], &vh = m_vh[gi];
        const RowMatrixXf ek = k - kh;
        std::vector<double>& valueErr = m_valueErr[gi];
        const auto n = static_cast<std::size_t>(m_t);
        valueErr.assign(n, 0.0);
        std::vector<double> keyErr(n), keyEnergy(n), valueEnergy(n), scoreErr(n, 0.0);
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
        auto prefix = [n](const std::vector<double>& x) {
            std::vector<double> sum(n + 1, 0.0);
            for (std::size_t j = 0; j < n; ++j)
                sum[j + 1] = sum[j] + x[j];
            return sum;
        };
        const auto sumKeyErr = prefix(keyErr), sumValueErr = prefix(valueErr), sumScoreErr = prefix(scoreErr),
                   sumKeyEnergy = prefix(keyEnergy), sumValueEnergy = prefix(valueEnergy);
        auto ratio = [](double a, double b) { return b > 0.0 ? a / b : 0.0; };
        const std::size_t base = (static_cast<std::size_t>(layer) * d.kvHeads + gi) * d.count;
        for (int i = 0; i < d.count; ++i) {
            const Index t = d.start + i;
            const auto lo = static_cast<std::size_t>(windowStart(t));
            const auto endK = std::max(lo, static_cast<std::size_t>(lm::cachedKeys(t, groupK, m_o.residual)));
            const auto endV = std::max(lo, static_cast<std::size_t>(lm::cachedKeys(t, groupV, m_o.residual)));
            const auto all = static_cast<std::size_t>(t + 1);
            const auto range = [lo](const std::vector<double>& sum, std::size_t end) { return sum[end] - sum[lo]; };
            d.relK[base + i] = static_cast<float>(ratio(range(sumKeyErr, endK), range(sumKeyEnergy, all)));
            d.relV[base + i] = static_cast<float>(ratio(range(sumValueErr, endV), range(sumValueEnergy, all)));
            if (moments)
                d.calibScoreErr[base + i] = static_cast<float>(range(sumScoreErr, endK) / static_cast<double>(all - lo));
        }
    }

    Index windowStart(Index t) const { return m_c.slidingWindow > 0 ? std::max<Index>(0, t - m_c.slidingWindow + 1) : 0; }

    /// The per-key value errors of every KV head, [kvHeads x T] in the device's accumulator type.
    void uploadValueErrors()
    {
        const auto n = static_cast<std::size_t>(m_t) * static_cast<std::size_t>(m_c.kvHeads);
        if (m_r.context().hasDouble()) {
            std::vector<double> e;
            e.reserve(n);
            for (const auto& g : m_valueErr)
                e.insert(e.end(), g.begin(), g.end());
            upload(m_r.scratch("verr", n * sizeof(double)), e.data(), n * sizeof(double));
        } else {
            std::vector<float> e;
            e.reserve(n);
            for (const auto& g : m_valueErr)
                for (double x : g)
                    e.push_back(static_cast<float>(x));
            upload(m_r.scratch("verr", n * sizeof(float)), e.data(), n * sizeof(float));
        }
    }

    /// Heads h0 .. h0 + hg - 1: scores (and exact scores for the damage), softmax, values; with damage,
    /// the exact softmax and output first, then the oracle measures.
    void attendHeads(int layer, int h0, int hg, bool hooked, bool converted, int groupK, int groupV, bool damage)
    {
        const std::size_t t = static_cast<std::size_t>(m_t), square = static_cast<std::size_t>(hg) * t * t;
        const int T = static_cast<int>(m_t), qkvRows = m_c.qkvRows(), ldKvh = static_cast<int>(2 * m_kvd);
        const float scale = 1.0f / std::sqrt(static_cast<float>(m_c.headDim));
        cl::Buffer& qkv = buffer("qkv", 0);
        cl::Buffer& qc = converted ? buffer("qc", 0) : qkv;
        const int ldQc = converted ? static_cast<int>(m_qd) : qkvRows;
        cl::Buffer& kvh = hooked ? buffer("kvh", 0) : qkv; // any valid buffer when unhooked
        cl::Buffer& s = buffer("s", square);
        cl::Buffer& se = damage ? buffer("se", square) : s;
        cl::Kernel& scores = args("attention_scores", T, m_c.headDim, h0, m_c.heads, m_c.kvHeads, qkv, qkvRows, qc, ldQc, kvh,
                                  ldKvh, hooked ? 1 : 0, groupK, m_o.residual, m_c.slidingWindow, scale, s, se,
                                  damage ? 1 : 0);
        if (m_d.gpu())
            launch(scores, cl::NDRange(roundUp(t, 16), roundUp(t, 4), static_cast<std::size_t>(hg)), cl::NDRange(16, 4, 1));
        else
            launch(scores, cl::NDRange(roundUp((t + 3) / 4, 8), roundUp((t + 3) / 4, 8), static_cast<std::size_t>(hg)),
                   cl::NDRange(8, 8, 1));
        if (damage) {
            softmax(se, buffer("pe", square), hg);
            values(buffer("pe", 0), h0, hg, qkv, kvh, false, groupV, buffer("oe", t * m_qd));
        }
        softmax(s, buffer("p", square), hg);
        values(buffer("p", 0), h0, hg, qkv, kvh, hooked, groupV, buffer("attn", 0));
        if (damage)
            oracleDamage(layer, h0, hg, groupV);
    }

    void softmax(cl::Buffer& s, cl::Buffer& p, int hg)
    {
        const int rows = hg * static_cast<int>(m_t);
        launch1d(m_r, args("attention_softmax", static_cast<int>(m_t), rows, m_c.slidingWindow, s, p),
                 static_cast<std::size_t>(rows));
    }

    void values(cl::Buffer& p, int h0, int hg, cl::Buffer& qkv, cl::Buffer& kvh, bool hooked, int groupV, cl::Buffer& out)
    {
        const std::size_t t = static_cast<std::size_t>(m_t), hd = static_cast<std::size_t>(m_c.headDim);
        cl::Kernel& k = args("attention_values", static_cast<int>(m_t), m_c.headDim, h0, m_c.heads, m_c.kvHeads, p, qkv,
                             m_c.qkvRows(), kvh, static_cast<int>(2 * m_kvd), hooked ? 1 : 0, groupV, m_o.residual,
                             m_c.slidingWindow, out);
        if (m_d.gpu())
            launch(k, cl::NDRange(roundUp(hd, 16), roundUp(t, 4), static_cast<std::size_t>(hg)), cl::NDRange(16, 4, 1));
        else
            launch(k, cl::NDRange((hd + 7) / 8, roundUp((t + 3) / 4, 16), static_cast<std::size_t>(hg)), cl::NDRange(1, 16, 1));
    }

    void oracleDamage(int layer, int h0, int hg, int groupV)
    {
        const int start = m_damage->start;
        cl::Kernel& k = args("attention_damage", static_cast<int>(m_t), start, m_c.headDim, h0, m_c.heads, m_c.kvHeads, layer,
                             buffer("s", 0), buffer("se", 0), buffer("pe", 0), buffer("oe", 0), buffer("attn", 0),
                             m_r.scratch("verr", 0), groupV, m_o.residual, m_c.slidingWindow, buffer("dkl", 0),
                             buffer("dfisher", 0), buffer("da2", 0), buffer("dout", 0));
        launch(k, cl::NDRange(roundUp(static_cast<std::size_t>(m_t - start), 64), static_cast<std::size_t>(hg)),
               cl::NDRange(64, 1));
    }

    // --- the end ---------------------------------------------------------------------------------------

    /// Final norm of rows logitsStart..T-1 and the output head, downloaded.
    void logits(lm::ForwardResult& result)
    {
        const int first = m_o.logitsStart;
        const Index rows = m_t - first;
        norm(buffer("x", 0), first, rows, m_d.finalNorm, m_d.finalNormBias, buffer("h", 0));
        const DeviceMatrix& head = m_d.head;
        cl::Buffer& out = buffer("logits", static_cast<std::size_t>(rows) * static_cast<std::size_t>(head.rows));
        multiplyTransposed(m_r, m_d.engine, buffer("h", 0), 0, static_cast<int>(rows), m_c.hidden, head, out, 0,
                           static_cast<int>(head.rows));
        download("logits", result.logits, rows, head.rows);
    }

    void finishDamage(lm::ForwardResult& result)
    {
        if (!m_damage)
            return;
        lm::AttentionDamage& d = *m_damage;
        const std::pair<const char*, std::vector<float>*> parts[] = {
            {"dkl", &d.kl}, {"dfisher", &d.fisher}, {"da2", &d.a2}, {"dout", &d.outErr}};
        for (const auto& [name, values] : parts)
            if (!values->empty())
                m_r.queue().enqueueReadBuffer(buffer(name, 0), CL_TRUE, 0, values->size() * sizeof(float), values->data());
        result.damage = std::move(m_damage);
    }

    static constexpr std::size_t kNormGroup = 128; ///< forward.cl's NORM_GROUP
    static constexpr std::size_t kScoreFloats = std::size_t{32} << 20;

    const OpenClForward::Impl& m_d;
    PassResources& m_r;
    const lm::Transformer& m_model;
    const lm::ModelConfig& m_c;
    const lm::ForwardOptions& m_o;
    Index m_t;
    std::size_t m_qd, m_kvd; ///< widths of the query heads and of the key (or value) heads
    std::vector<RowMatrixXf> m_k, m_v, m_kh, m_vh;
    std::vector<std::vector<double>> m_valueErr;
    std::optional<lm::AttentionDamage> m_damage;
};

/// Uploads every matrix and vector of `model`.
void uploadWeights(OpenClForward::Impl& d, const lm::Transformer& model, std::uint64_t maxAlloc)
{
    cl::Context& context = d.ctx->context();
    cl::CommandQueue queue(context, d.ctx->device());
    const lm::ModelTensors& w = model.tensors();
    std::string types;
    auto matrix = [&](const lm::WeightMatrix& m) {
        DeviceMatrix dm = uploadMatrix(context, queue, m, maxAlloc);
        d.bytes += dm.bytes();
        for (const DeviceSegment& s : dm.segments) {
            const std::string name(ggml::ggmlName(s.type));
            if ((", " + types + ",").find(", " + name + ",") == std::string::npos)
                types += (types.empty() ? "" : ", ") + name;
        }
        return dm;
    };
    for (const lm::LayerTensors& lw : w.layers) {
        OpenClForward::Impl::Layer l;
        l.qkv = matrix(lw.qkv);
        l.out = matrix(lw.out);
        l.up = matrix(lw.up);
        l.down = matrix(lw.down);
        l.attnNorm = uploadVector(context, lw.attnNorm);
        l.attnNormBias = uploadVector(context, lw.attnNormBias);
        l.qkvBias = uploadVector(context, lw.qkvBias);
        l.outBias = uploadVector(context, lw.outBias);
        l.mlpNorm = uploadVector(context, lw.mlpNorm);
        l.mlpNormBias = uploadVector(context, lw.mlpNormBias);
        l.upBias = uploadVector(context, lw.upBias);
        l.downBias = uploadVector(context, lw.downBias);
        d.layers.push_back(std::move(l));
    }
    d.head = matrix(w.head());
    d.finalNorm = uploadVector(context, w.finalNorm);
    d.finalNormBias = uploadVector(context, w.finalNormBias);
    d.types = types;
}

/// Bytes the model's matrices take on the device.
std::uint64_t weightBytesOf(const lm::ModelTensors& w)
{
    std::uint64_t bytes = deviceBytes(w.head());
    for (const lm::LayerTensors& lw : w.layers)
        bytes += deviceBytes(lw.qkv) + deviceBytes(lw.out) + deviceBytes(lw.up) + deviceBytes(lw.down);
    return bytes;
}

} // namespace

OpenClForward::OpenClForward(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

OpenClForward::~OpenClForward() = default;

Result<std::shared_ptr<OpenClForward>> OpenClForward::create(const lm::Transformer& model, const std::string& request)
{
    auto ctx = OpenClContext::create(request);
    if (!ctx)
        return ctx.error();
    auto impl = std::make_unique<Impl>();
    impl->ctx = *ctx;
    impl->config = model.config();
    impl->tensors = &model.tensors();
    auto engine = chooseEngine(*impl->ctx);
    if (!engine)
        return engine.error();
    impl->engine = *engine;
    auto program = impl->ctx->program({"forward"}, "-DNORM_GROUP=128");
    if (!program)
        return program.error();
    impl->program = *program;
    const DeviceInfo& info = impl->ctx->info();
    const std::uint64_t needed = weightBytesOf(model.tensors());
    if (needed > info.globalMemory)
        return Error{"OpenCL", info.label() + ": the weights need " + mib(needed) + " of device memory; the device has "
                                   + mib(info.globalMemory)};
    try {
        const auto maxAlloc = impl->ctx->device().getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
        uploadWeights(*impl, model, maxAlloc);
    } catch (const cl::Error& e) {
        return Error{"OpenCL", info.label() + ": cannot upload the weights (" + mib(needed) + "): " + e.what() + " "
                                   + clErrorText(e.err())};
    } catch (const std::bad_alloc&) {
        return Error{"OpenCL", info.label() + ": out of host memory while uploading the weights"};
    }
    return std::shared_ptr<OpenClForward>(new OpenClForward(std::move(impl)));
}

Result<lm::ForwardResult> OpenClForward::forward(const lm::Transformer& model, std::span<const std::int32_t> tokens,
                                                 const lm::ForwardOptions& options) const
{
    const Impl& d = *m_impl;
    if (&model.tensors() != d.tensors)
        return Error{"device", d.ctx->info().label() + " holds the weights of another model (OpenClForward::create binds "
                                                       "one model)"};
    if (options.probe)
        return model.forwardOnCpu(tokens, options); // one query for the drill-down: not worth a device pass
    std::unique_ptr<PassResources> resources;
    try {
        resources = d.take();
        DevicePass pass(d, *resources, model, options, static_cast<int>(tokens.size()));
        auto result = pass.run(tokens);
        d.give(std::move(resources));
        return result;
    } catch (const cl::Error& e) {
        {
            const std::lock_guard lock(d.mutex);
            ++d.fallbacks;
            if (d.firstFallback.empty())
                d.firstFallback = std::string(e.what()) + " " + clErrorText(e.err());
        }
        return model.forwardOnCpu(tokens, options);
    } catch (const std::bad_alloc&) {
        return Error{d.config.source, "out of memory in a forward of " + std::to_string(tokens.size()) + " tokens on "
                                          + d.ctx->info().label()};
    } catch (const std::exception& e) {
        // Only the cache hook (the caller's code) can throw anything else.
        return Error{"cache", std::string("the forward stopped on an exception: ") + e.what()};
    }
}

std::string OpenClForward::label() const
{
    const Impl& d = *m_impl;
    std::string text = "OpenCL, " + d.ctx->info().name + " (" + d.ctx->info().type + ", " + d.ctx->info().platform + ", "
                       + (d.gpu() ? "GPU" : "CPU") + "-style kernels); products by " + productEngineName(d.engine)
                       + " on float32 panels of the weights as stored (" + d.types
                       + "); KV codecs on the CPU (per hooked layer K and V down, khat and vhat up)";
    const std::lock_guard lock(d.mutex);
    if (d.fallbacks > 0)
        text += "; " + std::to_string(d.fallbacks) + " pass(es) ran on the CPU after an OpenCL error, first: " + d.firstFallback;
    return text;
}

const DeviceInfo& OpenClForward::device() const
{
    return m_impl->ctx->info();
}

std::string OpenClForward::productEngine() const
{
    return productEngineName(m_impl->engine);
}

std::uint64_t OpenClForward::weightBytes() const
{
    return m_impl->bytes;
}

int OpenClForward::fallbacks() const
{
    const std::lock_guard lock(m_impl->mutex);
    return m_impl->fallbacks;
}

Result<double> OpenClForward::productGflops(int rows, int repeats) const
{
    const Impl& d = *m_impl;
    if (d.layers.empty())
        return Error{"model", "has no layers"};
    const DeviceMatrix& w = d.layers.front().up;
    try {
        auto resources = d.take();
        std::vector<float> a(static_cast<std::size_t>(rows) * static_cast<std::size_t>(w.cols));
        for (std::size_t i = 0; i < a.size(); ++i)
            a[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        cl::Buffer& in = resources->scratch("bench_a", a.size() * sizeof(float));
        resources->queue().enqueueWriteBuffer(in, CL_TRUE, 0, a.size() * sizeof(float), a.data());
        cl::Buffer& out = resources->scratch("bench_c", static_cast<std::size_t>(rows) * static_cast<std::size_t>(w.rows) * sizeof(float));
        auto once = [&] {
            multiplyTransposed(*resources, d.engine, in, 0, rows, static_cast<int>(w.cols), w, out, 0, static_cast<int>(w.rows));
            resources->queue().finish();
        };
        once();
        std::vector<double> ms;
        for (int i = 0; i < std::max(1, repeats); ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            once();
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        d.give(std::move(resources));
        return 2.0 * rows * double(w.rows) * double(w.cols) / (ms[ms.size() / 2] * 1e6);
    } catch (const cl::Error& e) {
        return Error{"OpenCL", d.ctx->info().label() + ": " + e.what() + " " + clErrorText(e.err())};
    }
}

} // namespace kvlens::gpu
