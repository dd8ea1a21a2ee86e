// SPDX-License-Identifier: GPL-3.0-or-later
// Paper B's claims (SpectralQuant against TurboQuant, water-filling).
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
// Paper B

Claim sqVsTqClaim(const ResultSet* gaussian, const ResultSet* heavyTail, const ResultSet* lowRank, std::uint64_t seed,
                  int resamples)
{
    Claim claim;
    claim.id = "B1-sq-vs-tq";
    claim.paper = "B";
    claim.title = "SpectralQuant vs TurboQuant by regime and budget";
    claim.statement = "Heavy tails: the calibrated eigenbasis fails and TQ-KV wins at every budget. Low rank: SQ beats "
                      "TQ. Isotropic data at b = 2: no structure to exploit, Plain-KV is competitive. b ≥ 4: TQ-KV "
                      "dominates outside highly structured regimes.";
    claim.criterion = "Per-query output error d² = relMSE_T² + ε_dir,T² (paper B's metric), with the seed as the unit: "
                      "each seed's median d², exact Wilcoxon signed-rank over the seeds. Heavy tail, every n: TQ-KV "
                      "lower than SQ-KV (p < 0.01). Low rank, every n: SQ-KV lower than TQ-KV (p < 0.01). Gaussian, "
                      "n ≥ 4: TQ-KV lower than SQ-KV (p < 0.01). Borderline within 5 times the level. Gaussian, n = 2: "
                      "Plain-KV 'competitive' is read as its median d² within 1.25× of the best scheme's (1 dB of "
                      "output SNR, the margin of B2): holds when the ratio's seed-resampled interval lies under 1.25, "
                      "borderline when it straddles it.";
    const std::vector<std::string> names = {"Plain-KV", "TQ-KV", "TQ-QKV", "SQ-KV", "SQU-KV", "SQ-QKV"};
    Table d2Table, klTable;
    d2Table.caption = "Median per-query d² by regime and budget";
    klTable.caption = "Median per-query KL by regime and budget";
    d2Table.header = klTable.header = {"regime", "n", "Plain-KV", "TQ-KV", "TQ-QKV", "SQ-KV", "SQU-KV", "SQ-QKV", "best"};
    std::uint64_t s = seed;
    for (const auto& [rs, kind] : {std::pair<const ResultSet*, int>{heavyTail, 0}, {lowRank, 1}, {gaussian, 2}}) {
        if (!rs)
            continue;
        claim.runs.push_back(rs->spec.name);
        const int tq = rs->schemeIndex("TQ-KV"), sq = rs->schemeIndex("SQ-KV"), plain = rs->schemeIndex("Plain-KV");
        for (int n : budgetsOf(*rs)) {
            std::vector<std::string> d2Row = {runLabel(*rs), std::to_string(n)}, klRow = d2Row;
            double best = 1e300;
            std::string bestName;
            std::map<std::string, double> medians;
            for (const std::string& name : names) {
                const int i = rs->schemeIndex(name);
                if (i < 0) {
                    d2Row.push_back("");
                    klRow.push_back("");
                    continue;
                }
                const auto c = cell(*rs, 0, i, n);
                const double md = median(pooled(c, &TrialResult::d2));
                medians[name] = md;
                d2Row.push_back(formatSig(md));
                klRow.push_back(formatSig(median(pooled(c, &TrialResult::kl))));
                if (md < best) {
                    best = md;
                    bestName = name;
                }
            }
            d2Row.push_back(bestName);
            klRow.push_back("");
            d2Table.rows.push_back(d2Row);
            klTable.rows.push_back(klRow);
            if (tq < 0 || sq < 0)
                continue;
            const Units tqD2 = units(*rs, cell(*rs, 0, tq, n), &TrialResult::d2);
            const Units sqD2 = units(*rs, cell(*rs, 0, sq, n), &TrialResult::d2);
            const std::string setting = runLabel(*rs) + ", n = " + std::to_string(n);
            if (kind == 0 || (kind == 2 && n >= 4)) {
                const Contrast c = contrast(tqD2, sqD2, ++s, resamples);
                claim.checks.push_back({setting + ": TQ-KV beats SQ-KV",
                                        "d² SQ-KV / TQ-KV " + ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low) +
                                            ", " + seedP(c),
                                        false, directional(c)});
            } else if (kind == 1) {
                const Contrast c = contrast(sqD2, tqD2, ++s, resamples);
                claim.checks.push_back({setting + ": SQ-KV beats TQ-KV",
                                        "d² TQ-KV / SQ-KV " + ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low) +
                                            ", " + seedP(c),
                                        false, directional(c)});
            } else if (kind == 2 && n == 2 && plain >= 0) {
                const int bestIndex = rs->schemeIndex(bestName);
                const Contrast c = contrast(units(*rs, cell(*rs, 0, plain, n), &TrialResult::d2),
                                            units(*rs, cell(*rs, 0, bestIndex, n), &TrialResult::d2), ++s, resamples);
                claim.checks.push_back({setting + ": Plain-KV competitive",
                                        "median d² Plain-KV / best (" + bestName + ") = " + ratioText(c.ratio, c.low, c.high),
                                        false, bestIndex == plain ? Outcome::Holds : bandOutcome(c.low, c.high, 0.0, 1.25)});
            }
        }
        claim.figures.push_back(klByBudgetFigure(*rs, 0, names, std::string("b1_d2_") + rs->spec.regime,
                                                 "Output error d² by budget (" + runLabel(*rs) + ")", &TrialResult::d2,
                                                 "mean d² per query"));
    }
    std::string headline;
    for (const Check& c : claim.checks)
        headline += (headline.empty() ? "" : "; ") + c.setting + (c.holds ? " ✓" : " ✗");
    claim.headline = headline;
    claim.tables.push_back(std::move(d2Table));
    claim.tables.push_back(std::move(klTable));
    decide(claim);
    return claim;
}

