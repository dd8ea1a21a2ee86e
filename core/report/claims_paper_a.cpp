// SPDX-License-Identifier: GPL-3.0-or-later
// Paper A's claims (the K-V asymmetry, QJL on keys, tails, low rank, the budget crossover).
#include "core/stats/total_order.h"
#include "core/report/claims.h"

#include <limits>
#include <variant>

#include "core/report/claim_support.h"
#include "core/quant/lloyd_max.h"
#include "core/quant/qjl.h"

#include "core/spec/grid.h"
#include "core/analysis/figures.h"
#include "core/quant/wht.h"
#include "core/regimes/regime.h"
#include "core/rng/rng.h"
#include "core/stats/bootstrap.h"
#include "core/stats/kolmogorov_smirnov.h"
#include "core/stats/mann_whitney.h"
#include "core/stats/spearman.h"
#include "core/stats/wilcoxon.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numbers>
#include <set>

namespace kvlens::claims {

using namespace support;

// ---------------------------------------------------------------------------------------------
// Paper A

Claim qjlVarianceClaim(const ResultSet& rs)
{
    Claim claim;
    claim.id = "A1-qjl-variance";
    claim.paper = "A";
    claim.title = "QJL on keys inflates the score-error variance: π/2 over the residual, about 2π over the n-bit scalar";
    claim.statement = "Replacing scalar bits on the keys by a 1-bit QJL sketch multiplies the variance of the score "
                      "error by at least π/2 ≈ 1.57 relative to the residual it estimates, and by about 2π ≈ 6.28 when an "
                      "(n−1)-bit scalar + 1-bit QJL key path (QKQV) is compared with an n-bit scalar one (KQV).";
    claim.criterion = "Per budget n, per seed (the unit): Var(ŝ − s) of QKQV over the variance of its residual-free "
                      "base, and Var(ŝ − s) of QKQV over that of KQV on the same draw; mean over seeds with a 95% "
                      "Student-t interval. Residual: π/2 is the sketch's exact expectation at m = d, so no tolerance "
                      "is added to the measurement's own spread: a check holds when the interval contains π/2, "
                      "'larger' when it lies above (the claim says at least π/2), borderline within 5% below. n-bit "
                      "scalar: 'about 2π' is the asymptote of the closed form (π/2)·D(n−1)/D(n) of design §5, which "
                      "itself lies 10-22% below 2π at n = 2-4 (Lloyd-Max D(n−1)/D(n) = 3.1-3.6, not 4), so the claim "
                      "is read as within ±25% of 2π: holds when the whole interval lies inside, borderline when it "
                      "straddles a bound, contradicted outside.";
    claim.runs = {rs.spec.name};
    const int q = anyScheme(rs, {"QKQV", "TQ-QKQV"}), k = anyScheme(rs, {"KQV", "TQ-KQV"});
    Table table;
    table.caption = "Score-error variance ratios (" + runLabel(rs) + ")";
    table.header = {"setting", "n", "Var(QKQV) / Var(residual dropped)", "π/2", "Var(QKQV) / Var(KQV)",
                    "closed form (π/2)·D(n−1)/D(n)", "2π", "Jensen σ²/2 (QKQV)", "measured log E[exp δs]"};
    Figure fig;
    fig.id = "a1_variance_ratio";
    fig.title = "QJL on keys: score-error variance ratios";
    fig.xLabel = "bit budget n";
    fig.yLabel = "variance ratio";
    Series residual{"Var(QKQV) / Var(residual dropped)", {}, {}, {}, {}}, scalar{"Var(QKQV) / Var(KQV)", {}, {}, {}, {}},
        closed{"closed form (π/2)·D(n−1)/D(n)", {}, {}, {}, {}};
    closed.reference = false;
    std::string headline;
    const std::vector<int> budgets = budgetsOf(rs);
    for (int point = 0; q >= 0 && k >= 0 && point < rs.spec.pointCount(); ++point) {
        for (int n : budgets) {
            const auto cq = cell(rs, point, q, n), ck = cell(rs, point, k, n);
            std::vector<double> overBase, overScalar, predicted, jensenPred, jensenMeas;
            for (std::size_t i = 0; i < cq.size() && i < ck.size(); ++i) {
                overBase.push_back(cq[i]->scoreErrorVar / cq[i]->scoreErrorVarBase);
                overScalar.push_back(cq[i]->scoreErrorVar / ck[i]->scoreErrorVar);
                predicted.push_back(cq[i]->scoreErrorVarPredicted / ck[i]->scoreErrorVarPredicted);
                jensenPred.push_back(0.5 * cq[i]->scoreErrorVar);
                jensenMeas.push_back(cq[i]->logMeanExpScoreError);
            }
            const Interval ib = seedInterval(overBase), is = seedInterval(overScalar);
            const double closedForm = mean(predicted);
            const std::string setting = (rs.spec.pointCount() > 1 ? settingLabel(rs, point) + ", " : "") +
                                        "n = " + std::to_string(n);
            claim.checks.push_back({setting + ": residual ratio ≈ π/2", intervalText(ib) + " (" + std::to_string(ib.n) + " seeds)",
                                    false, ib.n < 2 ? Outcome::NotTestable : claimedValueOutcome(ib.low, ib.high, kPi / 2.0)});
            claim.checks.push_back({setting + ": vs n-bit scalar ≈ 2π", intervalText(is) + " (closed form " +
                                        formatSig(closedForm) + ")",
                                    false, ib.n < 2 ? Outcome::NotTestable : bandOutcome(is.low, is.high, 0.75 * 2.0 * kPi, 1.25 * 2.0 * kPi)});
            table.rows.push_back({rs.spec.pointCount() > 1 ? settingLabel(rs, point) : runLabel(rs), std::to_string(n),
                                  intervalText(ib), formatSig(kPi / 2.0), intervalText(is), formatSig(closedForm),
                                  formatSig(2.0 * kPi), formatSig(mean(jensenPred)), formatSig(mean(jensenMeas))});
            if (point == 0) {
                pushInterval(residual, n, ib);
                pushInterval(scalar, n, is);
                closed.x.push_back(n);
                closed.y.push_back(closedForm);
                headline += (headline.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) +
                            ": residual ratio " + intervalText(ib) + ", vs n-bit scalar " + intervalText(is);
            }
        }
    }
    claim.headline = headline + " (π/2 = 1.571, 2π = 6.283; 95% intervals over seeds)";
    if (!budgets.empty()) {
        const double x0 = budgets.front() - 0.2, x1 = budgets.back() + 0.2;
        fig.series = {residual, scalar, closed, referenceLine("π/2", x0, x1, kPi / 2.0),
                      referenceLine("2π", x0, x1, 2.0 * kPi)};
    }
    fig.logY = true;
    fig.caption = "Measured ratios (95% intervals over seeds) against π/2 and 2π; the closed form uses the "
                  "Lloyd-Max distortions D(n) of the codebooks actually used.";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}


Claim kqvBeatsQkqvClaim(const ResultSet& rs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "A2-kqv-vs-qkqv";
    claim.paper = "A";
    claim.title = "KQV has lower attention KL than QKQV at n = 2, 3, 4";
    claim.statement = "Spending the QJL bit on the values only (KQV) gives lower KL(p‖p̂) than spending it on keys and "
                      "values (QKQV) at every budget; at n = 4, 2.25× lower with p < 1e-23.";
    claim.criterion = "Per budget, with the seed as the unit (the queries of a seed share its draw): exact two-sided "
                      "Wilcoxon signed-rank over the seeds on each seed's log ratio of median KL, QKQV over KQV. A check "
                      "holds when p < 0.01 and KQV is lower; borderline when p < 0.05 (five times the level); not "
                      "testable when the seeds cannot reach 0.01 (fewer than 8: the smallest p of k seeds is 2/2^k). "
                      "The paper's p < 1e-23 counted every query as independent: "
                      "the query-level Mann-Whitney p and rank-biserial r are tabulated beside it, secondary.";
    claim.runs = {rs.spec.name};
    const int k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"}), kv = rs.schemeIndex("KV");
    Table table;
    table.caption = "Per-query KL, KQV against QKQV and KV (" + runLabel(rs) + ")";
    table.header = {"setting", "n", "seeds", "queries", "median KL KQV", "median KL QKQV", "QKQV / KQV [95% CI]",
                    "p (seeds)", "seeds KQV lower", "query-level p (secondary)", "rank-biserial r", "median KL KV",
                    "KV / KQV", "p (KQV vs KV, seeds)"};
    std::string headline;
    for (int point = 0; k >= 0 && q >= 0 && point < rs.spec.pointCount(); ++point) {
        for (int n : budgetsOf(rs)) {
            const Units a = units(rs, cell(rs, point, k, n), &TrialResult::kl);
            const Contrast c = contrast(a, units(rs, cell(rs, point, q, n), &TrialResult::kl), seed + n, resamples);
            Contrast ckv;
            if (kv >= 0)
                ckv = contrast(a, units(rs, cell(rs, point, kv, n), &TrialResult::kl), seed + 100 + n, 0);
            const std::string setting = (rs.spec.pointCount() > 1 ? settingLabel(rs, point) + ", " : "") + "n = " +
                                        std::to_string(n);
            const std::string measured = "QKQV/KQV median KL " + ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low) +
                                         ", " + seedP(c) + ", KQV lower in " + std::to_string(c.unitsALower) + " of " +
                                         std::to_string(c.units) + " seeds";
            claim.checks.push_back({setting, measured, false, directional(c)});
            headline += (headline.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) + ": " + measured;
            table.rows.push_back({rs.spec.pointCount() > 1 ? settingLabel(rs, point) : runLabel(rs), std::to_string(n),
                                  std::to_string(c.units), std::to_string(c.nA), formatSig(c.medianA), formatSig(c.medianB),
                                  ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low), formatP(c.p),
                                  std::to_string(c.unitsALower), formatP(c.queryP), signedText(c.r),
                                  kv >= 0 ? formatSig(ckv.medianB) : "", kv >= 0 ? formatSig(1.0 / ckv.ratio) : "",
                                  kv >= 0 ? formatP(ckv.p) : ""});
        }
    }
    claim.headline = headline;
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(
        klByBudgetFigure(rs, 0, {"KV", "KQV", "QKQV"}, "a2_kl_by_budget", "Attention KL by budget (" + runLabel(rs) + ")"));
    decide(claim);
    return claim;
}

