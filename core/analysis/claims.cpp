// SPDX-License-Identifier: GPL-3.0-or-later
// Claim evaluation: pooled per-query and per-key samples, rank tests, bootstrap intervals, verdicts from stated criteria.
#include "core/analysis/claims.h"

#include "core/model/grid.h"

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

std::string_view verdictText(Verdict verdict)
{
    switch (verdict) {
    case Verdict::Reproduced: return "reproduced";
    case Verdict::NotReproduced: return "not reproduced";
    case Verdict::DependsOnSetting: return "depends on setting";
    }
    return "not reproduced";
}

Verdict verdictFrom(std::span<const Check> checks)
{
    const auto holding = std::count_if(checks.begin(), checks.end(), [](const Check& c) { return c.holds; });
    if (checks.empty() || holding == 0)
        return Verdict::NotReproduced;
    return static_cast<std::size_t>(holding) == checks.size() ? Verdict::Reproduced : Verdict::DependsOnSetting;
}

bool significantInDirection(const stats::PValue& p, double effect, double alpha)
{
    // logP keeps its precision where p underflows; compare there.
    return effect > 0.0 && p.logP < std::log(alpha);
}

bool withinRelative(double measured, double expected, double tolerance)
{
    if (!std::isfinite(measured) || !std::isfinite(expected) || expected == 0.0)
        return false;
    return std::abs(measured / expected - 1.0) <= tolerance;
}

bool equivalentRatio(double lower, double upper, double margin)
{
    assert(margin > 1.0 && "an equivalence margin is a factor above 1");
    return std::isfinite(lower) && std::isfinite(upper) && lower >= 1.0 / margin && upper <= margin;
}

std::string formatSig(double value, int digits)
{
    if (!std::isfinite(value))
        return "n/a";
    char text[64];
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    return text;
}

std::string formatP(const stats::PValue& p)
{
    if (p.p >= 1e-300)
        return formatSig(p.p, 2);
    const double log10p = p.logP / std::numbers::ln10;
    const double exponent = std::floor(log10p);
    char text[64];
    std::snprintf(text, sizeof text, "%.1fe%.0f", std::pow(10.0, log10p - exponent), exponent);
    return text;
}

void decide(Claim& claim)
{
    claim.verdict = verdictFrom(claim.checks);
    claim.dependsOn.clear();
    if (claim.verdict != Verdict::DependsOnSetting)
        return;
    std::string holds, fails;
    for (const Check& c : claim.checks)
        (c.holds ? holds : fails) += (((c.holds ? holds : fails).empty()) ? "" : "; ") + c.setting;
    claim.dependsOn = "holds at: " + holds + ". Does not hold at: " + fails + ".";
}

namespace {

constexpr double kPi = std::numbers::pi;

int schemeIndex(const ResultSet& rs, std::string_view name)
{
    for (std::size_t i = 0; i < rs.schemes.size(); ++i)
        if (rs.schemes[i].name == name)
            return static_cast<int>(i);
    return -1;
}

/// The first of `names` the run has (KQV and TQ-KQV are one scheme under two papers' names).
int anyScheme(const ResultSet& rs, std::initializer_list<std::string_view> names)
{
    for (std::string_view n : names)
        if (int i = schemeIndex(rs, n); i >= 0)
            return i;
    return -1;
}

/// The trials of one (point, scheme, budget), in seed order.
std::vector<const TrialResult*> cell(const ResultSet& rs, int point, int scheme, int budget)
{
    return TrialCells(rs).atBudget(point, budget, scheme);
}

using QueryField = std::vector<float> TrialResult::*;

/// Per-query values of a cell, pooled over seeds (queries in order, so two cells on the same
/// seeds pair up).
std::vector<double> pooled(const std::vector<const TrialResult*>& c, QueryField field)
{
    std::vector<double> out;
    for (const TrialResult* t : c)
        for (float v : t->*field)
            out.push_back(static_cast<double>(v));
    return out;
}

/// Per-key direction error eps_dir = 1 - cos(phi) of the kept key samples, pooled over seeds
/// (the samples are the same key indices under every scheme, so two cells pair up).
std::vector<double> pooledEpsK(const std::vector<const TrialResult*>& c)
{
    std::vector<double> out;
    for (const TrialResult* t : c)
        for (float phi : t->samplesK.phi)
            out.push_back(1.0 - std::cos(static_cast<double>(phi)));
    return out;
}

/// Mean eps_dir^K per seed, with its 95% interval over seeds.
Interval epsKInterval(const std::vector<const TrialResult*>& c)
{
    std::vector<double> perSeed;
    for (const TrialResult* t : c) {
        double sum = 0.0;
        for (float phi : t->samplesK.phi)
            sum += 1.0 - std::cos(static_cast<double>(phi));
        perSeed.push_back(t->samplesK.phi.empty() ? 0.0 : sum / static_cast<double>(t->samplesK.phi.size()));
    }
    return seedInterval(perSeed);
}

/// Mean per-query value per seed, with its 95% interval over seeds.
Interval queryMeanInterval(const std::vector<const TrialResult*>& c, QueryField field)
{
    std::vector<double> perSeed;
    for (const TrialResult* t : c) {
        const auto& v = t->*field;
        double sum = 0.0;
        for (float x : v)
            sum += x;
        perSeed.push_back(v.empty() ? 0.0 : sum / static_cast<double>(v.size()));
    }
    return seedInterval(perSeed);
}

double median(std::vector<double> v)
{
    return v.empty() ? std::numeric_limits<double>::quiet_NaN() : stats::location(v, stats::Location::Median);
}

double mean(const std::vector<double>& v)
{
    return v.empty() ? std::numeric_limits<double>::quiet_NaN() : stats::location(v, stats::Location::Mean);
}

/// A against B on a lower-is-better sample.
struct Contrast {
    std::size_t nA = 0, nB = 0;
    double medianA = 0.0, medianB = 0.0;
    double ratio = 0.0, low = 0.0, high = 0.0; ///< median A / median B with a bootstrap 95% interval
    double r = 0.0;                            ///< rank-biserial: > 0 when A ranks lower (less damage)
    stats::PValue p;                           ///< two-sided Mann-Whitney
};

Contrast contrast(const std::vector<double>& a, const std::vector<double>& b, std::uint64_t seed, int resamples)
{
    Contrast c;
    c.nA = a.size();
    c.nB = b.size();
    c.medianA = median(a);
    c.medianB = median(b);
    c.ratio = c.medianB != 0.0 ? c.medianA / c.medianB : std::numeric_limits<double>::quiet_NaN();
    c.low = c.high = c.ratio;
    if (a.empty() || b.empty())
        return c;
    const stats::MannWhitneyResult mw = stats::mannWhitneyU(a, b);
    c.r = mw.rankBiserial;
    c.p = mw.p;
    if (resamples > 0 && c.medianB != 0.0) {
        // Same queries under both schemes: keep the pairing in the resamples.
        const stats::BootstrapCi ci = a.size() == b.size()
                                          ? stats::bootstrapPairedRatio(a, b, stats::Location::Median, 0.95, resamples, seed)
                                          : stats::bootstrapRatio(a, b, stats::Location::Median, 0.95, resamples, seed);
        if (ci.resamples > 0) {
            c.low = ci.lower;
            c.high = ci.upper;
        }
    }
    return c;
}

std::string ratioText(double ratio, double low, double high)
{
    return formatSig(ratio) + " [" + formatSig(low) + ", " + formatSig(high) + "]";
}

std::string intervalText(const Interval& i, int digits = 3)
{
    return formatSig(i.mean, digits) + " [" + formatSig(i.low, digits) + ", " + formatSig(i.high, digits) + "]";
}

std::string signedText(double r)
{
    char text[32];
    std::snprintf(text, sizeof text, "%+.3f", r);
    return text;
}

/// "heavy_tail (nu = 1.5)", "low_rank (rank = 8, d = 1024)", "gaussian".
std::string runLabel(const ExperimentSpec& s)
{
    std::string params;
    auto add = [&](const char* key, const char* name) {
        const auto it = s.regimeParams.find(key);
        if (it == s.regimeParams.end())
            return;
        bool swept = false;
        for (const SweepAxis& a : s.sweep)
            swept = swept || (a.parameter == SweepParameter::Regime && a.regimeKey == key);
        if (swept)
            return;
        if (const double* v = std::get_if<double>(&it->second))
            params += (params.empty() ? "" : ", ") + std::string(name) + " = " + formatSig(*v);
    };
    if (s.regime == "heavy_tail")
        add("nu", "ν");
    if (s.regime == "low_rank" || s.regime == "kv_subspace")
        add("rank", "rank");
    if (s.d != 128)
        params += (params.empty() ? "" : ", ") + std::string("d = ") + std::to_string(s.d);
    return params.empty() ? s.regime : s.regime + " (" + params + ")";
}

std::string runLabel(const ResultSet& rs)
{
    return runLabel(rs.spec);
}

/// Run label plus the grid point's swept values.
std::string settingLabel(const ResultSet& rs, int point)
{
    const std::string p = rs.spec.pointLabel(point);
    return p.empty() ? runLabel(rs) : runLabel(rs) + ", " + p;
}

/// Budgets of a run, ascending.
std::vector<int> budgetsOf(const ResultSet& rs)
{
    std::vector<int> b = rs.spec.budgets;
    std::sort(b.begin(), b.end());
    return b;
}

/// Grid points whose keys differ: a sweep over score_scale alone redraws only the queries' scale.
std::vector<int> keyPoints(const ResultSet& rs)
{
    bool onlyScore = !rs.spec.sweep.empty();
    for (const SweepAxis& a : rs.spec.sweep)
        onlyScore = onlyScore && a.parameter == SweepParameter::ScoreScale;
    std::vector<int> out;
    for (int p = 0; p < (onlyScore ? 1 : rs.spec.pointCount()); ++p)
        out.push_back(p);
    return out;
}

double pointValue(const ResultSet& rs, int point, SweepParameter parameter, std::string_view regimeKey, double fallback)
{
    const auto axes = rs.spec.gridAxes();
    const auto values = rs.spec.pointValues(point);
    for (std::size_t i = 0; i < axes.size(); ++i)
        if (axes[i]->parameter == parameter && axes[i]->regimeKey == regimeKey)
            return values[i];
    return fallback;
}

Series referenceLine(const std::string& name, double x0, double x1, double y)
{
    Series s;
    s.name = name;
    s.x = {x0, x1};
    s.y = {y, y};
    s.reference = true;
    return s;
}

void pushInterval(Series& s, double x, const Interval& i)
{
    s.x.push_back(x);
    s.y.push_back(i.mean);
    s.low.push_back(i.low);
    s.high.push_back(i.high);
}

void pushRatio(Series& s, double x, double ratio, double low, double high)
{
    s.x.push_back(x);
    s.y.push_back(ratio);
    s.low.push_back(low);
    s.high.push_back(high);
}

} // namespace

