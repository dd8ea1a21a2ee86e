// SPDX-License-Identifier: GPL-3.0-or-later
// The teaching chain for one query, computed in double from the same CPU encoder the experiments use.
#include "core/metrics/teaching.h"

#include "core/attention/attention.h"
#include "core/io/csv.h"
#include "core/quant/path.h"
#include "core/quant/scheme.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace kvlens {

namespace {

constexpr int kMaxDimension = 4096;
constexpr int kMaxTokens = 1 << 16;
constexpr double kMaxScoreScale = 100.0;

bool cancelled(const std::atomic<bool>* cancel)
{
    return cancel && cancel->load(std::memory_order_relaxed);
}

Error cancelledError()
{
    return Error::cancellation("teaching");
}

/// sum_j w_j x_j in double (w: N, x: N x d).
Eigen::VectorXd weightedSum(std::span<const double> w, const Eigen::Ref<const RowMatrixXf>& x)
{
    Eigen::VectorXd out = Eigen::VectorXd::Zero(x.cols());
    for (Eigen::Index j = 0; j < x.rows(); ++j)
        out += w[static_cast<std::size_t>(j)] * x.row(j).transpose().cast<double>();
    return out;
}

Status checkCommon(const std::string& regimeName, int d, double scoreScale)
{
    if (!findRegime(regimeName))
        return Error{"teaching.regime", "unknown regime '" + regimeName + "'; one of " + regimeNames()};
    if (d < 2 || d > kMaxDimension)
        return Error{"teaching.d", "must be in [2, " + std::to_string(kMaxDimension) + "], got " + std::to_string(d)};
    if (!std::isfinite(scoreScale) || scoreScale <= 0.0 || scoreScale > kMaxScoreScale)
        return Error{"teaching.score_scale", "must be in (0, 100], got " + std::to_string(scoreScale)};
    return Ok{};
}

/// Draws one query and `tokens` keys and values; the query is multiplied by the score scale.
Result<Dataset> drawData(const std::string& regimeName, const RegimeParams& given, int d, int tokens, double scoreScale,
                         EngineKind engine, std::uint64_t seed)
{
    const Regime* regime = findRegime(regimeName);
    const DataShape shape{d, tokens, 1, 0};
    auto params = regime->normalize(given.empty() ? regime->defaults() : given, shape);
    if (!params)
        return params.error();
    auto data = regime->generate(*params, shape, engine, seed);
    if (!data)
        return data.error();
    data->queries *= static_cast<float>(scoreScale);
    return data;
}

} // namespace

double effectiveTokens(std::span<const double> probs)
{
    double sum2 = 0.0;
    for (double p : probs)
        sum2 += p * p;
    return sum2 > 0.0 ? 1.0 / sum2 : 0.0;
}

double logLogSlope(std::span<const double> x, std::span<const double> y)
{
    double sx = 0.0, sy = 0.0, sxx = 0.0, sxy = 0.0;
    int n = 0;
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
        if (!(x[i] > 0.0) || !(y[i] > 0.0))
            continue;
        const double lx = std::log(x[i]), ly = std::log(y[i]);
        sx += lx;
        sy += ly;
        sxx += lx * lx;
        sxy += lx * ly;
        ++n;
    }
    const double denominator = n * sxx - sx * sx;
    if (n < 2 || !(denominator > 0.0))
        return std::numeric_limits<double>::quiet_NaN();
    return (n * sxy - sx * sy) / denominator;
}

std::vector<double> densityHistogram(std::span<const float> values, std::span<const double> edges)
{
    if (edges.size() < 2)
        return {};
    std::vector<double> density(edges.size() - 1, 0.0);
    for (float v : values) {
        if (!(v >= edges.front() && v <= edges.back()))
            continue;
        // The last bin is closed on the right so the maximum lands in it.
        auto bin = static_cast<std::size_t>(std::upper_bound(edges.begin(), edges.end(), static_cast<double>(v))
                                            - edges.begin()) - 1;
        density[std::min(bin, density.size() - 1)] += 1.0;
    }
    for (std::size_t b = 0; b < density.size(); ++b)
        density[b] /= static_cast<double>(values.size()) * (edges[b + 1] - edges[b]);
    return density;
}