namespace {

/// The ratio of QKQV's mean KL over KQV's, bootstrapped over seeds (the unit: each resampled seed
/// brings its queries): its 2.5% and 97.5% points, NaN without seeds.
std::pair<double, double> meanRatioInterval(const Units& kqv, const Units& qkqv, std::uint64_t seed, int resamples)
{
    std::vector<double> ratios;
    Rng rng(EngineKind::Pcg64, seed, Stream::Statistics);
    const std::size_t seeds = std::min(kqv.byUnit.size(), qkqv.byUnit.size());
    for (int r = 0; r < resamples && seeds > 0; ++r) {
        double sa = 0.0, sb = 0.0;
        for (std::size_t i = 0; i < seeds; ++i) {
            const auto j = static_cast<std::size_t>(rng.below(seeds));
            for (double v : kqv.byUnit[j])
                sa += v;
            for (double v : qkqv.byUnit[j])
                sb += v;
        }
        ratios.push_back(sb / sa);
    }
    stats::sortTotal(ratios.begin(), ratios.end());
    auto at = [&](double p) {
        return ratios.empty() ? std::numeric_limits<double>::quiet_NaN()
                              : ratios[static_cast<std::size_t>(p * static_cast<double>(ratios.size() - 1))];
    };
    return {at(0.025), at(0.975)};
}

/// Mean attention entropy over a cell's trials (nats).
double cellEntropy(const std::vector<const TrialResult*>& c)
{
    double entropy = 0.0;
    for (const TrialResult* t : c)
        entropy += t->meanEntropy / static_cast<double>(c.size());
    return entropy;
}

/// A3's table across regimes and sizes at budget `checked`: which settings reach 2.25, against the
/// closed form. KQV's keys carry the n-bit distortion D_n; QKQV's carry D_{n-1} and the sketch's
/// correction, whose score-error variance is about (pi/2) D_{n-1} at m = d. For small noise
/// KL ~ Var(ds)/2, so the predicted KL ratio is (pi/2) D_{n-1}/D_n (D_b: relative distortion of the
/// b-bit codebook). Each run tabulated is added to `runs`; `seed` counts up per resampling.
Table acrossRegimesTable(const std::vector<const ResultSet*>& acrossRegimes, int checked, std::uint64_t seed,
                         int resamples, std::vector<std::string>& runs)
{
    Table across;
    across.caption = "QKQV / KQV KL across regimes and sizes (n = " + std::to_string(checked) + ")";
    across.header = {"run", "d", "seeds", "mean entropy H(p) (nats)", "mean-KL ratio [95% CI]",
                     "median-KL ratio [95% CI]", "closed form (π/2)·D_{n−1}/D_n", "2.25 in an interval"};
    std::uint64_t s = seed;
    for (const ResultSet* run : acrossRegimes) {
        if (!run)
            continue;
        const int kk = anyScheme(*run, {"KQV", "TQ-KQV"}), qq = anyScheme(*run, {"QKQV", "TQ-QKQV"});
        const std::vector<int> bs = budgetsOf(*run);
        if (kk < 0 || qq < 0 || std::find(bs.begin(), bs.end(), checked) == bs.end())
            continue;
        const int dim = static_cast<int>(paddedDimension(static_cast<std::size_t>(run->spec.d)));
        const auto lower = cachedCodebook(CodebookLaw::Beta, std::max(dim, 3), checked - 1);
        const auto upper = cachedCodebook(CodebookLaw::Beta, std::max(dim, 3), checked);
        const double predicted = kPi / 2.0 * (lower->mse / lower->variance) / (upper->mse / upper->variance);
        for (int point : keyPoints(*run)) {
            const auto ck = cell(*run, point, kk, checked), cq = cell(*run, point, qq, checked);
            const Units ua = units(*run, ck, &TrialResult::kl), ub = units(*run, cq, &TrialResult::kl);
            const auto a = ua.pooled(), b = ub.pooled();
            const Contrast c = contrast(ua, ub, ++s, resamples);
            const double medianRatio = 1.0 / c.ratio;
            const auto [meanLow, meanHigh] = meanRatioInterval(ua, ub, ++s, resamples);
            const double meanRatio = mean(b) / mean(a);
            const bool reaches = (meanLow <= 2.25 && 2.25 <= meanHigh) || (1.0 / c.high <= 2.25 && 2.25 <= 1.0 / c.low);
            across.rows.push_back({settingLabel(*run, point), std::to_string(run->spec.d),
                                   std::to_string(run->spec.seedCount), formatSig(cellEntropy(ck)),
                                   ratioText(meanRatio, meanLow, meanHigh),
                                   ratioText(medianRatio, 1.0 / c.high, 1.0 / c.low), formatSig(predicted),
                                   reaches ? "yes" : "no"});
        }
        runs.push_back(run->spec.name);
    }
    return across;
}

} // namespace

