// SPDX-License-Identifier: GPL-3.0-or-later
// From a damaged token down to the attention that caused it: one scored token's attention in one
// head, under the exact cache and under a configuration's, and which heads changed most.
#pragma once

#include "core/common/result.h"
#include "core/eval/eval_result.h"
#include "core/lm/transformer.h"

#include <functional>
#include <string>
#include <vector>

namespace kvlens::eval {

/// One query's attention over its context (keys 0..t of its chunk) in one head.
struct TokenAttention {
    int configuration = 0, scored = 0;   ///< the configuration and the scored position (index into EvalResult::scored)
    int layer = 0, head = 0, kvHead = 0;
    int position = 0;                    ///< t in the chunk
    std::vector<std::int32_t> keys;      ///< the context's token ids (keys 0..t)
    std::vector<double> exact;           ///< attention weights of the reference pass (exact cache everywhere)
    std::vector<double> quantized;       ///< attention weights of the configuration's pass, as the query read them
    /// The score errors of the configuration's pass: cache scores minus exact-key scores, same query
    /// (this layer's key error alone).
    std::vector<double> scoreError;
    double kl = 0.0;                     ///< KL(exact || quantized) of the two weight vectors, nats
};

/// Probes scored position `scored` of configuration `configuration` in (layer, query head): two
/// forward passes of its chunk (the reference and the configuration's cache). Refused naming the
/// argument when out of range.
Result<TokenAttention> probeToken(const lm::Transformer& model, const EvalResult& r, int configuration, int scored,
                                  int layer, int head, const std::function<bool()>& cancelled = {});

/// KL(exact || quantized) of that token's attention in every (layer, head), sorted descending: the
/// head whose attention the cache changed most first. 2 x layers x heads forward passes.
Result<std::vector<TokenAttention>> headChanges(const lm::Transformer& model, const EvalResult& r, int configuration,
                                                int scored, const std::function<bool()>& cancelled = {});

} // namespace kvlens::eval