Result<MarginalHistogram> rotatedKeyMarginal(const ExperimentSpec& spec, int bins, int maxSample)
{
    const Regime* regime = findRegime(spec.regime);
    if (!regime)
        return Error{"regime", "unknown regime '" + spec.regime + "'"};
    DataShape shape;
    shape.d = spec.d;
    shape.tokens = spec.tokens;
    shape.queries = 1;
    Result<Dataset> data = regime->generate(spec.regimeParams, shape, spec.engine, spec.seed(0));
    if (!data)
        return data.error();
    const RowMatrixXf& keys = data->keys;

    MarginalHistogram h;
    h.label = runLabel(spec);
    // Raw coordinates: excess kurtosis says how heavy the tails were before rotation.
    double m2 = 0.0, m4 = 0.0, mu = 0.0;
    const double count = static_cast<double>(keys.size());
    for (Eigen::Index i = 0; i < keys.size(); ++i)
        mu += keys.data()[i];
    mu /= count;
    for (Eigen::Index i = 0; i < keys.size(); ++i) {
        const double c = keys.data()[i] - mu;
        m2 += c * c;
        m4 += c * c * c * c;
    }
    m2 /= count;
    m4 /= count;
    h.rawExcessKurtosis = m2 > 0.0 ? m4 / (m2 * m2) - 3.0 : 0.0;

    Rng rng(spec.engine, spec.seed(0), Stream::KeySigns);
    const std::vector<float> signs = randomSigns(paddedDimension(static_cast<std::size_t>(spec.d)), rng);
    RowMatrixXf rotated;
    rotateRows(keys, signs, rotated);
    const double scale = std::sqrt(static_cast<double>(rotated.cols()));
    constexpr double kLow = -4.0, kHigh = 4.0;
    const double width = (kHigh - kLow) / bins;
    for (int b = 0; b <= bins; ++b)
        h.edges.push_back(kLow + width * b);
    std::vector<double> counts(static_cast<std::size_t>(bins), 0.0);
    std::vector<double> all;
    all.reserve(static_cast<std::size_t>(rotated.size()));
    for (Eigen::Index r = 0; r < rotated.rows(); ++r) {
        const double norm = rotated.row(r).cast<double>().norm();
        if (norm == 0.0)
            continue;
        for (Eigen::Index c = 0; c < rotated.cols(); ++c) {
            const double x = rotated(r, c) / norm * scale;
            all.push_back(x);
            const int b = static_cast<int>(std::floor((x - kLow) / width));
            if (b >= 0 && b < bins)
                counts[static_cast<std::size_t>(b)] += 1.0;
        }
    }
    for (double c : counts)
        h.density.push_back(all.empty() ? 0.0 : c / (static_cast<double>(all.size()) * width));
    const std::size_t keep = std::min<std::size_t>(all.size(), static_cast<std::size_t>(std::max(maxSample, 1)));
    for (std::size_t i = 0; i < keep; ++i)
        h.sample.push_back(all[i * all.size() / keep]);
    return h;
}

// ---------------------------------------------------------------------------------------------
// Paper A