Claim klRatioClaim(const ResultSet& rs, std::uint64_t seed, int resamples, const std::vector<const ResultSet*>& acrossRegimes)
{
    Claim claim;
    claim.id = "A3-kl-ratio-score-scale";
    claim.paper = "A";
    claim.title = "KQV's KL advantage at n = 4 is 2.25× — as a function of the score scale";
    claim.statement = "At the practically dominant 4-bit budget KQV reaches 2.25× lower KL than QKQV. The size of this "
                      "ratio depends on how peaked attention is, so it is measured at several score scales.";
    claim.criterion = "At n = 4 (the largest budget run), per score scale: median KL of QKQV over median KL of KQV with "
                      "a 95% interval that resamples seeds (the unit), and the exact seed-level Wilcoxon p. A check holds "
                      "when p < 0.01 with KQV lower and the interval contains 2.25; 'larger effect than claimed' when "
                      "the interval lies above 2.25; borderline when it ends within 5% below 2.25 (or p < 0.05); "
                      "contradicted below that. No tolerance around 2.25 is assumed: the interval is the measurement's "
                      "own sampling spread. Other budgets are tabulated, not checked.";
    claim.runs = {rs.spec.name};
    const int k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"});
    const std::vector<int> budgets = budgetsOf(rs);
    const int checked = budgets.empty() ? 4 : (std::count(budgets.begin(), budgets.end(), 4) ? 4 : budgets.back());
    Table table;
    table.caption = "QKQV / KQV median KL by score scale and budget (" + runLabel(rs) + ")";
    table.header = {"score scale", "mean entropy H(p) (nats)", "n", "seeds", "median KL KQV", "median KL QKQV",
                    "QKQV / KQV [95% CI]", "p (seeds)", "query-level p (secondary)"};
    Figure fig;
    fig.id = "a3_kl_ratio_vs_score_scale";
    fig.title = "QKQV / KQV median KL against the score scale";
    fig.xLabel = "score scale (query multiplier)";
    fig.yLabel = "median KL ratio QKQV / KQV";
    fig.logX = true;
    fig.logY = true;
    std::map<int, Series> lines;
    std::string headline;
    double xMin = 1e300, xMax = -1e300;
    for (int point = 0; k >= 0 && q >= 0 && point < rs.spec.pointCount(); ++point) {
        const double scale = pointValue(rs, point, SweepParameter::ScoreScale, {}, rs.pointSpec(point).scoreScale);
        xMin = std::min(xMin, scale);
        xMax = std::max(xMax, scale);
        for (int n : budgets) {
            const auto ck = cell(rs, point, k, n);
            const Contrast c = contrast(units(rs, ck, &TrialResult::kl), units(rs, cell(rs, point, q, n), &TrialResult::kl),
                                        seed + 7 * static_cast<std::uint64_t>(point) + n, resamples);
            const double ratio = 1.0 / c.ratio, low = 1.0 / c.high, high = 1.0 / c.low;
            table.rows.push_back({formatSig(scale), formatSig(cellEntropy(ck)), std::to_string(n), std::to_string(c.units),
                                  formatSig(c.medianA), formatSig(c.medianB), ratioText(ratio, low, high), formatP(c.p),
                                  formatP(c.queryP)});
            Series& s = lines[n];
            s.name = "n = " + std::to_string(n);
            pushRatio(s, scale, ratio, low, high);
            if (n == checked) {
                headline += (headline.empty() ? "" : "; ") + std::string("scale ") + formatSig(scale) + " → " +
                            ratioText(ratio, low, high);
                claim.checks.push_back({"score scale " + formatSig(scale) + ", n = " + std::to_string(n),
                                        "ratio " + ratioText(ratio, low, high) + ", " + seedP(c), false,
                                        both(directional(c), claimedValueOutcome(low, high, 2.25))});
            }
        }
    }
    for (auto& [n, s] : lines)
        fig.series.push_back(std::move(s));
    if (xMax >= xMin)
        fig.series.push_back(referenceLine("paper A: 2.25", xMin / 1.2, xMax * 1.2, 2.25));
    fig.caption = "Ratio of medians with 95% intervals that resample seeds; larger score scales mean more peaked "
                  "attention (lower entropy).";
    claim.headline = "QKQV / KQV median KL at n = " + std::to_string(checked) + ": " + headline + " (paper A: 2.25)";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));

    // Across regimes (tabulated, not checked): which settings reach 2.25, against the closed form.
    if (!acrossRegimes.empty())
        claim.tables.push_back(acrossRegimesTable(acrossRegimes, checked, seed + 500, resamples, claim.runs));
    decide(claim);
    return claim;
}

