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

/// Per-query values of one (scheme, budget) over every head of `layer`, pooled over heads and seeds
/// (heads in grid order, so two schemes' samples pair up).
std::vector<double> layerSample(const ResultSet& rs, const std::vector<ModelCell>& cells, int layer, int scheme,
                                int budget, QueryField field)
{
    std::vector<double> out;
    for (std::size_t p = 0; p < cells.size(); ++p)
        if (cells[p].layer == layer) {
            const auto v = pooled(cell(rs, static_cast<int>(p), scheme, budget), field);
            out.insert(out.end(), v.begin(), v.end());
        }
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
    const int lower = schemeIndex(rs, c.lower), higher = schemeIndex(rs, c.higher);
    Table table;
    table.caption = c.tableCaption;
    table.header = {"layer", "n", "median " + c.valueName + " " + c.lower, "median " + c.valueName + " " + c.higher,
                    c.higher + " / " + c.lower + " [95% CI]", "Mann-Whitney p", "r", "holds"};
    if (c.meanChecks)
        table.header.insert(table.header.end() - 1, {"mean " + c.higher + " / " + c.lower + " [95% CI]", "means hold"});
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
                const std::vector<double> a = layerSample(rs, cells, layer, lower, n, c.field),
                                          b = layerSample(rs, cells, layer, higher, n, c.field);
                const Contrast k = contrast(a, b, ++s, resamples);
                const bool holds = significantInDirection(k.p, k.r);
                holding += holds ? 1 : 0;
                const std::string where = "layer " + std::to_string(layer) + ", n = " + std::to_string(n);
                const std::string ratio = ratioText(1.0 / k.ratio, 1.0 / k.high, 1.0 / k.low);
                claim.checks.push_back({where + (c.meanChecks ? ", typical query (medians)" : ""),
                                        c.higher + " / " + c.lower + " " + ratio + ", " + pEquals(k.p) + ", r = "
                                            + signedText(k.r),
                                        holds});
                std::vector<std::string> row{std::to_string(layer), std::to_string(n), formatSig(k.medianA),
                                             formatSig(k.medianB), ratio, formatP(k.p), signedText(k.r)};
                if (c.meanChecks) {
                    const stats::BootstrapCi m = stats::bootstrapPairedRatio(b, a, stats::Location::Mean, 0.95,
                                                                             resamples, ++s);
                    const bool meansHold = m.resamples > 0 && m.lower > 1.0;
                    meanHolding += meansHold ? 1 : 0;
                    const std::string meanRatio = ratioText(m.estimate, m.lower, m.upper);
                    claim.checks.push_back({where + ", means", "mean " + c.higher + " / " + c.lower + " " + meanRatio,
                                            meansHold});
                    row.push_back(meanRatio);
                    row.push_back(meansHold ? "yes" : "no");
                }
                row.push_back(holds ? "yes" : "no");
                table.rows.push_back(std::move(row));
                pushRatio(series, static_cast<double>(li), 1.0 / k.ratio, 1.0 / k.high, 1.0 / k.low);
            }
            fig.series.push_back(std::move(series));
        }
        fig.series.push_back(referenceLine("1", -0.5, static_cast<double>(layers.size()) - 0.5, 1.0));
    }
    fig.caption = "Median per-query " + c.valueName + " of " + c.higher + " over " + c.lower + " per layer, pooled "
                  "over heads, queries and seeds, with bootstrap 95% intervals; above 1, " + c.lower + " damages less.";
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
                  "against only V quantized (V-only), pooled over the layer's heads, queries and seeds; a check holds "
                  "when V-only is lower with Mann-Whitney p < 0.01 (the typical query), and a second check holds when "
                  "the paired bootstrap 95% interval of mean K-only / mean V-only lies above 1 (the average over the "
                  "cache, which the advisor minimizes). (KL cannot be used: a value error never moves the weights, "
                  "so V-only's KL is 0.)";
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
    c.criterion = "Per layer and budget: per-query KL(p‖p̂) of KQV against QKQV, pooled over the layer's heads, queries "
                  "and seeds; a check holds when KQV is lower with Mann-Whitney p < 0.01.";
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
