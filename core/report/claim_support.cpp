// SPDX-License-Identifier: GPL-3.0-or-later
// Verdict rules, formatting, the shared claim support, and the rotated key marginal.
#include "core/report/claim_support.h"

#include "core/spec/grid.h"
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

std::string_view outcomeText(Outcome outcome)
{
    switch (outcome) {
    case Outcome::Unset: return "unset";
    case Outcome::Holds: return "holds";
    case Outcome::HoldsLarger: return "holds, larger effect than claimed";
    case Outcome::Borderline: return "borderline";
    case Outcome::Contradicted: return "contradicted";
    case Outcome::NotTestable: return "not testable here";
    }
    return "unset";
}

std::string_view verdictText(Verdict verdict)
{
    switch (verdict) {
    case Verdict::Holds: return "holds";
    case Verdict::HoldsLarger: return "holds, larger effect than claimed";
    case Verdict::Borderline: return "borderline";
    case Verdict::Contradicted: return "contradicted";
    case Verdict::DependsOnSetting: return "depends on setting";
    case Verdict::NotTestable: return "not testable here";
    }
    return "not testable here";
}

Verdict verdictFrom(std::span<const Check> checks)
{
    int holds = 0, larger = 0, borderline = 0, contradicted = 0;
    for (const Check& c : checks) {
        switch (c.outcome) {
        case Outcome::Holds: ++holds; break;
        case Outcome::HoldsLarger: ++larger; break;
        case Outcome::Borderline: ++borderline; break;
        case Outcome::Contradicted: ++contradicted; break;
        case Outcome::Unset: (c.holds ? holds : contradicted)++; break;
        case Outcome::NotTestable: break;
        }
    }
    const int testable = holds + larger + borderline + contradicted;
    if (testable == 0)
        return Verdict::NotTestable;
    if (contradicted == 0 && borderline == 0)
        return larger == testable ? Verdict::HoldsLarger : Verdict::Holds;
    if (contradicted == 0)
        return Verdict::Borderline;
    return holds + larger + borderline == 0 ? Verdict::Contradicted : Verdict::DependsOnSetting;
}

Outcome directionalOutcome(const stats::PValue& p, double effect, double pMin, double alpha)
{
    if (!(pMin <= alpha))
        return Outcome::NotTestable;
    if (effect > 0.0 && p.logP < std::log(alpha))
        return Outcome::Holds;
    if (effect > 0.0 && p.logP < std::log(kBorderlineFactor * alpha))
        return Outcome::Borderline;
    return Outcome::Contradicted;
}

Outcome bandOutcome(double low, double high, double lo, double hi)
{
    if (std::isnan(low) || std::isnan(high))
        return Outcome::NotTestable;
    if (low >= lo && high <= hi)
        return Outcome::Holds;
    if (high < lo || low > hi)
        return Outcome::Contradicted;
    return Outcome::Borderline;
}

Outcome both(Outcome direction, Outcome size)
{
    if (direction == Outcome::NotTestable || direction == Outcome::Contradicted || direction == Outcome::Unset)
        return direction;
    if (direction == Outcome::Borderline)
        return size == Outcome::Contradicted || size == Outcome::NotTestable ? size : Outcome::Borderline;
    return size;
}

Outcome claimedValueOutcome(double low, double high, double claimed, double slack)
{
    if (!std::isfinite(low) || !std::isfinite(high))
        return Outcome::NotTestable;
    if (low <= claimed && claimed <= high)
        return Outcome::Holds;
    if (low > claimed)
        return Outcome::HoldsLarger;
    return high >= claimed * (1.0 - slack) ? Outcome::Borderline : Outcome::Contradicted;
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
    return stats::formatPValue(p);
}

std::string pEquals(const stats::PValue& p)
{
    const std::string text = formatP(p);
    return text.front() == '<' ? "p " + text : "p = " + text;
}

void decide(Claim& claim)
{
    for (Check& c : claim.checks) {
        if (c.outcome == Outcome::Unset)
            c.outcome = c.holds ? Outcome::Holds : Outcome::Contradicted;
        c.holds = c.outcome == Outcome::Holds || c.outcome == Outcome::HoldsLarger;
    }
    claim.verdict = verdictFrom(claim.checks);
    claim.dependsOn.clear();
    if (claim.verdict != Verdict::DependsOnSetting && claim.verdict != Verdict::Borderline)
        return;
    std::string holds, borderline, fails, untestable;
    auto add = [](std::string& list, const std::string& s) { list += (list.empty() ? "" : "; ") + s; };
    for (const Check& c : claim.checks) {
        if (c.holds)
            add(holds, c.setting);
        else if (c.outcome == Outcome::Borderline)
            add(borderline, c.setting);
        else if (c.outcome == Outcome::Contradicted)
            add(fails, c.setting);
        else
            add(untestable, c.setting);
    }
    std::string text;
    for (const auto& [label, list] : {std::pair<const char*, const std::string*>{"Holds at: ", &holds},
                                      {"Borderline at: ", &borderline},
                                      {"Does not hold at: ", &fails},
                                      {"Not testable at: ", &untestable}})
        if (!list->empty())
            text += (text.empty() ? "" : " ") + std::string(label) + *list + ".";
    claim.dependsOn = text;
}