Claim qjlVarianceClaim(const ResultSet& rs)
{
    Claim claim;
    claim.id = "A1-qjl-variance";
    claim.paper = "A";
    claim.title = "QJL on keys inflates the score-error variance: π/2 over the residual, about 2π over the n-bit scalar";
    claim.statement = "Replacing scalar bits on the keys by a 1-bit QJL sketch multiplies the variance of the score "
                      "error by at least π/2 ≈ 1.57 relative to the residual it estimates, and by about 2π ≈ 6.28 when an "
                      "(n−1)-bit scalar + 1-bit QJL key path (QKQV) is compared with an n-bit scalar one (KQV).";
    claim.criterion = "Per budget n, per seed: Var(ŝ − s) of QKQV over the variance of its residual-free base, and "
                      "Var(ŝ − s) of QKQV over that of KQV on the same draw; mean over seeds with a 95% normal "
                      "interval. A check holds when the mean is within ±10% of π/2 (residual) or within ±25% of 2π "
                      "(n-bit scalar). The closed form (π/2)·D(n−1)/D(n) of design §5 is shown beside 2π.";
    claim.runs = {rs.spec.name};
    const int q = anyScheme(rs, {"QKQV", "TQ-QKQV"}), k = anyScheme(rs, {"KQV", "TQ-KQV"});
    Table table;
    table.caption = "Score-error variance ratios (" + runLabel(rs) + ")";
    table.header = {"setting", "n", "Var(QKQV) / Var(residual dropped)", "π/2", "Var(QKQV) / Var(KQV)",
                    "closed form (π/2)·D(n−1)/D(n)", "2π", "Jensen σ²/2 (QKQV)", "measured log E[exp δs]"};
    Figure fig;
    fig.id = "a1_variance_ratio";
    fig.title = "QJL on keys: score-error variance ratios";
    fig.xLabel = "bit budget n";
    fig.yLabel = "variance ratio";
    Series residual{"Var(QKQV) / Var(residual dropped)", {}, {}, {}, {}}, scalar{"Var(QKQV) / Var(KQV)", {}, {}, {}, {}},
        closed{"closed form (π/2)·D(n−1)/D(n)", {}, {}, {}, {}};
    closed.reference = false;
    std::string headline;
    const std::vector<int> budgets = budgetsOf(rs);
    for (int point = 0; q >= 0 && k >= 0 && point < rs.spec.pointCount(); ++point) {
        for (int n : budgets) {
            const auto cq = cell(rs, point, q, n), ck = cell(rs, point, k, n);
            std::vector<double> overBase, overScalar, predicted, jensenPred, jensenMeas;
            for (std::size_t i = 0; i < cq.size() && i < ck.size(); ++i) {
                overBase.push_back(cq[i]->scoreErrorVar / cq[i]->scoreErrorVarBase);
                overScalar.push_back(cq[i]->scoreErrorVar / ck[i]->scoreErrorVar);
                predicted.push_back(cq[i]->scoreErrorVarPredicted / ck[i]->scoreErrorVarPredicted);
                jensenPred.push_back(0.5 * cq[i]->scoreErrorVar);
                jensenMeas.push_back(cq[i]->logMeanExpScoreError);
            }
            const Interval ib = seedInterval(overBase), is = seedInterval(overScalar);
            const double closedForm = mean(predicted);
            const std::string setting = (rs.spec.pointCount() > 1 ? settingLabel(rs, point) + ", " : "") +
                                        "n = " + std::to_string(n);
            claim.checks.push_back({setting + ": residual ratio ≈ π/2", intervalText(ib),
                                    withinRelative(ib.mean, kPi / 2.0, 0.10)});
            claim.checks.push_back({setting + ": vs n-bit scalar ≈ 2π", intervalText(is) + " (closed form " +
                                        formatSig(closedForm) + ")",
                                    withinRelative(is.mean, 2.0 * kPi, 0.25)});
            table.rows.push_back({rs.spec.pointCount() > 1 ? settingLabel(rs, point) : runLabel(rs), std::to_string(n),
                                  intervalText(ib), formatSig(kPi / 2.0), intervalText(is), formatSig(closedForm),
                                  formatSig(2.0 * kPi), formatSig(mean(jensenPred)), formatSig(mean(jensenMeas))});
            if (point == 0) {
                pushInterval(residual, n, ib);
                pushInterval(scalar, n, is);
                closed.x.push_back(n);
                closed.y.push_back(closedForm);
                headline += (headline.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) +
                            ": residual ratio " + intervalText(ib) + ", vs n-bit scalar " + intervalText(is);
            }
        }
    }
    claim.headline = headline + " (π/2 = 1.571, 2π = 6.283; 95% intervals over seeds)";
    if (!budgets.empty()) {
        const double x0 = budgets.front() - 0.2, x1 = budgets.back() + 0.2;
        fig.series = {residual, scalar, closed, referenceLine("π/2", x0, x1, kPi / 2.0),
                      referenceLine("2π", x0, x1, 2.0 * kPi)};
    }
    fig.logY = true;
    fig.caption = "Measured ratios (95% intervals over seeds) against π/2 and 2π; the closed form uses the "
                  "Lloyd-Max distortions D(n) of the codebooks actually used.";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

namespace {

/// Mean KL per scheme against the budget, with 95% intervals over seeds.
Figure klByBudgetFigure(const ResultSet& rs, int point, const std::vector<std::string>& names, const std::string& id,
                        const std::string& title, QueryField field = &TrialResult::kl,
                        const std::string& yLabel = "mean KL (nats)")
{
    Figure fig;
    fig.id = id;
    fig.title = title;
    fig.xLabel = "bit budget n";
    fig.yLabel = yLabel;
    fig.logY = true;
    for (const std::string& name : names) {
        const int s = schemeIndex(rs, name);
        if (s < 0)
            continue;
        Series series{name, {}, {}, {}, {}};
        for (int n : budgetsOf(rs))
            pushInterval(series, n, queryMeanInterval(cell(rs, point, s, n), field));
        fig.series.push_back(std::move(series));
    }
    fig.caption = "Means over queries, 95% intervals over seeds.";
    return fig;
}

} // namespace

Claim kqvBeatsQkqvClaim(const ResultSet& rs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "A2-kqv-vs-qkqv";
    claim.paper = "A";
    claim.title = "KQV has lower attention KL than QKQV at n = 2, 3, 4";
    claim.statement = "Spending the QJL bit on the values only (KQV) gives lower KL(p‖p̂) than spending it on keys and "
                      "values (QKQV) at every budget; at n = 4, 2.25× lower with p < 1e-23.";
    claim.criterion = "Per budget: per-query KL pooled over seeds, two-sided Mann-Whitney U test of KQV against QKQV "
                      "with rank-biserial r (r > 0: KQV's KL ranks lower). A check holds when p < 0.01 and r > 0.";
    claim.runs = {rs.spec.name};
    const int k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"}), kv = schemeIndex(rs, "KV");
    Table table;
    table.caption = "Per-query KL, KQV against QKQV and KV (" + runLabel(rs) + ")";
    table.header = {"setting", "n", "queries", "median KL KQV", "median KL QKQV", "QKQV / KQV [95% CI]",
                    "Mann-Whitney p", "rank-biserial r", "median KL KV", "KV / KQV", "p (KQV vs KV)", "r (KQV vs KV)"};
    std::string headline;
    for (int point = 0; k >= 0 && q >= 0 && point < rs.spec.pointCount(); ++point) {
        for (int n : budgetsOf(rs)) {
            const auto a = pooled(cell(rs, point, k, n), &TrialResult::kl);
            const Contrast c = contrast(a, pooled(cell(rs, point, q, n), &TrialResult::kl), seed + n, resamples);
            Contrast ckv;
            if (kv >= 0)
                ckv = contrast(a, pooled(cell(rs, point, kv, n), &TrialResult::kl), seed + 100 + n, 0);
            const std::string setting = (rs.spec.pointCount() > 1 ? settingLabel(rs, point) + ", " : "") + "n = " +
                                        std::to_string(n);
            const std::string measured = "QKQV/KQV median KL " + ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low) +
                                         ", p = " + formatP(c.p) + ", r = " + signedText(c.r);
            claim.checks.push_back({setting, measured, significantInDirection(c.p, c.r)});
            headline += (headline.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) + ": " + measured;
            table.rows.push_back({rs.spec.pointCount() > 1 ? settingLabel(rs, point) : runLabel(rs), std::to_string(n),
                                  std::to_string(c.nA), formatSig(c.medianA), formatSig(c.medianB),
                                  ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low), formatP(c.p), signedText(c.r),
                                  kv >= 0 ? formatSig(ckv.medianB) : "", kv >= 0 ? formatSig(1.0 / ckv.ratio) : "",
                                  kv >= 0 ? formatP(ckv.p) : "", kv >= 0 ? signedText(ckv.r) : ""});
        }
    }
    claim.headline = headline;
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(
        klByBudgetFigure(rs, 0, {"KV", "KQV", "QKQV"}, "a2_kl_by_budget", "Attention KL by budget (" + runLabel(rs) + ")"));
    decide(claim);
    return claim;
}

