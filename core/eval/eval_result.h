// SPDX-License-Identifier: GPL-3.0-or-later
// What an evaluation of KV-cache schemes on a model's next-token output produced.
#pragma once

#include "core/lm/next_token_stats.h"
#include "core/spec/eval_spec.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvlens::eval {

/// One scored position: the logits at `position` of chunk `chunk` predicting `next`.
struct ScoredToken {
    int chunk = 0;
    int position = 0;          ///< in the chunk (0-based)
    std::int32_t token = 0;    ///< the token at `position`
    std::int32_t next = 0;     ///< the correct next token
};

/// One of a position's most likely next tokens.
struct TopToken {
    std::int32_t token = -1;
    float probability = 0.0f;
};
inline constexpr std::size_t kTopTokens = 5;
using TopTokens = std::array<TopToken, kTopTokens>;

/// The attention-level proxies of one scored token (paper C's study at model level), each the mean
/// over layers and heads of lm::AttentionDamage's measure at the token's position. Oracle proxies
/// read the evaluated token's own queries; deployable ones only what the cache holds for the context
/// and the calibration text's queries.
enum class TokenProxy { AttnKl, Fisher, A2, OutErr, RelK, RelV, CalibScoreErr };
inline constexpr int kTokenProxyCount = 7;
using TokenProxies = std::array<float, kTokenProxyCount>;
inline constexpr std::array<const char*, kTokenProxyCount> kTokenProxyColumns = {
    "attn_kl", "fisher", "a2_value_error", "out_rel_err", "rel_mse_k", "rel_mse_v", "calib_score_err"};
inline constexpr std::array<bool, kTokenProxyCount> kTokenProxyDeployable = {false, false, false, false, true, true, true};
/// One sentence per proxy, for the report and tooltips.
inline constexpr std::array<const char*, kTokenProxyCount> kTokenProxyDescriptions = {
    "Attention KL(p || p^) of the token's own queries, mean over layers and heads (oracle).",
    "Fisher score error Var_p(s^ - s) of the token's own queries (oracle; KL ~ Var/2 to second order).",
    "A^2 value error sum_j p_j^2 ||v_j - v^_j||^2 / ||o||^2 of the token's own queries (oracle).",
    "Relative attention-output error ||o - o^||^2 / ||o||^2 of the token's own queries (oracle).",
    "Key error of the context the token reads, sum ||k - k^||^2 / sum ||k||^2 (deployable: no query).",
    "Value error of the context the token reads, sum ||v - v^||^2 / sum ||v||^2 (deployable: no query).",
    "Mean squared score error a calibration query would see on the context's keys, e^T E[q q^T] e / d "
    "(deployable: paper C's score-space error with calibration queries)."};

/// One configuration: a scheme at a budget and seed, every layer quantized.
struct ConfigurationResult {
    int scheme = 0;            ///< index into spec.schemes
    int budget = 0;            ///< 0: a scheme whose widths the budget does not set (fp16, exact, llama.cpp's types, absolute bits), run once
    int seedIndex = 0;
    std::string name;          ///< the scheme's name
    double bitsK = 0.0, bitsV = 0.0; ///< exact bits per coordinate, mean over layers and KV heads
    /// The share of the keys (values) a scored token attends to that it reads from the quantized
    /// cache, mean over scored positions and layers: 1 when every key is quantized when written
    /// (llama.cpp's setting); below 1 when a codec encodes groups of tokens (the open group stays
    /// exact) or a residual window keeps recent tokens exact.
    double cacheShareK = 1.0, cacheShareV = 1.0;
    /// What a query was converted to before its product with the cached keys: ggml's vec_dot_type
    /// for llama.cpp's cache types ("q8_0", "q8_1", "f16"), "f32" when it stayed float32 (per layer,
    /// "q8_0 layer 2: f32", when layers differ).
    std::string queryConversion = "f32";
    /// Bits per coordinate of what a scored token reads: the codec's bits for the cached share, 16
    /// (fp16, as a deployed cache holds its open group and window) for the rest.
    double bitsSpentK() const { return cacheShareK * bitsK + (1.0 - cacheShareK) * 16.0; }
    double bitsSpentV() const { return cacheShareV * bitsV + (1.0 - cacheShareV) * 16.0; }
    std::vector<lm::TokenStat> tokens; ///< per scored position, in ScoredToken order
    std::vector<TopTokens> top;        ///< per scored position: the 5 most likely next tokens under this cache
    std::vector<TokenProxies> proxies; ///< per scored position (all zero for the exact cache)
    lm::NextTokenSummary summary;
};