Claim recallFollowsKlClaim(const ResultSet& rs)
{
    Claim claim;
    claim.id = "A4-recall-follows-kl";
    claim.paper = "A";
    claim.title = "Top-5 recall and output direction error follow KL";
    claim.statement = "Lower KL under KQV goes with higher top-5 routing recall and lower output direction error φ_T.";
    claim.criterion = "Per (score scale, n), KQV against QKQV, each measure by the exact seed-level Wilcoxon test on "
                      "each seed's log ratio (of median KL, of mean recall, of median φ_T), signed so that > 0 means "
                      "KQV better. Where KL separates the schemes (p < 0.01) a check holds when recall and φ_T do too "
                      "(p < 0.01) in the same direction; where it does not, when neither separates them; borderline "
                      "when a p that decides lies within 5 times the level. The rank-biserial r of the figure is the "
                      "query-level effect size (descriptive).";
    claim.runs = {rs.spec.name};
    const int k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"});
    Table table;
    table.caption = "Effects of KQV against QKQV (> 0: KQV better) (" + runLabel(rs) + ")";
    table.header = {"setting", "n", "r KL", "p KL", "mean recall KQV", "mean recall QKQV", "r recall", "p recall",
                    "median φ_T KQV (rad)", "median φ_T QKQV (rad)", "r φ_T", "p φ_T", "follows"};
    Figure fig;
    fig.id = "a4_effects";
    fig.title = "Recall and output-direction effects against the KL effect";
    fig.xLabel = "rank-biserial r of KL (> 0: KQV lower)";
    fig.yLabel = "rank-biserial r (> 0: KQV better)";
    Series recall{"top-5 recall", {}, {}, {}, {}, false}, phi{"output direction error φ_T", {}, {}, {}, {}, false};
    int follows = 0;
    for (int point = 0; k >= 0 && q >= 0 && point < rs.spec.pointCount(); ++point) {
        for (int n : budgetsOf(rs)) {
            const auto ck = cell(rs, point, k, n), cq = cell(rs, point, q, n);
            const Contrast kl = contrast(units(rs, ck, &TrialResult::kl), units(rs, cq, &TrialResult::kl), 0, 0);
            // Recall is higher-is-better: put QKQV first so an effect > 0 means KQV's recall is higher.
            const Contrast rc = contrast(units(rs, cq, &TrialResult::recall), units(rs, ck, &TrialResult::recall), 0, 0,
                                         stats::Location::Mean);
            const Contrast ph = contrast(units(rs, ck, &TrialResult::phiT), units(rs, cq, &TrialResult::phiT), 0, 0);
            const bool klSignificant = kl.p.logP < std::log(kAlpha);
            auto agrees = [&](const Contrast& m) {
                const bool significant = m.p.logP < std::log(kAlpha);
                return klSignificant ? significant && (m.effect > 0.0) == (kl.effect > 0.0) : !significant;
            };
            // A p just above the level (within the borderline factor) could have decided the other way.
            auto near = [&](const Contrast& m) {
                return m.p.logP >= std::log(kAlpha) && m.p.logP < std::log(kBorderlineFactor * kAlpha);
            };
            const bool holds = agrees(rc) && agrees(ph);
            const Outcome outcome = kl.pMin > kAlpha ? Outcome::NotTestable
                                    : holds          ? Outcome::Holds
                                    : (near(kl) || near(rc) || near(ph)) ? Outcome::Borderline
                                                                           : Outcome::Contradicted;
            follows += holds ? 1 : 0;
            const std::string setting = settingLabel(rs, point) + ", n = " + std::to_string(n);
            claim.checks.push_back({setting,
                                    "r KL " + signedText(kl.r) + " (p " + formatP(kl.p) + "), r recall " + signedText(rc.r) +
                                        " (p " + formatP(rc.p) + "), r φ_T " + signedText(ph.r) + " (p " + formatP(ph.p) +
                                        "); p over " + std::to_string(kl.units) + " seeds",
                                    holds, outcome});
            table.rows.push_back({settingLabel(rs, point), std::to_string(n), signedText(kl.r), formatP(kl.p),
                                  formatSig(queryMeanInterval(ck, &TrialResult::recall).mean),
                                  formatSig(queryMeanInterval(cq, &TrialResult::recall).mean), signedText(rc.r),
                                  formatP(rc.p), formatSig(ph.medianA), formatSig(ph.medianB), signedText(ph.r),
                                  formatP(ph.p), holds ? "yes" : "no"});
            recall.x.push_back(kl.r);
            recall.y.push_back(rc.r);
            phi.x.push_back(kl.r);
            phi.y.push_back(ph.r);
        }
    }
    Series diagonal = referenceLine("y = x", -1.0, 1.0, 0.0);
    diagonal.y = {-1.0, 1.0};
    fig.series = {recall, phi, diagonal};
    fig.caption = "One point per (score scale, budget): points in the upper-right quadrant mean KQV is better on "
                  "both KL and the other measure.";
    claim.headline = std::to_string(follows) + " of " + std::to_string(claim.checks.size()) +
                     " settings: recall and φ_T move with KL (details in the table)";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

Claim heavyTailClaim(const ResultSet& rs)
{
    Claim claim;
    claim.id = "A5-heavy-tails";
    claim.paper = "A";
    claim.title = "Heavy tails (ν → 1.05): KV fails, WHT schemes stay stable";
    claim.statement = "The Walsh-Hadamard rotation protects against marginal concentration: KQV keeps a stable key "
                      "direction error (ε_dir^K ≈ 0.027) as the tail weight grows to ν = 1.05, while KV (no rotation) "
                      "fails catastrophically.";
    claim.criterion = "ε_dir^K = 1 − cos φ_K per key (the kept key samples), mean per seed, 95% Student-t interval over "
                      "seeds. Per budget: KQV and QKQV are stable when ε at the heaviest ν is at most 1.5× ε at the "
                      "lightest ν; KV fails when its ε at the heaviest ν is at least 3× its ε at the lightest ν. The "
                      "paper quantifies neither word: 1.5× and 3× are this report's reading of 'stable' and 'fails "
                      "catastrophically', and the sampling spread decides against them: the ratio's interval (from the "
                      "two seed intervals' ends) must lie on the claimed side of the bound to hold; one that straddles "
                      "it is borderline.";
    claim.runs = {rs.spec.name};
    const int kv = rs.schemeIndex("KV"), k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"});
    std::vector<std::pair<double, int>> nus;
    for (int p = 0; p < rs.spec.pointCount(); ++p)
        nus.push_back({pointValue(rs, p, SweepParameter::Regime, "nu", 0.0), p});
    std::sort(nus.begin(), nus.end());
    Table table;
    table.caption = "ε_dir^K by tail weight ν (" + rs.spec.regime + ")";
    table.header = {"ν", "n", "KV", "KQV", "QKQV"};
    Figure fig;
    fig.id = "a5_eps_dir_vs_nu";
    fig.title = "Key direction error ε_dir^K against the tail weight ν";
    fig.xLabel = "Student-t degrees of freedom ν (heavier tails to the left)";
    fig.yLabel = "ε_dir^K = 1 − cos φ_K";
    fig.logX = true;
    fig.logY = true;
    std::map<std::pair<int, int>, Series> lines;
    std::map<std::pair<int, int>, Interval> at; // (scheme, n) at heaviest / lightest
    std::map<std::pair<int, int>, Interval> atLight;
    for (const auto& [nu, point] : nus) {
        for (int n : budgetsOf(rs)) {
            std::vector<std::string> row = {formatSig(nu), std::to_string(n)};
            for (int s : {kv, k, q}) {
                if (s < 0) {
                    row.push_back("");
                    continue;
                }
                const Interval e = epsKInterval(cell(rs, point, s, n));
                row.push_back(intervalText(e));
                Series& line = lines[{s, n}];
                line.name = rs.schemes[static_cast<std::size_t>(s)].name + " n=" + std::to_string(n);
                pushInterval(line, nu, e);
                if (point == nus.front().second)
                    at[{s, n}] = e;
                if (point == nus.back().second)
                    atLight[{s, n}] = e;
            }
            table.rows.push_back(row);
        }
    }
    std::string headline;
    if (nus.size() >= 2) {
        const std::string heavy = formatSig(nus.front().first), light = formatSig(nus.back().first);
        for (int n : budgetsOf(rs)) {
            for (int s : {k, q}) {
                if (s < 0)
                    continue;
                const double ratio = at[{s, n}].mean / atLight[{s, n}].mean;
                const double low = at[{s, n}].low / atLight[{s, n}].high, high = at[{s, n}].high / atLight[{s, n}].low;
                claim.checks.push_back({rs.schemes[static_cast<std::size_t>(s)].name + " stable, n = " + std::to_string(n),
                                        "ε(ν=" + heavy + ") " + intervalText(at[{s, n}]) + " / ε(ν=" + light + ") " +
                                            intervalText(atLight[{s, n}]) + " = " + ratioText(ratio, low, high),
                                        false, bandOutcome(low, high, 0.0, 1.5)});
            }
            if (kv >= 0) {
                const double ratio = at[{kv, n}].mean / atLight[{kv, n}].mean;
                const double low = at[{kv, n}].low / atLight[{kv, n}].high, high = at[{kv, n}].high / atLight[{kv, n}].low;
                claim.checks.push_back({"KV fails, n = " + std::to_string(n),
                                        "ε(ν=" + heavy + ") " + intervalText(at[{kv, n}]) + " / ε(ν=" + light + ") " +
                                            intervalText(atLight[{kv, n}]) + " = " + ratioText(ratio, low, high),
                                        false, bandOutcome(low, high, 3.0, std::numeric_limits<double>::infinity())});
            }
            if (k >= 0 && kv >= 0)
                headline += (headline.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) +
                            ": ε_dir^K at ν = " + heavy + " KQV " + formatSig(at[{k, n}].mean) + ", KV " +
                            formatSig(at[{kv, n}].mean);
        }
    }
    claim.headline = headline + " (paper A: KQV ≈ 0.027)";
    for (auto& [key, s] : lines)
        fig.series.push_back(std::move(s));
    fig.caption = "Means of 1 − cos φ over the kept key samples, 95% intervals over seeds.";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

namespace {

/// The subspace basis of a low-rank run ("haar" for any other regime).
std::string basisOf(const ResultSet& rs)
{
    const auto it = rs.spec.regimeParams.find("basis");
    const std::string* text = it == rs.spec.regimeParams.end() ? nullptr : std::get_if<std::string>(&it->second);
    return text ? *text : "haar";
}

/// Mean over a cell's trials of a trial-level value.
template <typename Get>
double cellMean(const std::vector<const TrialResult*>& c, Get get)
{
    double sum = 0.0;
    for (const TrialResult* t : c)
        sum += get(*t);
    return c.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(c.size());
}

} // namespace

namespace {

/// A6's premise, reported and not counted (it does not make the claim about KL any truer): the two
/// runs' rotated key marginals have the same histogram. A table of the KS test and the histograms.
void addLowRankPremise(Claim& claim, const MarginalHistogram* lrMarginal, const MarginalHistogram* htMarginal)
{
    const stats::KsResult ks = stats::ksTwoSample(lrMarginal->sample, htMarginal->sample);
    claim.tables.push_back({"Premise: same rotated marginal histogram (KS D ≤ 0.05)",
                            {"KS D", "KS p", "raw excess kurtosis, low rank", "raw excess kurtosis, heavy tail",
                             "premise holds"},
                            {{formatSig(ks.d), formatP(ks.p), formatSig(lrMarginal->rawExcessKurtosis),
                              formatSig(htMarginal->rawExcessKurtosis), ks.d <= 0.05 ? "yes" : "no"}}});
    Figure hist;
    hist.id = "a6_marginal_histograms";
    hist.title = "Rotated key marginals: low rank vs heavy tail";
    hist.xLabel = "√d · (H D k / ‖k‖) coordinate";
    hist.yLabel = "density";
    for (const MarginalHistogram* m : {lrMarginal, htMarginal}) {
        Series s;
        s.name = m->label;
        s.steps = true;
        for (std::size_t b = 0; b < m->density.size(); ++b) {
            s.x.push_back(0.5 * (m->edges[b] + m->edges[b + 1]));
            s.y.push_back(m->density[b]);
        }
        hist.series.push_back(std::move(s));
    }
    Series gauss;
    gauss.name = "N(0, 1) (the d → ∞ limit of the Beta law)";
    gauss.reference = true;
    for (int i = 0; i <= 80; ++i) {
        const double x = -4.0 + 0.1 * i;
        gauss.x.push_back(x);
        gauss.y.push_back(std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi));
    }
    hist.series.push_back(std::move(gauss));
    hist.caption = "Histograms of every rotated, normalized key coordinate of the first seed; KS D = " +
                   formatSig(ks.d) + ".";
    claim.figures.push_back(std::move(hist));
}

/// What A6 builds over the constructions it checks: the table, the bars and their series.
struct LowRankReport {
    Table table;
    Figure bars;
    Series lrSeries, htSeries;
    std::string headline;
    std::uint64_t seed = 0x6a6; ///< one resampling seed per check, in check order
};

/// One construction of the low-rank regime (`lr`) against the heavy-tailed run, checked per scheme
/// and budget; `several`: more than one construction is checked, so their names prefix the rows.
void checkLowRankConstruction(Claim& claim, LowRankReport& report, const ResultSet& lr, const ResultSet& heavyTail,
                              bool several)
{
    Table& table = report.table;
    Figure& bars = report.bars;
    const std::string basis = basisOf(lr);
    const std::string prefix = several ? basis + " subspace: " : "";
    for (int n : budgetsOf(lr)) {
        for (std::size_t s = 0; s < lr.schemes.size(); ++s) {
            const int h = heavyTail.schemeIndex(lr.schemes[s].name);
            if (h < 0)
                continue;
            const auto lrCell = cell(lr, 0, static_cast<int>(s), n), htCell = cell(heavyTail, 0, h, n);
            // A = heavy tail, B = low rank: the claim says A is lower.
            const Contrast c = contrastRuns(units(heavyTail, htCell, &TrialResult::kl), units(lr, lrCell, &TrialResult::kl),
                                            report.seed++, 400, stats::Location::Mean);
            const double ratio = 1.0 / c.ratio, low = 1.0 / c.high, high = 1.0 / c.low;
            const std::string name = prefix + lr.schemes[s].name;
            claim.checks.push_back({name + ", n = " + std::to_string(n),
                                    "mean KL ratio " + ratioText(ratio, low, high) + " (" + formatSig(std::log10(ratio), 2) +
                                        " decades), " + pEquals(c.p) + " over " + std::to_string(lrCell.size()) + " + " +
                                        std::to_string(htCell.size()) + " seeds",
                                    false,
                                    both(directional(c), bandOutcome(low, high, 100.0, std::numeric_limits<double>::infinity()))});
            table.rows.push_back({name, std::to_string(n), std::to_string(lrCell.size()) + " + " + std::to_string(htCell.size()),
                                  formatSig(c.medianB), formatSig(c.medianA), ratioText(ratio, low, high),
                                  formatSig(std::log10(ratio), 2), formatP(c.p), formatP(c.queryP)});
            const double x = static_cast<double>(bars.categories.size());
            // Short labels: the construction, the scheme and the budget.
            bars.categories.push_back((several ? basis + " " : std::string()) + lr.schemes[s].name + " n=" +
                                      std::to_string(n));
            pushInterval(report.lrSeries, x, queryMeanInterval(lrCell, &TrialResult::kl));
            pushInterval(report.htSeries, x, queryMeanInterval(htCell, &TrialResult::kl));
            report.headline += (report.headline.empty() ? "" : "; ") + name + " n=" + std::to_string(n) + ": ×" + formatSig(ratio);
        }
    }
}

/// Why the construction decides: a table of every construction against the heavy-tailed run, and
/// the statement's explanation (with the tension it creates for A2 in the axis-aligned one).
void addConstructionsTable(Claim& claim, const std::vector<const ResultSet*>& all, const ResultSet& lowRank,
                           const ResultSet& heavyTail)
{
    // Why the construction decides: H D x for x on the first r axes mixes only the first r
    // Sylvester columns, whose entries depend on the coordinate index mod r: the rotated key
    // repeats with period r, its d/r copies carry the same quantization error, and the score
    // error adds up coherently (up to d/r times the independent-error prediction).
    Table constructionsTable;
    constructionsTable.caption = "Constructions of the low-rank regime against the heavy-tailed run (n = " +
                                 std::to_string(budgetsOf(lowRank).empty() ? 0 : budgetsOf(lowRank).back()) + ")";
    constructionsTable.header = {"subspace basis", "scheme", "mean KL ratio vs heavy tail", "measured / predicted Var(ds)",
                                 "φ_K low rank / heavy tail", "mean entropy low rank (nats)",
                                 "mean entropy heavy tail (nats)"};
    const double htEntropy = runMeanEntropy(heavyTail);
    std::string axisTension;
    for (const ResultSet* run : all) {
        const int n = budgetsOf(*run).empty() ? 0 : budgetsOf(*run).back();
        for (const char* name : {"KV", "KQV", "QKQV", "KQV-P"}) {
            const int s = run->schemeIndex(name);
            const int h = heavyTail.schemeIndex(std::string_view(name) == "KQV-P" ? "KQV" : name);
            if (s < 0 || h < 0)
                continue;
            const auto lrCell = cell(*run, 0, s, n), htCell = cell(heavyTail, 0, h, n);
            const double ratio = mean(pooled(lrCell, &TrialResult::kl)) / mean(pooled(htCell, &TrialResult::kl));
            const double excess = cellMean(lrCell, [](const TrialResult& t) {
                return t.scoreErrorVar / t.scoreErrorVarPredicted;
            });
            const double phi = cellMean(lrCell, [](const TrialResult& t) { return t.sixD.phiK; }) /
                               cellMean(htCell, [](const TrialResult& t) { return t.sixD.phiK; });
            constructionsTable.rows.push_back({basisOf(*run), name, formatSig(ratio), formatSig(excess), formatSig(phi),
                                               formatSig(runMeanEntropy(*run)), formatSig(htEntropy)});
        }
        if (basisOf(*run) == "axis") {
            const int kqv = run->schemeIndex("KQV"), qkqv = run->schemeIndex("QKQV");
            if (kqv >= 0 && qkqv >= 0) {
                const double a = mean(pooled(cell(*run, 0, kqv, n), &TrialResult::kl));
                const double b = mean(pooled(cell(*run, 0, qkqv, n), &TrialResult::kl));
                axisTension = " In the axis-aligned construction QKQV's mean KL is " + formatSig(b) + " against KQV's " +
                              formatSig(a) + (b < a ? " (QKQV wins)" : " (KQV wins)") +
                              ": the construction that shows A6 is one where A2's 'KQV wins everywhere' is tested "
                              "too, and the two cannot both hold there unless KQV also wins in this row.";
            }
        }
    }
    claim.tables.push_back(std::move(constructionsTable));
    claim.criterion += " Each construction of the low-rank regime (subspace basis haar, axis, random_axes) is checked "
                       "by the same rule, so the verdict names the constructions that hold it. KQV-P is KQV with a "
                       "seeded coordinate permutation before the WHT (rotation wht_permuted), on the same data.";
    claim.statement += " Which construction shows it: a subspace on the first r coordinate axes is coherent with "
                       "the Sylvester ordering of the Hadamard transform (the random signs do not change which "
                       "Hadamard columns those axes map to), so every rotated key repeats with period r and its "
                       "quantization errors add coherently; a Haar subspace is incoherent with it and cannot show "
                       "the effect, r random axes only weakly, and a seeded coordinate permutation before the WHT "
                       "removes it." + axisTension;
}

} // namespace

Claim lowRankClaim(const ResultSet& lowRank, const ResultSet& heavyTail, const MarginalHistogram* lrMarginal,
                   const MarginalHistogram* htMarginal, const std::vector<const ResultSet*>& constructions)
{
    Claim claim;
    claim.id = "A6-low-rank";
    claim.paper = "A";
    claim.title = "Low-rank keys at d = " + std::to_string(lowRank.spec.d) +
                  ": KL orders of magnitude above heavy-tailed keys with the same marginal histogram";
    claim.statement = "At d = 1024, low-rank keys produce a KL orders of magnitude worse than heavy-tailed keys although "
                      "the rotated marginal histograms are identical: the WHT fixes marginals, not the joint structure.";
    claim.criterion = "Premise (reported, not a check): the rotated, normalized key coordinates of the two runs "
                      "have the same histogram (two-sample KS D ≤ 0.05). Per scheme and budget, with the seed as the "
                      "unit (the two runs' seeds are independent draws, so they do not pair): each seed's mean KL, the "
                      "exact Mann-Whitney test between the two runs' seeds (p < 0.01, heavy tail lower), and the ratio "
                      "of mean KL, low rank over heavy tail, with a 95% interval resampling each run's seeds: 'orders "
                      "of magnitude' is read as at least 100×. Holds when the test is significant and the interval lies "
                      "above 100; borderline when it straddles 100; contradicted below; not testable when the seeds "
                      "cannot reach p < 0.01 (4 and 4 seeds give at best 0.029).";
    claim.runs = {lowRank.spec.name, heavyTail.spec.name};
    if (lrMarginal && htMarginal)
        addLowRankPremise(claim, lrMarginal, htMarginal);
    LowRankReport report;
    Table& table = report.table;
    table.caption = "Per-query KL, low rank against heavy tail";
    table.header = {"scheme", "n", "seeds", "mean KL low rank", "mean KL heavy tail", "ratio of means [95% CI]",
                    "decades", "p (seeds)", "query-level p (secondary)"};
    Figure& bars = report.bars;
    bars.id = "a6_kl_low_rank_vs_heavy_tail";
    bars.title = "Mean attention KL: low-rank vs heavy-tailed keys";
    bars.yLabel = "mean KL (nats)";
    bars.logY = true;
    report.lrSeries = Series{runLabel(lowRank), {}, {}, {}, {}, false};
    report.htSeries = Series{runLabel(heavyTail), {}, {}, {}, {}, false};
    std::vector<const ResultSet*> all{&lowRank};
    for (const ResultSet* rs : constructions)
        if (rs)
            all.push_back(rs);
    for (const ResultSet* run : all) { // each construction in turn, checked the same way
        if (run != all.front())
            claim.runs.push_back(run->spec.name);
        checkLowRankConstruction(claim, report, *run, heavyTail, all.size() > 1);
    }
    if (all.size() > 1)
        addConstructionsTable(claim, all, lowRank, heavyTail);
    bars.series = {report.lrSeries, report.htSeries};
    bars.caption = "Means over queries, 95% intervals over seeds.";
    claim.headline = "mean KL low rank / heavy tail: " + report.headline;
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(bars));
    decide(claim);
    return claim;
}

