// SPDX-License-Identifier: GPL-3.0-or-later
// The papers' claims checked against measured runs: each claim's numbers, tests, figures and a computed verdict.
#pragma once

#include "core/common/result.h"
#include "core/spec/result.h"
#include "core/stats/p_value.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::claims {

/// Significance level of every directional test of the report.
inline constexpr double kAlpha = 0.01;

/// A p this many times alpha or less (but not below it) is borderline, not a contradiction: with 8
/// seeds, one seed of eight the other way gives an exact seed-level p of 0.016 to 0.04.
inline constexpr double kBorderlineFactor = 5.0;

/// What one check of a claim found, keeping direction and strength.
enum class Outcome {
    Unset,        ///< from `holds` alone (decide() maps it to Holds or Contradicted)
    Holds,        ///< the criterion is met
    HoldsLarger,  ///< met, and the effect is larger than claimed (the interval lies beyond the claimed value)
    Borderline,   ///< a p within kBorderlineFactor of alpha, or an interval touching the criterion
    Contradicted, ///< the measurement says otherwise (no effect, or the opposite one)
    NotTestable,  ///< the run cannot decide it (too few units for the test to reach alpha, an effect too small to see)
};
/// "holds", "holds, larger effect than claimed", "borderline", "contradicted", "not testable here".
std::string_view outcomeText(Outcome outcome);

/// What the measurements say about a claim: the checks' outcomes combined.
enum class Verdict {
    Holds,            ///< every testable check holds
    HoldsLarger,      ///< every testable check holds with a larger effect than claimed
    Borderline,       ///< nothing contradicts it, but some checks are only borderline
    Contradicted,     ///< no testable check holds
    DependsOnSetting, ///< some settings hold, others contradict it (dependsOn names them)
    NotTestable,      ///< no check could be decided on these runs
};

/// "holds", "holds, larger effect than claimed", "borderline", "contradicted", "depends on setting",
/// "not testable here".
std::string_view verdictText(Verdict verdict);

/// One setting in which a claim was tested, and what the stated criterion found there.
struct Check {
    std::string setting;  ///< "n = 4, score scale 1"
    std::string measured; ///< the numbers the criterion looked at
    bool holds = false;   ///< outcome is Holds or HoldsLarger (set by decide() from outcome)
    Outcome outcome = Outcome::Unset;
};

/// Verdict from the checks (outcomes already resolved): see Verdict.
Verdict verdictFrom(std::span<const Check> checks);

/// The directional criterion: p < alpha and the effect in the claimed direction (effect > 0).
bool significantInDirection(const stats::PValue& p, double effect, double alpha = kAlpha);

/// The directional criterion with its strength: NotTestable when the test cannot reach alpha with
/// its units (pMin > alpha); Holds when p < alpha and effect > 0; Borderline when effect > 0 and
/// p < kBorderlineFactor alpha; else Contradicted.
Outcome directionalOutcome(const stats::PValue& p, double effect, double pMin, double alpha = kAlpha);

/// A measured quantity with its 95% interval [low, high] against the value a paper states, where
/// a larger value means a larger effect: Holds when the interval contains `claimed`; HoldsLarger when
/// it lies above; Borderline when it lies below but its upper end is within `slack` (relative) of
/// `claimed`; Contradicted below that. Non-finite ends: NotTestable.
Outcome claimedValueOutcome(double low, double high, double claimed, double slack = 0.05);

/// A measurement's interval against a band [lo, hi] the claim puts it in: Holds when the whole
/// interval lies inside, Borderline when it straddles a bound, Contradicted when it lies outside;
/// NotTestable for a non-finite interval (an unbounded side of the band may be +-inf).
Outcome bandOutcome(double low, double high, double lo, double hi);

/// Two criteria a check needs together (a direction and a size): the weaker decides. An untestable
/// or contradicted direction decides alone; a borderline direction caps the size at borderline.
Outcome both(Outcome direction, Outcome size);

/// |measured / expected - 1| <= tolerance (false for a non-finite measurement or expected = 0).
bool withinRelative(double measured, double expected, double tolerance);

/// Equivalence of a ratio: the interval [lower, upper] lies inside [1 / margin, margin] (margin > 1).
bool equivalentRatio(double lower, double upper, double margin);

