// SPDX-License-Identifier: GPL-3.0-or-later
// Planning a path part by part, its bit accounting, and the engine that composes the parts.
#include "core/quant/path.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace kvlens {

namespace {

const PartKind& kindOf(const CodecPart& part, PartRole role)
{
    const PartKind* kind = findPart(part.kind, role);
    assert(kind && "planPath: normalizePath checks part kinds");
    return *kind;
}

} // namespace

int projectionColumns(const PathConfig& config, int d)
{
    int columns = 0;
    auto add = [&](const CodecPart& part, PartRole role) {
        if (const PartKind* kind = findPart(part.kind, role); kind && kind->projectionColumns)
            columns = std::max(columns, kind->projectionColumns(part, d));
    };
    for (const CodecPart& t : config.transforms)
        add(t, PartRole::Transform);
    add(config.quantizer, PartRole::Quantizer);
    for (const CodecPart& r : config.residuals)
        add(r, PartRole::Residual);
    add(config.tokenPolicy, PartRole::TokenPolicy);
    return columns;
}

PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const RowMatrixXf* calibration,
                  EngineKind engine, std::uint64_t seed)
{
    PlanInputs inputs;
    inputs.calibration = calibration;
    return planPath(config, budget, d, site, inputs, engine, seed);
}

PathPlan planPath(const PathConfig& config, int budget, int d, PathSite site, const PlanInputs& inputs,
                  EngineKind engine, std::uint64_t seed)
{
    PathPlan plan;
    plan.config = config;
    plan.d = d;
    plan.bits = config.bits.at(budget);
    plan.scoreScale = 1.0f / std::sqrt(static_cast<float>(d));
    PlanContext context{config, budget, plan.bits, d, d, site, inputs, engine, seed, plan.scoreScale, {}, 0, {}};
    // The calibration set in the stored basis, transformed by the transforms planned so far, on demand.
    RowMatrixXf storedCalibration;
    bool storedReady = false;
    context.storedCalibration = [&]() -> const RowMatrixXf* {
        if (!inputs.calibration || inputs.calibration->rows() == 0)
            return nullptr;
        if (!storedReady) {
            storedCalibration = *inputs.calibration;
            for (const auto& t : plan.transforms) {
                RowMatrixXf next;
                t->forward(storedCalibration, next);
                storedCalibration = std::move(next);
            }
            storedReady = true;
        }
        return &storedCalibration;
    };
    for (const CodecPart& part : config.transforms) {
        plan.transforms.push_back(kindOf(part, PartRole::Transform).planTransform(part, context));
        context.dim = plan.transforms.back()->outDim();
        storedReady = false;
    }
    plan.dim = context.dim;
    plan.quantizer = kindOf(config.quantizer, PartRole::Quantizer).planQuantizer(config.quantizer, context);
    for (const CodecPart& part : config.residuals)
        plan.residuals.push_back(kindOf(part, PartRole::Residual).planResidual(part, context));
    plan.tokenPolicy = kindOf(config.tokenPolicy, PartRole::TokenPolicy).planTokenPolicy(config.tokenPolicy, context);
    return plan;
}

void PathPlan::assignTokenBits(const TokenContext& context)
{
    tokenBits = tokenPolicy ? tokenPolicy->tokenBits(context, bits) : std::vector<int>{};
}

int PathPlan::causalGroup() const
{
    int g = quantizer ? quantizer->causalGroup() : 1;
    if (tokenPolicy)
        g = std::max(g, tokenPolicy->causalGroup());
    return std::max(1, g);
}

std::optional<double> PathPlan::relativeDistortion() const
{
    return quantizer ? quantizer->relativeDistortion() : std::nullopt;
}

double PathPlan::predictedScoreErrorVariance(double meanQueryNorm2, double meanKeyNorm2, bool withResidual) const
{
    const auto distortion = relativeDistortion();
    if (!distortion)
        return std::numeric_limits<double>::quiet_NaN();
    double factor = 1.0 / dim;
    if (withResidual)
        for (const auto& r : residuals)
            if (const auto f = r->scoreVarianceFactor(dim)) {
                factor = *f;
                break;
            }
    return *distortion * meanQueryNorm2 * meanKeyNorm2 / d * factor;
}

PathDimension PathPlan::dimension() const
{
    return quantizer ? quantizer->dimension() : PathDimension{};
}

