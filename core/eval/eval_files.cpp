// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/eval/eval_files.h"

#include "core/io/csv.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

namespace kvlens::eval {

namespace {

constexpr const char* kConvention =
    "# scored: positions ctx/2 .. ctx-2 of each chunk predict the next token (llama.cpp's perplexity convention); "
    "KLD over the whole vocabulary in double";

std::string header(const EvalResult& r)
{
    std::string h = std::string(kConvention) + "\n";
    h += r.spec.ggmlQueryConversion
             ? "# queries: converted to the key type's vec_dot_type before the score product for llama.cpp's cache "
               "types, as ggml's CPU path does (column query); float32 for every other scheme\n"
             : "# queries: float32 for every scheme (query_conversion none: the codec alone)\n";
    if (!r.forward.empty())
        h += "# forward: " + r.forward + "\n";
    if (r.cancelled)
        h += "# partial run: cancelled after " + std::to_string(r.chunksScored) + " chunks\n";
    return h;
}

} // namespace

std::string budgetText(int budget)
{
    return budget > 0 ? std::to_string(budget) : std::string("fixed");
}

std::string escapeTokenText(const std::string& bytes)
{
    std::string out;
    for (const unsigned char c : bytes) {
        switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\\': out += "\\\\"; break;
        default:
            if (c >= 0x20 && c < 0x7f) {
                out += static_cast<char>(c);
            } else {
                char hex[8];
                std::snprintf(hex, sizeof hex, "\\x%02X", c);
                out += hex;
            }
        }
    }
    return out;
}

std::string summaryCsv(const EvalResult& r)
{
    CsvWriter csv({"scheme", "budget", "seed", "bits_k", "bits_v", "tokens", "ppl", "ppl_err", "ppl_base", "ppl_base_err",
                   "ln_ppl_ratio", "ln_ppl_ratio_err", "ppl_ratio", "ppl_ratio_err", "kld_mean", "kld_mean_err", "kld_max",
                   "kld_p999", "kld_p99", "kld_p95", "kld_p90", "kld_median", "kld_p10", "kld_p5", "kld_p1", "kld_min",
                   "dp_mean", "dp_mean_err", "dp_rms", "dp_rms_err", "same_top1", "same_top1_err", "nll_correlation",
                   "query", "cache_share_k", "cache_share_v", "bits_k_spent", "bits_v_spent"});
    for (const ConfigurationResult& c : r.configurations) {
        const lm::NextTokenSummary& s = c.summary;
        csv.add(c.name).add(budgetText(c.budget)).add(static_cast<unsigned long long>(r.spec.seed(c.seedIndex))).add(c.bitsK).add(c.bitsV)
            .add(static_cast<long long>(c.tokens.size()))
            .add(s.pplQ.mean).add(s.pplQ.error).add(s.pplBase.mean).add(s.pplBase.error)
            .add(s.logPplRatio.mean).add(s.logPplRatio.error).add(s.pplRatio.mean).add(s.pplRatio.error)
            .add(s.kld.mean).add(s.kld.error)
            .add(s.kldPercentiles.maximum).add(s.kldPercentiles.p999).add(s.kldPercentiles.p99).add(s.kldPercentiles.p95)
            .add(s.kldPercentiles.p90).add(s.kldPercentiles.median).add(s.kldPercentiles.p10).add(s.kldPercentiles.p5)
            .add(s.kldPercentiles.p1).add(s.kldPercentiles.minimum)
            .add(s.deltaP.mean).add(s.deltaP.error).add(s.deltaPRms.mean).add(s.deltaPRms.error)
            .add(s.sameTop.mean).add(s.sameTop.error).add(s.nllCorrelation)
            .add(c.queryConversion).add(c.cacheShareK).add(c.cacheShareV).add(c.bitsSpentK()).add(c.bitsSpentV());
        csv.endRow();
    }
    return header(r) + csv.text();
}

std::string tokensCsv(const EvalResult& r)
{
    std::vector<std::string> columns = {"scheme", "budget", "seed", "chunk", "position", "token", "next", "next_text",
                                        "nll_base", "nll", "kld", "top1_base", "top1", "dp"};
    columns.insert(columns.end(), kTokenProxyColumns.begin(), kTokenProxyColumns.end());
    CsvWriter csv(columns);
    for (const ConfigurationResult& c : r.configurations)
        for (std::size_t i = 0; i < c.tokens.size() && i < r.scored.size(); ++i) {
            const ScoredToken& p = r.scored[i];
            const lm::TokenStat& t = c.tokens[i];
            csv.add(c.name).add(budgetText(c.budget)).add(static_cast<unsigned long long>(r.spec.seed(c.seedIndex))).add(p.chunk)
                .add(p.position).add(static_cast<long long>(p.token)).add(static_cast<long long>(p.next))
                .add(i < r.tokenText.size() ? escapeTokenText(r.tokenText[i]) : std::string())
                .add(t.nllBase).add(t.nllQ).add(t.kld).add(t.topBase).add(t.topQ).add(t.deltaP);
            for (int k = 0; k < kTokenProxyCount; ++k)
                csv.add(i < c.proxies.size() ? static_cast<double>(c.proxies[i][static_cast<std::size_t>(k)])
                                             : std::numeric_limits<double>::quiet_NaN());
            csv.endRow();
        }
    return header(r) + csv.text();
}