/// Which path of a layer (or head) a row of the attribution quantized.
enum class AttributionPath { K, V, Both };
const char* attributionPathName(AttributionPath p); ///< "K", "V", "both"

/// The damage when only one layer (or one KV head of it) is quantized.
struct AttributionRow {
    int configuration = 0;     ///< index into EvalResult::configurations
    int layer = 0;
    int kvHead = -1;           ///< -1: every head of the layer
    AttributionPath path = AttributionPath::Both;
    lm::MeanError kld;         ///< mean KLD over the scored tokens +- its standard error
    double kldLow = 0.0, kldHigh = 0.0; ///< 95% interval mean +- 1.96 SE
    double sameTop = 0.0;      ///< share of scored tokens whose argmax agrees with the reference
};

/// One scored token of one attribution row: kept per token so that a row's sums are the same
/// additions in the same order whether the run was sharded or not.
struct AttributionToken {
    double kld = 0.0;
    bool sameTop = false;
};

/// An evaluation's results. Per-token statistics are in full double precision.
struct EvalResult {
    EvalSpec spec;
    std::string modelSummary;  ///< architecture, sizes, parameters
    std::string tokenizer;     ///< "bytes", "bpe", "sentencepiece", "ids"
    int layers = 0, kvHeads = 0, headDim = 0, vocab = 0;
    int calibrationTokens = 0; ///< tokens used for calibration (never scored)
    int chunksScored = 0;
    std::vector<ScoredToken> scored;
    std::vector<std::string> tokenText; ///< the bytes of each scored position's next token, for display
    std::vector<TopTokens> topBase;     ///< per scored position: the 5 most likely next tokens under the exact cache
    std::vector<std::int32_t> tokens;   ///< the whole text's ids (calibration first), for the drill-down
    std::optional<std::int32_t> bos;    ///< each chunk's first token, when the tokenizer adds one
    std::vector<ConfigurationResult> configurations;
    std::vector<AttributionRow> attribution;
    /// Per attribution row, per scored position (in `scored` order): the token's KLD and whether its
    /// top-1 agrees (finishEvalResult makes the rows' means, errors and same-top shares from them).
    std::vector<std::vector<AttributionToken>> attributionTokens;
    std::vector<int> chunkIndices;   ///< the text's chunks this result scored, increasing (all, or a shard's)
    std::uint64_t modelHash = 0;     ///< lm::Transformer::dataHash of the weights
    /// Worker threads of the forward passes: the products split their columns by thread, so two runs
    /// agree to the last bit only on the same number (shards and reused runs are checked for it).
    int threads = 0;
    std::uint64_t tokensHash = 0;    ///< eval::tokensHash of the ids the run reads (calibration and every chunk)
    int shardIndex = 0, shardCount = 1; ///< which fixed 1/shardCount of the chunks (0 of 1: all)
    std::vector<double> referenceNll;   ///< per scored position: -log p_base(next)
    double referenceNllMean = 0.0;   ///< mean -log p_base(next) over the scored tokens
    bool cancelled = false;          ///< stopped early: configurations hold what was scored
    double elapsedMs = 0.0;
    double forwardMs = 0.0;          ///< time in forward passes
    /// Where the forward passes ran: "CPU, N threads", or the forward device's label (lm::ForwardDevice),
    /// with the note of the choice ("auto: ..."); a merge of shards that ran apart lists each.
    std::string forward;
    long long forwardTokens = 0;     ///< tokens through forward passes (partial passes counted by their layers)
};

/// The derived fields of `r` from its per-token data: each configuration's llama.cpp summary (two or
/// more tokens), the attribution rows from their tokens, the reference's
/// mean NLL: sums over the tokens in order, as a running accumulation would. What an evaluation does when
/// it finishes, and what a merge of shards does.
void finishEvalResult(EvalResult& r);

} // namespace kvlens::eval