ScoreNoiseChain scoreNoiseChain(std::span<const float> scores, std::span<const float> scoresHat,
                                const Eigen::Ref<const RowMatrixXf>& values, const Eigen::Ref<const RowMatrixXf>& valuesHat)
{
    assert(scores.size() == scoresHat.size() && "scoreNoiseChain: one estimate per score");
    assert(static_cast<std::size_t>(values.rows()) == scores.size() && values.rows() == valuesHat.rows());
    ScoreNoiseChain c;
    const std::size_t n = scores.size();
    if (n == 0)
        return c;
    const std::vector<double> p = softmaxVector(scores);
    const std::vector<double> pHat = softmaxVector(scoresHat);
    c.probsHat.assign(pHat.begin(), pHat.end());
    c.deltaS.resize(n);
    double sum = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        c.deltaS[j] = scoresHat[j] - scores[j];
        sum += c.deltaS[j];
    }
    c.meanDeltaS = sum / static_cast<double>(n);
    double var = 0.0, inflation = 0.0, partition = 0.0, pMean = 0.0, pSquare = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        const double centred = c.deltaS[j] - c.meanDeltaS;
        var += centred * centred;
        const double factor = std::exp(centred);
        inflation += factor;
        partition += p[j] * factor;
        pMean += p[j] * c.deltaS[j];
        pSquare += p[j] * static_cast<double>(c.deltaS[j]) * c.deltaS[j];
    }
    c.varianceDeltaS = var / static_cast<double>(n);
    c.jensenFactor = std::exp(0.5 * c.varianceDeltaS);
    c.measuredInflation = inflation / static_cast<double>(n);
    c.partitionInflation = partition;
    c.fisher = std::max(0.0, pSquare - pMean * pMean);
    c.kl = klFromScores(p, scores, scoresHat);

    const Eigen::VectorXd o = weightedSum(p, values);
    const Eigen::VectorXd oHat = weightedSum(pHat, valuesHat);
    const Eigen::VectorXd oKeyOnly = weightedSum(pHat, values);
    const Eigen::VectorXd oValueOnly = weightedSum(p, valuesHat);
    const double norm = o.norm();
    if (norm > 0.0) {
        c.outputError = (oHat - o).norm() / norm;
        c.keyOutputError = (oKeyOnly - o).norm() / norm;
        c.valueOutputError = (oValueOnly - o).norm() / norm;
    }
    return c;
}

