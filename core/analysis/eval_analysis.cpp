// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/analysis/eval_analysis.h"

#include "core/eval/eval_files.h"
#include "core/rng/rng.h"
#include "core/stats/spearman.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

namespace kvlens::eval {

int findConfiguration(const EvalResult& r, const std::string& name, int budget, int seedIndex)
{
    for (std::size_t i = 0; i < r.configurations.size(); ++i) {
        const ConfigurationResult& c = r.configurations[i];
        if (c.name == name && (c.budget == budget || c.budget == 0) && c.seedIndex == seedIndex)
            return static_cast<int>(i);
    }
    return -1;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Per-chunk sums of one configuration's tokens.
struct ChunkSums {
    std::vector<double> kld, nllQ, nllBase, count;
};

ChunkSums chunkSums(const EvalResult& r, int c)
{
    ChunkSums s;
    const int chunks = r.chunksScored;
    s.kld.assign(static_cast<std::size_t>(chunks), 0.0);
    s.nllQ = s.nllBase = s.count = s.kld;
    const ConfigurationResult& conf = r.configurations[static_cast<std::size_t>(c)];
    for (std::size_t i = 0; i < conf.tokens.size() && i < r.scored.size(); ++i) {
        const auto k = static_cast<std::size_t>(r.scored[i].chunk);
        if (k >= s.kld.size())
            continue;
        s.kld[k] += conf.tokens[i].kld;
        s.nllQ[k] += conf.tokens[i].nllQ;
        s.nllBase[k] += conf.tokens[i].nllBase;
        s.count[k] += 1.0;
    }
    return s;
}

/// The statistic on the chunk weights `w` (how often each chunk is drawn), its value on all chunks,
/// and the 2.5% / 97.5% percentiles over `resamples` resamples of the chunks.
ChunkInterval bootstrapChunks(int chunks, std::uint64_t seed, int resamples,
                              const std::function<double(const std::vector<double>&)>& statistic)
{
    ChunkInterval out;
    out.chunks = chunks;
    std::vector<double> w(static_cast<std::size_t>(chunks), 1.0);
    out.value = statistic(w);
    if (chunks < 2 || resamples < 10) {
        out.low = out.high = kNaN;
        return out;
    }
    Rng rng(EngineKind::Pcg64, seed, Stream::Statistics);
    std::vector<double> values;
    values.reserve(static_cast<std::size_t>(resamples));
    for (int b = 0; b < resamples; ++b) {
        std::fill(w.begin(), w.end(), 0.0);
        for (int i = 0; i < chunks; ++i)
            w[static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(chunks)))] += 1.0;
        const double v = statistic(w);
        if (std::isfinite(v))
            values.push_back(v);
    }
    if (values.size() < 10) {
        out.low = out.high = kNaN;
        return out;
    }
    std::sort(values.begin(), values.end());
    auto at = [&](double q) {
        const double pos = q * static_cast<double>(values.size() - 1);
        const auto i = static_cast<std::size_t>(pos);
        const double f = pos - static_cast<double>(i);
        return i + 1 < values.size() ? values[i] * (1.0 - f) + values[i + 1] * f : values.back();
    };
    out.low = at(0.025);
    out.high = at(0.975);
    return out;
}

double weighted(const std::vector<double>& sums, const std::vector<double>& w)
{
    double s = 0.0;
    for (std::size_t i = 0; i < sums.size(); ++i)
        s += w[i] * sums[i];
    return s;
}

} // namespace

ChunkInterval meanKld(const EvalResult& r, int c, std::uint64_t seed, int resamples)
{
    const ChunkSums s = chunkSums(r, c);
    return bootstrapChunks(r.chunksScored, seed, resamples,
                           [&](const std::vector<double>& w) { return weighted(s.kld, w) / weighted(s.count, w); });
}

ChunkInterval kldRatio(const EvalResult& r, int a, int b, std::uint64_t seed, int resamples)
{
    const ChunkSums sa = chunkSums(r, a), sb = chunkSums(r, b);
    return bootstrapChunks(r.chunksScored, seed, resamples, [&](const std::vector<double>& w) {
        const double db = weighted(sb.kld, w);
        return db > 0.0 ? weighted(sa.kld, w) / db : kNaN;
    });
}

