// SPDX-License-Identifier: GPL-3.0-or-later
// The trial pipeline, shared by every backend: host-side planning, backend stages, host-side metrics.
#include "core/experiment/trial.h"

#include "core/common/simd.h"
#include "core/metrics/vector_metrics.h"
#include "core/quant/token_policy.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>

namespace kvlens {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// Strided subsample of at most `cap` entries (the whole array if shorter).
VectorSamples sample(const RowErrors& e, int cap)
{
    VectorSamples s;
    const auto n = e.snrDb.size();
    if (cap <= 0 || n == 0)
        return s;
    const std::size_t count = std::min<std::size_t>(n, static_cast<std::size_t>(cap));
    s.snrDb.reserve(count);
    s.phi.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t at = i * n / count;
        s.snrDb.push_back(e.snrDb[at]);
        s.phi.push_back(e.phi[at]);
    }
    return s;
}

double mean(const std::vector<float>& v)
{
    double sum = 0.0;
    for (float x : v)
        sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

struct Moments {
    double mean = 0.0, variance = 0.0;
    double logMeanExp = 0.0; ///< log mean exp(a - b), overflow-free
};

/// Mean, population variance and log-mean-exp of a - b over the entries that are not masked
/// out (b == kMaskedScore: a key in a query's future), scalar: causal runs are small.
Moments maskedDifferenceMoments(const RowMatrixXf& a, const RowMatrixXf& b)
{
    double sum = 0.0, sum2 = 0.0, maximum = -std::numeric_limits<double>::infinity();
    long long count = 0;
    const Eigen::Index n = a.size();
    for (Eigen::Index i = 0; i < n; ++i) {
        if (b.data()[i] == kMaskedScore)
            continue;
        const double d = static_cast<double>(a.data()[i]) - b.data()[i];
        sum += d;
        sum2 += d * d;
        maximum = std::max(maximum, d);
        ++count;
    }
    double sumExp = 0.0;
    for (Eigen::Index i = 0; i < n; ++i)
        if (b.data()[i] != kMaskedScore)
            sumExp += std::exp(static_cast<double>(a.data()[i]) - b.data()[i] - maximum);
    Moments m;
    const double c = static_cast<double>(std::max<long long>(count, 1));
    m.mean = sum / c;
    m.variance = std::max(0.0, sum2 / c - m.mean * m.mean);
    m.logMeanExp = maximum + std::log(sumExp / c);
    return m;
}

/// Mean, population variance and log-mean-exp of a - b over all entries: eight lane-wise double
/// partial sums and vector exponentials (simd::exp), in a fixed order.
Moments differenceMoments(const RowMatrixXf& a, const RowMatrixXf& b)
{
    using namespace simd;
    const Eigen::Index n = a.size();
    const float* pa = a.data();
    const float* pb = b.data();
    Double8 vsum{}, vsum2{};
    Float8 vmax = broadcast(-std::numeric_limits<float>::infinity());
    Eigen::Index i = 0;
    for (; i + 8 <= n; i += 8) {
        const Float8 df = load(pa + i) - load(pb + i);
        const Double8 d = widen(load(pa + i)) - widen(load(pb + i));
        vsum += d;
        vsum2 += d * d;
        vmax = df > vmax ? df : vmax;
    }
    double sum = simd::sum(vsum), sum2 = simd::sum(vsum2), maximum = -std::numeric_limits<double>::infinity();
    for (int l = 0; l < 8; ++l)
        maximum = std::max(maximum, static_cast<double>(vmax[l]));
    for (; i < n; ++i) {
        const double d = static_cast<double>(pa[i]) - pb[i];
        sum += d;
        sum2 += d * d;
        maximum = std::max(maximum, static_cast<double>(static_cast<float>(pa[i] - pb[i])));
    }
    // Float exponentials (~1e-7 relative) summed in double: plenty for a log-mean.
    const auto shift = static_cast<float>(maximum);
    const Float8 s8 = broadcast(shift);
    Double8 vexp{};
    i = 0;
    for (; i + 8 <= n; i += 8)
        vexp += widen(simd::exp(load(pa + i) - load(pb + i) - s8));
    double sumExp = simd::sum(vexp);
    for (; i < n; ++i)
        sumExp += simd::exp(broadcast(pa[i] - pb[i] - shift))[0];
    Moments m;
    m.mean = sum / static_cast<double>(n);
    m.variance = std::max(0.0, sum2 / static_cast<double>(n) - m.mean * m.mean);
    m.logMeanExp = maximum + std::log(sumExp / static_cast<double>(n));
    return m;
}

} // namespace

