// SPDX-License-Identifier: GPL-3.0-or-later
// Two evaluations compared configuration by configuration and token by token (kvlens compare on two
// eval runs): differences paired over chunks, since a chunk's tokens share their context.
#include "core/analysis/eval_compare.h"

#include "core/common/math_policy.h"
#include "core/eval/eval_files.h"
#include "core/io/csv.h"

#include <boost/math/distributions/students_t.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

namespace kvlens {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

std::string configurationKey(const std::string& scheme, int budget, unsigned long long seed)
{
    return scheme + " n = " + eval::budgetText(budget) + " seed " + std::to_string(seed);
}

/// Why two runs' scored tokens are not the same tokens, or "".
std::string whyNotComparable(const eval::EvalResult& a, const eval::EvalResult& b)
{
    if (a.shardCount != 1 || b.shardCount != 1)
        return std::string("shards: run ") + (a.shardCount != 1 ? "A" : "B")
               + " is a shard (bring its shards together with kvlens merge first)";
    if (a.cancelled || b.cancelled)
        return std::string("cancelled: run ") + (a.cancelled ? "A" : "B") + " stopped before its last chunk (partial)";
    if (a.modelHash != b.modelHash)
        return "model: the runs evaluated other weights (their model hashes differ)";
    if (a.spec.ctx != b.spec.ctx)
        return "ctx: " + std::to_string(a.spec.ctx) + " in A, " + std::to_string(b.spec.ctx) + " in B";
    if (a.calibrationTokens != b.calibrationTokens)
        return "calibration: " + std::to_string(a.calibrationTokens) + " tokens in A, "
               + std::to_string(b.calibrationTokens) + " in B (the chunks start elsewhere)";
    if (a.chunkIndices != b.chunkIndices || a.scored.size() != b.scored.size())
        return "chunks: the runs scored other chunks (" + std::to_string(a.chunkIndices.size()) + " in A, "
               + std::to_string(b.chunkIndices.size()) + " in B)";
    if (a.tokensHash != b.tokensHash)
        return "text: the runs read other tokens (their token hashes differ)";
    return {};
}

std::vector<std::string> settingDifferences(const eval::EvalResult& a, const eval::EvalResult& b)
{
    std::vector<std::string> out;
    auto conversion = [](const EvalSpec& s) { return s.ggmlQueryConversion ? "ggml" : "none"; };
    if (a.spec.ggmlQueryConversion != b.spec.ggmlQueryConversion)
        out.push_back(std::string("query_conversion: ") + conversion(a.spec) + " -> " + conversion(b.spec));
    if (a.spec.residual != b.spec.residual)
        out.push_back("residual: " + std::to_string(a.spec.residual) + " -> " + std::to_string(b.spec.residual));
    if (a.threads != b.threads)
        out.push_back("threads: " + std::to_string(a.threads) + " -> " + std::to_string(b.threads)
                      + " (moves results by ~1e-9 only)");
    return out;
}

/// One metric's value for a token.
using TokenMetric = double (*)(const lm::TokenStat&);

EvalMetricDifference pairedOverChunks(const char* name, TokenMetric metric, const eval::EvalResult& ra,
                                      const eval::ConfigurationResult& a, const eval::ConfigurationResult& b)
{
    // Per chunk: the sums of the metric in A and B over its scored tokens, and the count.
    struct Sums {
        double a = 0.0, b = 0.0;
        int count = 0;
    };
    std::map<int, Sums> chunks;
    EvalMetricDifference d;
    d.metric = name;
    const std::size_t n = std::min({a.tokens.size(), b.tokens.size(), ra.scored.size()});
    for (std::size_t i = 0; i < n; ++i) {
        Sums& s = chunks[ra.scored[i].chunk];
        const double x = metric(a.tokens[i]), y = metric(b.tokens[i]);
        s.a += x;
        s.b += y;
        ++s.count;
        d.a += x;
        d.b += y;
    }
    d.a = n ? d.a / static_cast<double>(n) : kNan;
    d.b = n ? d.b / static_cast<double>(n) : kNan;
    std::vector<double> differences;
    for (const auto& [chunk, s] : chunks)
        differences.push_back((s.b - s.a) / s.count);
    double mean = 0.0;
    for (const double x : differences)
        mean += x;
    const double k = static_cast<double>(differences.size());
    d.difference = differences.empty() ? kNan : mean / k;
    d.low = d.high = kNan;
    if (differences.size() > 1) {
        double ss = 0.0;
        for (const double x : differences)
            ss += (x - d.difference) * (x - d.difference);
        const boost::math::students_t_distribution<double, MathPolicy> student(k - 1.0);
        const double half = boost::math::quantile(boost::math::complement(student, 0.025)) * std::sqrt(ss / (k - 1.0) / k);
        d.low = d.difference - half;
        d.high = d.difference + half;
    }
    return d;
}

std::vector<EvalMetricDifference> metricsOf(const eval::EvalResult& ra, const eval::ConfigurationResult& a,
                                            const eval::ConfigurationResult& b)
{
    return {pairedOverChunks("kld_mean", [](const lm::TokenStat& t) { return t.kld; }, ra, a, b),
            pairedOverChunks("ln_ppl_ratio", [](const lm::TokenStat& t) { return t.nllQ - t.nllBase; }, ra, a, b),
            pairedOverChunks("same_top1", [](const lm::TokenStat& t) { return t.sameTop() ? 1.0 : 0.0; }, ra, a, b)};
}

} // namespace

