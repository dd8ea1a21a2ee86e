// SPDX-License-Identifier: GPL-3.0-or-later
// Two evaluations of one model on one text compared: per configuration the paired difference over
// chunks of mean KLD, ln PPL ratio and same-top, and per token the KLD difference.
#pragma once

#include "core/common/result.h"
#include "core/eval/eval_result.h"

#include <string>
#include <vector>

namespace kvlens {

/// One metric of one configuration in both runs: the means over the scored tokens of A and B, and
/// B - A paired over chunks (each chunk's mean in B minus its mean in A) with its 95% Student-t
/// interval over the chunks (nan with fewer than two chunks).
struct EvalMetricDifference {
    std::string metric;              ///< "kld_mean", "ln_ppl_ratio", "same_top1"
    double a = 0.0, b = 0.0;         ///< over every scored token
    double difference = 0.0;         ///< mean over chunks of (B - A)
    double low = 0.0, high = 0.0;    ///< 95% interval of `difference`
};

/// A configuration (scheme name, budget, seed) both runs hold.
struct EvalConfigurationComparison {
    std::string scheme;
    int budget = 0; ///< 0: fixed-width
    unsigned long long seed = 0;
    int configurationA = 0, configurationB = 0; ///< indices into each run's configurations
    std::string queryA, queryB;                 ///< each run's query conversion ("f32", "q8_0" ...)
    std::vector<EvalMetricDifference> metrics;
};

struct EvalComparison {
    std::vector<EvalConfigurationComparison> shared;
    std::vector<std::string> onlyA, onlyB; ///< "scheme n = budget seed s" of configurations in one run only
    int chunks = 0, tokens = 0;            ///< chunks and scored tokens per configuration
    /// The settings that differ between the runs (query conversion, residual, calibration ...),
    /// "field: A -> B" each; the model, text, context and chunks cannot (they are refused).
    std::vector<std::string> settingDifferences;
};

/// Compares two whole evaluations. Refused, naming the field, unless both are whole (not shards,
/// not cancelled) runs of the same weights (model hash), the same tokens (tokens hash), the same
/// context, calibration tokens and scored chunks: only then is each scored token the same token in both.
Result<EvalComparison> compareEvals(const eval::EvalResult& a, const eval::EvalResult& b);

/// eval_comparison.csv: per shared configuration and metric: scheme, budget, seed, metric, a, b,
/// b_minus_a, low, high, chunks, query_a, query_b; a comment line per configuration in one run only.
std::string evalComparisonCsv(const EvalComparison& c);
/// compare_tokens.csv: per shared configuration and scored token: scheme, budget, seed, chunk,
/// position, next, next_text, kld_a, kld_b, kld_b_minus_a, nll_a, nll_b, top1_same_a, top1_same_b.
std::string compareTokensCsv(const EvalComparison& c, const eval::EvalResult& a, const eval::EvalResult& b);
/// The terminal report: one line per shared configuration with B - A of mean KLD and its interval.
std::string evalComparisonText(const EvalComparison& c);

} // namespace kvlens
