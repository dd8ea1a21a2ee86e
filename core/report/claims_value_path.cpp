// SPDX-License-Identifier: GPL-3.0-or-later
// Papers A and B on the value path: where the QJL bit goes.
#include "core/report/claims.h"

#include "core/report/claim_support.h"

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
#include <array>
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
// Papers A and B on the value path

namespace {

struct VpathCell {
    std::string setting;
    int n = 0;
    Contrast phiVsNone, d2VsNone;    ///< V-QJL against no QJL (lower-is-better, V-QJL first)
    Contrast klVsK, d2VsK;           ///< V-QJL against K-QJL
};

std::vector<VpathCell> vpathCells(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    std::vector<VpathCell> cells;
    for (const ResultSet* rs : runs) {
        const int v = anyScheme(*rs, {"TQ-KQV", "KQV"}), none = rs->schemeIndex("TQ-KV"),
                  kq = rs->schemeIndex("TQ-QKV");
        if (v < 0 || none < 0 || kq < 0)
            continue;
        for (int point = 0; point < rs->spec.pointCount(); ++point) {
            for (int n : budgetsOf(*rs)) {
                const auto cv = cell(*rs, point, v, n), cn = cell(*rs, point, none, n), ck = cell(*rs, point, kq, n);
                VpathCell c;
                c.setting = settingLabel(*rs, point);
                c.n = n;
                const std::uint64_t s = seed + 31 * cells.size();
                c.phiVsNone = contrast(units(*rs, cv, &TrialResult::phiT), units(*rs, cn, &TrialResult::phiT), s, resamples);
                c.d2VsNone = contrast(units(*rs, cv, &TrialResult::d2), units(*rs, cn, &TrialResult::d2), s + 1, resamples);
                c.klVsK = contrast(units(*rs, cv, &TrialResult::kl), units(*rs, ck, &TrialResult::kl), s + 2, resamples);
                c.d2VsK = contrast(units(*rs, cv, &TrialResult::d2), units(*rs, ck, &TrialResult::d2), s + 3, resamples);
                cells.push_back(std::move(c));
            }
        }
    }
    return cells;
}

Table vpathTable(const std::vector<VpathCell>& cells)
{
    Table t;
    t.caption = "The same comparisons for both papers: TQ-KQV (QJL on V) against TQ-KV (no QJL) and TQ-QKV (QJL on K)";
    t.header = {"setting", "n", "seeds", "φ_T: KQV / KV [CI]", "p (seeds)", "r (queries)", "d²: KQV / KV [CI]",
                "p (seeds)", "r (queries)", "A (V-QJL helps)", "B (V-QJL hurts)", "KL: KQV / QKV [CI]", "p (seeds)",
                "r (queries)", "d²: KQV / QKV [CI]", "p (seeds)", "r (queries)"};
    for (const VpathCell& c : cells) {
        auto helps = [](const Contrast& x) { return significantInDirection(x.p, x.effect); };
        auto hurts = [](const Contrast& x) { return significantInDirection(x.p, -x.effect); };
        const std::string a = std::string(helps(c.phiVsNone) ? "φ_T " : "") + (helps(c.d2VsNone) ? "d²" : "");
        const std::string b = std::string(hurts(c.phiVsNone) ? "φ_T " : "") + (hurts(c.d2VsNone) ? "d²" : "");
        t.rows.push_back({c.setting, std::to_string(c.n), std::to_string(c.phiVsNone.units),
                          ratioText(c.phiVsNone.ratio, c.phiVsNone.low, c.phiVsNone.high),
                          formatP(c.phiVsNone.p), signedText(c.phiVsNone.r),
                          ratioText(c.d2VsNone.ratio, c.d2VsNone.low, c.d2VsNone.high), formatP(c.d2VsNone.p),
                          signedText(c.d2VsNone.r), a.empty() ? "—" : a, b.empty() ? "—" : b,
                          ratioText(c.klVsK.ratio, c.klVsK.low, c.klVsK.high), formatP(c.klVsK.p), signedText(c.klVsK.r),
                          ratioText(c.d2VsK.ratio, c.d2VsK.low, c.d2VsK.high), formatP(c.d2VsK.p),
                          signedText(c.d2VsK.r)});
    }
    return t;
}

std::vector<std::string> vpathRuns(const std::vector<const ResultSet*>& runs)
{
    std::vector<std::string> names;
    for (const ResultSet* rs : runs)
        names.push_back(rs->spec.name);
    return names;
}

} // namespace

/// AB1/AB2's checks for one cell: TQ-KQV against TQ-KV on per-query φ_T and d², holding when the
/// difference is significant in `direction` (+1: TQ-KQV lower, -1: higher). Returns how many hold.
int addVpathChecks(Claim& claim, const VpathCell& c, double direction)
{
    const std::string setting = c.setting + ", n = " + std::to_string(c.n);
    int holding = 0;
    for (const auto& [metric, x] : {std::pair<const char*, const Contrast*>{"φ_T", &c.phiVsNone}, {"d²", &c.d2VsNone}}) {
        const Outcome o = directionalOutcome(x->p, direction * x->effect, x->pMin);
        holding += o == Outcome::Holds ? 1 : 0;
        claim.checks.push_back({setting + " [" + metric + "]",
                                "ratio " + ratioText(x->ratio, x->low, x->high) + ", " + seedP(*x), false, o});
    }
    return holding;
}