Result<ValuePathSweep> valuePathSweep(const ValuePathConfig& config, const std::atomic<bool>* cancel)
{
    if (auto ok = checkCommon(config.regime, config.d, config.scoreScale); !ok)
        return ok.error();
    if (config.tokens.empty())
        return Error{"teaching.sweep_tokens", "needs at least one token count"};
    for (int n : config.tokens)
        if (n < 1 || n > kMaxTokens)
            return Error{"teaching.sweep_tokens", "each must be in [1, 65536], got " + std::to_string(n)};
    if (!std::isfinite(config.noiseLevel) || config.noiseLevel < 0.0 || config.noiseLevel > 10.0)
        return Error{"teaching.noise_level", "must be in [0, 10], got " + std::to_string(config.noiseLevel)};
    if (config.repeats < 1 || config.repeats > 1000)
        return Error{"teaching.repeats", "must be in [1, 1000], got " + std::to_string(config.repeats)};

    const int maxTokens = *std::max_element(config.tokens.begin(), config.tokens.end());
    auto data = drawData(config.regime, config.regimeParams, config.d, maxTokens, config.scoreScale, config.engine,
                         config.seed);
    if (!data)
        return data.error();
    const RowMatrixXf& keys = data->keys;
    const RowMatrixXf& values = data->values;
    const Eigen::VectorXf q = data->queries.row(0).transpose();
    const double invSqrtD = 1.0 / std::sqrt(static_cast<double>(config.d));
    const double rmsK = std::sqrt(keys.rowwise().squaredNorm().cast<double>().mean() / config.d);
    Eigen::VectorXf s = keys * q;
    s *= static_cast<float>(invSqrtD);

    ValuePathSweep sweep;
    sweep.config = config;
    const std::size_t points = config.tokens.size();
    std::vector<double> valueSq(points, 0.0), mass(points, 0.0), kl(points, 0.0), keyOutSq(points, 0.0);
    std::vector<std::vector<double>> probs(points);
    for (std::size_t i = 0; i < points; ++i)
        probs[i] = softmaxVector(std::span<const float>(s.data(), static_cast<std::size_t>(config.tokens[i])));

    // One noise stream for the whole sweep, so the points of a draw share their first tokens.
    Rng rng(config.engine, config.seed, Stream::SchemeExtra, 0x7eac);
    RowMatrixXf keyNoise(maxTokens, config.d), valueNoise(maxTokens, config.d);
    std::vector<float> sTilde(static_cast<std::size_t>(maxTokens));
    for (int r = 0; r < config.repeats; ++r) {
        if (cancelled(cancel))
            return cancelledError();
        rng.fillNormal(keyNoise.data(), static_cast<std::size_t>(keyNoise.size()));
        rng.fillNormal(valueNoise.data(), static_cast<std::size_t>(valueNoise.size()));
        // Score noise of the perturbed keys: ds_j = eta rms_k (q . e_j) / sqrt(d).
        const Eigen::VectorXf noiseScores = keyNoise * q;
        double sumDs = 0.0, sumDs2 = 0.0;
        for (int j = 0; j < maxTokens; ++j) {
            const double ds = config.noiseLevel * rmsK * noiseScores[j] * invSqrtD;
            sTilde[static_cast<std::size_t>(j)] = static_cast<float>(s[j] + ds);
            sumDs += ds;
            sumDs2 += ds * ds;
        }
        if (r == 0) {
            const double mean = sumDs / maxTokens;
            sweep.scoreNoiseStd = std::sqrt(std::max(0.0, sumDs2 / maxTokens - mean * mean));
        }
        for (std::size_t i = 0; i < points; ++i) {
            const auto n = static_cast<std::size_t>(config.tokens[i]);
            const std::vector<double>& p = probs[i];
            const auto ni = static_cast<Eigen::Index>(n);
            // Value path: ||sum_j p_j e_j|| / rms_j ||e_j|| (eta and rms_v cancel).
            const Eigen::VectorXd readOut = weightedSum(p, valueNoise.topRows(ni));
            const double noiseRms2 = valueNoise.topRows(ni).rowwise().squaredNorm().cast<double>().mean();
            valueSq[i] += readOut.squaredNorm() / noiseRms2;
            // Key path: the reweighting the same relative noise on keys causes.
            const std::span<const float> sPrefix(s.data(), n), sTildePrefix(sTilde.data(), n);
            const std::vector<double> pTilde = softmaxVector(sTildePrefix);
            double moved = 0.0;
            std::vector<double> dp(n);
            for (std::size_t j = 0; j < n; ++j) {
                dp[j] = pTilde[j] - p[j];
                moved += std::abs(dp[j]);
            }
            mass[i] += 0.5 * moved;
            kl[i] += klFromScores(p, sPrefix, sTildePrefix);
            const double valueRms2 = values.topRows(ni).rowwise().squaredNorm().cast<double>().mean();
            keyOutSq[i] += weightedSum(dp, values.topRows(ni)).squaredNorm() / valueRms2;
        }
    }
    std::vector<double> neff(points), valueError(points), keyMass(points);
    for (std::size_t i = 0; i < points; ++i) {
        ValuePathPoint pt;
        pt.tokens = config.tokens[i];
        pt.effectiveTokens = effectiveTokens(probs[i]);
        pt.valueError = std::sqrt(valueSq[i] / config.repeats);
        pt.keyMassMoved = mass[i] / config.repeats;
        pt.keyKl = kl[i] / config.repeats;
        pt.keyOutputError = std::sqrt(keyOutSq[i] / config.repeats);
        neff[i] = pt.effectiveTokens;
        valueError[i] = pt.valueError;
        keyMass[i] = pt.keyMassMoved;
        sweep.points.push_back(pt);
    }
    sweep.valueSlope = logLogSlope(neff, valueError);
    sweep.keySlope = logLogSlope(neff, keyMass);
    return sweep;
}