ChunkInterval pplRatio(const EvalResult& r, int c, std::uint64_t seed, int resamples)
{
    const ChunkSums s = chunkSums(r, c);
    return bootstrapChunks(r.chunksScored, seed, resamples, [&](const std::vector<double>& w) {
        const double n = weighted(s.count, w);
        return std::exp((weighted(s.nllQ, w) - weighted(s.nllBase, w)) / n);
    });
}

ChunkInterval excessPplShareRemoved(const EvalResult& r, int worse, int better, std::uint64_t seed, int resamples)
{
    const ChunkSums sw = chunkSums(r, worse), sb = chunkSums(r, better);
    return bootstrapChunks(r.chunksScored, seed, resamples, [&](const std::vector<double>& w) {
        const double n = weighted(sw.count, w);
        const double base = std::exp(weighted(sw.nllBase, w) / n);
        const double pw = std::exp(weighted(sw.nllQ, w) / n), pb = std::exp(weighted(sb.nllQ, w) / n);
        return pw > base ? (pw - pb) / (pw - base) : kNaN;
    });
}

Result<std::vector<LayerCurves>> endToEndCurves(const EvalResult& r, const std::string& scheme)
{
    // (budget, layer, path) -> mean KLD; budget -> bits.
    std::map<std::tuple<int, int, AttributionPath>, double> loss;
    std::map<int, std::pair<double, double>> bits;
    for (const AttributionRow& a : r.attribution) {
        const ConfigurationResult& c = r.configurations[static_cast<std::size_t>(a.configuration)];
        if (c.name != scheme || a.kvHead >= 0 || c.seedIndex != 0 || c.budget == 0)
            continue;
        loss[{c.budget, a.layer, a.path}] = a.kld.mean;
        bits[c.budget] = {c.bitsK, c.bitsV};
    }
    if (bits.size() < 2)
        return Error{"advisor", "the end-to-end curves need the per-layer attribution of " + scheme
                                    + " at two budgets or more (run kvlens eval with --schemes " + scheme
                                    + " --budgets 2,3,4 and --attribution layers)"};
    std::vector<LayerCurves> curves;
    for (int l = 0; l < r.layers; ++l) {
        LayerCurves c;
        c.layer = l;
        for (const auto& [budget, b] : bits) {
            const auto k = loss.find({budget, l, AttributionPath::K}), v = loss.find({budget, l, AttributionPath::V});
            if (k == loss.end() || v == loss.end())
                return Error{"advisor", "layer " + std::to_string(l) + " of " + scheme + " at n = " + std::to_string(budget)
                                            + " has no K-only or V-only attribution"};
            c.kBits.push_back(budget);
            c.vBits.push_back(budget);
            c.kLoss.push_back(k->second);
            c.vLoss.push_back(v->second);
            c.kCost.push_back(b.first);
            c.vCost.push_back(b.second);
        }
        curves.push_back(std::move(c));
    }
    return curves;
}

