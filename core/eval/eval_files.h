// SPDX-License-Identifier: GPL-3.0-or-later
// The files and the terminal report of an evaluation: eval_summary.csv, eval_tokens.csv,
// eval_layers.csv, and llama.cpp's KL-divergence report per configuration.
#pragma once

#include "core/eval/eval_result.h"

#include <string>

namespace kvlens::eval {

/// One row per configuration (budget "fixed" for fixed-width schemes): scheme, budget, seed, bits_k, bits_v, tokens, ppl, ppl_err,
/// ppl_base, ppl_base_err, ln_ppl_ratio, ln_ppl_ratio_err, ppl_ratio, ppl_ratio_err, kld_mean,
/// kld_mean_err, kld_max, kld_p999, kld_p99, kld_p95, kld_p90, kld_median, kld_p10, kld_p5,
/// kld_p1, kld_min, dp_mean, dp_mean_err, dp_rms, dp_rms_err, same_top1, same_top1_err,
/// nll_correlation. A first comment line states the convention (llama.cpp's: the second half of
/// each chunk scored) and, for a cancelled run, that it is partial.
std::string summaryCsv(const EvalResult& result);
/// One row per (configuration, scored position): scheme, budget, seed, chunk, position, token,
/// next, next_text (the next token's bytes, escaped: \n, \t, \\, non-printable as \xHH),
/// nll_base, nll, kld, top1_base, top1, dp, then the token's attention-level proxies
/// (kTokenProxyColumns: attn_kl ... calib_score_err; all 0 for the exact cache, nan when not computed).
std::string tokensCsv(const EvalResult& result);
/// One row per attribution row: scheme, budget, seed, layer, head ("all" or the KV head), path
/// (K, V, both), kld_mean, kld_err, kld_low, kld_high (95%: mean +- 1.96 SE), same_top1, tokens.
std::string layersCsv(const EvalResult& result);
/// The terminal report: the model, the text, the convention, and per configuration the block of
/// llama.cpp's --kl-divergence report (Mean PPL(Q), Mean PPL(base), Cor(ln(PPL(Q)), ln(PPL(base))),
/// Mean ln(PPL(Q)/PPL(base)), Mean PPL(Q)/PPL(base), Mean KLD, the KLD percentiles, RMS Δp,
/// Same top p), then the layers that matter most.
std::string reportText(const EvalResult& result);
/// A configuration's budget for files: "3", or "fixed" (0: a fixed-width scheme run once).
std::string budgetText(int budget);
/// A token's bytes for a CSV cell: printable ASCII as is, \n \r \t \\ escaped, other bytes \xHH.
std::string escapeTokenText(const std::string& bytes);

} // namespace kvlens::eval