/// A ratio AB1 or AB2 draws per cell: its series name and the cell's contrast.
struct VpathRatio {
    const char* name;
    Contrast VpathCell::*contrast;
};

/// AB1/AB2's figure and checks: each cell's checks (addVpathChecks in `direction`) and, as bars, the
/// two ratios with their intervals, against a line at 1. Returns how many checks hold.
int addVpathRatios(Claim& claim, Figure& fig, const std::vector<VpathCell>& cells, double direction, VpathRatio first,
                   VpathRatio second)
{
    const std::array<VpathRatio, 2> ratios{first, second};
    std::array<Series, 2> series;
    for (std::size_t i = 0; i < ratios.size(); ++i)
        series[i] = Series{ratios[i].name, {}, {}, {}, {}, false};
    int holding = 0;
    for (const VpathCell& c : cells) {
        holding += addVpathChecks(claim, c, direction);
        const double xPos = static_cast<double>(fig.categories.size());
        fig.categories.push_back(c.setting + " n=" + std::to_string(c.n));
        for (std::size_t i = 0; i < ratios.size(); ++i) {
            const Contrast& x = c.*ratios[i].contrast;
            pushRatio(series[i], xPos, x.ratio, x.low, x.high);
        }
    }
    if (!fig.categories.empty())
        fig.series = {series[0], series[1], referenceLine("no difference", -0.5, fig.categories.size() - 0.5, 1.0)};
    return holding;
}

Claim vpathPaperAClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "AB1-vpath-paper-a";
    claim.paper = "A vs B";
    claim.title = "QJL on the value path — paper A's verdict: it helps";
    claim.statement = "Paper A: on the values, the 1-bit QJL sketch corrects the bias of the scalar code without a "
                      "variance penalty (values enter the output linearly), so (n−1)-bit scalar + QJL on V improves the "
                      "output; QJL belongs on V, never on K.";
    claim.criterion = "Same data, same budget: TQ-KQV (WHT + n-bit K; (n−1)-bit + QJL on V) against TQ-KV (n bits on "
                      "both, no QJL), per-query output error, with the seed as the unit (exact Wilcoxon over seeds of each "
                      "seed's log median ratio). One check per (setting, n, metric) with metric ∈ {φ_T (paper A's output "
                      "direction error), d² (paper B's)}: it holds when TQ-KQV is lower with p < 0.01 (borderline within "
                      "5 times the level).";
    claim.runs = vpathRuns(runs);
    const std::vector<VpathCell> cells = vpathCells(runs, seed, resamples);
    Figure fig;
    fig.id = "ab1_vpath_output_error_ratio";
    fig.title = "QJL on V vs none: output-error ratio TQ-KQV / TQ-KV";
    fig.yLabel = "median ratio TQ-KQV / TQ-KV";
    fig.logY = true;
    const int helpsCount = addVpathRatios(claim, fig, cells, +1.0, {"φ_T", &VpathCell::phiVsNone}, {"d²", &VpathCell::d2VsNone});
    fig.caption = "Below 1: QJL on V lowers the output error (paper A); above 1: it raises it (paper B). Paired "
                  "95% intervals of the ratio of medians resampling seeds.";
    claim.headline = "TQ-KQV has significantly lower output error than TQ-KV in " + std::to_string(helpsCount) +
                     " of " + std::to_string(claim.checks.size()) + " (setting, n, metric) checks";
    claim.tables.push_back(vpathTable(cells));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

Claim vpathPaperBClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "AB2-vpath-paper-b";
    claim.paper = "A vs B";
    claim.title = "QJL on the value path — paper B's verdict: it hurts";
    claim.statement = "Paper B: applying QJL to the values (which are summed over tokens) is a heuristic that "
                      "consistently degrades the output, compared with no QJL and with corrections on the K path.";
    claim.criterion = "On the same data and tests as AB1 (TQ-KQV against TQ-KV, per-query φ_T and d²), a check holds "
                      "when TQ-KQV is HIGHER with p < 0.01 (seed level). The K-path comparison (TQ-KQV against TQ-QKV) is "
                      "tabulated and drawn beside it.";
    claim.runs = vpathRuns(runs);
    const std::vector<VpathCell> cells = vpathCells(runs, seed, resamples);
    Figure fig;
    fig.id = "ab2_vpath_vs_kpath_ratio";
    fig.title = "QJL on V vs QJL on K: ratio TQ-KQV / TQ-QKV";
    fig.yLabel = "median ratio TQ-KQV / TQ-QKV";
    fig.logY = true;
    const int hurtsCount = addVpathRatios(claim, fig, cells, -1.0, {"KL", &VpathCell::klVsK}, {"d²", &VpathCell::d2VsK});
    fig.caption = "Below 1: the QJL bit does less damage on V than on K (paper A's placement); above 1: on K is "
                  "better (paper B's). 95% intervals resampling seeds.";
    claim.headline = "TQ-KQV has significantly higher output error than TQ-KV in " + std::to_string(hurtsCount) +
                     " of " + std::to_string(claim.checks.size()) + " (setting, n, metric) checks";
    claim.tables.push_back(vpathTable(cells));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

} // namespace kvlens::claims
