// SPDX-License-Identifier: GPL-3.0-or-later
// Next-token damage of a quantized KV cache, per token and summarized with the names and error
// formulas of llama.cpp's `llama-perplexity --kl-divergence` report.
#pragma once

#include "core/common/result.h"

#include <cstddef>
#include <span>

namespace kvlens::lm {

/// One scored token: the logits at position t predicting the token at t + 1.
struct TokenStat {
    double nllBase = 0.0; ///< -log p_base(correct)
    double nllQ = 0.0;    ///< -log p_Q(correct)
    double kld = 0.0;     ///< KL(base || Q) over the whole vocabulary, nats (round-off below 0 clamped)
    double deltaP = 0.0;  ///< p_Q(correct) - p_base(correct)
    int topBase = 0;      ///< argmax of the base logits (the first on ties)
    int topQ = 0;         ///< argmax of the quantized logits
    bool sameTop() const { return topBase == topQ; }
};

/// Statistics of one token from a base logits row and a quantized one (both [vocab], the same
/// length) and the correct next token id (in [0, vocab)). In double: log p_i = l_i - LSE(l) with
/// LSE(l) = m + log sum_i exp(l_i - m), m = max l; KL = sum_i p_base,i (log p_base,i - log p_Q,i)
/// with no truncation (llama.cpp drops base log-probs below -16 because it stores them in 16 bits;
/// with both rows in memory nothing is dropped). Refused: rows of different or zero length, a
/// correct id outside the vocabulary, a non-finite logit (naming the row and index).
Result<TokenStat> scoreToken(std::span<const float> baseLogits, std::span<const float> quantLogits, int correct);

/// Mean and standard error as llama.cpp's mean_and_uncertainty computes them:
/// mean = S/n; SE = sqrt((S2/n - mean^2) / (n - 1)), and 0 when n <= 10 or the variance is <= 0.
struct MeanError {
    double mean = 0.0;
    double error = 0.0;
};

/// Order statistics: linear interpolation on the sorted values at fraction f (position f (n - 1));
/// median = the 0.5 point (the mean of the two middle values for even n, as llama.cpp prints it).
struct Percentiles {
    double maximum = 0.0, p999 = 0.0, p99 = 0.0, p95 = 0.0, p90 = 0.0, p75 = 0.0, median = 0.0, p25 = 0.0, p10 = 0.0,
           p5 = 0.0, p1 = 0.0, p01 = 0.0, minimum = 0.0;
};

/// The summary of llama.cpp's --kl-divergence report (tools/perplexity/perplexity.cpp, function
/// kl_divergence), computed in double from the per-token values:
///  - "Mean PPL(Q)", "Mean PPL(base)": exp(mean NLL) +- PPL x SE(NLL);
///  - "Cor(ln(PPL(Q)), ln(PPL(base)))": cov / (SE_Q SE_base) with
///    cov = (E[nll_Q nll_base] - E[nll_Q] E[nll_base]) / (n - 1) (0 when n < 10): the Pearson r of the
///    per-token NLLs; NaN when either SE is 0 (n <= 10 or a constant NLL);
///  - "Mean ln(PPL(Q)/PPL(base))": mean_Q - mean_base +- sqrt(SE_Q^2 + SE_base^2 - 2 cov); its exp
///    "Mean PPL(Q)/PPL(base)" +- ratio x that error; "Mean PPL(Q)-PPL(base)" +-
///    sqrt(err_Q^2 + err_base^2 - 2 PPL_Q PPL_base cov);
///  - "Mean KLD" +- SE, and its percentiles;
///  - "Mean Δp" +- SE, and its percentiles (with 75 % and 25 %);
///  - "RMS Δp" = sqrt(mean Δp^2) +- 0.5 / RMS x SE(Δp^2) (0 when RMS is 0);
///  - "Same top p" = share of tokens whose argmax agrees +- sqrt(p (1 - p) / (n - 1)).
/// llama.cpp prints the final block only with at least 100 tokens; `count` lets the caller decide.
struct NextTokenSummary {
    std::size_t count = 0;
    MeanError pplQ, pplBase;
    double nllCorrelation = 0.0;
    MeanError logPplRatio, pplRatio, pplDifference;
    MeanError kld;
    Percentiles kldPercentiles;
    MeanError deltaP;
    Percentiles deltaPPercentiles;
    MeanError deltaPRms;
    MeanError sameTop;
};

/// The summary of `tokens` (at least 2, else refused).
Result<NextTokenSummary> summarizeNextTokens(std::span<const TokenStat> tokens);

/// llama.cpp's mean_and_uncertainty: from the sum, the sum of squares and the count (see MeanError).
MeanError meanAndError(double sum, double sumSquares, std::size_t count);

/// The value at fraction `fraction` of `sorted` (ascending, non-empty) by linear interpolation:
/// the front for fraction <= 0, the back for fraction >= 1.
double percentileOfSorted(std::span<const double> sorted, double fraction);

} // namespace kvlens::lm
