// SPDX-License-Identifier: GPL-3.0-or-later
// Per-token NLL, KL, Δp and top-1 agreement of two logits rows, and llama.cpp's summary of them.
#include "core/lm/next_token_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kvlens::lm {

namespace {

/// Index of the first maximum, and the log-sum-exp of the row, in double.
struct RowSummary {
    int argmax = 0;
    double logSumExp = 0.0;
};

RowSummary summarizeRow(std::span<const float> logits)
{
    RowSummary r;
    float best = logits[0];
    for (std::size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > best) {
            best = logits[i];
            r.argmax = static_cast<int>(i);
        }
    const double m = best;
    double sum = 0.0;
    for (const float l : logits)
        sum += std::exp(double(l) - m);
    r.logSumExp = m + std::log(sum);
    return r;
}

Percentiles percentiles(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    const std::span<const double> v(values);
    Percentiles p;
    p.maximum = v.back();
    p.p999 = percentileOfSorted(v, 0.999);
    p.p99 = percentileOfSorted(v, 0.99);
    p.p95 = percentileOfSorted(v, 0.95);
    p.p90 = percentileOfSorted(v, 0.90);
    p.p75 = percentileOfSorted(v, 0.75);
    p.median = percentileOfSorted(v, 0.5);
    p.p25 = percentileOfSorted(v, 0.25);
    p.p10 = percentileOfSorted(v, 0.10);
    p.p5 = percentileOfSorted(v, 0.05);
    p.p1 = percentileOfSorted(v, 0.01);
    p.p01 = percentileOfSorted(v, 0.001);
    p.minimum = v.front();
    return p;
}

} // namespace

Result<TokenStat> scoreToken(std::span<const float> baseLogits, std::span<const float> quantLogits, int correct)
{
    if (baseLogits.empty() || baseLogits.size() != quantLogits.size())
        return Error{"logits", "base and quantized rows must have the same, non-zero length; got "
                                   + std::to_string(baseLogits.size()) + " and " + std::to_string(quantLogits.size())};
    if (correct < 0 || static_cast<std::size_t>(correct) >= baseLogits.size())
        return Error{"correct", "token " + std::to_string(correct) + " is outside the vocabulary [0, "
                                    + std::to_string(baseLogits.size() - 1) + "]"};
    for (std::size_t i = 0; i < baseLogits.size(); ++i) {
        if (!std::isfinite(baseLogits[i]))
            return Error{"logits", "base logit " + std::to_string(i) + " is not finite"};
        if (!std::isfinite(quantLogits[i]))
            return Error{"logits", "quantized logit " + std::to_string(i) + " is not finite"};
    }
    const RowSummary base = summarizeRow(baseLogits), quant = summarizeRow(quantLogits);
    TokenStat s;
    s.topBase = base.argmax;
    s.topQ = quant.argmax;
    const double logPBase = double(baseLogits[static_cast<std::size_t>(correct)]) - base.logSumExp;
    const double logPQ = double(quantLogits[static_cast<std::size_t>(correct)]) - quant.logSumExp;
    s.nllBase = -logPBase;
    s.nllQ = -logPQ;
    s.deltaP = std::exp(logPQ) - std::exp(logPBase);
    // log p_base,i - log p_Q,i = (b_i - q_i) - (LSE_b - LSE_q): no log of a tiny probability is taken.
    const double shift = base.logSumExp - quant.logSumExp;
    double kl = 0.0;
    for (std::size_t i = 0; i < baseLogits.size(); ++i) {
        const double b = baseLogits[i];
        kl += std::exp(b - base.logSumExp) * ((b - double(quantLogits[i])) - shift);
    }
    s.kld = std::max(0.0, kl);
    return s;
}

MeanError meanAndError(double sum, double sumSquares, std::size_t count)
{
    if (count < 1)
        return {};
    const double n = static_cast<double>(count);
    const double mean = sum / n;
    const double variance = sumSquares / n - mean * mean;
    return {mean, variance > 0 && count > 10 ? std::sqrt(variance / (n - 1)) : 0.0};
}

