// SPDX-License-Identifier: GPL-3.0-or-later
// Spec defaults and validation.
#include "core/spec/spec.h"

#include "core/common/format.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"
#include "core/regimes/model_dump.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <map>
#include <set>

namespace kvlens {

std::string_view advisorStatisticName(AdvisorStatistic s)
{
    switch (s) {
    case AdvisorStatistic::Mean: return "mean";
    case AdvisorStatistic::Median: return "median";
    case AdvisorStatistic::P99: return "p99";
    }
    return "mean";
}

std::optional<AdvisorStatistic> parseAdvisorStatistic(std::string_view text)
{
    for (const AdvisorStatistic s : {AdvisorStatistic::Mean, AdvisorStatistic::Median, AdvisorStatistic::P99})
        if (text == advisorStatisticName(s))
            return s;
    return std::nullopt;
}

std::string_view advisorLossName(AdvisorLoss l)
{
    return l == AdvisorLoss::Kl ? "kl" : "rel_mse_t";
}

std::optional<AdvisorLoss> parseAdvisorLoss(std::string_view text)
{
    for (const AdvisorLoss l : {AdvisorLoss::RelMseT, AdvisorLoss::Kl})
        if (text == advisorLossName(l))
            return l;
    return std::nullopt;
}

bool ExperimentSpec::hasModelCells() const
{
    const Regime* r = findRegime(regime);
    return r && r->hasModelCells();
}

int ExperimentSpec::calibrationRows() const
{
    const bool needed = std::any_of(schemes.begin(), schemes.end(), [](const SchemeConfig& s) { return needsCalibration(s); });
    if (!needed)
        return 0;
    return calibrationTokens > 0 ? calibrationTokens : tokens;
}

long long ExperimentSpec::trialCount() const
{
    return static_cast<long long>(pointCount()) * static_cast<long long>(schemes.size())
           * static_cast<long long>(budgets.size()) * seedCount;
}

std::vector<const SweepAxis*> ExperimentSpec::gridAxes() const
{
    std::vector<const SweepAxis*> axes;
    for (const auto& a : sweep)
        axes.push_back(&a);
    return axes;
}

int ExperimentSpec::pointCount() const
{
    long long count = 1;
    for (const SweepAxis* a : gridAxes())
        count = std::min<long long>(count * static_cast<long long>(a->values.size()), 1LL << 40);
    return static_cast<int>(std::min<long long>(count, std::numeric_limits<int>::max()));
}

std::vector<double> ExperimentSpec::pointValues(int point) const
{
    // Mixed radix, the last axis fastest.
    const auto axes = gridAxes();
    std::vector<double> values(axes.size());
    long long rest = point;
    for (std::size_t i = axes.size(); i-- > 0;) {
        const auto n = static_cast<long long>(axes[i]->values.size());
        values[i] = n > 0 ? axes[i]->values[static_cast<std::size_t>(rest % n)] : 0.0;
        rest = n > 0 ? rest / n : 0;
    }
    return values;
}

namespace {

/// Applies one swept value to a spec (a budget axis is folded into the budget list by normalizeSpec).
void applySweepValue(ExperimentSpec& s, const SweepAxis& axis, double v)
{
    switch (axis.parameter) {
    case SweepParameter::D:
        s.d = static_cast<int>(v);
        break;
    case SweepParameter::Tokens:
        s.tokens = static_cast<int>(v);
        break;
    case SweepParameter::Queries:
        s.queries = static_cast<int>(v);
        break;
    case SweepParameter::ScoreScale:
        s.scoreScale = v;
        break;
    case SweepParameter::Regime:
        s.regimeParams[axis.regimeKey] = v;
        break;
    case SweepParameter::Budget:
        s.budgets = {static_cast<int>(v)};
        break;
    }
}

} // namespace

std::string SweepAxis::name() const
{
    switch (parameter) {
    case SweepParameter::Budget:
        return "budget";
    case SweepParameter::D:
        return "d";
    case SweepParameter::Queries:
        return "queries";
    case SweepParameter::Regime:
        return "regime." + regimeKey;
    case SweepParameter::ScoreScale:
        return "score_scale";
    case SweepParameter::Tokens:
        return "tokens";
    }
    return {};
}

std::optional<SweepAxis> SweepAxis::named(std::string_view name)
{
    SweepAxis axis;
    constexpr std::string_view regime = "regime.";
    if (name.size() > regime.size() && name.substr(0, regime.size()) == regime) {
        axis.parameter = SweepParameter::Regime;
        axis.regimeKey = std::string(name.substr(regime.size()));
        return axis;
    }
    for (auto p : {SweepParameter::Budget, SweepParameter::D, SweepParameter::Queries, SweepParameter::ScoreScale,
                   SweepParameter::Tokens}) {
        axis.parameter = p;
        if (axis.name() == name)
            return axis;
    }
    return std::nullopt;
}

bool SweepAxis::integral() const
{
    return parameter == SweepParameter::D || parameter == SweepParameter::Tokens || parameter == SweepParameter::Queries;
}

std::string_view backendKindName(BackendKind b)
{
    switch (b) {
    case BackendKind::Cpu:
        return "cpu";
    case BackendKind::OpenCl:
        return "opencl";
    case BackendKind::Auto:
        return "auto";
    }
    return "cpu";
}

std::optional<BackendText> parseBackendText(std::string_view text)
{
    for (auto b : {BackendKind::Cpu, BackendKind::OpenCl, BackendKind::Auto})
        if (text == backendKindName(b))
            return BackendText{b, {}};
    constexpr std::string_view prefix = "cpu (fallback: ";
    if (text.size() > prefix.size() && text.substr(0, prefix.size()) == prefix && text.back() == ')')
        return BackendText{BackendKind::Cpu, std::string(text.substr(prefix.size(), text.size() - prefix.size() - 1))};
    if (text.substr(0, std::string_view("cpu (fallback").size()) == "cpu (fallback")
        return BackendText{BackendKind::Cpu, std::string(text.substr(3))};
    return std::nullopt;
}

std::string ExperimentSpec::backendText() const
{
    if (!fallback.empty())
        return "cpu (fallback: " + fallback + ")";
    return std::string(backendKindName(backend));
}

ExperimentSpec ExperimentSpec::pointSpec(int point) const
{
    ExperimentSpec s = *this;
    s.sweep.clear();
    const auto axes = gridAxes();
    const auto values = pointValues(point);
    for (std::size_t i = 0; i < axes.size(); ++i)
        applySweepValue(s, *axes[i], values[i]);
    return s;
}

std::string ExperimentSpec::pointLabel(int point) const
{
    const auto axes = gridAxes();
    const auto values = pointValues(point);
    std::string label;
    for (std::size_t i = 0; i < axes.size(); ++i) {
        const std::string name = axes[i]->parameter == SweepParameter::Regime ? axes[i]->regimeKey : axes[i]->name();
        label += (label.empty() ? "" : ", ") + name + " = " + formatNumber(values[i]);
    }
    return label;
}

void hashFieldValue(Fnv1a& h, const std::string& value)
{
    h.text(value);
}

void hashFieldValue(Fnv1a& h, int value)
{
    h.i64(value);
}

void hashFieldValue(Fnv1a& h, double value)
{
    h.f64(value);
}

void hashFieldValue(Fnv1a& h, EngineKind value)
{
    h.u64(static_cast<std::uint64_t>(value));
}

void hashFieldValue(Fnv1a& h, const std::variant<double, std::string>& value)
{
    h.u64(value.index());
    if (const auto* d = std::get_if<double>(&value))
        h.f64(*d);
    else
        h.text(std::get<std::string>(value));
}

void hashFieldValue(Fnv1a& h, const RegimeParams& params)
{
    h.u64(params.size());
    for (const auto& [key, value] : params) { // a std::map: sorted by key
        h.text(key);
        hashFieldValue(h, value);
    }
}

ExperimentSpec defaultSpec()
{
    ExperimentSpec spec;
    for (const char* name : {"KV", "KQV", "QKQV"})
        spec.schemes.push_back(*findScheme(name));
    spec.regimeParams = findRegime(spec.regime)->defaults();
    return spec;
}

namespace {

std::string num(double v)
{
    return formatNumber(v);
}

Error outOfRange(const std::string& field, double lo, double hi, double got, bool integer = true)
{
    return Error{field, std::string("must be ") + (integer ? "an integer " : "") + "in [" + num(lo) + ", " + num(hi)
                            + "], got " + num(got)};
}

/// Text printed on terminals and written to spec.json: UTF-8, no control characters (a name with
/// ESC or CR could rewrite the terminal; invalid UTF-8 cannot go into JSON).
Status checkText(const std::string& field, const std::string& text)
{
    if (!io::isValidUtf8(text))
        return Error{field, "is not valid UTF-8: " + io::quoteName(text)};
    for (const char c : text)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            return Error{field, "must not contain control characters (tab, newline, escape ...): " + io::quoteName(text)};
    return Ok{};
}

} // namespace

namespace {

/// The checks of the fields a sweep value may change (sizes, score scale, the regime's parameters
/// and rules, the schemes against d), on one point's spec. Spec-wide fields (names, seeds, budgets,
/// comparisons) are checked once, on the base spec, not per value.
Result<RegimeParams> checkPoint(const ExperimentSpec& spec, InputCheck inputs, bool checkSchemes)
{
    using L = SpecLimits;
    if (spec.d < L::kMinD || spec.d > L::kMaxD)
        return outOfRange("d", L::kMinD, L::kMaxD, spec.d);
    if (spec.tokens < L::kMinTokens || spec.tokens > L::kMaxTokens)
        return outOfRange("tokens", L::kMinTokens, L::kMaxTokens, spec.tokens);
    if (spec.queries < L::kMinQueries || spec.queries > L::kMaxQueries)
        return outOfRange("queries", L::kMinQueries, L::kMaxQueries, spec.queries);
    if (!std::isfinite(spec.scoreScale) || spec.scoreScale <= 0.0 || spec.scoreScale > L::kMaxScoreScale)
        return Error{"score_scale", "must be in (0, " + num(L::kMaxScoreScale) + "], got " + num(spec.scoreScale)};
    if (spec.metrics.topK < 1 || spec.metrics.topK > spec.tokens)
        return outOfRange("metrics.top_k", 1, spec.tokens, spec.metrics.topK);
    const Regime* regime = findRegime(spec.regime);
    if (!regime)
        return Error{"regime.name", "unknown regime '" + spec.regime + "' (known: " + regimeNames() + ")"};
    const DataShape shape{spec.d, spec.tokens, spec.queries, 0};
    auto params = regime->normalize(spec.regimeParams, shape, inputs == InputCheck::Full);
    if (!params)
        return params.error();
    if (checkSchemes)
        for (std::size_t i = 0; i < spec.schemes.size(); ++i)
            if (auto ok = validateScheme(spec.schemes[i], spec.budgets, spec.d, spec.schemeField(static_cast<int>(i)));
                !ok)
                return ok.error();
    return params;
}

} // namespace

/// An allocation file read into a model run's schemes must be of that model: every layer it lists
/// is a layer of the dump, and it lists every layer of the dump.
Status checkAllocationsFitDump(const ExperimentSpec& spec, InputCheck inputs)
{
    if (!spec.hasModelCells() || spec.schemeOrigins.allocations.empty() || inputs != InputCheck::Full)
        return Ok{};
    auto dump = inspectModelDump(paramText(spec.regimeParams, "file"));
    if (!dump)
        return dump.error();
    for (const auto& a : spec.schemeOrigins.allocations) {
        const std::set<int> layers(a.layers.begin(), a.layers.end());
        for (std::size_t i = 0; i < a.layers.size(); ++i)
            if (a.layers[i] >= dump->layers)
                return Error{a.field + ".allocation",
                             io::quoteName(a.path) + ": layers[" + std::to_string(i) + "].layer is "
                                 + std::to_string(a.layers[i]) + " but the dump has layers 0.."
                                 + std::to_string(dump->layers - 1) + ": the allocation was made for another model"};
        for (int l = 0; l < dump->layers; ++l)
            if (!layers.count(l))
                return Error{a.field + ".allocation",
                             io::quoteName(a.path) + " has no entry for layer " + std::to_string(l) + " of the dump's "
                                 + std::to_string(dump->layers) + ": the allocation was made for another model"};
    }
    return Ok{};
}

std::string ExperimentSpec::schemeField(int index) const
{
    if (index >= 0 && static_cast<std::size_t>(index) < schemeOrigins.fields.size()
        && !schemeOrigins.fields[static_cast<std::size_t>(index)].empty())
        return schemeOrigins.fields[static_cast<std::size_t>(index)];
    return "schemes[" + std::to_string(index) + "]";
}

namespace {

/// Text that reaches a terminal or spec.json: the name, the device, each scheme's name and description.
Status checkSpecText(const ExperimentSpec& spec)
{
    if (auto text = checkText("name", spec.name); !text)
        return text.error();
    if (auto text = checkText("device", spec.device); !text)
        return text.error();
    for (std::size_t i = 0; i < spec.schemes.size(); ++i) {
        const std::string field = spec.schemeField(static_cast<int>(i));
        if (auto text = checkText(field + ".name", spec.schemes[i].name); !text)
            return text.error();
        if (auto text = checkText(field + ".description", spec.schemes[i].description); !text)
            return text.error();
    }
    return Ok{};
}

/// The spec-wide numbers: calibration rows, seeds (the last must not wrap past 2^64 - 1 to 0),
/// the sample cap and the memory limit.
Status checkRunSizes(const ExperimentSpec& spec)
{
    using L = SpecLimits;
    if (spec.calibrationTokens < 0 || spec.calibrationTokens > L::kMaxCalibration)
        return outOfRange("calibration_tokens", 0, L::kMaxCalibration, spec.calibrationTokens);
    if (spec.seedCount < 1 || spec.seedCount > L::kMaxSeeds)
        return outOfRange("seeds.count", 1, L::kMaxSeeds, spec.seedCount);
    if (spec.firstSeed > std::numeric_limits<std::uint64_t>::max() - static_cast<std::uint64_t>(spec.seedCount - 1))
        return Error{"seeds.first", "with " + std::to_string(spec.seedCount) + " seeds must be at most "
                                        + std::to_string(std::numeric_limits<std::uint64_t>::max()
                                                         - static_cast<std::uint64_t>(spec.seedCount - 1))
                                        + " (the last seed would wrap past 2^64 - 1), got "
                                        + std::to_string(spec.firstSeed)};
    if (spec.metrics.sampleCap < 0 || spec.metrics.sampleCap > L::kMaxSampleCap)
        return outOfRange("metrics.sample_cap", 0, L::kMaxSampleCap, spec.metrics.sampleCap);
    if (!std::isfinite(spec.memoryLimitMb) || spec.memoryLimitMb < 0.0)
        return Error{"memory_limit_mb", "must be >= 0 (0 means half of physical memory), got " + num(spec.memoryLimitMb)};
    return Ok{};
}

/// The sweep's axes: known parameters, each once, values given, no value twice, a bounded grid.
/// Axes are sorted by name (as JSON objects are), so the grid order is canonical; a budget axis
/// becomes the budget list (budget is already a trial dimension).
Status normalizeSweep(ExperimentSpec& spec)
{
    using L = SpecLimits;
    std::sort(spec.sweep.begin(), spec.sweep.end(),
              [](const SweepAxis& a, const SweepAxis& b) { return a.name() < b.name(); });
    std::set<std::string> seenAxes;
    long long points = 1;
    for (const SweepAxis& axis : spec.sweep) {
        const std::string field = "sweep." + axis.name();
        if (axis.parameter == SweepParameter::Regime && axis.regimeKey.empty())
            return Error{field, "name the regime parameter: regime.<parameter>"};
        if (!seenAxes.insert(axis.name()).second)
            return Error{field, "is swept twice"};
        if (axis.values.empty())
            return Error{field, "give at least one value"};
        std::set<double> seenValues;
        for (std::size_t k = 0; k < axis.values.size(); ++k)
            if (!seenValues.insert(axis.values[k]).second) // a value twice runs its cells twice
                return Error{field + "[" + std::to_string(k) + "]",
                             "value " + num(axis.values[k]) + " is listed twice (each value runs once)"};
        points *= static_cast<long long>(axis.values.size());
        if (points > L::kMaxPoints)
            return Error{"sweep", "the grid has more than " + std::to_string(L::kMaxPoints) + " points"};
    }
    const auto it = std::find_if(spec.sweep.begin(), spec.sweep.end(),
                                 [](const SweepAxis& a) { return a.parameter == SweepParameter::Budget; });
    if (it == spec.sweep.end())
        return Ok{};
    spec.budgets.clear();
    for (std::size_t k = 0; k < it->values.size(); ++k) {
        const double v = it->values[k];
        if (v != std::floor(v) || v < L::kMinBudget || v > L::kMaxBudget)
            return Error{"sweep.budget[" + std::to_string(k) + "]",
                         "must be an integer in [" + std::to_string(L::kMinBudget) + ", "
                             + std::to_string(L::kMaxBudget) + "], got " + num(v)};
        spec.budgets.push_back(static_cast<int>(v));
    }
    spec.sweep.erase(it);
    return Ok{};
}

/// At least one budget, each in range and listed once.
Status checkBudgets(const ExperimentSpec& spec)
{
    using L = SpecLimits;
    if (spec.budgets.empty())
        return Error{"budgets", "give at least one budget in [" + std::to_string(L::kMinBudget) + ", "
                                    + std::to_string(L::kMaxBudget) + "]"};
    std::set<int> seenBudgets;
    for (std::size_t i = 0; i < spec.budgets.size(); ++i) {
        const int b = spec.budgets[i];
        const std::string field = "budgets[" + std::to_string(i) + "]";
        if (b < L::kMinBudget || b > L::kMaxBudget)
            return outOfRange(field, L::kMinBudget, L::kMaxBudget, b);
        if (!seenBudgets.insert(b).second)
            return Error{field, "budget " + std::to_string(b) + " is listed twice"};
    }
    return Ok{};
}

/// The advisor's targets: an allocation of the widths run costs at least the narrowest budget
/// (overheads only add), so a target below it can never be met; above fp16 nothing is saved.
Status checkAdvisor(const ExperimentSpec& spec)
{
    using L = SpecLimits;
    if (spec.advisor.bits.size() > static_cast<std::size_t>(L::kMaxAdvisorTargets))
        return Error{"advisor.bits", "give at most " + std::to_string(L::kMaxAdvisorTargets) + " targets, got "
                                         + std::to_string(spec.advisor.bits.size())};
    const int narrowest = *std::min_element(spec.budgets.begin(), spec.budgets.end());
    for (std::size_t i = 0; i < spec.advisor.bits.size(); ++i) {
        const double b = spec.advisor.bits[i];
        const std::string field = "advisor.bits[" + std::to_string(i) + "]";
        if (!std::isfinite(b) || b < narrowest || b > L::kMaxAdvisorBits)
            return Error{field, num(b) + " is outside [" + num(narrowest) + ", " + num(L::kMaxAdvisorBits)
                                    + "] (no allocation of the widths run, budgets from " + num(narrowest)
                                    + ", costs less than " + num(narrowest) + " bits per coordinate; "
                                    + num(L::kMaxAdvisorBits) + " is fp16)"};
        for (std::size_t k = 0; k < i; ++k)
            if (spec.advisor.bits[k] == b)
                return Error{field, num(b) + " is listed twice (first as advisor.bits[" + std::to_string(k) + "])"};
    }
    return Ok{};
}

/// At least one scheme, each name once; the comparison pairs name two different schemes of the
/// spec (listed when every pair of many schemes would be a quadratic table); resampling in range.
Status checkSchemesAndComparisons(const ExperimentSpec& spec)
{
    using L = SpecLimits;
    if (spec.schemes.empty())
        return Error{"schemes", "choose at least one scheme (known: " + schemeNames() + ")"};
    std::map<std::string, std::size_t> seenNames;
    for (std::size_t i = 0; i < spec.schemes.size(); ++i) {
        const auto [it, inserted] = seenNames.emplace(spec.schemes[i].name, i);
        if (!inserted)
            return Error{spec.schemeField(static_cast<int>(i)),
                         "scheme '" + spec.schemes[i].name + "' is listed twice (first as "
                             + spec.schemeField(static_cast<int>(it->second)) + ")"};
    }
    auto knownScheme = [&](const std::string& name) { return seenNames.count(name) > 0; };
    for (std::size_t i = 0; i < spec.comparisons.pairs.size(); ++i) {
        const auto& [a, b] = spec.comparisons.pairs[i];
        const std::string field = "comparisons.pairs[" + std::to_string(i) + "]";
        if (!knownScheme(a))
            return Error{field + "[0]", "'" + a + "' is not one of the spec's schemes"};
        if (!knownScheme(b))
            return Error{field + "[1]", "'" + b + "' is not one of the spec's schemes"};
        if (a == b)
            return Error{field, "compares '" + a + "' with itself"};
    }
    // Every pair of many schemes is a quadratic table (10^4 schemes: 5 x 10^7 rows): above a few
    // dozen schemes the pairs to compare must be listed.
    if (spec.comparisons.pairs.empty() && spec.schemes.size() > static_cast<std::size_t>(L::kMaxAllPairsSchemes))
        return Error{"comparisons.pairs", "with " + std::to_string(spec.schemes.size()) + " schemes, comparing every "
                                              "pair makes " + std::to_string(spec.schemes.size() * (spec.schemes.size() - 1) / 2)
                                              + " rows per budget and grid point: list the pairs to compare (every "
                                                "pair is compared for at most "
                                              + std::to_string(L::kMaxAllPairsSchemes) + " schemes)"};
    if (spec.comparisons.bootstrap < 0 || spec.comparisons.bootstrap > L::kMaxResamples)
        return outOfRange("comparisons.bootstrap", 0, L::kMaxResamples, spec.comparisons.bootstrap);
    if (spec.comparisons.permutations < 0 || spec.comparisons.permutations > L::kMaxResamples)
        return outOfRange("comparisons.permutations", 0, L::kMaxResamples, spec.comparisons.permutations);
    return Ok{};
}

/// Every swept value on the base point: only what that value can change is checked again (the
/// schemes against d only on a d axis); a regime axis must name a numeric parameter of the regime.
Status checkSweepValues(const ExperimentSpec& spec, const ExperimentSpec& base, InputCheck inputs)
{
    for (const SweepAxis& axis : spec.sweep) {
        for (std::size_t k = 0; k < axis.values.size(); ++k) {
            ExperimentSpec one = base;
            const double v = axis.values[k];
            const std::string field = "sweep." + axis.name() + "[" + std::to_string(k) + "]";
            applySweepValue(one, axis, v);
            if (axis.integral() && v != std::floor(v))
                return Error{field, "must be an integer, got " + num(v)};
            if (axis.parameter == SweepParameter::Regime) {
                const Regime* r = findRegime(one.regime);
                const std::string& key = axis.regimeKey;
                const auto& descs = r ? r->params() : std::vector<ParamDesc>{};
                const auto it = std::find_if(descs.begin(), descs.end(), [&](const ParamDesc& p) { return p.key == key; });
                if (it == descs.end() || it->kind == ParamDesc::Kind::Choice || it->kind == ParamDesc::Kind::Text)
                    return Error{"sweep." + axis.name(), "is not a numeric parameter of regime '" + one.regime + "'"};
            }
            auto checked = checkPoint(one, inputs, axis.parameter == SweepParameter::D);
            if (!checked)
                return Error{field, checked.error().field + " " + checked.error().message};
        }
    }
    return Ok{};
}

} // namespace

Result<ExperimentSpec> normalizeSpec(const ExperimentSpec& given, InputCheck inputs)
{
    ExperimentSpec spec = given;
    // Spec-wide fields first, once: an error in them is reported under their own name, never
    // under the first sweep value that happened to reach them.
    for (auto phase : {checkSpecText, checkRunSizes})
        if (auto ok = phase(spec); !ok)
            return ok.error();
    if (auto ok = normalizeSweep(spec); !ok)
        return ok.error();
    for (auto phase : {checkBudgets, checkAdvisor, checkSchemesAndComparisons})
        if (auto ok = phase(spec); !ok)
            return ok.error();

    // The base point, then every swept value on it.
    ExperimentSpec base = spec;
    base.sweep.clear();
    auto params = checkPoint(base, inputs, true);
    if (!params)
        return params.error();
    spec.regimeParams = std::move(params).value();
    // Every part's options present: equal compositions compare (and key caches) alike however written.
    for (SchemeConfig& scheme : spec.schemes)
        scheme = normalizedScheme(std::move(scheme));
    if (auto fits = checkAllocationsFitDump(spec, inputs); !fits)
        return fits.error();
    if (auto ok = checkSweepValues(spec, base, inputs); !ok)
        return ok.error();
    return spec;
}

} // namespace kvlens