namespace support {

/// The first of `names` the run has (KQV and TQ-KQV are one scheme under two papers' names).
int anyScheme(const ResultSet& rs, std::initializer_list<std::string_view> names)
{
    for (std::string_view n : names)
        if (int i = rs.schemeIndex(n); i >= 0)
            return i;
    return -1;
}

/// The trials of one (point, scheme, budget), in seed order.
std::vector<const TrialResult*> cell(const ResultSet& rs, int point, int scheme, int budget)
{
    return TrialCells(rs).atBudget(point, budget, scheme);
}


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

Units unitsEpsK(const ResultSet& rs, const std::vector<const TrialResult*>& c)
{
    Units u;
    u.design = designOf(rs);
    for (const TrialResult* t : c) {
        u.seeds.push_back(t->key.seedIndex);
        auto& values = u.byUnit.emplace_back();
        for (float phi : t->samplesK.phi)
            values.push_back(1.0 - std::cos(static_cast<double>(phi)));
    }
    return u;
}

Outcome allOf(const std::vector<Outcome>& outcomes)
{
    auto any = [&](Outcome o) { return std::find(outcomes.begin(), outcomes.end(), o) != outcomes.end(); };
    if (outcomes.empty() || any(Outcome::NotTestable))
        return Outcome::NotTestable;
    if (any(Outcome::Contradicted) || any(Outcome::Unset))
        return Outcome::Contradicted;
    if (any(Outcome::Borderline))
        return Outcome::Borderline;
    return any(Outcome::Holds) ? Outcome::Holds : Outcome::HoldsLarger;
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


std::vector<double> Units::pooled() const
{
    std::vector<double> out;
    for (const auto& u : byUnit)
        out.insert(out.end(), u.begin(), u.end());
    return out;
}

std::size_t Units::values() const
{
    std::size_t n = 0;
    for (const auto& u : byUnit)
        n += u.size();
    return n;
}

stats::ClusterDesign designOf(const ResultSet& rs)
{
    const Regime* regime = findRegime(rs.spec.regime);
    return regime && regime->seedIndependent() ? stats::ClusterDesign::Crossed : stats::ClusterDesign::Nested;
}

Units units(const ResultSet& rs, const std::vector<const TrialResult*>& c, QueryField field)
{
    Units u;
    u.design = designOf(rs);
    for (const TrialResult* t : c) {
        u.seeds.push_back(t->key.seedIndex);
        u.byUnit.emplace_back((t->*field).begin(), (t->*field).end());
    }
    return u;
}

void appendUnits(Units& a, const Units& b)
{
    for (std::size_t j = 0; j < b.seeds.size(); ++j) {
        const auto it = std::lower_bound(a.seeds.begin(), a.seeds.end(), b.seeds[j]);
        const auto at = static_cast<std::size_t>(it - a.seeds.begin());
        if (it == a.seeds.end() || *it != b.seeds[j]) {
            a.seeds.insert(it, b.seeds[j]);
            a.byUnit.insert(a.byUnit.begin() + static_cast<std::ptrdiff_t>(at), b.byUnit[j]);
        } else {
            a.byUnit[at].insert(a.byUnit[at].end(), b.byUnit[j].begin(), b.byUnit[j].end());
        }
    }
}

Contrast contrast(const Units& ua, const Units& ub, std::uint64_t seed, int resamples, stats::Location perUnit)
{
    // The units both samples hold, paired by seed.
    std::vector<std::vector<double>> xa, xb;
    for (std::size_t i = 0, j = 0; i < ua.seeds.size() && j < ub.seeds.size();) {
        if (ua.seeds[i] == ub.seeds[j]) {
            xa.push_back(ua.byUnit[i++]);
            xb.push_back(ub.byUnit[j++]);
        } else if (ua.seeds[i] < ub.seeds[j]) {
            ++i;
        } else {
            ++j;
        }
    }
    std::vector<double> a, b;
    for (std::size_t k = 0; k < xa.size(); ++k) {
        a.insert(a.end(), xa[k].begin(), xa[k].end());
        b.insert(b.end(), xb[k].begin(), xb[k].end());
    }
    Contrast c;
    c.design = ua.design;
    c.units = static_cast<int>(xa.size());
    c.pMin = std::ldexp(2.0, -c.units);
    c.nA = a.size();
    c.nB = b.size();
    c.medianA = median(a);
    c.medianB = median(b);
    c.ratio = c.medianB != 0.0 ? c.medianA / c.medianB : std::numeric_limits<double>::quiet_NaN();
    c.low = c.high = c.ratio;
    if (a.empty() || b.empty())
        return c;
    // The seed as the unit: each seed's log median ratio, tested over the seeds.
    std::vector<double> d, zero(xa.size(), 0.0);
    for (std::size_t k = 0; k < xa.size(); ++k) {
        const double ma = stats::location(xa[k], perUnit);
        const double mb = stats::location(xb[k], perUnit);
        const double dk = ma == mb ? 0.0 : std::log(mb) - std::log(ma);
        d.push_back(dk);
        c.unitsALower += dk > 0.0;
    }
    c.effect = stats::location(d, stats::Location::Median);
    c.p = stats::wilcoxonSignedRankExact(d, zero).p;
    // Secondary: queries as if independent.
    const stats::MannWhitneyResult mw = stats::mannWhitneyU(a, b);
    c.r = mw.rankBiserial;
    c.queryP = mw.p;
    if (resamples > 0 && c.medianB != 0.0) {
        const stats::BootstrapCi ci = stats::bootstrapClusteredRatio(xa, xb, c.design, 0.95, resamples, seed);
        if (ci.resamples > 0) {
            c.low = ci.lower;
            c.high = ci.upper;
        }
    }
    return c;
}

Contrast contrastRuns(const Units& ua, const Units& ub, std::uint64_t seed, int resamples, stats::Location perUnit)
{
    Contrast c;
    c.design = ua.design;
    std::vector<double> sa, sb;
    for (const auto& u : ua.byUnit)
        sa.push_back(stats::location(u, perUnit));
    for (const auto& u : ub.byUnit)
        sb.push_back(stats::location(u, perUnit));
    c.units = static_cast<int>(std::min(sa.size(), sb.size()));
    c.nA = ua.values();
    c.nB = ub.values();
    if (sa.empty() || sb.empty())
        return c;
    c.pMin = std::exp(stats::logSeparationTail(sa.size(), sb.size()));
    c.medianA = stats::location(sa, perUnit);
    c.medianB = stats::location(sb, perUnit);
    c.ratio = c.medianB != 0.0 ? c.medianA / c.medianB : std::numeric_limits<double>::quiet_NaN();
    c.low = c.high = c.ratio;
    c.effect = c.medianA == c.medianB ? 0.0 : std::log(c.medianB) - std::log(c.medianA);
    const stats::MannWhitneyResult mw = stats::mannWhitneyUExact(sa, sb);
    c.p = mw.p;
    c.unitsALower = static_cast<int>(std::count_if(sa.begin(), sa.end(), [&](double v) { return v < c.medianB; }));
    const stats::MannWhitneyResult q = stats::mannWhitneyU(ua.pooled(), ub.pooled());
    c.r = q.rankBiserial;
    c.queryP = q.p;
    if (resamples > 0 && c.medianB != 0.0) {
        const stats::BootstrapCi ci = stats::bootstrapRatio(sa, sb, perUnit, 0.95, resamples, seed);
        if (ci.resamples > 0) {
            c.low = ci.lower;
            c.high = ci.upper;
        }
    }
    return c;
}

Outcome directional(const Contrast& c)
{
    return directionalOutcome(c.p, c.effect, c.pMin);
}

std::string seedP(const Contrast& c)
{
    return pEquals(c.p) + " (" + std::to_string(c.units) + " seed" + (c.units == 1 ? "" : "s") + ")";
}

std::string ratioText(double ratio, double low, double high)
{
    return formatSig(ratio) + " [" + formatSig(low) + ", " + formatSig(high) + "]";
}

std::string intervalText(const Interval& i, int digits)
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
    // Choices that change the construction are named when they differ from the default.
    auto addChoice = [&](const char* key, const char* plain, const std::string& label) {
        const auto it = s.regimeParams.find(key);
        const std::string* v = it == s.regimeParams.end() ? nullptr : std::get_if<std::string>(&it->second);
        if (v && *v != plain)
            params += (params.empty() ? "" : ", ") + (label.empty() ? *v : label);
    };
    if (s.regime == "heavy_tail")
        addChoice("standardize", "false", "standardized");
    if (s.regime == "low_rank" || s.regime == "kv_subspace") {
        add("rank", "rank");
        addChoice("basis", "haar", "");
    }
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

/// Mean KL per scheme against the budget, with 95% intervals over seeds.
Figure klByBudgetFigure(const ResultSet& rs, int point, const std::vector<std::string>& names, const std::string& id,
                        const std::string& title, QueryField field,
                        const std::string& yLabel)
{
    Figure fig;
    fig.id = id;
    fig.title = title;
    fig.xLabel = "bit budget n";
    fig.yLabel = yLabel;
    fig.logY = true;
    for (const std::string& name : names) {
        const int s = rs.schemeIndex(name);
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


} // namespace support

using namespace support;


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

} // namespace kvlens::claims