Result<TeachingResult> computeTeaching(const TeachingConfig& config, const std::atomic<bool>* cancel)
{
    if (auto ok = checkCommon(config.regime, config.d, config.scoreScale); !ok)
        return ok.error();
    if (config.tokens < 2 || config.tokens > kMaxTokens)
        return Error{"teaching.tokens", "must be in [2, 65536], got " + std::to_string(config.tokens)};
    if (config.topTokens < 1 || config.histogramBins < 2 || config.histogramBins > 10000)
        return Error{"teaching.histogram_bins", "needs at least one top token and 2..10000 bins"};
    auto data = drawData(config.regime, config.regimeParams, config.d, config.tokens, config.scoreScale, config.engine,
                         config.seed);
    if (!data)
        return data.error();
    TeachingResult out;
    out.config = config;
    RowMatrixXf scores;
    attentionScores(data->queries, data->keys, 1.0f / std::sqrt(static_cast<float>(config.d)), scores);
    out.scores.assign(scores.data(), scores.data() + scores.size());
    out.probs = softmaxVector(out.scores);
    out.effectiveTokens = effectiveTokens(out.probs);
    for (double p : out.probs)
        if (p > 0.0)
            out.entropy -= p * std::log(p);
    std::vector<int> order(out.probs.size());
    std::iota(order.begin(), order.end(), 0);
    const auto top = static_cast<std::size_t>(std::min(config.topTokens, config.tokens));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(), [&](int a, int b) {
        const double pa = out.probs[static_cast<std::size_t>(a)], pb = out.probs[static_cast<std::size_t>(b)];
        return pa > pb || (pa == pb && a < b);
    });
    out.topTokens.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top));

    for (std::size_t i = 0; i < out.schemes.size(); ++i) {
        if (cancelled(cancel))
            return cancelledError();
        const std::string field = "teaching.schemes[" + std::to_string(i) + "]";
        const auto scheme = findScheme(config.schemes[i]);
        if (!scheme)
            return Error{field, "unknown scheme '" + config.schemes[i] + "'; one of " + schemeNames()};
        if (needsCalibration(*scheme))
            return Error{field, "'" + scheme->name + "' needs a calibration set; pick a data-oblivious scheme"};
        if (auto ok = validateScheme(*scheme, {config.budget}, config.d, field); !ok)
            return ok.error();
        const PathPlan keyPlan =
            planPath(scheme->key, config.budget, config.d, PathSite::Keys, nullptr, config.engine, config.seed);
        const PathResult keyPath = encodePathCpu(keyPlan, data->keys, &data->queries);
        const PathPlan valuePlan =
            planPath(scheme->value, config.budget, config.d, PathSite::Values, nullptr, config.engine, config.seed);
        const PathResult valuePath = encodePathCpu(valuePlan, data->values, nullptr);
        TeachingScheme& t = out.schemes[i];
        t.name = scheme->name;
        t.keyBits = pathBitsPerCoordinate(keyPlan, config.tokens);
        t.valueBits = pathBitsPerCoordinate(valuePlan, config.tokens);
        const double keyNorm2 = data->keys.squaredNorm();
        t.keyRelativeError = keyNorm2 > 0.0 ? std::sqrt((keyPath.reconstruction - data->keys).squaredNorm() / keyNorm2) : 0.0;
        t.chain = scoreNoiseChain(out.scores, std::span<const float>(keyPath.scores.data(), out.scores.size()),
                                  data->values, valuePath.reconstruction);
    }

    // Shared, symmetric bins with one centred on 0, wide enough for both schemes.
    double reach = 0.0;
    for (const TeachingScheme& t : out.schemes)
        for (float ds : t.chain.deltaS)
            reach = std::max(reach, std::abs(static_cast<double>(ds)));
    reach = reach > 0.0 ? reach * (1.0 + 1e-6) : 1.0;
    const int bins = config.histogramBins | 1;
    out.binEdges.resize(static_cast<std::size_t>(bins) + 1);
    for (int b = 0; b <= bins; ++b)
        out.binEdges[static_cast<std::size_t>(b)] = -reach + 2.0 * reach * b / bins;
    for (TeachingScheme& t : out.schemes)
        t.histogram = densityHistogram(t.chain.deltaS, out.binEdges);

    if (config.sweepRepeats > 0 && !config.sweepTokens.empty()) {
        ValuePathConfig v;
        v.regime = config.regime;
        v.regimeParams = config.regimeParams;
        v.d = config.d;
        v.tokens = config.sweepTokens;
        v.scoreScale = config.scoreScale;
        v.noiseLevel = std::max(out.schemes[0].keyRelativeError, out.schemes[1].keyRelativeError);
        v.repeats = config.sweepRepeats;
        v.engine = config.engine;
        v.seed = config.seed;
        auto sweep = valuePathSweep(v, cancel);
        if (!sweep)
            return sweep.error();
        out.valuePath = std::move(sweep).value();
    }
    return out;
}