namespace {

struct CellMeasures {
    double kl = 0.0, relMseT = 0.0, fisher = 0.0, scoreErrVar = 0.0, entropy = 0.0;
    int n = 0;
};

double meanOf(const std::vector<float>& v)
{
    double s = 0.0;
    int n = 0;
    for (float x : v)
        if (std::isfinite(x)) {
            s += x;
            ++n;
        }
    return n > 0 ? s / n : kNaN;
}

ChunkInterval bootstrapRho(const std::vector<double>& x, const std::vector<double>& y, std::uint64_t seed, int resamples)
{
    ChunkInterval out;
    out.chunks = static_cast<int>(x.size());
    out.value = stats::spearman(x, y);
    Rng rng(EngineKind::Pcg64, seed, Stream::Statistics);
    std::vector<double> rhos, bx(x.size()), by(y.size());
    for (int b = 0; b < resamples; ++b) {
        for (std::size_t i = 0; i < x.size(); ++i) {
            const auto j = static_cast<std::size_t>(rng.below(x.size()));
            bx[i] = x[j];
            by[i] = y[j];
        }
        const double rho = stats::spearman(bx, by);
        if (std::isfinite(rho))
            rhos.push_back(rho);
    }
    if (rhos.size() < 10) {
        out.low = out.high = kNaN;
        return out;
    }
    std::sort(rhos.begin(), rhos.end());
    out.low = rhos[static_cast<std::size_t>(0.025 * static_cast<double>(rhos.size() - 1))];
    out.high = rhos[static_cast<std::size_t>(0.975 * static_cast<double>(rhos.size() - 1))];
    return out;
}

/// Pairs (x, y) with both finite, with their chunks, and each variable's order with its ties grouped:
/// Spearman's rho on any resample of the chunks then costs one pass (weightedSpearman).
struct RankedPairs {
    std::vector<int> chunk;
    std::vector<double> x, y;
    std::vector<std::size_t> byX, byY; ///< indices sorted by x and by y
};

RankedPairs rankPairs(const std::vector<double>& x, const std::vector<double>& y, const std::vector<int>& chunk)
{
    RankedPairs r;
    for (std::size_t t = 0; t < x.size(); ++t)
        if (std::isfinite(x[t]) && std::isfinite(y[t])) {
            r.chunk.push_back(chunk[t]);
            r.x.push_back(x[t]);
            r.y.push_back(y[t]);
        }
    r.byX.resize(r.x.size());
    std::iota(r.byX.begin(), r.byX.end(), std::size_t{0});
    r.byY = r.byX;
    std::sort(r.byX.begin(), r.byX.end(), [&](std::size_t a, std::size_t b) { return r.x[a] < r.x[b]; });
    std::sort(r.byY.begin(), r.byY.end(), [&](std::size_t a, std::size_t b) { return r.y[a] < r.y[b]; });
    return r;
}

/// Mid-ranks of `values` in the sample where pair t appears weight[t] times: a group of equal values
/// of total weight W after B others ranks B + (W + 1) / 2, as in the expanded sample.
void weightedMidRanks(const std::vector<double>& values, const std::vector<std::size_t>& order,
                      const std::vector<double>& weight, std::vector<double>& ranks)
{
    ranks.assign(values.size(), 0.0);
    double before = 0.0;
    for (std::size_t g = 0; g < order.size();) {
        std::size_t e = g;
        double total = 0.0;
        while (e < order.size() && values[order[e]] == values[order[g]])
            total += weight[order[e++]];
        for (std::size_t k = g; k < e; ++k)
            ranks[order[k]] = before + (total + 1.0) / 2.0;
        before += total;
        g = e;
    }
}

/// Spearman's rho of the pairs with chunk k drawn w[k] times: the Pearson correlation of the
/// weighted mid-ranks, equal to stats::spearman on the expanded sample. NaN with fewer than 3
/// pairs drawn or a constant variable.
double weightedSpearman(const RankedPairs& p, const std::vector<double>& w)
{
    std::vector<double> weight(p.x.size());
    double n = 0.0;
    for (std::size_t t = 0; t < weight.size(); ++t) {
        weight[t] = w[static_cast<std::size_t>(p.chunk[t])];
        n += weight[t];
    }
    if (n < 3.0)
        return kNaN;
    std::vector<double> rx, ry;
    weightedMidRanks(p.x, p.byX, weight, rx);
    weightedMidRanks(p.y, p.byY, weight, ry);
    const double mean = (n + 1.0) / 2.0; // mid-ranks of n drawn values always average (n + 1) / 2
    double sxy = 0.0, sxx = 0.0, syy = 0.0;
    for (std::size_t t = 0; t < weight.size(); ++t) {
        if (weight[t] == 0.0)
            continue;
        const double dx = rx[t] - mean, dy = ry[t] - mean;
        sxy += weight[t] * dx * dy;
        sxx += weight[t] * dx * dx;
        syy += weight[t] * dy * dy;
    }
    return sxx > 0.0 && syy > 0.0 ? sxy / std::sqrt(sxx * syy) : kNaN;
}

} // namespace

