// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/analysis/eval_analysis.h"

#include "core/rng/rng.h"
#include "core/stats/spearman.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
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