std::string layersCsv(const EvalResult& r)
{
    CsvWriter csv({"scheme", "budget", "seed", "layer", "head", "path", "kld_mean", "kld_err", "kld_low", "kld_high",
                   "same_top1", "tokens"});
    for (const AttributionRow& a : r.attribution) {
        const ConfigurationResult& c = r.configurations[static_cast<std::size_t>(a.configuration)];
        csv.add(c.name).add(budgetText(c.budget)).add(static_cast<unsigned long long>(r.spec.seed(c.seedIndex))).add(a.layer)
            .add(a.kvHead < 0 ? std::string("all") : std::to_string(a.kvHead)).add(std::string(attributionPathName(a.path)))
            .add(a.kld.mean).add(a.kld.error).add(a.kldLow).add(a.kldHigh).add(a.sameTop)
            .add(static_cast<long long>(r.scored.size()));
        csv.endRow();
    }
    return "# per-layer attribution: the damage when only this layer (or KV head) of the cache is quantized, on the path "
           "named; the rest exact\n"
           + header(r) + csv.text();
}

namespace {

std::string pm(double value, double error, int precision = 6)
{
    char text[96];
    std::snprintf(text, sizeof text, "%.*f +/- %.*f", precision, value, precision, error);
    return text;
}

} // namespace

std::string reportText(const EvalResult& r)
{
    std::ostringstream o;
    o << "model: " << r.modelSummary << "\n";
    o << "text: " << (r.spec.tokensFile.empty() ? r.spec.textFile : r.spec.tokensFile) << " (" << r.tokenizer
      << " tokens); " << r.chunksScored << " chunks of " << r.spec.ctx << ", " << r.scored.size()
      << " scored tokens (the second half of each chunk), " << r.calibrationTokens << " calibration tokens before them"
      << (r.spec.residual > 0 ? ", the " + std::to_string(r.spec.residual) + " most recent tokens exact" : std::string())
      << (r.cancelled ? "; CANCELLED: partial" : "") << "\n";
    if (!r.forward.empty())
        o << "forward: " << r.forward << "\n";
    o << "reference: PPL " << std::exp(r.referenceNllMean) << " (mean NLL " << r.referenceNllMean << " nats)\n";
    for (const ConfigurationResult& c : r.configurations) {
        const lm::NextTokenSummary& s = c.summary;
        o << "\n== " << c.name << ", n = " << budgetText(c.budget) << ", seed " << r.spec.seed(c.seedIndex) << " (K "
          << c.bitsK << ", V " << c.bitsV << " bits per coordinate"
          << (c.queryConversion != "f32" ? ", queries converted to " + c.queryConversion + " as ggml does" : std::string())
          << ") ==\n";
        if (c.cacheShareK < 1.0 || c.cacheShareV < 1.0)
            o << "  read from the quantized cache: " << 100.0 * c.cacheShareK << " % of keys, " << 100.0 * c.cacheShareV
              << " % of values (the rest exact: open codec groups, residual window); bits spent K " << c.bitsSpentK()
              << ", V " << c.bitsSpentV() << "\n";
        if (c.tokens.size() < 2) {
            o << "  (fewer than two tokens scored)\n";
            continue;
        }
        o << "  Mean PPL(Q)                   : " << pm(s.pplQ.mean, s.pplQ.error) << "\n";
        o << "  Mean PPL(base)                : " << pm(s.pplBase.mean, s.pplBase.error) << "\n";
        o << "  Cor(ln(PPL(Q)), ln(PPL(base))): " << 100.0 * s.nllCorrelation << "%\n";
        o << "  Mean ln(PPL(Q)/PPL(base))     : " << pm(s.logPplRatio.mean, s.logPplRatio.error) << "\n";
        o << "  Mean PPL(Q)/PPL(base)         : " << pm(s.pplRatio.mean, s.pplRatio.error) << "\n";
        o << "  Mean KLD                      : " << pm(s.kld.mean, s.kld.error) << "\n";
        o << "  Maximum KLD: " << s.kldPercentiles.maximum << ", 99.9%: " << s.kldPercentiles.p999 << ", 99%: "
          << s.kldPercentiles.p99 << ", 95%: " << s.kldPercentiles.p95 << ", median: " << s.kldPercentiles.median
          << ", minimum: " << s.kldPercentiles.minimum << "\n";
        o << "  RMS Δp                        : " << pm(100.0 * s.deltaPRms.mean, 100.0 * s.deltaPRms.error, 3) << " %\n";
        o << "  Same top p                    : " << pm(100.0 * s.sameTop.mean, 100.0 * s.sameTop.error, 3) << " %\n";
    }
    // The layers whose quantization alone costs the most (both paths), per configuration.
    std::map<int, std::vector<const AttributionRow*>> byConfiguration;
    for (const AttributionRow& a : r.attribution)
        if (a.kvHead < 0 && a.path == AttributionPath::Both)
            byConfiguration[a.configuration].push_back(&a);
    if (!byConfiguration.empty())
        o << "\nlayers that matter most (mean KLD when only that layer's cache is quantized, K and V):\n";
    for (auto& [index, rows] : byConfiguration) {
        const ConfigurationResult& c = r.configurations[static_cast<std::size_t>(index)];
        std::sort(rows.begin(), rows.end(), [](const AttributionRow* a, const AttributionRow* b) { return a->kld.mean > b->kld.mean; });
        o << "  " << c.name << " n = " << budgetText(c.budget) << ":";
        for (std::size_t i = 0; i < rows.size() && i < 4; ++i)
            o << (i ? ", " : " ") << "layer " << rows[i]->layer << " " << rows[i]->kld.mean;
        o << "\n";
    }
    return o.str();
}

} // namespace kvlens::eval