std::string teachingCsv(const TeachingResult& r)
{
    CsvWriter csv({"quantity", "scheme", "index", "value"});
    auto row = [&](std::string_view quantity, std::string_view scheme, long long index, double value) {
        csv.add(quantity).add(scheme).add(index).add(value);
        csv.endRow();
    };
    const TeachingConfig& c = r.config;
    row("config.d", "", -1, c.d);
    row("config.tokens", "", -1, c.tokens);
    row("config.budget", "", -1, c.budget);
    row("config.score_scale", "", -1, c.scoreScale);
    row("config.seed", "", -1, static_cast<double>(c.seed));
    row("entropy", "", -1, r.entropy);
    row("effective_tokens", "", -1, r.effectiveTokens);
    for (std::size_t b = 0; b < r.binEdges.size(); ++b)
        row("bin_edge", "", static_cast<long long>(b), r.binEdges[b]);
    for (int j : r.topTokens)
        row("p", "", j, r.probs[static_cast<std::size_t>(j)]);
    for (const TeachingScheme& t : r.schemes) {
        const ScoreNoiseChain& k = t.chain;
        row("key_bits", t.name, -1, t.keyBits);
        row("value_bits", t.name, -1, t.valueBits);
        row("key_relative_error", t.name, -1, t.keyRelativeError);
        row("score_error_mean", t.name, -1, k.meanDeltaS);
        row("score_error_variance", t.name, -1, k.varianceDeltaS);
        row("fisher_score_error", t.name, -1, k.fisher);
        row("jensen_factor", t.name, -1, k.jensenFactor);
        row("measured_inflation", t.name, -1, k.measuredInflation);
        row("partition_inflation", t.name, -1, k.partitionInflation);
        row("kl", t.name, -1, k.kl);
        row("output_error", t.name, -1, k.outputError);
        row("output_error_key_path", t.name, -1, k.keyOutputError);
        row("output_error_value_path", t.name, -1, k.valueOutputError);
        for (std::size_t b = 0; b < t.histogram.size(); ++b)
            row("score_error_density", t.name, static_cast<long long>(b), t.histogram[b]);
        for (int j : r.topTokens)
            row("p_hat", t.name, j, k.probsHat[static_cast<std::size_t>(j)]);
    }
    const ValuePathSweep& v = r.valuePath;
    row("sweep.noise_level", "", -1, v.config.noiseLevel);
    row("sweep.score_noise_std", "", -1, v.scoreNoiseStd);
    row("sweep.value_slope", "", -1, v.valueSlope);
    row("sweep.key_slope", "", -1, v.keySlope);
    for (std::size_t i = 0; i < v.points.size(); ++i) {
        const ValuePathPoint& p = v.points[i];
        const auto index = static_cast<long long>(i);
        row("sweep.tokens", "", index, p.tokens);
        row("sweep.effective_tokens", "", index, p.effectiveTokens);
        row("sweep.value_error", "value path", index, p.valueError);
        row("sweep.key_mass_moved", "key path", index, p.keyMassMoved);
        row("sweep.key_kl", "key path", index, p.keyKl);
        row("sweep.key_output_error", "key path", index, p.keyOutputError);
    }
    return csv.text();
}

} // namespace kvlens