std::vector<OutputVsAttention> outputVsAttention(const ResultSet& map, const EvalResult& r, const std::string& scheme,
                                                 std::uint64_t seed, int resamples)
{
    std::vector<OutputVsAttention> rows;
    const std::vector<ModelCell> cells = modelCells(map);
    if (cells.empty() || r.kvHeads <= 0)
        return rows;
    int scheme_ = -1;
    for (std::size_t s = 0; s < map.schemes.size(); ++s)
        if (map.schemes[s].name == scheme)
            scheme_ = static_cast<int>(s);
    if (scheme_ < 0)
        return rows;
    int mapHeads = 0;
    for (const ModelCell& c : cells)
        mapHeads = std::max(mapHeads, c.head + 1);
    const int group = std::max(1, mapHeads / r.kvHeads);
    // The map's measures per (layer, head, budget): the mean over seeds of each trial's mean.
    std::map<std::tuple<int, int, int>, CellMeasures> byHead; // (layer, kvHead, budget)
    std::map<std::tuple<int, int>, CellMeasures> byLayer;     // (layer, budget)
    for (const TrialResult& t : map.trials) {
        if (t.key.scheme != scheme_ || t.key.point < 0 || t.key.point >= static_cast<int>(cells.size()))
            continue;
        const ModelCell& c = cells[static_cast<std::size_t>(t.key.point)];
        for (CellMeasures* m : {&byHead[{c.layer, c.head / group, t.key.budget}], &byLayer[{c.layer, t.key.budget}]}) {
            m->kl += meanOf(t.kl);
            m->relMseT += meanOf(t.relMseT);
            m->fisher += meanOf(t.fisher);
            m->scoreErrVar += t.scoreErrorVar;
            m->entropy += t.meanEntropy;
            ++m->n;
        }
    }
    // The end-to-end attribution per (layer, budget) and (layer, kvHead, budget), both paths.
    std::map<std::tuple<int, int>, double> e2eLayer;
    std::map<std::tuple<int, int, int>, double> e2eHead;
    for (const AttributionRow& a : r.attribution) {
        const ConfigurationResult& c = r.configurations[static_cast<std::size_t>(a.configuration)];
        if (c.name != scheme || a.path != AttributionPath::Both || c.seedIndex != 0)
            continue;
        if (a.kvHead < 0)
            e2eLayer[{a.layer, c.budget}] = a.kld.mean;
        else
            e2eHead[{a.layer, a.kvHead, c.budget}] = a.kld.mean;
    }
    const std::pair<const char*, double CellMeasures::*> measures[] = {{"kl_mean", &CellMeasures::kl},
                                                                       {"rel_mse_t", &CellMeasures::relMseT},
                                                                       {"fisher", &CellMeasures::fisher},
                                                                       {"score_err_var", &CellMeasures::scoreErrVar},
                                                                       {"entropy", &CellMeasures::entropy}};
    auto add = [&](const char* level, const auto& mapCells, const auto& truth, std::uint64_t salt) {
        for (const auto& [name, field] : measures) {
            std::vector<double> x, y;
            for (const auto& [key, m] : mapCells) {
                const auto e = truth.find(key);
                if (e == truth.end() || m.n == 0)
                    continue;
                const double v = m.*field / m.n;
                if (std::isfinite(v) && std::isfinite(e->second)) {
                    x.push_back(v);
                    y.push_back(e->second);
                }
            }
            if (x.size() < 3)
                continue;
            const ChunkInterval rho = bootstrapRho(x, y, seed + salt, resamples);
            rows.push_back(OutputVsAttention{level, name, rho.value, rho.low, rho.high, static_cast<int>(x.size())});
            ++salt;
        }
    };
    add("layer", byLayer, e2eLayer, 0);
    add("head", byHead, e2eHead, 100);
    return rows;
}