void applyCausalMask(const Dataset& data, RowMatrixXf& scores)
{
    if (!data.causal() || scores.size() == 0)
        return;
    for (Eigen::Index i = 0; i < scores.rows(); ++i) {
        const int t = data.queryPositions[static_cast<std::size_t>(i)];
        for (Eigen::Index j = 0; j < scores.cols(); ++j)
            if (data.keyPositions[static_cast<std::size_t>(j)] > t)
                scores(i, j) = kMaskedScore;
    }
}

Result<TrialGroup> prepareTrialGroup(const ExperimentSpec& spec, int point, int seedIndex, ComputeBackend& backend,
                                     const Dataset* fixedData)
{
    const Regime* regime = findRegime(spec.regime);
    if (!regime)
        return Error{"regime.name", "unknown regime '" + spec.regime + "'"};
    TrialGroup g;
    g.point = point;
    g.seedIndex = seedIndex;
    g.seed = spec.seed(seedIndex);
    const DataShape shape{spec.d, spec.tokens, spec.queries, spec.calibrationRows()};
    if (fixedData) {
        g.data = *fixedData;
    } else {
        auto data = regime->generate(spec.regimeParams, shape, spec.engine, g.seed);
        if (!data)
            return data.error();
        g.data = std::move(data).value();
    }
    if (spec.scoreScale != 1.0) {
        const auto c = static_cast<float>(spec.scoreScale);
        g.data.queries *= c;
        g.data.calibrationQueries *= c;
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(spec.d));
    backend.scores(g.data.queries, g.data.keys, scale, g.scores);
    applyCausalMask(g.data, g.scores);
    backend.attend(g.scores, g.data.values, g.probs, g.logSumExp, g.output);
    // Exact attention must be finite, or no metric of the group would mean anything.
    for (std::size_t i = 0; i < g.logSumExp.size(); ++i)
        if (!std::isfinite(g.logSumExp[i]))
            return Error{"score_scale", "the exact attention scores of query " + std::to_string(i)
                                            + " are not finite (score_scale x |q| |k| overflows float32); "
                                              "rescale the data or lower score_scale"};
    g.meanQueryNorm2 = g.data.queries.rowwise().squaredNorm().cast<double>().mean();
    g.meanKeyNorm2 = g.data.keys.rowwise().squaredNorm().cast<double>().mean();
    return g;
}