int PathPlan::boundaryDecisions(const RowMatrixXf& x, double margin) const
{
    RowMatrixXf stored = x;
    for (const auto& t : transforms) {
        RowMatrixXf next;
        t->forward(stored, next);
        stored = std::move(next);
    }
    int count = quantizer->boundaryDecisions(stored, margin);
    if (!residuals.empty()) {
        RowMatrixXf xHat;
        int saturated = 0;
        quantizer->roundTrip(stored, bits, xHat, saturated);
        for (const auto& r : residuals)
            count += r->boundaryDecisions(stored, xHat, margin);
    }
    return count;
}

double pathBitsPerCoordinate(const PathPlan& plan, int tokens)
{
    double meanBits = plan.bits;
    if (!plan.tokenBits.empty()) {
        double sum = 0.0;
        for (int b : plan.tokenBits)
            sum += b;
        meanBits = sum / static_cast<double>(plan.tokenBits.size());
    }
    double total = plan.quantizer->bits(tokens, plan.dim, meanBits);
    for (const auto& t : plan.transforms)
        total += t->bits(tokens);
    for (const auto& r : plan.residuals)
        total += r->bitsPerVector() * tokens;
    return tokens > 0 ? total / (static_cast<double>(tokens) * plan.d) : 0.0;
}

double pathBitsPerCoordinate(const PathConfig& config, int budget, int d, int tokens)
{
    // Planned on no data: calibrated parts fall back to their data-free form, which is what a
    // preview can know (their bits do not depend on the calibration set's values).
    const PathPlan plan = planPath(config, budget, d, PathSite::Keys, PlanInputs{}, EngineKind::Mt19937_64, 0);
    return pathBitsPerCoordinate(plan, tokens);
}

namespace {

/// The rows of a Mat on the host: read in place on the CPU, else downloaded into `scratch`.
DeviceMatrix::HostRows hostView(const Mat& m, CodecPrimitives& prims, RowMatrixXf& scratch)
{
    if (auto rows = m->hostRows())
        return *rows;
    prims.download(m, scratch);
    return DeviceMatrix::HostRows(scratch.data(), scratch.rows(), scratch.cols(), Eigen::OuterStride<>(scratch.cols()));
}

/// `m` as a matrix of `to`'s primitives (moved across when they differ in memory).
Mat moveTo(const Mat& m, CodecPrimitives& from, CodecPrimitives& to)
{
    if (&from == &to || !m)
        return m;
    RowMatrixXf scratch;
    return to.upload(hostView(m, from, scratch));
}

/// A transform applied to a Mat on the CPU (read in place, the result a new host matrix).
Mat forwardOnCpu(const TransformPlan& t, const Mat& m, CodecPrimitives& at)
{
    RowMatrixXf scratch, next;
    t.forward(hostView(m, at, scratch), next);
    return hostMat(std::move(next));
}

/// Quantizes rows grouped by their per-token widths (the A^2 policy), each group at its width.
void roundTripByToken(const QuantizerPlan& q, const Eigen::Ref<const RowMatrixXf>& xr, const std::vector<int>& tokenBits, RowMatrixXf& xHat,
                      int& saturated)
{
    xHat.resize(xr.rows(), xr.cols());
    std::vector<int> widths(tokenBits);
    std::sort(widths.begin(), widths.end());
    widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
    for (int b : widths) {
        std::vector<Eigen::Index> rows;
        for (Eigen::Index r = 0; r < xr.rows(); ++r)
            if (tokenBits[static_cast<std::size_t>(r)] == b)
                rows.push_back(r);
        RowMatrixXf sub(static_cast<Eigen::Index>(rows.size()), xr.cols()), subHat;
        for (std::size_t i = 0; i < rows.size(); ++i)
            sub.row(static_cast<Eigen::Index>(i)) = xr.row(rows[i]);
        q.roundTrip(sub, b, subHat, saturated);
        for (std::size_t i = 0; i < rows.size(); ++i)
            xHat.row(rows[i]) = subHat.row(static_cast<Eigen::Index>(i));
    }
}

} // namespace

namespace {

/// One encode of a path, in its phases: transforms and the quantizer, the queries' scores against the
/// quantized rows, the residual stages, the transforms undone. Each phase runs on the primitives that
/// offer it (the rest on the CPU, noted in `cpuStages`); intermediates are released as soon as no
/// later phase reads them (at paper scale each is 16 MB).
class PathEncode {
public:
    PathEncode(const PathPlan& plan, CodecPrimitives& prims, std::vector<std::string>* cpuStages)
        : m_plan(plan), m_prims(prims), m_cpu(cpuPrimitives()), m_cpuStages(cpuStages)
    {
    }

