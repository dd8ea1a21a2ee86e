// SPDX-License-Identifier: GPL-3.0-or-later
// Verdict rules, formatting, the shared claim support, and the rotated key marginal.
#include "core/report/claim_support.h"

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
    return stats::formatPValue(p);
}

std::string pEquals(const stats::PValue& p)
{
    const std::string text = formatP(p);
    return text.front() == '<' ? "p " + text : "p = " + text;
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

namespace support {


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