TrialResult runTrial(const ExperimentSpec& spec, const TrialGroup& g, int schemeIndex, int budget,
                     ComputeBackend& backend)
{
    const SchemeConfig& scheme = spec.schemes[static_cast<std::size_t>(schemeIndex)];
    TrialResult t;
    t.key = TrialKey{g.point, schemeIndex, budget, g.seedIndex, g.seed};
    const Dataset& data = g.data;
    const RowMatrixXf* calibrationKeys = data.calibrationKeys.rows() > 0 ? &data.calibrationKeys : nullptr;
    const RowMatrixXf* calibrationValues = data.calibrationValues.rows() > 0 ? &data.calibrationValues : nullptr;

    const RowMatrixXf* calibrationQueries = data.calibrationQueries.rows() > 0 ? &data.calibrationQueries : nullptr;

    auto start = Clock::now();
    PlanInputs keyInputs{calibrationKeys, calibrationQueries, g.keySpectra};
    const PathPlan keyPlan = planPath(scheme.key, budget, spec.d, PathSite::Keys, keyInputs, spec.engine, g.seed);
    PathResult keyPath = backend.encodePath(keyPlan, data.keys, &data.queries);
    applyCausalMask(data, keyPath.scores);
    applyCausalMask(data, keyPath.baseScores);
    t.timings.keyPath = msSince(start);

    start = Clock::now();
    PlanInputs valueInputs{calibrationValues, calibrationQueries, g.valueSpectra};
    PathPlan valuePlan = planPath(scheme.value, budget, spec.d, PathSite::Values, valueInputs, spec.engine, g.seed);
    valuePlan.assignTokenBits(TokenContext{data.keys, data.values, calibrationQueries, valuePlan.scoreScale});
    const PathResult valuePath = backend.encodePath(valuePlan, data.values, nullptr);
    t.timings.valuePath = msSince(start);

    start = Clock::now();
    RowMatrixXf probsHat, outputHat;
    std::vector<double> logSumExpHat;
    backend.attend(keyPath.scores, valuePath.reconstruction, probsHat, logSumExpHat, outputHat);
    t.timings.attention = msSince(start);

    start = Clock::now();
    const RowErrors keyErrors = rowErrors(data.keys, keyPath.reconstruction);
    const RowErrors valueErrors = rowErrors(data.values, valuePath.reconstruction);
    const RowErrors outputErrors = rowErrors(g.output, outputHat);
    std::vector<float> valueError2(static_cast<std::size_t>(spec.tokens));
    for (int j = 0; j < spec.tokens; ++j)
        valueError2[static_cast<std::size_t>(j)] = (data.values.row(j) - valuePath.reconstruction.row(j)).squaredNorm();

    AttentionPair pair;
    pair.scores = &g.scores;
    pair.probs = &g.probs;
    pair.logSumExp = &g.logSumExp;
    pair.scoresHat = &keyPath.scores;
    pair.probsHat = &probsHat;
    pair.logSumExpHat = &logSumExpHat;
    QueryMetrics q = backend.queryMetrics(pair, valueError2, spec.metrics.topK);

    t.kl = std::move(q.kl);
    t.recall = std::move(q.recall);
    t.argmaxShift = std::move(q.argmaxShift);
    t.fisher = std::move(q.fisher);
    t.a2 = std::move(q.a2);
    t.meanEntropy = mean(q.entropy);
    t.snrT = outputErrors.snrDb;
    t.phiT = outputErrors.phi;
    t.relMseT = outputErrors.relErr;
    t.d2.resize(t.relMseT.size());
    for (std::size_t i = 0; i < t.d2.size(); ++i) {
        const double epsDir = 1.0 - std::cos(static_cast<double>(t.phiT[i]));
        t.d2[i] = static_cast<float>(static_cast<double>(t.relMseT[i]) * t.relMseT[i] + epsDir * epsDir);
    }

    t.sixD = SixD{mean(keyErrors.snrDb), mean(keyErrors.phi), mean(valueErrors.snrDb),
                  mean(valueErrors.phi), mean(outputErrors.snrDb), mean(outputErrors.phi)};
    t.relMseK = keyErrors.sumNorm2 > 0.0 ? keyErrors.sumError2 / keyErrors.sumNorm2 : 0.0;
    t.relMseV = valueErrors.sumNorm2 > 0.0 ? valueErrors.sumError2 / valueErrors.sumNorm2 : 0.0;
    auto effectiveDimension = [](const PathPlan& plan) {
        const PathDimension p = plan.dimension();
        EffectiveDimension e;
        if (p.reported) {
            e.used = p.used;
            e.participationRatio = p.participationRatio;
            e.gapRule = p.gapRule;
            e.byGap = p.byGap;
        }
        return e;
    };
    t.deffK = effectiveDimension(keyPlan);
    t.deffV = effectiveDimension(valuePlan);
    t.rawMseK = keyErrors.sumError2 / (static_cast<double>(spec.tokens) * spec.d);

    const auto moments = data.causal() ? maskedDifferenceMoments : differenceMoments;
    const Moments errors = moments(keyPath.scores, g.scores);
    t.scoreErrorMean = errors.mean;
    t.scoreErrorVar = errors.variance;
    t.logMeanExpScoreError = errors.logMeanExp;
    t.scoreErrorVarBase =
        keyPath.baseScores.size() > 0 ? moments(keyPath.baseScores, g.scores).variance : errors.variance;
    t.scoreErrorVarPredicted = keyPlan.predictedScoreErrorVariance(g.meanQueryNorm2, g.meanKeyNorm2, true);

    t.bits = BitAccounting{pathBitsPerCoordinate(keyPlan, spec.tokens), pathBitsPerCoordinate(valuePlan, spec.tokens)};
    t.saturatedNorms = keyPath.saturatedNorms + valuePath.saturatedNorms;
    t.samplesK = sample(keyErrors, spec.metrics.sampleCap);
    t.samplesV = sample(valueErrors, spec.metrics.sampleCap);
    t.samplesT = sample(outputErrors, spec.metrics.sampleCap);
    t.timings.metrics = msSince(start);
    return t;
}

} // namespace kvlens