Claim waterFillingClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "B2-water-filling";
    claim.paper = "B";
    claim.title = "Water-filling bit allocation is no better than uniform allocation";
    claim.statement = "Across every regime tested, water-filling (SQ-KV) performs like uniform allocation (SQU-KV): "
                      "eigenvalue ratios inside d_eff rarely justify unequal bits.";
    claim.criterion = "Per regime and budget: median per-query d² of SQ-KV over that of SQU-KV with a 95% interval that "
                      "resamples seeds (the unit). Equivalence margin [0.8, 1.25]: a factor of 1.25 in d² is about 1 dB "
                      "of output SNR, below what the paper's figures resolve. A check holds when the whole interval lies "
                      "in the margin, is borderline when it straddles a bound, contradicted when it lies outside.";
    Table table;
    table.caption = "SQ-KV (water-filling) against SQU-KV (uniform)";
    table.header = {"regime", "n", "seeds", "median d² SQ-KV", "median d² SQU-KV", "SQ / SQU [95% CI]", "p (seeds)",
                    "median KL SQ-KV", "median KL SQU-KV", "outcome"};
    Figure fig;
    fig.id = "b2_water_filling_ratio";
    fig.title = "Water-filling over uniform allocation: d² ratio";
    fig.yLabel = "median d² ratio SQ-KV / SQU-KV";
    Series ratios{"SQ-KV / SQU-KV", {}, {}, {}, {}, false};
    std::uint64_t s = seed;
    for (const ResultSet* rs : runs) {
        const int wf = rs->schemeIndex("SQ-KV"), un = rs->schemeIndex("SQU-KV");
        if (wf < 0 || un < 0)
            continue;
        claim.runs.push_back(rs->spec.name);
        for (int n : budgetsOf(*rs)) {
            const auto cw = cell(*rs, 0, wf, n), cu = cell(*rs, 0, un, n);
            const Contrast c = contrast(units(*rs, cw, &TrialResult::d2), units(*rs, cu, &TrialResult::d2), ++s, resamples);
            const Outcome o = bandOutcome(c.low, c.high, 0.8, 1.25);
            const std::string setting = runLabel(*rs) + ", n = " + std::to_string(n);
            claim.checks.push_back({setting, "ratio " + ratioText(c.ratio, c.low, c.high) + " (" + std::to_string(c.units)
                                                 + " seeds)",
                                    false, o});
            table.rows.push_back({runLabel(*rs), std::to_string(n), std::to_string(c.units), formatSig(c.medianA),
                                  formatSig(c.medianB), ratioText(c.ratio, c.low, c.high), formatP(c.p),
                                  formatSig(median(pooled(cw, &TrialResult::kl))),
                                  formatSig(median(pooled(cu, &TrialResult::kl))), std::string(outcomeText(o))});
            const double x = static_cast<double>(fig.categories.size());
            fig.categories.push_back(runLabel(*rs) + " n=" + std::to_string(n));
            pushRatio(ratios, x, c.ratio, c.low, c.high);
        }
    }
    if (!fig.categories.empty()) {
        const double x0 = -0.5, x1 = fig.categories.size() - 0.5;
        fig.series = {ratios, referenceLine("equivalence margin 0.8", x0, x1, 0.8), referenceLine("1", x0, x1, 1.0),
                      referenceLine("equivalence margin 1.25", x0, x1, 1.25)};
    }
    fig.caption = "95% intervals resampling seeds; inside the dashed margins the two allocations are equivalent.";
    int equivalent = 0;
    for (const Check& c : claim.checks)
        equivalent += c.holds ? 1 : 0;
    claim.headline = std::to_string(equivalent) + " of " + std::to_string(claim.checks.size()) +
                     " (regime, n) settings equivalent within [0.8, 1.25]";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

} // namespace kvlens::claims