/// "3.2e-05"; "< 1e-300" below what a double holds (where no tail approximation is exact to a digit).
std::string formatP(const stats::PValue& p);
/// "p = 3.2e-05" or "p < 1e-300".
std::string pEquals(const stats::PValue& p);
/// A number with `digits` significant digits ("0.0271", "2.3e+03"; "n/a" when not finite).
std::string formatSig(double value, int digits = 3);

/// A plain table of text cells.
struct Table {
    std::string caption;
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
};

/// One drawn series of a claim figure. `low` and `high` (when not empty) are the interval
/// ends, absolute values, one per point.
struct Series {
    std::string name;
    std::vector<double> x, y, low, high;
    bool line = true;       ///< connect the points
    bool reference = false; ///< a theory or threshold line (dashed, black)
    bool steps = false;     ///< a histogram drawn as a step line
};

/// A figure of a claim, drawn by the app (the numbers are all here).
struct Figure {
    std::string id;          ///< file stem, unique within a report ("a1_variance_ratio")
    std::string title;
    std::string xLabel, yLabel;
    bool logX = false, logY = false;
    std::vector<std::string> categories; ///< non-empty: x is 0..k-1 and these are its tick labels
    std::vector<Series> series;
    std::string caption;     ///< one or two sentences under the figure
};

/// A claim, what was measured, and the verdict computed from the checks.
struct Claim {
    std::string id;          ///< stable identifier ("A1-qjl-variance")
    std::string paper;       ///< "A", "B", "C", "A vs B"
    std::string title;
    std::string statement;   ///< what the paper says
    std::string criterion;   ///< how each check is decided (stated before looking at the numbers)
    std::string headline;    ///< the measured figure in one line, with its interval or p-value
    std::vector<std::string> runs; ///< presets the claim reads
    std::vector<Check> checks;
    Verdict verdict = Verdict::NotTestable;
    std::string dependsOn;   ///< which settings hold and which do not (set when they differ)
    std::vector<Table> tables;
    std::vector<Figure> figures;
};

/// Resolves every check's outcome (Unset: from holds), sets holds from it, then claim.verdict and,
/// for a split verdict, claim.dependsOn (the settings that hold and those that do not).
void decide(Claim& claim);

/// Marginal histogram of the keys as the codebook sees them: WHT-rotated, unit-normalized,
/// times sqrt(d) (so the Beta law of a random unit vector's coordinates tends to N(0, 1)).
struct MarginalHistogram {
    std::string label;
    std::vector<double> edges;   ///< bins+1 edges on [-4, 4]
    std::vector<double> density; ///< per unit x, bins entries
    std::vector<double> sample;  ///< evenly spaced subsample of the coordinates (for KS tests)
    double rawExcessKurtosis = 0.0; ///< of the coordinates before rotation
};

/// Draws the keys of a spec's first seed and histograms their rotated marginal (design §4).
/// Errors come from the regime (bad parameters).
Result<MarginalHistogram> rotatedKeyMarginal(const ExperimentSpec& spec, int bins = 64, int maxSample = 20000);

/// The runs the report reads (presets in resources/presets). Null members are skipped,
/// with the claims that need them.
struct Runs {
    const ResultSet* paperA = nullptr;          ///< paper_a.json: gaussian, KV/KQV/QKQV, n = 2, 3, 4
    const ResultSet* scoreScale = nullptr;      ///< repro_score_scale.json: gaussian, score-scale sweep
    const ResultSet* heavyTailSweep = nullptr;  ///< heavy_tail_sweep.json: nu = 5 ... 1.05
    const ResultSet* lowRank1024 = nullptr;     ///< low_rank_d1024.json
    const ResultSet* heavyTail1024 = nullptr;   ///< repro_heavy_tail_d1024.json (same sizes and schemes, standardized)
    const ResultSet* lowRankAxis1024 = nullptr;       ///< low_rank_axis_d1024.json: the subspace on the first 8 axes
    const ResultSet* lowRankRandomAxes1024 = nullptr; ///< low_rank_random_axes_d1024.json: on 8 random axes
    const ResultSet* crossover = nullptr;       ///< budget_crossover.json
    const ResultSet* vpathHeavyTail = nullptr;  ///< repro_vpath_heavy_tail.json: TQ-{KV,QKV,KQV,QKQV}
    const ResultSet* vpathLowRank = nullptr;    ///< repro_vpath_low_rank.json
    const ResultSet* paperBGaussian = nullptr;  ///< paper_b_gaussian.json
    const ResultSet* paperBHeavyTail = nullptr; ///< paper_b_heavy_tail.json
    const ResultSet* paperBLowRank = nullptr;   ///< paper_b_low_rank.json
    const ResultSet* paperC = nullptr;          ///< paper_c_headq.json
    const ResultSet* tinyModel = nullptr;       ///< repro_tiny_lm.json: the shipped model's dump, every layer and head
    const MarginalHistogram* lowRankMarginal = nullptr;   ///< of lowRank1024's spec
    const MarginalHistogram* heavyTailMarginal = nullptr; ///< of heavyTail1024's spec
    std::uint64_t seed = 1; ///< of the bootstrap resampling
    int resamples = 400;    ///< bootstrap resamples of each interval
};