    PathResult run(const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries)
    {
        quantize(x);
        if (queries)
            scoreQueries(*queries);
        for (std::size_t i = 0; i < m_plan.residuals.size(); ++i)
            applyResidual(i, x, queries != nullptr);
        m_stored.reset();
        m_queries.reset();
        PathResult out;
        CodecPrimitives* at = undoTransforms();
        take(m_back, *at, out.reconstruction);
        if (queries) {
            take(m_scores, m_prims, out.scores);
            if (m_baseScores)
                take(m_baseScores, m_prims, out.baseScores);
        }
        out.saturatedNorms = m_saturated;
        return out;
    }

private:
    void noteCpu(const std::string& what)
    {
        if (m_cpuStages && std::find(m_cpuStages->begin(), m_cpuStages->end(), what) == m_cpuStages->end())
            m_cpuStages->push_back(what);
    }

    /// Transforms, then the quantizer. One signed WHT followed by a norm + codebook quantizer is
    /// fused (no rotated copy is kept unless a residual needs it).
    void quantize(const Eigen::Ref<const RowMatrixXf>& x)
    {
        const QuantizerPlan& quantizer = *m_plan.quantizer;
        const bool anyResidual = !m_plan.residuals.empty();
        const bool deviceCodebook = quantizer.codebook() && m_plan.tokenBits.empty() && m_prims.offers(Primitive::NormCodebook);
        Mat X = m_prims.view(x);
        const std::vector<float>* onlySigns = m_plan.transforms.size() == 1 ? m_plan.transforms.front()->whtSigns() : nullptr;
        if (onlySigns && deviceCodebook && m_prims.offers(Primitive::RotateNormCodebook)) {
            m_xHat = m_prims.rotateNormCodebook(X, *onlySigns, *quantizer.codebook(), quantizer.scalarFormat(), m_saturated,
                                                anyResidual ? &m_stored : nullptr);
            return;
        }
        m_stored = std::move(X);
        CodecPrimitives* at = &m_prims;
        for (std::size_t i = 0; i < m_plan.transforms.size(); ++i) {
            const TransformPlan& t = *m_plan.transforms[i];
            if (const auto* signs = t.whtSigns(); signs && at->offers(Primitive::Rotate)) {
                m_stored = at->rotate(m_stored, *signs);
            } else {
                if (at != &m_cpu)
                    noteCpu(m_plan.config.transforms[i].kind);
                m_stored = forwardOnCpu(t, m_stored, *at);
                at = &m_cpu;
            }
        }
        if (deviceCodebook) {
            m_stored = moveTo(m_stored, *at, m_prims);
            m_xHat = m_prims.normCodebook(m_stored, *quantizer.codebook(), quantizer.scalarFormat(), m_saturated);
            return;
        }
        if (&m_prims != &m_cpu)
            noteCpu(m_plan.config.quantizer.kind);
        RowMatrixXf scratch, hat;
        const auto xr = hostView(m_stored, *at, scratch);
        if (!m_plan.tokenBits.empty())
            roundTripByToken(quantizer, xr, m_plan.tokenBits, hat, m_saturated);
        else
            quantizer.roundTrip(xr, m_plan.bits, hat, m_saturated);
        m_xHat = &m_prims == &m_cpu ? hostMat(std::move(hat)) : m_prims.upload(hat);
        m_stored = anyResidual ? moveTo(m_stored, *at, m_prims) : Mat{};
    }

    /// Queries into the stored basis, and the cache's scores from the quantized rows.
    void scoreQueries(const RowMatrixXf& queries)
    {
        m_queries = m_prims.view(queries);
        CodecPrimitives* at = &m_prims;
        for (const auto& t : m_plan.transforms) {
            if (const auto* signs = t->whtSigns(); signs && at->offers(Primitive::Rotate)) {
                m_queries = at->rotate(m_queries, *signs);
            } else {
                m_queries = forwardOnCpu(*t, m_queries, *at);
                at = &m_cpu;
            }
        }
        m_queries = moveTo(m_queries, *at, m_prims);
        m_scores = m_prims.gemmNT(m_queries, m_xHat, m_plan.scoreScale);
    }

    /// Residual stage `i`, on the primitives it can run on.
    void applyResidual(std::size_t i, const Eigen::Ref<const RowMatrixXf>& x, bool withQueries)
    {
        const ResidualPlan& r = *m_plan.residuals[i];
        CodecPrimitives& on = r.runsOn(m_prims) ? m_prims : m_cpu;
        if (&on != &m_prims)
            noteCpu(m_plan.config.residuals[i].kind);
        Mat s = moveTo(m_stored, m_prims, on), h = moveTo(m_xHat, m_prims, on), q = moveTo(m_queries, m_prims, on);
        Mat sc = moveTo(m_scores, m_prims, on), base = moveTo(m_baseScores, m_prims, on);
        m_xHat.reset(); // h is the one copy the stage corrects
        ResidualIO io{x, s, h, q, withQueries ? &sc : nullptr, withQueries && !m_baseScores ? &base : nullptr, m_saturated,
                      m_plan.scoreScale, on};
        r.apply(io);
        m_xHat = moveTo(h, on, m_prims);
        if (withQueries) {
            m_scores = moveTo(sc, on, m_prims);
            if (!m_baseScores)
                m_baseScores = moveTo(base, on, m_prims);
        }
    }

