// SPDX-License-Identifier: GPL-3.0-or-later
// The papers' claims on a real (small, trained) model: the K-V asymmetry and paper A's ordering,
// layer by layer.
#include "core/report/claims.h"

#include "core/analysis/model_lens.h"
#include "core/report/claim_support.h"
#include "core/stats/bootstrap.h"

#include <map>
#include <string>
#include <vector>

namespace kvlens::claims {

using namespace support;

namespace {

/// Per-query values of one (scheme, budget) over every head of `layer`, by seed (each seed's unit
/// holds every head's queries in grid order, so two schemes' samples pair up).
Units layerSample(const ResultSet& rs, const std::vector<ModelCell>& cells, int layer, int scheme, int budget,
                  QueryField field)
{
    Units out;
    out.design = designOf(rs);
    for (std::size_t p = 0; p < cells.size(); ++p)
        if (cells[p].layer == layer)
            appendUnits(out, units(rs, cell(rs, static_cast<int>(p), scheme, budget), field));
    return out;
}

std::vector<int> layersOf(const std::vector<ModelCell>& cells)
{
    std::map<int, int> seen;
    for (const ModelCell& c : cells)
        seen[c.layer] = 1;
    std::vector<int> out;
    for (const auto& [layer, one] : seen)
        out.push_back(layer);
    return out;
}

/// One claim of the form "A damages less than B in every layer and budget" on per-query `field`;
/// the figure plots median B / A per layer (one series per budget), so above 1 is the claimed side.
struct LayerContrastSpec {
    std::string id, title, statement, criterion, tableCaption, figureId, figureTitle, yLabel, valueName;
    std::string lower, higher; ///< scheme names: `lower` is claimed to damage less
    QueryField field;
    /// Also check the means (what an average over the cache, and the advisor, sees): the paired
    /// bootstrap 95% interval of mean(higher) / mean(lower) lies above 1.
    bool meanChecks = false;
};

Claim layerContrastClaim(const ResultSet& rs, const LayerContrastSpec& c, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = c.id;
    claim.paper = "A";
    claim.title = c.title;
    claim.statement = c.statement;
    claim.criterion = c.criterion;
    claim.runs = {rs.spec.name};
    const std::vector<ModelCell> cells = modelCells(rs);
    const int lower = rs.schemeIndex(c.lower), higher = rs.schemeIndex(c.higher);
    Table table;
    table.caption = c.tableCaption;
    table.header = {"layer", "n", "seeds", "median " + c.valueName + " " + c.lower, "median " + c.valueName + " " + c.higher,
                    c.higher + " / " + c.lower + " [95% CI]", "p (seeds)", "query-level p (secondary)", "outcome"};
    if (c.meanChecks)
        table.header.insert(table.header.end() - 1, {"mean " + c.higher + " / " + c.lower + " [95% CI]", "means"});
    Figure fig;
    fig.id = c.figureId;
    fig.title = c.figureTitle;
    fig.yLabel = c.yLabel;
    fig.logY = true;
    std::uint64_t s = seed;
    const std::vector<int> layers = layersOf(cells);
    for (int layer : layers)
        fig.categories.push_back("layer " + std::to_string(layer));
    int holding = 0, meanHolding = 0;
    if (lower >= 0 && higher >= 0 && !cells.empty()) {
        for (int n : budgetsOf(rs)) {
            Series series{"n = " + std::to_string(n), {}, {}, {}, {}, true};
            for (std::size_t li = 0; li < layers.size(); ++li) {
                const int layer = layers[li];
                const Units a = layerSample(rs, cells, layer, lower, n, c.field),
                            b = layerSample(rs, cells, layer, higher, n, c.field);
                const Contrast k = contrast(a, b, ++s, resamples);
                const Outcome outcome = directional(k);
                const bool holds = outcome == Outcome::Holds;
                holding += holds ? 1 : 0;
                const std::string where = "layer " + std::to_string(layer) + ", n = " + std::to_string(n);
                const std::string ratio = ratioText(1.0 / k.ratio, 1.0 / k.high, 1.0 / k.low);
                claim.checks.push_back({where + (c.meanChecks ? ", typical query (medians)" : ""),
                                        c.higher + " / " + c.lower + " " + ratio + ", " + seedP(k), false, outcome});
                std::vector<std::string> row{std::to_string(layer), std::to_string(n), std::to_string(k.units),
                                             formatSig(k.medianA), formatSig(k.medianB), ratio, formatP(k.p),
                                             formatP(k.queryP)};
                if (c.meanChecks) {
                    // The two-way bootstrap of the design (seeds and the fixed queries), of the ratio of means.
                    std::vector<std::vector<double>> xa, xb;
                    for (std::size_t u = 0; u < std::min(a.byUnit.size(), b.byUnit.size()); ++u) {
                        xa.push_back(a.byUnit[u]);
                        xb.push_back(b.byUnit[u]);
                    }
                    const stats::BootstrapCi m = stats::bootstrapClusteredRatio(xb, xa, a.design, 0.95, resamples, ++s, {},
                                                                                stats::Location::Mean);
                    const Outcome means = m.resamples == 0 ? Outcome::NotTestable
                                                           : bandOutcome(m.lower, m.upper, 1.0,
                                                                         std::numeric_limits<double>::infinity());
                    meanHolding += means == Outcome::Holds ? 1 : 0;
                    const std::string meanRatio = ratioText(m.estimate, m.lower, m.upper);
                    claim.checks.push_back({where + ", means", "mean " + c.higher + " / " + c.lower + " " + meanRatio,
                                            false, means});
                    row.push_back(meanRatio);
                    row.push_back(std::string(outcomeText(means)));
                }
                row.push_back(std::string(outcomeText(outcome)));
                table.rows.push_back(std::move(row));
                pushRatio(series, static_cast<double>(li), 1.0 / k.ratio, 1.0 / k.high, 1.0 / k.low);
            }
            fig.series.push_back(std::move(series));
        }
        fig.series.push_back(referenceLine("1", -0.5, static_cast<double>(layers.size()) - 0.5, 1.0));
    }
    fig.caption = "Median per-query " + c.valueName + " of " + c.higher + " over " + c.lower + " per layer, pooled "
                  "over heads, queries and seeds, with 95% intervals resampling seeds and queries (the fixed queries "
                  "and the quantizer's seeds are crossed); above 1, " + c.lower + " damages less.";
    const std::size_t settings = c.meanChecks ? claim.checks.size() / 2 : claim.checks.size();
    claim.headline = std::to_string(holding) + " of " + std::to_string(settings) + " (layer, n) settings: the typical "
                     "query's " + c.valueName + " of " + c.lower + " significantly below " + c.higher + "'s";
    if (c.meanChecks)
        claim.headline += "; " + std::to_string(meanHolding) + " of " + std::to_string(settings) + ": " + c.higher
                          + "'s mean above " + c.lower + "'s (95% interval above 1)";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

} // namespace

Claim modelAsymmetryClaim(const ResultSet& model, std::uint64_t seed, int resamples)
{
    LayerContrastSpec c;
    c.id = "M1-kv-asymmetry";
    c.title = "The K-V asymmetry, layer by layer, on a trained model";
    c.statement = "Quantizing keys damages attention more than quantizing values at the same width: a key error moves "
                  "the softmax weights (exponentially), a value error only the mixed output (linearly).";
    c.criterion = "Per layer and budget: per-query output relative error (rel_mse_t) with only K quantized (K-only) "
                  "against only V quantized (V-only) over the layer's heads and queries; the seed (a draw of the "
                  "quantizer's randomness) is the unit of the test, the fixed queries are crossed with it. A check "
                  "holds when V-only's median is lower in the exact seed-level Wilcoxon test with p < 0.01 (the "
                  "typical query; borderline within 5 times the level), and a second when the 95% interval of mean "
                  "K-only / mean V-only (resampling seeds and queries) lies above 1 (the average over the cache, "
                  "which the advisor minimizes; borderline when it straddles 1). (KL cannot be used: a value error "
                  "never moves the weights, so V-only's KL is 0.)";
    c.tableCaption = "Output error, K-only against V-only, per layer (" + model.spec.name + ")";
    c.figureId = "m1_kv_asymmetry";
    c.figureTitle = "K-only over V-only output error, per layer";
    c.yLabel = "median rel. output error K-only / V-only";
    c.valueName = "rel_mse_t";
    c.lower = "V-only";
    c.higher = "K-only";
    c.field = &TrialResult::relMseT;
    c.meanChecks = true;
    return layerContrastClaim(model, c, seed, resamples);
}

Claim modelOrderingClaim(const ResultSet& model, std::uint64_t seed, int resamples)
{
    LayerContrastSpec c;
    c.id = "M2-kqv-beats-qkqv";
    c.title = "Paper A's ordering KQV < QKQV, layer by layer, on a trained model";
    c.statement = "Paper A: spending the residual bit on a scalar key path (KQV) gives lower per-query KL than a QJL "
                  "key sketch (QKQV); here checked in every layer of a real model.";
    c.criterion = "Per layer and budget: per-query KL(p‖p̂) of KQV against QKQV over the layer's heads and queries, "
                  "with the seed as the unit (exact Wilcoxon on each seed's log median ratio); a check holds when KQV "
                  "is lower with p < 0.01, borderline within 5 times the level.";
    c.tableCaption = "Per-query KL, KQV against QKQV, per layer (" + model.spec.name + ")";
    c.figureId = "m2_kqv_qkqv_by_layer";
    c.figureTitle = "QKQV over KQV per-query KL, per layer";
    c.yLabel = "median KL ratio QKQV / KQV";
    c.valueName = "KL";
    c.lower = "KQV";
    c.higher = "QKQV";
    c.field = &TrialResult::kl;
    return layerContrastClaim(model, c, seed, resamples);
}

} // namespace kvlens::claims