Claim klRatioClaim(const ResultSet& rs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "A3-kl-ratio-score-scale";
    claim.paper = "A";
    claim.title = "KQV's KL advantage at n = 4 is 2.25× — as a function of the score scale";
    claim.statement = "At the practically dominant 4-bit budget KQV reaches 2.25× lower KL than QKQV. The size of this "
                      "ratio depends on how peaked attention is, so it is measured at several score scales.";
    claim.criterion = "At n = 4 (the largest budget run), per score scale: median KL of QKQV over median KL of KQV with "
                      "a paired bootstrap 95% interval, Mann-Whitney p and rank-biserial r. A check holds when p < 0.01, "
                      "r > 0 and the ratio is within ±20% of 2.25. Other budgets are tabulated, not checked.";
    claim.runs = {rs.spec.name};
    const int k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"});
    const std::vector<int> budgets = budgetsOf(rs);
    const int checked = budgets.empty() ? 4 : (std::count(budgets.begin(), budgets.end(), 4) ? 4 : budgets.back());
    Table table;
    table.caption = "QKQV / KQV median KL by score scale and budget (" + runLabel(rs) + ")";
    table.header = {"score scale", "mean entropy H(p) (nats)", "n", "median KL KQV", "median KL QKQV",
                    "QKQV / KQV [95% CI]", "Mann-Whitney p", "r"};
    Figure fig;
    fig.id = "a3_kl_ratio_vs_score_scale";
    fig.title = "QKQV / KQV median KL against the score scale";
    fig.xLabel = "score scale (query multiplier)";
    fig.yLabel = "median KL ratio QKQV / KQV";
    fig.logX = true;
    fig.logY = true;
    std::map<int, Series> lines;
    std::string headline;
    double xMin = 1e300, xMax = -1e300;
    for (int point = 0; k >= 0 && q >= 0 && point < rs.spec.pointCount(); ++point) {
        const double scale = pointValue(rs, point, SweepParameter::ScoreScale, {}, rs.pointSpec(point).scoreScale);
        xMin = std::min(xMin, scale);
        xMax = std::max(xMax, scale);
        for (int n : budgets) {
            const auto ck = cell(rs, point, k, n);
            const Contrast c = contrast(pooled(ck, &TrialResult::kl), pooled(cell(rs, point, q, n), &TrialResult::kl),
                                        seed + 7 * static_cast<std::uint64_t>(point) + n, resamples);
            const double ratio = 1.0 / c.ratio, low = 1.0 / c.high, high = 1.0 / c.low;
            double entropy = 0.0;
            for (const TrialResult* t : ck)
                entropy += t->meanEntropy / static_cast<double>(ck.size());
            table.rows.push_back({formatSig(scale), formatSig(entropy), std::to_string(n), formatSig(c.medianA),
                                  formatSig(c.medianB), ratioText(ratio, low, high), formatP(c.p), signedText(c.r)});
            Series& s = lines[n];
            s.name = "n = " + std::to_string(n);
            pushRatio(s, scale, ratio, low, high);
            if (n == checked) {
                headline += (headline.empty() ? "" : "; ") + std::string("scale ") + formatSig(scale) + " → " +
                            ratioText(ratio, low, high);
                claim.checks.push_back({"score scale " + formatSig(scale) + ", n = " + std::to_string(n),
                                        "ratio " + ratioText(ratio, low, high) + ", p = " + formatP(c.p) +
                                            ", r = " + signedText(c.r),
                                        significantInDirection(c.p, c.r) && withinRelative(ratio, 2.25, 0.20)});
            }
        }
    }
    for (auto& [n, s] : lines)
        fig.series.push_back(std::move(s));
    if (xMax >= xMin)
        fig.series.push_back(referenceLine("paper A: 2.25", xMin / 1.2, xMax * 1.2, 2.25));
    fig.caption = "Ratio of medians with paired bootstrap 95% intervals; larger score scales mean more peaked "
                  "attention (lower entropy).";
    claim.headline = "QKQV / KQV median KL at n = " + std::to_string(checked) + ": " + headline + " (paper A: 2.25)";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

Claim recallFollowsKlClaim(const ResultSet& rs)
{
    Claim claim;
    claim.id = "A4-recall-follows-kl";
    claim.paper = "A";
    claim.title = "Top-5 recall and output direction error follow KL";
    claim.statement = "Lower KL under KQV goes with higher top-5 routing recall and lower output direction error φ_T.";
    claim.criterion = "Per (score scale, n), KQV against QKQV, each by a two-sided Mann-Whitney test with rank-biserial "
                      "effect signed so that > 0 means KQV better (lower KL, higher recall, lower φ_T). Where KL "
                      "separates the schemes (p < 0.01) a check holds when recall and φ_T do too (p < 0.01) in the "
                      "same direction; where it does not, when neither separates them.";
    claim.runs = {rs.spec.name};
    const int k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"});
    Table table;
    table.caption = "Effects of KQV against QKQV (> 0: KQV better) (" + runLabel(rs) + ")";
    table.header = {"setting", "n", "r KL", "p KL", "mean recall KQV", "mean recall QKQV", "r recall", "p recall",
                    "median φ_T KQV (rad)", "median φ_T QKQV (rad)", "r φ_T", "p φ_T", "follows"};
    Figure fig;
    fig.id = "a4_effects";
    fig.title = "Recall and output-direction effects against the KL effect";
    fig.xLabel = "rank-biserial r of KL (> 0: KQV lower)";
    fig.yLabel = "rank-biserial r (> 0: KQV better)";
    Series recall{"top-5 recall", {}, {}, {}, {}, false}, phi{"output direction error φ_T", {}, {}, {}, {}, false};
    int follows = 0;
    for (int point = 0; k >= 0 && q >= 0 && point < rs.spec.pointCount(); ++point) {
        for (int n : budgetsOf(rs)) {
            const auto ck = cell(rs, point, k, n), cq = cell(rs, point, q, n);
            const Contrast kl = contrast(pooled(ck, &TrialResult::kl), pooled(cq, &TrialResult::kl), 0, 0);
            // Recall is higher-is-better: put QKQV first so r > 0 means KQV's recall is higher.
            const Contrast rc = contrast(pooled(cq, &TrialResult::recall), pooled(ck, &TrialResult::recall), 0, 0);
            const Contrast ph = contrast(pooled(ck, &TrialResult::phiT), pooled(cq, &TrialResult::phiT), 0, 0);
            const bool klSignificant = kl.p.logP < std::log(kAlpha);
            auto agrees = [&](const Contrast& m) {
                const bool significant = m.p.logP < std::log(kAlpha);
                return klSignificant ? significant && (m.r > 0.0) == (kl.r > 0.0) : !significant;
            };
            const bool holds = agrees(rc) && agrees(ph);
            follows += holds ? 1 : 0;
            const std::string setting = settingLabel(rs, point) + ", n = " + std::to_string(n);
            claim.checks.push_back({setting,
                                    "r KL " + signedText(kl.r) + " (p " + formatP(kl.p) + "), r recall " + signedText(rc.r) +
                                        " (p " + formatP(rc.p) + "), r φ_T " + signedText(ph.r) + " (p " + formatP(ph.p) +
                                        ")",
                                    holds});
            table.rows.push_back({settingLabel(rs, point), std::to_string(n), signedText(kl.r), formatP(kl.p),
                                  formatSig(queryMeanInterval(ck, &TrialResult::recall).mean),
                                  formatSig(queryMeanInterval(cq, &TrialResult::recall).mean), signedText(rc.r),
                                  formatP(rc.p), formatSig(ph.medianA), formatSig(ph.medianB), signedText(ph.r),
                                  formatP(ph.p), holds ? "yes" : "no"});
            recall.x.push_back(kl.r);
            recall.y.push_back(rc.r);
            phi.x.push_back(kl.r);
            phi.y.push_back(ph.r);
        }
    }
    Series diagonal = referenceLine("y = x", -1.0, 1.0, 0.0);
    diagonal.y = {-1.0, 1.0};
    fig.series = {recall, phi, diagonal};
    fig.caption = "One point per (score scale, budget): points in the upper-right quadrant mean KQV is better on "
                  "both KL and the other measure.";
    claim.headline = std::to_string(follows) + " of " + std::to_string(claim.checks.size()) +
                     " settings: recall and φ_T move with KL (details in the table)";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

Claim heavyTailClaim(const ResultSet& rs)
{
    Claim claim;
    claim.id = "A5-heavy-tails";
    claim.paper = "A";
    claim.title = "Heavy tails (ν → 1.05): KV fails, WHT schemes stay stable";
    claim.statement = "The Walsh-Hadamard rotation protects against marginal concentration: KQV keeps a stable key "
                      "direction error (ε_dir^K ≈ 0.027) as the tail weight grows to ν = 1.05, while KV (no rotation) "
                      "fails catastrophically.";
    claim.criterion = "ε_dir^K = 1 − cos φ_K per key (the kept key samples), mean per seed, 95% interval over seeds. Per "
                      "budget: KQV and QKQV are stable when ε at the heaviest ν is at most 1.5× ε at the lightest ν; KV "
                      "fails when its ε at the heaviest ν is at least 3× its ε at the lightest ν. Each is a check.";
    claim.runs = {rs.spec.name};
    const int kv = schemeIndex(rs, "KV"), k = anyScheme(rs, {"KQV", "TQ-KQV"}), q = anyScheme(rs, {"QKQV", "TQ-QKQV"});
    std::vector<std::pair<double, int>> nus;
    for (int p = 0; p < rs.spec.pointCount(); ++p)
        nus.push_back({pointValue(rs, p, SweepParameter::Regime, "nu", 0.0), p});
    std::sort(nus.begin(), nus.end());
    Table table;
    table.caption = "ε_dir^K by tail weight ν (" + rs.spec.regime + ")";
    table.header = {"ν", "n", "KV", "KQV", "QKQV"};
    Figure fig;
    fig.id = "a5_eps_dir_vs_nu";
    fig.title = "Key direction error ε_dir^K against the tail weight ν";
    fig.xLabel = "Student-t degrees of freedom ν (heavier tails to the left)";
    fig.yLabel = "ε_dir^K = 1 − cos φ_K";
    fig.logX = true;
    fig.logY = true;
    std::map<std::pair<int, int>, Series> lines;
    std::map<std::pair<int, int>, Interval> at; // (scheme, n) at heaviest / lightest
    std::map<std::pair<int, int>, Interval> atLight;
    for (const auto& [nu, point] : nus) {
        for (int n : budgetsOf(rs)) {
            std::vector<std::string> row = {formatSig(nu), std::to_string(n)};
            for (int s : {kv, k, q}) {
                if (s < 0) {
                    row.push_back("");
                    continue;
                }
                const Interval e = epsKInterval(cell(rs, point, s, n));
                row.push_back(intervalText(e));
                Series& line = lines[{s, n}];
                line.name = rs.schemes[static_cast<std::size_t>(s)].name + " n=" + std::to_string(n);
                pushInterval(line, nu, e);
                if (point == nus.front().second)
                    at[{s, n}] = e;
                if (point == nus.back().second)
                    atLight[{s, n}] = e;
            }
            table.rows.push_back(row);
        }
    }
    std::string headline;
    if (nus.size() >= 2) {
        const std::string heavy = formatSig(nus.front().first), light = formatSig(nus.back().first);
        for (int n : budgetsOf(rs)) {
            for (int s : {k, q}) {
                if (s < 0)
                    continue;
                const double ratio = at[{s, n}].mean / atLight[{s, n}].mean;
                claim.checks.push_back({rs.schemes[static_cast<std::size_t>(s)].name + " stable, n = " + std::to_string(n),
                                        "ε(ν=" + heavy + ") " + intervalText(at[{s, n}]) + " / ε(ν=" + light + ") " +
                                            intervalText(atLight[{s, n}]) + " = " + formatSig(ratio),
                                        std::isfinite(ratio) && ratio <= 1.5});
            }
            if (kv >= 0) {
                const double ratio = at[{kv, n}].mean / atLight[{kv, n}].mean;
                claim.checks.push_back({"KV fails, n = " + std::to_string(n),
                                        "ε(ν=" + heavy + ") " + intervalText(at[{kv, n}]) + " / ε(ν=" + light + ") " +
                                            intervalText(atLight[{kv, n}]) + " = " + formatSig(ratio),
                                        std::isfinite(ratio) && ratio >= 3.0});
            }
            if (k >= 0 && kv >= 0)
                headline += (headline.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) +
                            ": ε_dir^K at ν = " + heavy + " KQV " + formatSig(at[{k, n}].mean) + ", KV " +
                            formatSig(at[{kv, n}].mean);
        }
    }
    claim.headline = headline + " (paper A: KQV ≈ 0.027)";
    for (auto& [key, s] : lines)
        fig.series.push_back(std::move(s));
    fig.caption = "Means of 1 − cos φ over the kept key samples, 95% intervals over seeds.";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

Claim lowRankClaim(const ResultSet& lowRank, const ResultSet& heavyTail, const MarginalHistogram* lrMarginal,
                   const MarginalHistogram* htMarginal)
{
    Claim claim;
    claim.id = "A6-low-rank";
    claim.paper = "A";
    claim.title = "Low-rank keys at d = " + std::to_string(lowRank.spec.d) +
                  ": KL orders of magnitude above heavy-tailed keys with the same marginal histogram";
    claim.statement = "At d = 1024, low-rank keys produce a KL orders of magnitude worse than heavy-tailed keys although "
                      "the rotated marginal histograms are identical: the WHT fixes marginals, not the joint structure.";
    claim.criterion = "Premise (reported, not a check): the rotated, normalized key coordinates of the two runs "
                      "have the same histogram (two-sample KS D ≤ 0.05). Per scheme and budget: mean KL of the low-rank run over that of the "
                      "heavy-tailed run ≥ 100 (two orders of magnitude) and a Mann-Whitney test with p < 0.01 and "
                      "r > 0 (r > 0: heavy-tailed KL ranks lower).";
    claim.runs = {lowRank.spec.name, heavyTail.spec.name};
    if (lrMarginal && htMarginal) {
        const stats::KsResult ks = stats::ksTwoSample(lrMarginal->sample, htMarginal->sample);
        // The premise is reported, not counted: it does not make the claim about KL any truer.
        claim.tables.push_back({"Premise: same rotated marginal histogram (KS D ≤ 0.05)",
                                {"KS D", "KS p", "raw excess kurtosis, low rank", "raw excess kurtosis, heavy tail",
                                 "premise holds"},
                                {{formatSig(ks.d), formatP(ks.p), formatSig(lrMarginal->rawExcessKurtosis),
                                  formatSig(htMarginal->rawExcessKurtosis), ks.d <= 0.05 ? "yes" : "no"}}});
        Figure hist;
        hist.id = "a6_marginal_histograms";
        hist.title = "Rotated key marginals: low rank vs heavy tail";
        hist.xLabel = "√d · (H D k / ‖k‖) coordinate";
        hist.yLabel = "density";
        for (const MarginalHistogram* m : {lrMarginal, htMarginal}) {
            Series s;
            s.name = m->label;
            s.steps = true;
            for (std::size_t b = 0; b < m->density.size(); ++b) {
                s.x.push_back(0.5 * (m->edges[b] + m->edges[b + 1]));
                s.y.push_back(m->density[b]);
            }
            hist.series.push_back(std::move(s));
        }
        Series gauss;
        gauss.name = "N(0, 1) (the d → ∞ limit of the Beta law)";
        gauss.reference = true;
        for (int i = 0; i <= 80; ++i) {
            const double x = -4.0 + 0.1 * i;
            gauss.x.push_back(x);
            gauss.y.push_back(std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi));
        }
        hist.series.push_back(std::move(gauss));
        hist.caption = "Histograms of every rotated, normalized key coordinate of the first seed; KS D = " +
                       formatSig(ks.d) + ".";
        claim.figures.push_back(std::move(hist));
    }
    Table table;
    table.caption = "Per-query KL, low rank against heavy tail";
    table.header = {"scheme", "n", "mean KL low rank", "mean KL heavy tail", "ratio of means", "decades",
                    "median KL low rank", "median KL heavy tail", "Mann-Whitney p", "r"};
    Figure bars;
    bars.id = "a6_kl_low_rank_vs_heavy_tail";
    bars.title = "Mean attention KL: low-rank vs heavy-tailed keys";
    bars.yLabel = "mean KL (nats)";
    bars.logY = true;
    Series lrSeries{runLabel(lowRank), {}, {}, {}, {}, false}, htSeries{runLabel(heavyTail), {}, {}, {}, {}, false};
    std::string headline;
    for (int n : budgetsOf(lowRank)) {
        for (std::size_t s = 0; s < lowRank.schemes.size(); ++s) {
            const int h = schemeIndex(heavyTail, lowRank.schemes[s].name);
            if (h < 0)
                continue;
            const auto lrCell = cell(lowRank, 0, static_cast<int>(s), n), htCell = cell(heavyTail, 0, h, n);
            const auto a = pooled(htCell, &TrialResult::kl), b = pooled(lrCell, &TrialResult::kl);
            const Contrast c = contrast(a, b, 0, 0);
            const double ratio = mean(b) / mean(a);
            const std::string name = lowRank.schemes[s].name;
            claim.checks.push_back({name + ", n = " + std::to_string(n),
                                    "mean KL ratio " + formatSig(ratio) + " (" + formatSig(std::log10(ratio), 2) +
                                        " decades), p = " + formatP(c.p) + ", r = " + signedText(c.r),
                                    significantInDirection(c.p, c.r) && ratio >= 100.0});
            table.rows.push_back({name, std::to_string(n), formatSig(mean(b)), formatSig(mean(a)), formatSig(ratio),
                                  formatSig(std::log10(ratio), 2), formatSig(c.medianB), formatSig(c.medianA),
                                  formatP(c.p), signedText(c.r)});
            const double x = static_cast<double>(bars.categories.size());
            bars.categories.push_back(name + " n=" + std::to_string(n));
            pushInterval(lrSeries, x, queryMeanInterval(lrCell, &TrialResult::kl));
            pushInterval(htSeries, x, queryMeanInterval(htCell, &TrialResult::kl));
            headline += (headline.empty() ? "" : "; ") + name + " n=" + std::to_string(n) + ": ×" + formatSig(ratio);
        }
    }
    bars.series = {lrSeries, htSeries};
    bars.caption = "Means over queries, 95% intervals over seeds.";
    claim.headline = "mean KL low rank / heavy tail: " + headline;
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(bars));
    decide(claim);
    return claim;
}

Claim crossoverClaim(const std::vector<const ResultSet*>& runs)
{
    Claim claim;
    claim.id = "A7-budget-crossover";
    claim.paper = "A";
    claim.title = "Budget crossover in key direction error: QKQV better at n = 2, 3, KQV at n = 4";
    claim.statement = "At low budgets (n ∈ {2, 3}) QKQV reconstructs key directions better than KQV (lower ε_dir^K); at "
                      "n = 4 KQV wins. The crossover is invariant to rank and tail weight.";
    claim.criterion = "Per run and setting: ε_dir^K = 1 − cos φ_K of the same keys under both schemes, paired "
                      "Wilcoxon signed-rank test; runs without budgets on both sides of 4 are skipped. A setting's check holds when QKQV is lower at every run budget ≤ 3 "
                      "and KQV is lower at every budget ≥ 4, each with p < 0.01.";
    Table table;
    table.caption = "ε_dir^K of KQV and QKQV (paired per key)";
    table.header = {"setting", "n", "mean ε KQV", "mean ε QKQV", "Wilcoxon p", "r (> 0: QKQV lower)",
                    "expected lower", "as expected"};
    Figure fig;
    fig.id = "a7_crossover";
    fig.title = "Key direction error by budget: the crossover";
    fig.xLabel = "bit budget n";
    fig.yLabel = "ε_dir^K = 1 − cos φ_K";
    fig.logY = true;
    std::string headline;
    for (const ResultSet* rs : runs) {
        const int k = anyScheme(*rs, {"KQV", "TQ-KQV"}), q = anyScheme(*rs, {"QKQV", "TQ-QKQV"});
        if (k < 0 || q < 0)
            continue;
        // A crossover needs a budget on each side of it.
        const std::vector<int> budgets = budgetsOf(*rs);
        if (budgets.empty() || budgets.front() > 3 || budgets.back() < 4)
            continue;
        const std::vector<int> points = keyPoints(*rs);
        claim.runs.push_back(rs->spec.name);
        for (int point : points) {
            const std::string setting = points.size() > 1 ? settingLabel(*rs, point) : runLabel(*rs);
            bool all = true;
            std::string measured;
            Series sk{"KQV, " + setting, {}, {}, {}, {}}, sq{"QKQV, " + setting, {}, {}, {}, {}};
            for (int n : budgetsOf(*rs)) {
                const auto ck = cell(*rs, point, k, n), cq = cell(*rs, point, q, n);
                const auto a = pooledEpsK(ck), b = pooledEpsK(cq);
                stats::WilcoxonResult w;
                if (a.size() == b.size() && !a.empty())
                    w = stats::wilcoxonSignedRank(a, b);
                // Wilcoxon's r > 0 when KQV's error is larger, i.e. QKQV lower.
                const bool qkqvExpected = n <= 3;
                const double effect = qkqvExpected ? w.rankBiserial : -w.rankBiserial;
                const bool ok = significantInDirection(w.p, effect);
                all = all && ok;
                measured += (measured.empty() ? "" : "; ") + std::string("n = ") + std::to_string(n) + ": KQV " +
                            formatSig(mean(a)) + " vs QKQV " + formatSig(mean(b)) + " (p " + formatP(w.p) + ")";
                table.rows.push_back({setting, std::to_string(n), formatSig(mean(a)), formatSig(mean(b)), formatP(w.p),
                                      signedText(w.rankBiserial), qkqvExpected ? "QKQV" : "KQV", ok ? "yes" : "no"});
                if (point == points.front()) {
                    pushInterval(sk, n, epsKInterval(ck));
                    pushInterval(sq, n, epsKInterval(cq));
                }
            }
            claim.checks.push_back({setting, measured, all});
            if (headline.empty())
                headline = setting + ": " + measured;
            if (point == points.front() && fig.series.size() < 8) {
                fig.series.push_back(std::move(sk));
                fig.series.push_back(std::move(sq));
            }
        }
    }
    claim.headline = headline;
    fig.caption = "Means over the kept key samples, 95% intervals over seeds (first setting of each run).";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

// ---------------------------------------------------------------------------------------------
// Papers A and B on the value path

namespace {

struct VpathCell {
    std::string setting;
    int n = 0;
    Contrast phiVsNone, d2VsNone;    ///< V-QJL against no QJL (lower-is-better, V-QJL first)
    Contrast klVsK, d2VsK;           ///< V-QJL against K-QJL
};

std::vector<VpathCell> vpathCells(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    std::vector<VpathCell> cells;
    for (const ResultSet* rs : runs) {
        const int v = anyScheme(*rs, {"TQ-KQV", "KQV"}), none = schemeIndex(*rs, "TQ-KV"),
                  kq = schemeIndex(*rs, "TQ-QKV");
        if (v < 0 || none < 0 || kq < 0)
            continue;
        for (int point = 0; point < rs->spec.pointCount(); ++point) {
            for (int n : budgetsOf(*rs)) {
                const auto cv = cell(*rs, point, v, n), cn = cell(*rs, point, none, n), ck = cell(*rs, point, kq, n);
                VpathCell c;
                c.setting = settingLabel(*rs, point);
                c.n = n;
                const std::uint64_t s = seed + 31 * cells.size();
                c.phiVsNone = contrast(pooled(cv, &TrialResult::phiT), pooled(cn, &TrialResult::phiT), s, resamples);
                c.d2VsNone = contrast(pooled(cv, &TrialResult::d2), pooled(cn, &TrialResult::d2), s + 1, resamples);
                c.klVsK = contrast(pooled(cv, &TrialResult::kl), pooled(ck, &TrialResult::kl), s + 2, resamples);
                c.d2VsK = contrast(pooled(cv, &TrialResult::d2), pooled(ck, &TrialResult::d2), s + 3, resamples);
                cells.push_back(std::move(c));
            }
        }
    }
    return cells;
}

Table vpathTable(const std::vector<VpathCell>& cells)
{
    Table t;
    t.caption = "The same comparisons for both papers: TQ-KQV (QJL on V) against TQ-KV (no QJL) and TQ-QKV (QJL on K)";
    t.header = {"setting", "n", "φ_T: KQV / KV [CI]", "p", "r", "d²: KQV / KV [CI]", "p", "r", "A (V-QJL helps)",
                "B (V-QJL hurts)", "KL: KQV / QKV [CI]", "p", "r", "d²: KQV / QKV [CI]", "p", "r"};
    for (const VpathCell& c : cells) {
        auto helps = [](const Contrast& x) { return significantInDirection(x.p, x.r); };
        auto hurts = [](const Contrast& x) { return significantInDirection(x.p, -x.r); };
        const std::string a = std::string(helps(c.phiVsNone) ? "φ_T " : "") + (helps(c.d2VsNone) ? "d²" : "");
        const std::string b = std::string(hurts(c.phiVsNone) ? "φ_T " : "") + (hurts(c.d2VsNone) ? "d²" : "");
        t.rows.push_back({c.setting, std::to_string(c.n), ratioText(c.phiVsNone.ratio, c.phiVsNone.low, c.phiVsNone.high),
                          formatP(c.phiVsNone.p), signedText(c.phiVsNone.r),
                          ratioText(c.d2VsNone.ratio, c.d2VsNone.low, c.d2VsNone.high), formatP(c.d2VsNone.p),
                          signedText(c.d2VsNone.r), a.empty() ? "—" : a, b.empty() ? "—" : b,
                          ratioText(c.klVsK.ratio, c.klVsK.low, c.klVsK.high), formatP(c.klVsK.p), signedText(c.klVsK.r),
                          ratioText(c.d2VsK.ratio, c.d2VsK.low, c.d2VsK.high), formatP(c.d2VsK.p),
                          signedText(c.d2VsK.r)});
    }
    return t;
}

std::vector<std::string> vpathRuns(const std::vector<const ResultSet*>& runs)
{
    std::vector<std::string> names;
    for (const ResultSet* rs : runs)
        names.push_back(rs->spec.name);
    return names;
}

} // namespace

/// AB1/AB2's checks for one cell: TQ-KQV against TQ-KV on per-query φ_T and d², holding when the
/// difference is significant in `direction` (+1: TQ-KQV lower, -1: higher). Returns how many hold.
int addVpathChecks(Claim& claim, const VpathCell& c, double direction)
{
    const std::string setting = c.setting + ", n = " + std::to_string(c.n);
    int holding = 0;
    for (const auto& [metric, x] : {std::pair<const char*, const Contrast*>{"φ_T", &c.phiVsNone}, {"d²", &c.d2VsNone}}) {
        const bool holds = significantInDirection(x->p, direction * x->r);
        holding += holds ? 1 : 0;
        claim.checks.push_back({setting + " [" + metric + "]",
                                "ratio " + ratioText(x->ratio, x->low, x->high) + ", p = " + formatP(x->p) +
                                    ", r = " + signedText(x->r),
                                holds});
    }
    return holding;
}

Claim vpathPaperAClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "AB1-vpath-paper-a";
    claim.paper = "A vs B";
    claim.title = "QJL on the value path — paper A's verdict: it helps";
    claim.statement = "Paper A: on the values, the 1-bit QJL sketch corrects the bias of the scalar code without a "
                      "variance penalty (values enter the output linearly), so (n−1)-bit scalar + QJL on V improves the "
                      "output; QJL belongs on V, never on K.";
    claim.criterion = "Same data, same budget: TQ-KQV (WHT + n-bit K; (n−1)-bit + QJL on V) against TQ-KV (n bits on "
                      "both, no QJL), per-query output error by Mann-Whitney (r > 0: TQ-KQV lower). One check per "
                      "(setting, n, metric) with metric ∈ {φ_T (paper A's output direction error), d² (paper B's)}: it "
                      "holds when TQ-KQV is lower with p < 0.01.";
    claim.runs = vpathRuns(runs);
    const std::vector<VpathCell> cells = vpathCells(runs, seed, resamples);
    Figure fig;
    fig.id = "ab1_vpath_output_error_ratio";
    fig.title = "QJL on V vs none: output-error ratio TQ-KQV / TQ-KV";
    fig.yLabel = "median ratio TQ-KQV / TQ-KV";
    fig.logY = true;
    Series phi{"φ_T", {}, {}, {}, {}, false}, d2{"d²", {}, {}, {}, {}, false};
    int helpsCount = 0;
    for (const VpathCell& c : cells) {
        helpsCount += addVpathChecks(claim, c, +1.0);
        const double xPos = static_cast<double>(fig.categories.size());
        fig.categories.push_back(c.setting + " n=" + std::to_string(c.n));
        pushRatio(phi, xPos, c.phiVsNone.ratio, c.phiVsNone.low, c.phiVsNone.high);
        pushRatio(d2, xPos, c.d2VsNone.ratio, c.d2VsNone.low, c.d2VsNone.high);
    }
    if (!fig.categories.empty())
        fig.series = {phi, d2, referenceLine("no difference", -0.5, fig.categories.size() - 0.5, 1.0)};
    fig.caption = "Below 1: QJL on V lowers the output error (paper A); above 1: it raises it (paper B). Paired "
                  "bootstrap 95% intervals of the ratio of medians.";
    claim.headline = "TQ-KQV has significantly lower output error than TQ-KV in " + std::to_string(helpsCount) +
                     " of " + std::to_string(claim.checks.size()) + " (setting, n, metric) checks";
    claim.tables.push_back(vpathTable(cells));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

Claim vpathPaperBClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "AB2-vpath-paper-b";
    claim.paper = "A vs B";
    claim.title = "QJL on the value path — paper B's verdict: it hurts";
    claim.statement = "Paper B: applying QJL to the values (which are summed over tokens) is a heuristic that "
                      "consistently degrades the output, compared with no QJL and with corrections on the K path.";
    claim.criterion = "On the same data and tests as AB1 (TQ-KQV against TQ-KV, per-query φ_T and d²), a check holds "
                      "when TQ-KQV is HIGHER with p < 0.01 (r < 0). The K-path comparison (TQ-KQV against TQ-QKV) is "
                      "tabulated and drawn beside it.";
    claim.runs = vpathRuns(runs);
    const std::vector<VpathCell> cells = vpathCells(runs, seed, resamples);
    Figure fig;
    fig.id = "ab2_vpath_vs_kpath_ratio";
    fig.title = "QJL on V vs QJL on K: ratio TQ-KQV / TQ-QKV";
    fig.yLabel = "median ratio TQ-KQV / TQ-QKV";
    fig.logY = true;
    Series kl{"KL", {}, {}, {}, {}, false}, d2{"d²", {}, {}, {}, {}, false};
    int hurtsCount = 0;
    for (const VpathCell& c : cells) {
        hurtsCount += addVpathChecks(claim, c, -1.0);
        const double xPos = static_cast<double>(fig.categories.size());
        fig.categories.push_back(c.setting + " n=" + std::to_string(c.n));
        pushRatio(kl, xPos, c.klVsK.ratio, c.klVsK.low, c.klVsK.high);
        pushRatio(d2, xPos, c.d2VsK.ratio, c.d2VsK.low, c.d2VsK.high);
    }
    if (!fig.categories.empty())
        fig.series = {kl, d2, referenceLine("no difference", -0.5, fig.categories.size() - 0.5, 1.0)};
    fig.caption = "Below 1: the QJL bit does less damage on V than on K (paper A's placement); above 1: on K is "
                  "better (paper B's). Paired bootstrap 95% intervals.";
    claim.headline = "TQ-KQV has significantly higher output error than TQ-KV in " + std::to_string(hurtsCount) +
                     " of " + std::to_string(claim.checks.size()) + " (setting, n, metric) checks";
    claim.tables.push_back(vpathTable(cells));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

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
    claim.criterion = "Per-query output error d² = relMSE_T² + ε_dir,T² (paper B's metric), Mann-Whitney tests. Heavy "
                      "tail, every n: TQ-KV lower than SQ-KV (p < 0.01). Low rank, every n: SQ-KV lower than TQ-KV "
                      "(p < 0.01). Gaussian, n = 2: Plain-KV's median d² within 1.25× of the best scheme's. Gaussian, "
                      "n ≥ 4: TQ-KV lower than SQ-KV (p < 0.01).";
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
        const int tq = schemeIndex(*rs, "TQ-KV"), sq = schemeIndex(*rs, "SQ-KV"), plain = schemeIndex(*rs, "Plain-KV");
        for (int n : budgetsOf(*rs)) {
            std::vector<std::string> d2Row = {runLabel(*rs), std::to_string(n)}, klRow = d2Row;
            double best = 1e300;
            std::string bestName;
            std::map<std::string, double> medians;
            for (const std::string& name : names) {
                const int i = schemeIndex(*rs, name);
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
            const auto tqD2 = pooled(cell(*rs, 0, tq, n), &TrialResult::d2), sqD2 = pooled(cell(*rs, 0, sq, n), &TrialResult::d2);
            const std::string setting = runLabel(*rs) + ", n = " + std::to_string(n);
            if (kind == 0 || (kind == 2 && n >= 4)) {
                const Contrast c = contrast(tqD2, sqD2, ++s, resamples);
                claim.checks.push_back({setting + ": TQ-KV beats SQ-KV",
                                        "d² SQ-KV / TQ-KV " + ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low) +
                                            ", p = " + formatP(c.p) + ", r = " + signedText(c.r),
                                        significantInDirection(c.p, c.r)});
            } else if (kind == 1) {
                const Contrast c = contrast(sqD2, tqD2, ++s, resamples);
                claim.checks.push_back({setting + ": SQ-KV beats TQ-KV",
                                        "d² TQ-KV / SQ-KV " + ratioText(1.0 / c.ratio, 1.0 / c.high, 1.0 / c.low) +
                                            ", p = " + formatP(c.p) + ", r = " + signedText(c.r),
                                        significantInDirection(c.p, c.r)});
            } else if (kind == 2 && n == 2 && plain >= 0) {
                const double ratio = medians["Plain-KV"] / best;
                claim.checks.push_back({setting + ": Plain-KV competitive",
                                        "median d² Plain-KV / best (" + bestName + ") = " + formatSig(ratio),
                                        std::isfinite(ratio) && ratio <= 1.25});
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
    claim.criterion = "Per regime and budget: median per-query d² of SQ-KV over that of SQU-KV with a paired bootstrap "
                      "95% interval; a check holds (equivalence) when the whole interval lies in [0.8, 1.25].";
    Table table;
    table.caption = "SQ-KV (water-filling) against SQU-KV (uniform)";
    table.header = {"regime", "n", "median d² SQ-KV", "median d² SQU-KV", "SQ / SQU [95% CI]", "Mann-Whitney p", "r",
                    "median KL SQ-KV", "median KL SQU-KV", "equivalent"};
    Figure fig;
    fig.id = "b2_water_filling_ratio";
    fig.title = "Water-filling over uniform allocation: d² ratio";
    fig.yLabel = "median d² ratio SQ-KV / SQU-KV";
    Series ratios{"SQ-KV / SQU-KV", {}, {}, {}, {}, false};
    std::uint64_t s = seed;
    for (const ResultSet* rs : runs) {
        const int wf = schemeIndex(*rs, "SQ-KV"), un = schemeIndex(*rs, "SQU-KV");
        if (wf < 0 || un < 0)
            continue;
        claim.runs.push_back(rs->spec.name);
        for (int n : budgetsOf(*rs)) {
            const auto cw = cell(*rs, 0, wf, n), cu = cell(*rs, 0, un, n);
            const Contrast c = contrast(pooled(cw, &TrialResult::d2), pooled(cu, &TrialResult::d2), ++s, resamples);
            const bool holds = equivalentRatio(c.low, c.high, 1.25);
            const std::string setting = runLabel(*rs) + ", n = " + std::to_string(n);
            claim.checks.push_back({setting, "ratio " + ratioText(c.ratio, c.low, c.high), holds});
            table.rows.push_back({runLabel(*rs), std::to_string(n), formatSig(c.medianA), formatSig(c.medianB),
                                  ratioText(c.ratio, c.low, c.high), formatP(c.p), signedText(c.r),
                                  formatSig(median(pooled(cw, &TrialResult::kl))),
                                  formatSig(median(pooled(cu, &TrialResult::kl))), holds ? "yes" : "no"});
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
    fig.caption = "Paired bootstrap 95% intervals; inside the dashed margins the two allocations are equivalent.";
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

// ---------------------------------------------------------------------------------------------
// Paper C

Claim headqClaim(const ResultSet& rs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "C1-headq";
    claim.paper = "C";
    claim.title = "HeadQ beats KIVI; the wrong-sign and random-basis controls do not";
    claim.statement = "HeadQ's low-rank logit correction in a calibrated query basis removes most of KIVI's excess "
                      "damage; flipping its sign is catastrophic, and a random basis of the same rank fails.";
    claim.criterion = "Per budget, per-query KL, Mann-Whitney tests. Three checks per budget, each needing p < 0.01 in "
                      "the stated direction: HeadQ lower than KIVI; HeadQ-wrong-sign higher than KIVI; HeadQ lower than "
                      "HeadQ-random-basis.";
    claim.runs = {rs.spec.name};
    const int kivi = schemeIndex(rs, "KIVI"), headq = schemeIndex(rs, "HeadQ"), wrong = schemeIndex(rs, "HeadQ-wrong-sign"),
              random = schemeIndex(rs, "HeadQ-random-basis");
    Table table;
    table.caption = "Per-query KL (" + runLabel(rs) + ")";
    table.header = {"n", "median KL KIVI", "HeadQ", "wrong sign", "random basis", "KL removed by HeadQ (means)",
                    "HeadQ vs KIVI p, r", "wrong sign vs KIVI p, r", "HeadQ vs random p, r"};
    std::string headline;
    std::uint64_t s = seed;
    for (int n : budgetsOf(rs)) {
        if (kivi < 0 || headq < 0 || wrong < 0 || random < 0)
            break;
        const auto k = pooled(cell(rs, 0, kivi, n), &TrialResult::kl), h = pooled(cell(rs, 0, headq, n), &TrialResult::kl),
                   w = pooled(cell(rs, 0, wrong, n), &TrialResult::kl), r = pooled(cell(rs, 0, random, n), &TrialResult::kl);
        const Contrast hk = contrast(h, k, ++s, resamples), kw = contrast(k, w, ++s, resamples),
                       hr = contrast(h, r, ++s, resamples);
        const double removed = 1.0 - mean(h) / mean(k);
        const std::string nText = "n = " + std::to_string(n);
        claim.checks.push_back({nText + ": HeadQ beats KIVI",
                                "median KL ratio HeadQ / KIVI " + ratioText(hk.ratio, hk.low, hk.high) + ", p = " +
                                    formatP(hk.p) + ", r = " + signedText(hk.r),
                                significantInDirection(hk.p, hk.r)});
        claim.checks.push_back({nText + ": wrong sign worse than KIVI",
                                "median KL ratio wrong / KIVI " + ratioText(1.0 / kw.ratio, 1.0 / kw.high, 1.0 / kw.low) +
                                    ", p = " + formatP(kw.p) + ", r = " + signedText(kw.r),
                                significantInDirection(kw.p, kw.r)});
        claim.checks.push_back({nText + ": random basis does not do HeadQ's job",
                                "median KL ratio HeadQ / random " + ratioText(hr.ratio, hr.low, hr.high) + ", p = " +
                                    formatP(hr.p) + ", r = " + signedText(hr.r),
                                significantInDirection(hr.p, hr.r)});
        table.rows.push_back({std::to_string(n), formatSig(hk.medianB), formatSig(hk.medianA), formatSig(kw.medianB),
                              formatSig(hr.medianB), formatSig(100.0 * removed) + "%",
                              formatP(hk.p) + ", " + signedText(hk.r), formatP(kw.p) + ", " + signedText(kw.r),
                              formatP(hr.p) + ", " + signedText(hr.r)});
        headline += (headline.empty() ? "" : "; ") + nText + ": HeadQ removes " + formatSig(100.0 * removed) +
                    "% of KIVI's mean KL (p " + formatP(hk.p) + "), wrong sign ×" + formatSig(1.0 / kw.ratio) +
                    " KIVI's median";
    }
    claim.headline = headline + " (paper C: 84–94% of excess perplexity removed at 2 bits)";
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(klByBudgetFigure(rs, 0,
                                             {"KIVI", "HeadQ", "HeadQ-wrong-sign", "HeadQ-random-basis", "KIVI-A2",
                                              "HeadQ-A2"},
                                             "c1_headq_kl", "HeadQ, KIVI and the controls (" + runLabel(rs) + ")"));
    decide(claim);
    return claim;
}

Claim fisherProxyClaim(const std::vector<const ResultSet*>& runs, std::uint64_t seed, int resamples)
{
    Claim claim;
    claim.id = "C2-fisher-proxy";
    claim.paper = "C";
    claim.title = "Fisher score error predicts KL better than raw key MSE";
    claim.statement = "The Fisher-weighted score error Var_p(δs) ranks attention KL much better than the raw key MSE "
                      "(paper C: Spearman ρ about 0.62–0.69 across six models).";
    claim.criterion = "Per run, pooled over schemes, budgets and seeds: Spearman ρ of each proxy against per-query KL, "
                      "and a percentile bootstrap 95% interval of ρ(Fisher) − ρ(raw MSE) over queries. A check holds "
                      "when the interval's lower end is above 0.";
    Table table;
    table.caption = "Spearman ρ against per-query KL";
    table.header = {"run", "queries", "ρ Fisher", "ρ raw key MSE", "ρ(Fisher) − ρ(raw MSE) [95% CI]"};
    Figure fig;
    fig.id = "c2_proxy_rho";
    fig.title = "Spearman ρ against KL: Fisher score error vs raw key MSE";
    fig.yLabel = "Spearman ρ with per-query KL";
    Series fisherSeries{"Fisher score error", {}, {}, {}, {}, false}, mseSeries{"raw key MSE", {}, {}, {}, {}, false};
    std::string headline;
    std::uint64_t s = seed;
    for (const ResultSet* rs : runs) {
        claim.runs.push_back(rs->spec.name);
        std::vector<double> kl, fisher, mse;
        for (const TrialResult& t : rs->trials)
            for (std::size_t i = 0; i < t.kl.size() && i < t.fisher.size(); ++i)
                if (std::isfinite(t.kl[i]) && std::isfinite(t.fisher[i]) && std::isfinite(t.rawMseK)) {
                    kl.push_back(t.kl[i]);
                    fisher.push_back(t.fisher[i]);
                    mse.push_back(t.rawMseK);
                }
        const double rhoF = stats::spearman(fisher, kl), rhoM = stats::spearman(mse, kl);
        std::vector<double> diffs, fs, ms;
        Rng rng(EngineKind::Pcg64, ++s, Stream::Statistics);
        std::vector<double> bk(kl.size()), bf(kl.size()), bm(kl.size());
        for (int b = 0; b < resamples && kl.size() > 2; ++b) {
            for (std::size_t i = 0; i < kl.size(); ++i) {
                const auto j = static_cast<std::size_t>(rng.below(kl.size()));
                bk[i] = kl[j];
                bf[i] = fisher[j];
                bm[i] = mse[j];
            }
            const double f = stats::spearman(bf, bk), m = stats::spearman(bm, bk);
            diffs.push_back(f - m);
            fs.push_back(f);
            ms.push_back(m);
        }
        auto q = [](std::vector<double> v, double p) {
            if (v.empty())
                return std::numeric_limits<double>::quiet_NaN();
            std::sort(v.begin(), v.end());
            const double h = (static_cast<double>(v.size()) - 1.0) * p;
            const auto lo = static_cast<std::size_t>(std::floor(h));
            const std::size_t hi = std::min(lo + 1, v.size() - 1);
            return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
        };
        const double low = q(diffs, 0.025), high = q(diffs, 0.975);
        claim.checks.push_back({runLabel(*rs) + " (" + rs->spec.name.substr(0, rs->spec.name.find(':')) + ")",
                                "ρ Fisher " + formatSig(rhoF) + ", ρ raw MSE " + formatSig(rhoM) + ", difference " +
                                    ratioText(rhoF - rhoM, low, high),
                                std::isfinite(low) && low > 0.0});
        table.rows.push_back({rs->spec.name, std::to_string(kl.size()), formatSig(rhoF), formatSig(rhoM),
                              ratioText(rhoF - rhoM, low, high)});
        const double x = static_cast<double>(fig.categories.size());
        fig.categories.push_back(runLabel(*rs));
        pushRatio(fisherSeries, x, rhoF, q(fs, 0.025), q(fs, 0.975));
        pushRatio(mseSeries, x, rhoM, q(ms, 0.025), q(ms, 0.975));
        headline += (headline.empty() ? "" : "; ") + runLabel(*rs) + ": ρ " + formatSig(rhoF, 2) + " vs " +
                    formatSig(rhoM, 2);
    }
    fig.series = {fisherSeries, mseSeries};
    fig.caption = "Pooled over every scheme, budget and seed of each run; bootstrap 95% intervals over queries.";
    claim.headline = "Fisher vs raw MSE: " + headline;
    claim.tables.push_back(std::move(table));
    claim.figures.push_back(std::move(fig));
    decide(claim);
    return claim;
}

std::vector<Claim> evaluateClaims(const Runs& r)
{
    std::vector<Claim> out;
    if (r.paperA)
        out.push_back(qjlVarianceClaim(*r.paperA));
    if (r.paperA)
        out.push_back(kqvBeatsQkqvClaim(*r.paperA, r.seed, r.resamples));
    if (r.scoreScale)
        out.push_back(klRatioClaim(*r.scoreScale, r.seed + 1000, r.resamples));
    if (r.scoreScale)
        out.push_back(recallFollowsKlClaim(*r.scoreScale));
    if (r.heavyTailSweep)
        out.push_back(heavyTailClaim(*r.heavyTailSweep));
    if (r.lowRank1024 && r.heavyTail1024)
        out.push_back(lowRankClaim(*r.lowRank1024, *r.heavyTail1024, r.lowRankMarginal, r.heavyTailMarginal));
    std::vector<const ResultSet*> crossover;
    for (const ResultSet* rs : {r.crossover, r.heavyTailSweep, r.vpathLowRank, r.lowRank1024})
        if (rs)
            crossover.push_back(rs);
    if (!crossover.empty())
        out.push_back(crossoverClaim(crossover));
    std::vector<const ResultSet*> vpath;
    for (const ResultSet* rs : {r.scoreScale, r.vpathHeavyTail, r.vpathLowRank})
        if (rs)
            vpath.push_back(rs);
    if (!vpath.empty()) {
        out.push_back(vpathPaperAClaim(vpath, r.seed + 2000, r.resamples));
        out.push_back(vpathPaperBClaim(vpath, r.seed + 2000, r.resamples));
    }
    if (r.paperBGaussian || r.paperBHeavyTail || r.paperBLowRank)
        out.push_back(sqVsTqClaim(r.paperBGaussian, r.paperBHeavyTail, r.paperBLowRank, r.seed + 3000, r.resamples));
    std::vector<const ResultSet*> paperB;
    for (const ResultSet* rs : {r.paperBGaussian, r.paperBHeavyTail, r.paperBLowRank})
        if (rs)
            paperB.push_back(rs);
    if (!paperB.empty())
        out.push_back(waterFillingClaim(paperB, r.seed + 4000, r.resamples));
    if (r.paperC)
        out.push_back(headqClaim(*r.paperC, r.seed + 5000, r.resamples));
    std::vector<const ResultSet*> proxies;
    for (const ResultSet* rs : {r.paperC, r.paperA, r.paperBGaussian, r.paperBHeavyTail, r.paperBLowRank})
        if (rs)
            proxies.push_back(rs);
    if (!proxies.empty())
        out.push_back(fisherProxyClaim(proxies, r.seed + 6000, std::max(50, r.resamples / 2)));
    return out;
}

} // namespace kvlens::claims