std::vector<OutputProxyCell> outputProxyStudy(const EvalResult& r, std::uint64_t seed, int resamples)
{
    std::vector<OutputProxyCell> cells;
    std::vector<std::vector<int>> members; // configurations of each cell
    for (std::size_t c = 0; c < r.configurations.size(); ++c) {
        const ConfigurationResult& conf = r.configurations[c];
        if (conf.proxies.empty())
            continue;
        const bool allZero = std::all_of(conf.proxies.begin(), conf.proxies.end(), [](const TokenProxies& p) {
            return std::all_of(p.begin(), p.end(), [](float x) { return x == 0.0f; });
        });
        if (allZero)
            continue; // the exact cache
        std::size_t i = 0;
        while (i < cells.size() && !(cells[i].scheme == conf.name && cells[i].budget == conf.budget))
            ++i;
        if (i == cells.size()) {
            OutputProxyCell cell;
            cell.scheme = conf.name;
            cell.budget = conf.budget;
            cells.push_back(std::move(cell));
            members.emplace_back();
        }
        members[i].push_back(static_cast<int>(c));
    }
    const int chunks = r.chunksScored;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        OutputProxyCell& cell = cells[i];
        // The cell's tokens under every seed: chunk, KLD, proxies, and the reference's NLL.
        std::vector<int> chunkOf;
        std::vector<double> kld, nllBase;
        std::vector<TokenProxies> proxies;
        for (int c : members[i]) {
            const ConfigurationResult& conf = r.configurations[static_cast<std::size_t>(c)];
            const std::size_t n = std::min({conf.tokens.size(), conf.proxies.size(), r.scored.size()});
            for (std::size_t t = 0; t < n; ++t)
                if (r.scored[t].chunk >= 0 && r.scored[t].chunk < chunks) {
                    chunkOf.push_back(r.scored[t].chunk);
                    kld.push_back(conf.tokens[t].kld);
                    nllBase.push_back(conf.tokens[t].nllBase);
                    proxies.push_back(conf.proxies[t]);
                }
        }
        cell.tokens = static_cast<long long>(kld.size());
        // Per variable (the proxies, then nll_base): the pairs where both are finite, ranked once.
        std::vector<RankedPairs> ranked;
        for (int p = 0; p <= kTokenProxyCount; ++p) {
            std::vector<double> x(kld.size());
            for (std::size_t t = 0; t < x.size(); ++t)
                x[t] = p < kTokenProxyCount ? static_cast<double>(proxies[t][static_cast<std::size_t>(p)]) : nllBase[t];
            ranked.push_back(rankPairs(x, kld, chunkOf));
        }
        const std::uint64_t cellSeed = seed + 1000 * static_cast<std::uint64_t>(i);
        // Every statistic with the same seed: the same resampled chunks, so the gains are paired.
        for (int p = 0; p < kTokenProxyCount; ++p)
            cell.rho[static_cast<std::size_t>(p)] = bootstrapChunks(chunks, cellSeed, resamples, [&](const std::vector<double>& w) {
                return weightedSpearman(ranked[static_cast<std::size_t>(p)], w);
            });
        cell.referenceNll = bootstrapChunks(chunks, cellSeed, resamples, [&](const std::vector<double>& w) {
            return weightedSpearman(ranked.back(), w);
        });
        const auto relK = static_cast<std::size_t>(TokenProxy::RelK);
        cell.deployableGain = bootstrapChunks(chunks, cellSeed, resamples, [&](const std::vector<double>& w) {
            return weightedSpearman(ranked[static_cast<std::size_t>(TokenProxy::CalibScoreErr)], w)
                   - weightedSpearman(ranked[relK], w);
        });
        cell.oracleGain = bootstrapChunks(chunks, cellSeed, resamples, [&](const std::vector<double>& w) {
            return weightedSpearman(ranked[static_cast<std::size_t>(TokenProxy::Fisher)], w) - weightedSpearman(ranked[relK], w);
        });
    }
    return cells;
}

