// SPDX-License-Identifier: GPL-3.0-or-later
// What every paper's claims share: reading cells of a result set, pooled samples, contrasts with
// bootstrap intervals, labels, and figure helpers. Internal to core/report.
#pragma once

#include "core/analysis/figures.h"
#include "core/model/result.h"
#include "core/report/claims.h"
#include "core/stats/mann_whitney.h"

#include <cstdint>
#include <initializer_list>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::claims::support {

inline constexpr double kPi = std::numbers::pi;

/// A per-query metric of a trial (KL, recall, phi_T, ...).
using QueryField = std::vector<float> TrialResult::*;

/// A against B on a lower-is-better sample.
struct Contrast {
    std::size_t nA = 0, nB = 0;
    double medianA = 0.0, medianB = 0.0;
    double ratio = 0.0, low = 0.0, high = 0.0; ///< median A / median B with a bootstrap 95% interval
    double r = 0.0;                            ///< rank-biserial: > 0 when A ranks lower (less damage)
    stats::PValue p;                           ///< two-sided Mann-Whitney
};

int schemeIndex(const ResultSet& rs, std::string_view name);

/// The first of `names` the run has (KQV and TQ-KQV are one scheme under two papers' names).
int anyScheme(const ResultSet& rs, std::initializer_list<std::string_view> names);

/// The trials of one (point, scheme, budget), in seed order.
std::vector<const TrialResult*> cell(const ResultSet& rs, int point, int scheme, int budget);

/// Per-query values of a cell, pooled over seeds (queries in order, so two cells on the same
/// seeds pair up).
std::vector<double> pooled(const std::vector<const TrialResult*>& c, QueryField field);

/// Per-key direction error eps_dir = 1 - cos(phi) of the kept key samples, pooled over seeds
/// (the samples are the same key indices under every scheme, so two cells pair up).
std::vector<double> pooledEpsK(const std::vector<const TrialResult*>& c);

/// Mean eps_dir^K per seed, with its 95% interval over seeds.
Interval epsKInterval(const std::vector<const TrialResult*>& c);

/// Mean per-query value per seed, with its 95% interval over seeds.
Interval queryMeanInterval(const std::vector<const TrialResult*>& c, QueryField field);

double median(std::vector<double> v);

double mean(const std::vector<double>& v);

Contrast contrast(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t seed, int resamples);

std::string ratioText(double ratio, double low, double high);

std::string intervalText(const Interval& i, int digits = 3);

std::string signedText(double r);

/// "heavy_tail (nu = 1.5)", "low_rank (rank = 8, d = 1024)", "gaussian".
std::string runLabel(const ExperimentSpec& s);

std::string runLabel(const ResultSet& rs);

/// Run label plus the grid point's swept values.
std::string settingLabel(const ResultSet& rs, int point);

/// Budgets of a run, ascending.
std::vector<int> budgetsOf(const ResultSet& rs);

/// Grid points whose keys differ: a sweep over score_scale alone redraws only the queries' scale.
std::vector<int> keyPoints(const ResultSet& rs);

double pointValue(const ResultSet& rs, int point, SweepParameter parameter, std::string_view regimeKey, double fallback);

Series referenceLine(const std::string& name, double x0, double x1, double y);

void pushInterval(Series& s, double x, const Interval& i);

void pushRatio(Series& s, double x, double ratio, double low, double high);

/// Mean KL per scheme against the budget, with 95% intervals over seeds.
Figure klByBudgetFigure(const ResultSet& rs, int point, const std::vector<std::string>& names, const std::string& id,
                        const std::string& title, QueryField field = &TrialResult::kl,
                        const std::string& yLabel = "mean KL (nats)");

} // namespace kvlens::claims::support
