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

PathResult encodePath(const PathPlan& plan, const Eigen::Ref<const RowMatrixXf>& x, const RowMatrixXf* queries,
                      CodecPrimitives& prims, std::vector<std::string>* cpuStages)
{
    assert(x.cols() == plan.d && "encodePath: x must have d columns");
    CodecPrimitives& cpu = cpuPrimitives();
    auto noteCpu = [&](const std::string& what) {
        if (cpuStages && std::find(cpuStages->begin(), cpuStages->end(), what) == cpuStages->end())
            cpuStages->push_back(what);
    };
    PathResult out;
    int saturated = 0;
    const bool anyResidual = !plan.residuals.empty();
    const QuantizerPlan& quantizer = *plan.quantizer;
    const bool deviceCodebook = quantizer.codebook() && plan.tokenBits.empty() && prims.offers(Primitive::NormCodebook);

    // Transforms, then the quantizer. One signed WHT followed by a norm + codebook quantizer is
    // fused (no rotated copy is kept unless a residual needs it). Intermediates are released as
    // soon as no later stage reads them (at paper scale each is 16 MB).
    Mat stored, xHat;
    {
        Mat X = prims.view(x);
        const std::vector<float>* onlySigns = plan.transforms.size() == 1 ? plan.transforms.front()->whtSigns() : nullptr;
        if (onlySigns && deviceCodebook && prims.offers(Primitive::RotateNormCodebook)) {
            xHat = prims.rotateNormCodebook(X, *onlySigns, *quantizer.codebook(), quantizer.scalarFormat(), saturated,
                                            anyResidual ? &stored : nullptr);
        } else {
            stored = std::move(X);
            CodecPrimitives* at = &prims;
            for (std::size_t i = 0; i < plan.transforms.size(); ++i) {
                const TransformPlan& t = *plan.transforms[i];
                if (const auto* signs = t.whtSigns(); signs && at->offers(Primitive::Rotate)) {
                    stored = at->rotate(stored, *signs);
                } else {
                    if (at != &cpu)
                        noteCpu(plan.config.transforms[i].kind);
                    stored = forwardOnCpu(t, stored, *at);
                    at = &cpu;
                }
            }
            if (deviceCodebook) {
                stored = moveTo(stored, *at, prims);
                xHat = prims.normCodebook(stored, *quantizer.codebook(), quantizer.scalarFormat(), saturated);
            } else {
                if (&prims != &cpu)
                    noteCpu(plan.config.quantizer.kind);
                RowMatrixXf scratch, hat;
                const auto xr = hostView(stored, *at, scratch);
                if (!plan.tokenBits.empty())
                    roundTripByToken(quantizer, xr, plan.tokenBits, hat, saturated);
                else
                    quantizer.roundTrip(xr, plan.bits, hat, saturated);
                xHat = &prims == &cpu ? hostMat(std::move(hat)) : prims.upload(hat);
                stored = anyResidual ? moveTo(stored, *at, prims) : Mat{};
            }
        }
    }

    // Queries into the stored basis, and the cache's scores from the quantized rows.
    Mat Q, scores, baseScores;
    if (queries) {
        Q = prims.view(*queries);
        CodecPrimitives* at = &prims;
        for (const auto& t : plan.transforms) {
            if (const auto* signs = t->whtSigns(); signs && at->offers(Primitive::Rotate)) {
                Q = at->rotate(Q, *signs);
            } else {
                Q = forwardOnCpu(*t, Q, *at);
                at = &cpu;
            }
        }
        Q = moveTo(Q, *at, prims);
        scores = prims.gemmNT(Q, xHat, plan.scoreScale);
    }

    // Residual stages, each on the primitives it can run on.
    for (std::size_t i = 0; i < plan.residuals.size(); ++i) {
        const ResidualPlan& r = *plan.residuals[i];
        CodecPrimitives& on = r.runsOn(prims) ? prims : cpu;
        if (&on != &prims)
            noteCpu(plan.config.residuals[i].kind);
        Mat s = moveTo(stored, prims, on), h = moveTo(xHat, prims, on), q = moveTo(Q, prims, on);
        Mat sc = moveTo(scores, prims, on), base = moveTo(baseScores, prims, on);
        xHat.reset(); // h is the one copy the stage corrects
        ResidualIO io{x, s, h, q, queries ? &sc : nullptr, queries && !baseScores ? &base : nullptr, saturated,
                      plan.scoreScale, on};
        r.apply(io);
        xHat = moveTo(h, on, prims);
        if (queries) {
            scores = moveTo(sc, on, prims);
            if (!baseScores)
                baseScores = moveTo(base, on, prims);
        }
    }
    stored.reset();
    Q.reset();

    // Transforms undone, last first.
    Mat back = std::move(xHat);
    CodecPrimitives* at = &prims;
    for (std::size_t i = plan.transforms.size(); i-- > 0;) {
        const TransformPlan& t = *plan.transforms[i];
        if (const auto* signs = t.whtSigns(); signs && at->offers(Primitive::Rotate)) {
            // The width the inverse returns to: the previous transform's output, or d.
            const int to = i == 0 ? plan.d : plan.transforms[i - 1]->outDim();
            back = at->unrotate(back, *signs, to);
        } else {
            RowMatrixXf scratch, next;
            t.inverse(hostView(back, *at, scratch), next);
            back = hostMat(std::move(next));
            at = &cpu;
        }
    }
    auto take = [](Mat& m, CodecPrimitives& on, RowMatrixXf& into) {
        if (RowMatrixXf* h = m->host(); h && m.use_count() == 1)
            into = std::move(*h);
        else
            on.download(m, into);
        m.reset();
    };
    take(back, *at, out.reconstruction);
    if (queries) {
        take(scores, prims, out.scores);
        if (baseScores)
            take(baseScores, prims, out.baseScores);
    }
    out.saturatedNorms = saturated;
    return out;
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
