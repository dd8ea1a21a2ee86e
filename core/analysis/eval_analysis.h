// SPDX-License-Identifier: GPL-3.0-or-later
// Analyses of an evaluation (kvlens eval): intervals over chunks, contrasts of configurations, the
// advisor's curves measured end to end, and the attention-level map judged against the output.
#pragma once

#include "core/analysis/model_lens.h"
#include "core/eval/eval_result.h"
#include "core/spec/result.h"

#include <array>
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

/// Paper C's proxy study at model level, for one (scheme, budget) cell: Spearman rho over the cell's
/// scored tokens (its seeds pooled) between each attention-level proxy (kTokenProxyColumns) and the
/// token's end-to-end KLD, with a 95% bootstrap interval resampling chunks (a drawn chunk brings
/// its tokens under every seed). Tokens whose KLD or proxy is not finite are left out of that proxy.
struct OutputProxyCell {
    std::string scheme;
    int budget = 0;           ///< 0: a budget-free scheme
    long long tokens = 0;
    std::array<ChunkInterval, kTokenProxyCount> rho{}; ///< NaN where undefined (a constant proxy)
    /// Paper C's score-space gain over raw key error, paired on the same resampled chunks:
    /// rho(calib_score_err) - rho(rel_mse_k) (deployable) and rho(fisher) - rho(rel_mse_k) (oracle).
    ChunkInterval deployableGain, oracleGain;
    /// rho of the reference's own NLL of the token (no cache at all) with its KLD: what a proxy must
    /// beat to say more than "uncertain tokens move most".
    ChunkInterval referenceNll;
};

/// One row per (scheme, budget) whose configurations carry proxies, in configuration order; the
/// exact cache (every proxy zero) is left out.
std::vector<OutputProxyCell> outputProxyStudy(const EvalResult& r, std::uint64_t seed, int resamples);
/// scheme, budget ("fixed" for a budget-free scheme), tokens, then rho, rho_low, rho_high per proxy,
/// then both gains and nll_base's rho with intervals; comment lines first say what each proxy is.
std::string outputProxiesCsv(const std::vector<OutputProxyCell>& cells);
/// For the terminal report: per cell, the deployable and the oracle proxy that rank tokens best,
/// and the score-space gains; empty without cells.
std::string outputProxiesText(const std::vector<OutputProxyCell>& cells);

} // namespace kvlens::eval
