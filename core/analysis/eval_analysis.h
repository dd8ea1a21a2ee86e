// SPDX-License-Identifier: GPL-3.0-or-later
// Analyses of an evaluation (kvlens eval): intervals over chunks, contrasts of configurations, the
// advisor's curves measured end to end, and the attention-level map judged against the output.
#pragma once

#include "core/analysis/model_lens.h"
#include "core/eval/eval_result.h"
#include "core/spec/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::eval {

/// A statistic and its 95% percentile-bootstrap interval over chunks (the unit of replication of an
/// evaluation: a chunk's tokens share its context).
struct ChunkInterval {
    double value = 0.0, low = 0.0, high = 0.0;
    int chunks = 0;
};

/// The configuration of `name` at `budget` (0: a budget-free one) and seed index, or -1.
int findConfiguration(const EvalResult& r, const std::string& name, int budget, int seedIndex = 0);

/// Mean KLD of configuration `c`, its interval over chunks.
ChunkInterval meanKld(const EvalResult& r, int c, std::uint64_t seed, int resamples);
/// Mean KLD of `a` over that of `b`, paired by chunk (the same tokens under both).
ChunkInterval kldRatio(const EvalResult& r, int a, int b, std::uint64_t seed, int resamples);
/// PPL(Q) / PPL(base) of configuration `c` over chunks.
ChunkInterval pplRatio(const EvalResult& r, int c, std::uint64_t seed, int resamples);
/// The share of `worse`'s excess perplexity over the exact cache that `better` removes:
/// (PPL_worse - PPL_better) / (PPL_worse - PPL_base), paired by chunk (NaN where PPL_worse = PPL_base).
ChunkInterval excessPplShareRemoved(const EvalResult& r, int worse, int better, std::uint64_t seed, int resamples);

/// The advisor's curves measured end to end: per layer, the mean KLD when only that layer's K (or V)
/// is quantized by `scheme` at each budget (the attribution rows, paths K and V), and the
/// configuration's bits. Empty (with the reason) when the evaluation lacks the attribution of that
/// scheme at two or more budgets.
Result<std::vector<LayerCurves>> endToEndCurves(const EvalResult& r, const std::string& scheme);

/// One row of the map judged against the output: Spearman rho between an attention-level measure
/// (from a model-regime run over the same model) and the end-to-end attribution KLD, over the cells
/// of one level ("layer": (layer, budget) cells, the map averaged over the layer's heads; "head":
/// (layer, KV head, budget) cells, the map averaged over the query heads reading that KV head).
struct OutputVsAttention {
    std::string level;     ///< "layer" or "head"
    std::string measure;   ///< kl_mean, rel_mse_t, fisher, score_err_var, entropy
    double rho = 0.0, low = 0.0, high = 0.0; ///< 95% bootstrap interval over cells
    int cells = 0;
};

/// Every measure at both levels for `scheme` (the same scheme name in both runs). Cells present in
/// only one of the runs are left out. Empty when the runs share no cell.
std::vector<OutputVsAttention> outputVsAttention(const ResultSet& map, const EvalResult& r, const std::string& scheme,
                                                 std::uint64_t seed, int resamples);
/// level, measure, rho, rho_low, rho_high, cells.
std::string outputVsAttentionCsv(const std::vector<OutputVsAttention>& rows);

} // namespace kvlens::eval