namespace {

/// Why there is (or is not) a crossover. QKQV stores the (n-1)-bit residual r and adds the
/// sketch's reconstruction; the key error left is f ||r||^2 with f = ((pi/2) dim - 1)/m for
/// the unbiased Gaussian reconstruction (1.56 at m = dim: it adds 56% of the residual energy
/// instead of removing any), (pi/2) dim/m - 1 for orthogonal rows, and f / (1 + f) with the
/// MSE shrinkage. KQV's error is the n-bit distortion D_n, so QKQV wins only when
/// f < D_n / D_{n-1}: the sketch must remove 1 - D_n / D_{n-1} (68-73%) of the residual.
void explainCrossover(Claim& claim, const std::vector<const ResultSet*>& runs)
{
    for (const ResultSet* rs : runs) {
        const int kqv = anyScheme(*rs, {"KQV", "TQ-KQV"});
        if (kqv < 0)
            continue;
        std::vector<int> variants;
        for (std::size_t s = 0; s < rs->schemes.size(); ++s) {
            const PathConfig& k = rs->schemes[s].key;
            if (k.has("qjl") && k.transforms.size() == 1 && k.transforms.front().kind == "wht")
                variants.push_back(static_cast<int>(s));
        }
        if (variants.size() < 2)
            continue; // the explanation table needs alternatives side by side (budget_crossover.json)
        const int d = rs->spec.d;
        const int dim = static_cast<int>(paddedDimension(static_cast<std::size_t>(d)));
        Table why;
        why.caption = "Residual energy left by the key sketch (" + runLabel(*rs) + ", dim = " + std::to_string(dim) +
                      "): measured ‖k − k̂‖² / D_{n−1} against the closed form, and the fraction a crossover needs";
        why.header = {"scheme", "n", "sketch", "reconstruction", "m", "bits/coord K", "left: closed form",
                      "left: measured", "needed for a crossover (D_n / D_{n−1})", "mean ε KQV", "mean ε scheme",
                      "beats KQV"};
        for (int n : budgetsOf(*rs)) {
            if (n < 2)
                continue;
            const auto lower = cachedCodebook(CodebookLaw::Beta, std::max(dim, 3), n - 1);
            const auto upper = cachedCodebook(CodebookLaw::Beta, std::max(dim, 3), n);
            const double dLower = lower->mse / lower->variance, dUpper = upper->mse / upper->variance;
            const auto ck = cell(*rs, 0, kqv, n);
            const double epsKqv = mean(pooledEpsK(ck));
            for (int v : variants) {
                const PathConfig& k = rs->schemes[static_cast<std::size_t>(v)].key;
                if (k.bits.at(n) != n - 1)
                    continue;
                const CodecPart& qjl = *k.part("qjl");
                const int m = qjl.integer("m") > 0 ? qjl.integer("m") : d;
                const double f = QjlSketch::reconstructionError(m, dim, qjl.text("sketch") == "orthogonal");
                const double closed = qjl.text("reconstruction") == "mse" ? f / (1.0 + f) : f;
                const auto cv = cell(*rs, 0, v, n);
                const double relMse = cellMean(cv, [](const TrialResult& t) { return t.relMseK; });
                const double epsV = mean(pooledEpsK(cv));
                why.rows.push_back({rs->schemes[static_cast<std::size_t>(v)].name, std::to_string(n),
                                    qjl.text("sketch"), qjl.text("reconstruction"), std::to_string(m),
                                    formatSig(cellMean(cv, [](const TrialResult& t) { return t.bits.key; })),
                                    formatSig(closed), formatSig(relMse / dLower), formatSig(dUpper / dLower),
                                    formatSig(epsKqv), formatSig(epsV), epsV < epsKqv ? "yes" : "no"});
            }
        }
        claim.tables.push_back(std::move(why));
        auto percent = [](double f) { return formatSig(100.0 * f, 2) + "%"; };
        const double unbiased = QjlSketch::reconstructionError(d, dim, false);
        const double tall = QjlSketch::reconstructionError(4 * d, dim, false);
        claim.statement += " Why KVLens finds no crossover with the unbiased sketch: its reconstruction "
                           "√(π/2)/m·‖r‖·Sᵀsign(Sr) leaves ((π/2)·dim − 1)/m = " + percent(unbiased) +
                           " of the residual energy at m = d and dim = " + std::to_string(dim) +
                           ", while beating the n-bit scalar needs it to leave D_n/D_{n−1} (27–32% for n = 2..4), "
                           "i.e. to remove 68–73%. The closed forms of the alternatives measured side by side: the "
                           "MSE-shrunk reconstruction leaves " + percent(unbiased / (1.0 + unbiased)) +
                           ", an orthogonal sign sketch " + percent(QjlSketch::reconstructionError(d, dim, true)) +
                           ", m = 4d " + percent(tall) + " and m = 4d with the shrinkage " +
                           percent(tall / (1.0 + tall)) + " (at 3 more bits per coordinate).";
        return; // the first run with the alternatives side by side
    }
}

} // namespace

