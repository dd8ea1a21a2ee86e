// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/analysis/proxies.h"

#include "core/io/csv.h"
#include "core/spec/grid.h"
#include "core/stats/spearman.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kvlens::stats {

namespace {

double proxyValue(const TrialResult& t, Proxy proxy, std::size_t q)
{
    switch (proxy) {
    case Proxy::RawMseK: return t.rawMseK;
    case Proxy::RelMseK: return t.relMseK;
    case Proxy::RelMseV: return t.relMseV;
    case Proxy::Fisher: return q < t.fisher.size() ? t.fisher[q] : std::numeric_limits<double>::quiet_NaN();
    case Proxy::A2: return q < t.a2.size() ? t.a2[q] : std::numeric_limits<double>::quiet_NaN();
    case Proxy::D2: return q < t.d2.size() ? t.d2[q] : std::numeric_limits<double>::quiet_NaN();
    }
    return std::numeric_limits<double>::quiet_NaN();
}

template <typename Keep>
double rhoOver(const ResultSet& results, Proxy proxy, Keep keep, long long* pairs)
{
    std::vector<double> x, y;
    for (const TrialResult& t : results.trials) {
        if (!keep(t))
            continue;
        for (std::size_t q = 0; q < t.kl.size(); ++q) {
            const double kl = t.kl[q], p = proxyValue(t, proxy, q);
            if (std::isfinite(kl) && std::isfinite(p)) {
                x.push_back(p);
                y.push_back(kl);
            }
        }
    }
    if (pairs)
        *pairs = std::max<long long>(*pairs, static_cast<long long>(x.size()));
    return x.size() < 2 ? std::numeric_limits<double>::quiet_NaN() : spearman(x, y);
}

ProxyRow rowFor(const ResultSet& results, std::string group, int scheme)
{
    ProxyRow row;
    row.group = std::move(group);
    for (int p = 0; p < kProxyCount; ++p)
        row.rho[static_cast<std::size_t>(p)] = rhoOver(
            results, static_cast<Proxy>(p), [scheme](const TrialResult& t) { return scheme < 0 || t.key.scheme == scheme; },
            &row.queries);
    return row;
}

} // namespace

std::vector<ProxyRow> proxyStudy(const ResultSet& results)
{
    std::vector<ProxyRow> rows;
    for (std::size_t s = 0; s < results.schemes.size(); ++s)
        rows.push_back(rowFor(results, results.schemes[s].name, static_cast<int>(s)));
    if (results.schemes.size() > 1)
        rows.push_back(rowFor(results, "(pooled)", -1));
    return rows;
}

std::string proxiesCsv(const ResultSet& results, const std::vector<ProxyRow>& rows)
{
    std::vector<std::string> header = {"regime", "group", "queries"};
    for (const char* column : kProxyColumns)
        header.push_back(std::string("rho_") + column);
    CsvWriter csv(header);
    for (const ProxyRow& r : rows) {
        csv.add(results.spec.regime).add(r.group).add(r.queries);
        for (double rho : r.rho)
            csv.add(rho);
        csv.endRow();
    }
    return csv.text();
}

std::string proxiesText(const std::vector<ProxyRow>& rows)
{
    std::string out = "Spearman rho of each proxy against per-query KL (higher ranks damage better)\n"
                      "(fisher, a2_value_error and d2 are computed on the evaluated query itself: an oracle, Fisher\n"
                      " being the second-order expansion of that query's KL; the report's C2 judges proxies from\n"
                      " calibration queries on held-out ones)\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-22s %8s", "group", "queries");
    out += line;
    for (const char* column : kProxyColumns) {
        std::snprintf(line, sizeof line, " %14s", column);
        out += line;
    }
    out += "  best\n";
    for (const ProxyRow& r : rows) {
        std::snprintf(line, sizeof line, "%-22s %8lld", r.group.c_str(), r.queries);
        out += line;
        int best = -1;
        for (int p = 0; p < kProxyCount; ++p) {
            const double rho = r.rho[static_cast<std::size_t>(p)];
            // A rho of a constant proxy (or of too few queries) is undefined, and printed as such.
            if (std::isfinite(rho))
                std::snprintf(line, sizeof line, " %14.3f", rho);
            else
                std::snprintf(line, sizeof line, " %14s", "undefined");
            out += line;
            if (std::isfinite(rho) && (best < 0 || rho > r.rho[static_cast<std::size_t>(best)]))
                best = p;
        }
        out += "  ";
        out += best >= 0 ? kProxyColumns[static_cast<std::size_t>(best)] : "-";
        out += "\n";
    }
    return out;
}