std::string outputProxiesCsv(const std::vector<OutputProxyCell>& cells)
{
    std::string out = "# Spearman rho between each attention-level proxy of a token and its end-to-end KLD, over the "
                      "scored tokens of one (scheme, budget) cell (seeds pooled); 95% bootstrap interval resampling "
                      "chunks. Deployable proxies (rel_mse_k, rel_mse_v, calib_score_err) read only the cache and the "
                      "calibration queries; the others read the evaluated token's own queries (oracle); nll_base, the "
                      "token's NLL under the exact cache, is the baseline a proxy must beat.\n";
    for (std::size_t p = 0; p < kTokenProxyColumns.size(); ++p)
        out += std::string("# ") + kTokenProxyColumns[p] + ": " + kTokenProxyDescriptions[p] + "\n";
    out += "scheme,budget,tokens";
    for (const char* name : kTokenProxyColumns)
        out += std::string(",") + name + "," + name + "_low," + name + "_high";
    out += ",gain_calib_over_rel_k,gain_calib_low,gain_calib_high,gain_fisher_over_rel_k,gain_fisher_low,gain_fisher_high,"
           "nll_base,nll_base_low,nll_base_high\n";
    auto number = [](double v) {
        char b[32];
        std::snprintf(b, sizeof b, "%.6g", v);
        return std::string(b);
    };
    for (const OutputProxyCell& c : cells) {
        std::string name = c.scheme;
        if (name.find_first_of(",\"\n") != std::string::npos) {
            std::string quoted = "\"";
            for (char ch : name)
                quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
            name = quoted + "\"";
        }
        out += name + "," + budgetText(c.budget) + "," + std::to_string(c.tokens);
        for (const ChunkInterval& rho : c.rho)
            out += "," + number(rho.value) + "," + number(rho.low) + "," + number(rho.high);
        for (const ChunkInterval* g : {&c.deployableGain, &c.oracleGain, &c.referenceNll})
            out += "," + number(g->value) + "," + number(g->low) + "," + number(g->high);
        out += "\n";
    }
    return out;
}

std::string outputProxiesText(const std::vector<OutputProxyCell>& cells)
{
    if (cells.empty())
        return {};
    std::string out = "\nWhich attention-level proxy ranks the tokens by their KLD (Spearman rho over a cell's tokens, "
                      "95% interval over chunks; eval_proxies.csv has every proxy; calib_score_err needs calibration "
                      "tokens):\n";
    char line[320];
    std::snprintf(line, sizeof line, "  %-28s %6s  %-30s %-30s %-22s %s\n", "scheme", "budget", "best deployable",
                  "best oracle", "calib - rel_mse_k", "nll_base (no cache)");
    out += line;
    auto best = [](const OutputProxyCell& c, bool deployable) {
        int at = -1;
        for (int p = 0; p < kTokenProxyCount; ++p) {
            const double v = c.rho[static_cast<std::size_t>(p)].value;
            if (kTokenProxyDeployable[static_cast<std::size_t>(p)] == deployable && std::isfinite(v)
                && (at < 0 || v > c.rho[static_cast<std::size_t>(at)].value))
                at = p;
        }
        if (at < 0)
            return std::string("-");
        const ChunkInterval& r = c.rho[static_cast<std::size_t>(at)];
        char b[96];
        std::snprintf(b, sizeof b, "%s %.2f [%.2f, %.2f]", kTokenProxyColumns[static_cast<std::size_t>(at)], r.value, r.low,
                      r.high);
        return std::string(b);
    };
    for (const OutputProxyCell& c : cells) {
        char gain[64], baseline[64];
        if (std::isfinite(c.deployableGain.value))
            std::snprintf(gain, sizeof gain, "%+.2f [%+.2f, %+.2f]", c.deployableGain.value, c.deployableGain.low,
                          c.deployableGain.high);
        else
            std::snprintf(gain, sizeof gain, "n/a (no calibration)");
        std::snprintf(baseline, sizeof baseline, "%.2f [%.2f, %.2f]", c.referenceNll.value, c.referenceNll.low,
                      c.referenceNll.high);
        std::snprintf(line, sizeof line, "  %-28.28s %6s  %-30s %-30s %-22s %s\n", c.scheme.c_str(),
                      c.budget > 0 ? std::to_string(c.budget).c_str() : "fixed", best(c, true).c_str(),
                      best(c, false).c_str(), gain, baseline);
        out += line;
    }
    return out;
}

std::string outputVsAttentionCsv(const std::vector<OutputVsAttention>& rows)
{
    std::string out = "# Spearman rho between an attention-level measure of the Model map and the end-to-end attribution "
                      "KLD (only that layer or KV head quantized), over cells (layer, budget) or (layer, KV head, budget); "
                      "95% bootstrap interval over cells\nlevel,measure,rho,rho_low,rho_high,cells\n";
    for (const OutputVsAttention& r : rows) {
        char line[256];
        std::snprintf(line, sizeof line, "%s,%s,%.6g,%.6g,%.6g,%d\n", r.level.c_str(), r.measure.c_str(), r.rho, r.low,
                      r.high, r.cells);
        out += line;
    }
    return out;
}

} // namespace kvlens::eval