/// Paper A: QJL on keys inflates the score-error variance by pi/2 over the residual it
/// replaces and by about 2 pi over the n-bit scalar key path (QKQV against KQV).
Claim qjlVarianceClaim(const ResultSet& gaussian);
/// Paper A: KQV has lower per-query KL than QKQV at n = 2, 3, 4 (Mann-Whitney, rank-biserial).
Claim kqvBeatsQkqvClaim(const ResultSet& paperA, std::uint64_t seed, int resamples);
/// Paper A: at n = 4 the median KL of QKQV is 2.25x that of KQV; checked at every score scale.
/// `acrossRegimes` (optional): further runs with KQV and QKQV, tabulated (not checked) with mean
/// and median ratios, their intervals, the closed-form (pi/2) D_{n-1}/D_n and each run's entropy.
Claim klRatioClaim(const ResultSet& scoreScale, std::uint64_t seed, int resamples,
                   const std::vector<const ResultSet*>& acrossRegimes = {});
/// Paper A: top-5 recall and output direction error move with KL (KQV vs QKQV).
Claim recallFollowsKlClaim(const ResultSet& scoreScale);
/// Paper A: under heavy tails (nu -> 1.05) KV's key direction error blows up, KQV's and QKQV's stay put.
Claim heavyTailClaim(const ResultSet& sweep);
/// Paper A: low-rank keys at d = 1024 give KL orders of magnitude above heavy-tailed keys
/// with the same rotated marginal histogram. `constructions` (optional) are further low-rank
/// runs of other subspace bases (axis, random_axes): each adds its checks, labelled by basis, and
/// a row of the constructions table (KL ratios, the permuted rotation's, measured/predicted
/// score-error variance, phi_K, mean attention entropy of both runs).
Claim lowRankClaim(const ResultSet& lowRank, const ResultSet& heavyTail, const MarginalHistogram* lowRankMarginal,
                   const MarginalHistogram* heavyTailMarginal, const std::vector<const ResultSet*>& constructions = {});
/// Paper A: QKQV reconstructs key directions better at n = 2, 3, KQV at n = 4; on every given run.
Claim crossoverClaim(const std::vector<const ResultSet*>& runs);
/// Paper A's V-path verdict (spend the QJL bit on V, not K) on the given runs.
Claim vpathPaperAClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples);
/// Paper B's V-path verdict (QJL on V degrades the output) on the same runs.
Claim vpathPaperBClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples);
/// Paper B: SQ vs TQ by regime and budget (runs: gaussian, heavy tail, low rank; null skipped).
Claim sqVsTqClaim(const ResultSet* gaussian, const ResultSet* heavyTail, const ResultSet* lowRank,
                  std::uint64_t seed, int resamples);
/// Paper B: water-filling allocation is equivalent to uniform allocation (SQ-KV vs SQU-KV).
Claim waterFillingClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples);
/// Paper C: HeadQ beats KIVI; the wrong-sign control is worse than KIVI; the random basis does not do HeadQ's job.
Claim headqClaim(const ResultSet& paperC, std::uint64_t seed, int resamples);
/// Paper C: Fisher score error ranks per-query KL better than raw key MSE (Spearman rho).
Claim fisherProxyClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples);

/// On a model run (regime "model", schemes K-only and V-only): V-only's output error lower than
/// K-only's in every layer, at every budget.
Claim modelAsymmetryClaim(const ResultSet& model, std::uint64_t seed, int resamples);
/// On a model run with KQV and QKQV: KQV's per-query KL lower than QKQV's in every layer, at every budget.
Claim modelOrderingClaim(const ResultSet& model, std::uint64_t seed, int resamples);

/// Every claim whose runs are present, in report order.
std::vector<Claim> evaluateClaims(const Runs& runs);

} // namespace kvlens::claims