double percentileOfSorted(std::span<const double> sorted, double fraction)
{
    if (fraction <= 0)
        return sorted.front();
    if (fraction >= 1)
        return sorted.back();
    const double position = fraction * double(sorted.size() - 1);
    const auto i = static_cast<std::size_t>(position);
    const double w = position - double(i);
    return (1 - w) * sorted[i] + w * sorted[std::min(i + 1, sorted.size() - 1)];
}

Result<NextTokenSummary> summarizeNextTokens(std::span<const TokenStat> tokens)
{
    if (tokens.size() < 2)
        return Error{"tokens", "a summary needs at least 2 scored tokens; got " + std::to_string(tokens.size())};
    double nllQ = 0, nllQ2 = 0, nllB = 0, nllB2 = 0, nllQB = 0, kld = 0, kld2 = 0, dp = 0, dp2 = 0, dp4 = 0;
    std::size_t sameTop = 0;
    std::vector<double> klds, dps;
    klds.reserve(tokens.size());
    dps.reserve(tokens.size());
    for (const TokenStat& t : tokens) {
        nllQ += t.nllQ;
        nllQ2 += t.nllQ * t.nllQ;
        nllB += t.nllBase;
        nllB2 += t.nllBase * t.nllBase;
        nllQB += t.nllQ * t.nllBase;
        kld += t.kld;
        kld2 += t.kld * t.kld;
        dp += t.deltaP;
        const double sq = t.deltaP * t.deltaP;
        dp2 += sq;
        dp4 += sq * sq;
        sameTop += t.sameTop() ? 1 : 0;
        klds.push_back(t.kld);
        dps.push_back(t.deltaP);
    }
    const std::size_t count = tokens.size();
    const double n = static_cast<double>(count);
    NextTokenSummary s;
    s.count = count;
    const MeanError logQ = meanAndError(nllQ, nllQ2, count), logB = meanAndError(nllB, nllB2, count);
    const double cov = count < 10 ? 0.0 : (nllQB / n - (nllQ / n) * (nllB / n)) / (n - 1);
    s.pplQ = {std::exp(logQ.mean), std::exp(logQ.mean) * logQ.error};
    s.pplBase = {std::exp(logB.mean), std::exp(logB.mean) * logB.error};
    const double seProduct = logQ.error * logB.error;
    s.nllCorrelation = seProduct > 0 ? cov / seProduct : std::numeric_limits<double>::quiet_NaN();
    const double ratioVar = logQ.error * logQ.error + logB.error * logB.error - 2.0 * cov;
    s.logPplRatio = {logQ.mean - logB.mean, std::sqrt(std::max(0.0, ratioVar))};
    s.pplRatio = {std::exp(s.logPplRatio.mean), std::exp(s.logPplRatio.mean) * s.logPplRatio.error};
    const double diffVar = s.pplQ.error * s.pplQ.error + s.pplBase.error * s.pplBase.error
                           - 2.0 * s.pplQ.mean * s.pplBase.mean * cov;
    s.pplDifference = {s.pplQ.mean - s.pplBase.mean, std::sqrt(std::max(0.0, diffVar))};
    s.kld = meanAndError(kld, kld2, count);
    s.kldPercentiles = percentiles(std::move(klds));
    s.deltaP = meanAndError(dp, dp2, count);
    s.deltaPPercentiles = percentiles(std::move(dps));
    const MeanError mse = meanAndError(dp2, dp4, count);
    const double rms = std::sqrt(mse.mean);
    s.deltaPRms = {rms, rms > 0 ? 0.5 / rms * mse.error : 0.0};
    const double p = double(sameTop) / n;
    s.sameTop = {p, std::sqrt(p * (1 - p) / (n - 1))};
    return s;
}

} // namespace kvlens::lm
