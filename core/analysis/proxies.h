// SPDX-License-Identifier: GPL-3.0-or-later
// The proxy study (paper C): which cheap error measure ranks queries by the damage they see.
#pragma once

#include "core/spec/result.h"

#include <array>
#include <string>
#include <vector>

namespace kvlens::stats {

/// The proxies, in column order. Trial-level proxies (raw key MSE, relMSE_K, relMSE_V) give
/// every query of the trial the trial's value; the others are per query.
enum class Proxy { RawMseK, RelMseK, RelMseV, Fisher, A2, D2 };
inline constexpr int kProxyCount = 6;
inline constexpr std::array<const char*, kProxyCount> kProxyColumns = {"raw_mse_k", "rel_mse_k", "rel_mse_v",
                                                                       "fisher", "a2_value_error", "d2"};
/// One sentence per proxy, for tooltips and the report.
inline constexpr std::array<const char*, kProxyCount> kProxyDescriptions = {
    "Mean squared key error per coordinate, ||k - k^||^2 / d, of the trial.",
    "Key error relative to key energy, sum ||k - k^||^2 / sum ||k||^2, of the trial.",
    "Value error relative to value energy, sum ||v - v^||^2 / sum ||v||^2, of the trial.",
    "Fisher score error Var_p(s^ - s): score noise weighted by where the query attends.",
    "A^2 value error sum_j p_j^2 ||v_j - v^_j||^2: value noise weighted by squared attention.",
    "Paper B's d^2 = relMSE_T^2 + (1 - cos)^2 of the query's output."};

/// Spearman rho of each proxy against per-query KL over one group of queries.
struct ProxyRow {
    std::string group;                 ///< a scheme's name, or "(pooled)"
    long long queries = 0;             ///< pairs used (queries with a finite KL and finite proxies)
    std::array<double, kProxyCount> rho{}; ///< NaN where undefined (fewer than 2 queries)
};

/// One row per scheme (pooled over points, budgets and seeds), then one over every scheme. The
/// per-query proxies are computed on the evaluated query itself (an oracle; see
/// deployableProxyStudy for the held-out design).
/// Queries whose KL or proxy is not finite are left out of that proxy's correlation.
std::vector<ProxyRow> proxyStudy(const ResultSet& results);

/// DIR/proxies.csv: regime, group, queries, then one rho column per proxy.
std::string proxiesCsv(const ResultSet& results, const std::vector<ProxyRow>& rows);
/// A fixed-width table for the terminal, naming each group's best proxy.
std::string proxiesText(const std::vector<ProxyRow>& rows);

/// The deployable study. A proxy a cache could compute before the queries it is judged on: each
/// trial's queries are split into a calibration half (even indices) and a held-out half (odd).
/// The proxy's value for the trial comes from the calibration half alone (trial-level proxies as
/// they are; Fisher, A^2 and d^2 averaged over the calibration queries); its target is the mean
/// KL of the held-out half. Spearman rho over the trials of one (point, scheme, budget) cell, so
/// budgets are never pooled. `oracleFisher` is the held-out queries' own Fisher against their
/// KL, pooled over the cell's trials: the second-order expansion of the KL it predicts (KL ~ Var_p(ds) / 2), kept
/// as a labelled reference, not a deployable proxy.
struct DeployableProxyCell {
    int point = 0, scheme = 0, budget = 0;
    int trials = 0;
    std::array<double, kProxyCount> rho{}; ///< NaN with fewer than 3 trials
    double oracleFisher = 0.0;
};
std::vector<DeployableProxyCell> deployableProxyStudy(const ResultSet& results);
/// A proxy's deployable value for one trial: from its calibration (even-indexed) queries only.
double deployableProxy(const TrialResult& t, Proxy proxy);
/// The held-out target of one trial: the mean KL of its odd-indexed queries (NaN if none is finite).
double heldOutKl(const TrialResult& t);

/// rho of one proxy pooled over the trials of the given schemes and budgets (empty: all).
/// For tests and the report.
double proxyRho(const ResultSet& results, Proxy proxy, const std::vector<int>& schemes, const std::vector<int>& budgets);

} // namespace kvlens::stats