    /// Transforms undone, last first, into m_back; returns the primitives m_back lives on.
    CodecPrimitives* undoTransforms()
    {
        m_back = std::move(m_xHat);
        CodecPrimitives* at = &m_prims;
        for (std::size_t i = m_plan.transforms.size(); i-- > 0;) {
            const TransformPlan& t = *m_plan.transforms[i];
            if (const auto* signs = t.whtSigns(); signs && at->offers(Primitive::Rotate)) {
                // The width the inverse returns to: the previous transform's output, or d.
                const int to = i == 0 ? m_plan.d : m_plan.transforms[i - 1]->outDim();
                m_back = at->unrotate(m_back, *signs, to);
            } else {
                RowMatrixXf scratch, next;
                t.inverse(hostView(m_back, *at, scratch), next);
                m_back = hostMat(std::move(next));
                at = &m_cpu;
            }
        }
        return at;
    }

    /// A matrix's rows into `into`: moved when it is the one host copy, else downloaded.
    static void take(Mat& m, CodecPrimitives& on, RowMatrixXf& into)
    {
        if (RowMatrixXf* h = m->host(); h && m.use_count() == 1)
            into = std::move(*h);
        else
            on.download(m, into);
        m.reset();
    }

    const PathPlan& m_plan;
    CodecPrimitives& m_prims;
    CodecPrimitives& m_cpu;
    std::vector<std::string>* m_cpuStages;
    int m_saturated = 0;
    Mat m_stored, m_xHat, m_queries, m_scores, m_baseScores, m_back;
};

} // namespace

PathResult encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries,
                      CodecPrimitives& prims, std::vector<std::string>* cpuStages)
{
    assert(x.cols() == plan.d && "encodePath: x must have d columns");
    return PathEncode(plan, prims, cpuStages).run(x, queries);
}

PathResult encodePathCpu(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries)
{
    return encodePath(plan, x, queries, cpuPrimitives());
}

PathResult encodePathCausal(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries,
                            const CausalOptions& options, const TokenContext* tokens)
{
    const Eigen::Index n = x.rows();
    const Eigen::Index group = plan.causalGroup();
    // Complete groups, then the rows the recent window keeps exact.
    const Eigen::Index complete = (n / group) * group;
    const Eigen::Index quantized = std::max<Eigen::Index>(0, std::min(complete, n - options.residual));
    PathResult out;
    out.reconstruction = x;
    if (queries) {
        out.scores.noalias() = *queries * x.transpose();
        out.scores *= plan.scoreScale;
        out.baseScores = out.scores;
    }
    // Rows of a complete group are encoded from that group alone: one call per group (a codec that
    // encodes every row alone, group 1, takes all its rows in one call: the same codes).
    const Eigen::Index step = group == 1 ? std::max<Eigen::Index>(quantized, 1) : group;
    bool anyBase = false;
    for (Eigen::Index start = 0; start + step <= quantized || (group == 1 && start < quantized); start += step) {
        const Eigen::Index rows = std::min(step, quantized - start);
        PathPlan one = plan;
        if (tokens && plan.tokenPolicy) {
            const RowMatrixXf keys = tokens->keys.middleRows(start, rows);
            const RowMatrixXf values = tokens->values.middleRows(start, rows);
            const TokenContext slice{keys, values, tokens->calibrationQueries, tokens->scoreScale};
            one.tokenBits = plan.tokenPolicy->tokenBits(slice, plan.bits);
        } else {
            one.tokenBits.clear();
        }
        const PathResult part = encodePathCpu(one, x.middleRows(start, rows), queries);
        out.reconstruction.middleRows(start, rows) = part.reconstruction;
        out.saturatedNorms += part.saturatedNorms;
        if (queries) {
            out.scores.middleCols(start, rows) = part.scores;
            if (part.baseScores.size() > 0) {
                out.baseScores.middleCols(start, rows) = part.baseScores;
                anyBase = true;
            } else {
                out.baseScores.middleCols(start, rows) = part.scores;
            }
        }
    }
    if (queries && !anyBase)
        out.baseScores.resize(0, 0);
    return out;
}

} // namespace kvlens
