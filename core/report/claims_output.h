// SPDX-License-Identifier: GPL-3.0-or-later
// The papers' claims end to end: checked on a model's next-token output (kvlens eval on the shipped
// model), with intervals over chunks; the advisor's advice measured end to end; the attention-level
// map judged against the output.
#pragma once

#include "core/analysis/eval_analysis.h"
#include "core/analysis/model_lens.h"
#include "core/eval/eval_result.h"
#include "core/report/claims.h"
#include "core/spec/eval_spec.h"

#include <optional>
#include <string>
#include <vector>

namespace kvlens::claims {

/// The evaluation the end-to-end claims read: KQV, QKQV, TQ-KV, SQ-KV, KIVI, HeadQ, HeadQ-A2 at
/// n = 2, 3, 4; KIVI's and HeadQ's (and its controls') keys with exact values; K q8_0 with V at 3
/// bits and K at 3 bits with V q8_0. No attribution.
EvalSpec outputClaimsSpec(const std::string& modelDir, const std::string& textFile);
/// The evaluation the advisor's curves and the map's judgement read: TQ-KV at n = 2, 3, 4 with
/// attribution per layer and per KV head.
EvalSpec outputAttributionSpec(const std::string& modelDir, const std::string& textFile);
/// The check of an advice: the allocation and the best uniform split (per-layer widths), TQ-KV at
/// n = 2 and 3, and llama.cpp's K/V pairs q8_0/q8_0, q8_0/q4_0, q4_0/q4_0.
EvalSpec adviceCheckSpec(const std::string& modelDir, const std::string& textFile, const BitAllocation& advice,
                         const std::optional<BitAllocation>& uniform);

/// The end-to-end inputs of the report.
struct OutputRuns {
    const eval::EvalResult* claims = nullptr;      ///< outputClaimsSpec's run
    const eval::EvalResult* attribution = nullptr; ///< outputAttributionSpec's run
    const eval::EvalResult* advice = nullptr;      ///< adviceCheckSpec's run
    std::optional<BitAllocation> allocation;       ///< the advice (from the end-to-end curves)
    std::optional<BitAllocation> uniform;          ///< the best uniform split within the same bits
    double targetBits = 3.0;
    const ResultSet* map = nullptr;                ///< the Model map run of the same model (for rho)
    /// eval::outputProxyStudy of `claims` with seed + 90 and `resamples` when already computed (E7
    /// computes it otherwise).
    const std::vector<eval::OutputProxyCell>* proxies = nullptr;
    std::uint64_t seed = 1;
    int resamples = 400;
};

/// E1-E5 and E7: paper A's ordering, paper C's headline, the K-V split, paper B's SQ against TQ,
/// paper C's proxies per token, and the advisor, each on the model's output; then the map against
/// the output (E6, a table, no verdict).
std::vector<Claim> outputClaims(const OutputRuns& runs);

} // namespace kvlens::claims