double deployableProxy(const TrialResult& t, Proxy proxy)
{
    if (proxy == Proxy::RawMseK || proxy == Proxy::RelMseK || proxy == Proxy::RelMseV)
        return proxyValue(t, proxy, 0); // trial-level: computed from the cache alone
    double sum = 0.0;
    int count = 0;
    for (std::size_t q = 0; q < t.kl.size(); q += 2) { // calibration half only
        const double v = proxyValue(t, proxy, q);
        if (std::isfinite(v)) {
            sum += v;
            ++count;
        }
    }
    return count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
}

double heldOutKl(const TrialResult& t)
{
    double sum = 0.0;
    int count = 0;
    for (std::size_t q = 1; q < t.kl.size(); q += 2)
        if (std::isfinite(t.kl[q])) {
            sum += t.kl[q];
            ++count;
        }
    return count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
}

std::vector<DeployableProxyCell> deployableProxyStudy(const ResultSet& results)
{
    std::vector<DeployableProxyCell> out;
    const TrialCells cells(results);
    for (const TrialCells::Cell& where : cells.nonEmpty()) {
        const TrialSlot& at = where.at;
        const auto& trials = *where.trials;
        DeployableProxyCell cell;
        cell.point = at.point;
        cell.scheme = at.schemeIndex;
        cell.budget = trials.front()->key.budget;
        std::vector<double> target;
        for (const TrialResult* t : trials)
            target.push_back(heldOutKl(*t));
        for (int p = 0; p < kProxyCount; ++p) {
            std::vector<double> x, y;
            for (std::size_t i = 0; i < trials.size(); ++i) {
                const double v = deployableProxy(*trials[i], static_cast<Proxy>(p));
                if (std::isfinite(v) && std::isfinite(target[i])) {
                    x.push_back(v);
                    y.push_back(target[i]);
                }
            }
            cell.rho[static_cast<std::size_t>(p)] = x.size() < 3 ? std::numeric_limits<double>::quiet_NaN() : spearman(x, y);
            cell.trials = std::max(cell.trials, static_cast<int>(x.size()));
        }
        std::vector<double> fisher, kl; // the oracle: the evaluated (held-out) queries' own Fisher
        for (const TrialResult* t : trials)
            for (std::size_t q = 1; q < t->kl.size() && q < t->fisher.size(); q += 2)
                if (std::isfinite(t->kl[q]) && std::isfinite(t->fisher[q])) {
                    fisher.push_back(t->fisher[q]);
                    kl.push_back(t->kl[q]);
                }
        cell.oracleFisher = fisher.size() < 3 ? std::numeric_limits<double>::quiet_NaN() : spearman(fisher, kl);
        out.push_back(cell);
    }
    return out;
}

double proxyRho(const ResultSet& results, Proxy proxy, const std::vector<int>& schemes, const std::vector<int>& budgets)
{
    auto contains = [](const std::vector<int>& set, int v) { return set.empty() || std::find(set.begin(), set.end(), v) != set.end(); };
    return rhoOver(
        results, proxy, [&](const TrialResult& t) { return contains(schemes, t.key.scheme) && contains(budgets, t.key.budget); },
        nullptr);
}

} // namespace kvlens::stats