Claim crossoverClaim(const std::vector<const ResultSet*>& runs)
{
    Claim claim;
    claim.id = "A7-budget-crossover";
    claim.paper = "A";
    claim.title = "Budget crossover in key direction error: QKQV better at n = 2, 3, KQV at n = 4";
    claim.statement = "At low budgets (n ∈ {2, 3}) QKQV reconstructs key directions better than KQV (lower ε_dir^K); at "
                      "n = 4 KQV wins. The crossover is invariant to rank and tail weight.";
    claim.criterion = "Per run and setting: ε_dir^K = 1 − cos φ_K of the same keys under both schemes, each seed's "
                      "mean, exact Wilcoxon signed-rank over the seeds (the unit; the keys of a seed share its draw); "
                      "runs without budgets on both sides of 4 are skipped. A setting's check holds when QKQV is lower "
                      "at every run budget ≤ 3 and KQV is lower at every budget ≥ 4, each with p < 0.01; borderline "
                      "when the weakest is within 5 times the level.";
    Table table;
    table.caption = "ε_dir^K of KQV and QKQV (paired per key)";
    table.header = {"setting", "n", "seeds", "mean ε KQV", "mean ε QKQV", "p (seeds)", "seeds as expected",
                    "expected lower", "outcome"};
    Figure fig;
    fig.id = "a7_crossover";
    fig.title = "Key direction error by budget: the crossover";
    fig.xLabel = "bit budget n";
    fig.yLabel = "ε_dir^K = 1 − cos φ_K";
    fig.logY = true;
    std::string headline;
    for (const ResultSet* rs : runs) {
        const int k = anyScheme(*rs, {"KQV", "TQ-KQV"}), q = anyScheme(*rs, {"QKQV", "TQ-QKQV"});
        if (k < 0 || q < 0)
            continue;
        // A crossover needs a budget on each side of it.
        const std::vector<int> budgets = budgetsOf(*rs);
        if (budgets.empty() || budgets.front() > 3 || budgets.back() < 4)
            continue;
        const std::vector<int> points = keyPoints(*rs);
        claim.runs.push_back(rs->spec.name);
        for (int point : points) {
            const std::string setting = points.size() > 1 ? settingLabel(*rs, point) : runLabel(*rs);
            std::vector<Outcome> outcomes;
            std::string measured;
            Series sk{"KQV, " + setting, {}, {}, {}, {}}, sq{"QKQV, " + setting, {}, {}, {}, {}};
            for (int n : budgetsOf(*rs)) {
                const auto ck = cell(*rs, point, k, n), cq = cell(*rs, point, q, n);
                const Units uk = unitsEpsK(*rs, ck), uq = unitsEpsK(*rs, cq);
                const auto a = uk.pooled(), b = uq.pooled();
                // The scheme expected lower first: the claim's direction is then effect > 0.
                const bool qkqvExpected = n <= 3;
                const Contrast c = qkqvExpected ? contrast(uq, uk, 0, 0, stats::Location::Mean)
                                                : contrast(uk, uq, 0, 0, stats::Location::Mean);
                const Outcome o = directional(c);
                outcomes.push_back(o);
                measured += (measured.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) + ": KQV " +
                            formatSig(mean(a)) + " vs QKQV " + formatSig(mean(b)) + " (" + seedP(c) + ")";
                table.rows.push_back({setting, std::to_string(n), std::to_string(c.units), formatSig(mean(a)),
                                      formatSig(mean(b)), formatP(c.p), std::to_string(c.unitsALower),
                                      qkqvExpected ? "QKQV" : "KQV", std::string(outcomeText(o))});
                if (point == points.front()) {
                    pushInterval(sk, n, epsKInterval(ck));
                    pushInterval(sq, n, epsKInterval(cq));
                }
            }
            claim.checks.push_back({setting, measured, false, allOf(outcomes)});
            if (headline.empty())
                headline = setting + ": " + measured;
            if (point == points.front() && fig.series.size() < 8) {
                fig.series.push_back(std::move(sk));
                fig.series.push_back(std::move(sq));
            }
        }
    }
    claim.headline = headline;
    fig.caption = "Means over the kept key samples, 95% intervals over seeds (first setting of each run).";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));

    explainCrossover(claim, runs);
    decide(claim);
    return claim;
}

} // namespace kvlens::claims