Result<EvalComparison> compareEvals(const eval::EvalResult& a, const eval::EvalResult& b)
{
    if (const std::string why = whyNotComparable(a, b); !why.empty())
        return Error{"compare", "the evaluations cannot be compared token by token: " + why};
    EvalComparison c;
    c.chunks = static_cast<int>(a.chunkIndices.size());
    c.tokens = static_cast<int>(a.scored.size());
    c.settingDifferences = settingDifferences(a, b);
    std::map<std::string, int> inB;
    for (std::size_t j = 0; j < b.configurations.size(); ++j) {
        const auto& cb = b.configurations[j];
        inB[configurationKey(cb.name, cb.budget, b.spec.seed(cb.seedIndex))] = static_cast<int>(j);
    }
    for (std::size_t i = 0; i < a.configurations.size(); ++i) {
        const auto& ca = a.configurations[i];
        const unsigned long long seed = a.spec.seed(ca.seedIndex);
        const std::string key = configurationKey(ca.name, ca.budget, seed);
        const auto it = inB.find(key);
        if (it == inB.end()) {
            c.onlyA.push_back(key);
            continue;
        }
        const auto& cb = b.configurations[static_cast<std::size_t>(it->second)];
        c.shared.push_back({ca.name, ca.budget, seed, static_cast<int>(i), it->second, ca.queryConversion,
                            cb.queryConversion, metricsOf(a, ca, cb)});
        inB.erase(it);
    }
    for (std::size_t j = 0; j < b.configurations.size(); ++j) {
        const auto& cb = b.configurations[j];
        const std::string key = configurationKey(cb.name, cb.budget, b.spec.seed(cb.seedIndex));
        if (inB.count(key))
            c.onlyB.push_back(key);
    }
    return c;
}

std::string evalComparisonCsv(const EvalComparison& c)
{
    std::string out = "# B - A paired over " + std::to_string(c.chunks)
                      + " chunks (each chunk's mean in B minus its mean in A; 95% Student-t interval over chunks)\n";
    for (const std::string& s : c.settingDifferences)
        out += "# setting that differs: " + s + "\n";
    for (const std::string& s : c.onlyA)
        out += "# only in A: " + s + "\n";
    for (const std::string& s : c.onlyB)
        out += "# only in B: " + s + "\n";
    CsvWriter csv({"scheme", "budget", "seed", "metric", "a", "b", "b_minus_a", "low", "high", "chunks", "query_a",
                   "query_b"});
    for (const EvalConfigurationComparison& s : c.shared)
        for (const EvalMetricDifference& m : s.metrics) {
            csv.add(s.scheme).add(eval::budgetText(s.budget)).add(s.seed).add(m.metric).add(m.a).add(m.b)
                .add(m.difference).add(m.low).add(m.high).add(c.chunks).add(s.queryA).add(s.queryB);
            csv.endRow();
        }
    return out + csv.text();
}

std::string compareTokensCsv(const EvalComparison& c, const eval::EvalResult& a, const eval::EvalResult& b)
{
    CsvWriter csv({"scheme", "budget", "seed", "chunk", "position", "next", "next_text", "kld_a", "kld_b", "kld_b_minus_a",
                   "nll_a", "nll_b", "top1_same_a", "top1_same_b"});
    for (const EvalConfigurationComparison& s : c.shared) {
        const auto& ca = a.configurations[static_cast<std::size_t>(s.configurationA)];
        const auto& cb = b.configurations[static_cast<std::size_t>(s.configurationB)];
        const std::size_t n = std::min({ca.tokens.size(), cb.tokens.size(), a.scored.size()});
        for (std::size_t i = 0; i < n; ++i) {
            const eval::ScoredToken& p = a.scored[i];
            const lm::TokenStat &x = ca.tokens[i], &y = cb.tokens[i];
            csv.add(s.scheme).add(eval::budgetText(s.budget)).add(s.seed).add(p.chunk).add(p.position)
                .add(static_cast<long long>(p.next))
                .add(i < a.tokenText.size() ? eval::escapeTokenText(a.tokenText[i]) : std::string())
                .add(x.kld).add(y.kld).add(y.kld - x.kld).add(x.nllQ).add(y.nllQ).add(x.sameTop() ? 1 : 0)
                .add(y.sameTop() ? 1 : 0);
            csv.endRow();
        }
    }
    return csv.text();
}

std::string evalComparisonText(const EvalComparison& c)
{
    std::ostringstream o;
    for (const std::string& s : c.settingDifferences)
        o << "  setting that differs: " << s << "\n";
    char line[256];
    std::snprintf(line, sizeof line, "  %-28s %7s  %12s %12s %13s  %s\n", "scheme", "budget", "KLD A", "KLD B",
                  "B - A", "95% over chunks");
    o << line;
    for (const EvalConfigurationComparison& s : c.shared) {
        const EvalMetricDifference& m = s.metrics.front();
        std::snprintf(line, sizeof line, "  %-28s %7s  %12.6g %12.6g %+13.6g  [%+.6g, %+.6g]\n", s.scheme.c_str(),
                      eval::budgetText(s.budget).c_str(), m.a, m.b, m.difference, m.low, m.high);
        o << line;
    }
    for (const std::string& s : c.onlyA)
        o << "  only in A: " << s << "\n";
    for (const std::string& s : c.onlyB)
        o << "  only in B: " << s << "\n";
    return o.str();
}

} // namespace kvlens
