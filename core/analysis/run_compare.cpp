// SPDX-License-Identifier: GPL-3.0-or-later
// Reading two run directories back and comparing them configuration by configuration, seed as the unit.
#include "core/common/types.h"
#include "core/analysis/run_compare.h"

#include "core/analysis/comparison.h"

#include "core/common/format.h"
#include "core/common/hash.h"
#include "core/common/math_policy.h"
#include "core/experiment/runner.h"
#include "core/io/csv.h"
#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/spec/grid.h"
#include "core/spec/spec_json.h"
#include "core/stats/bootstrap.h"
#include "core/stats/holm.h"
#include "core/stats/mann_whitney.h"
#include "core/stats/wilcoxon.h"

#include <boost/math/distributions/students_t.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numbers>
#include <set>
#include <type_traits>

namespace kvlens {

namespace {


Error inDir(const std::string& dir, const std::string& file, const Error& e)
{
    return Error{dir, file + ": " + e.text()};
}

} // namespace

Result<RunDirectory> readRunDirectory(const std::string& dir, double memoryLimitBytes)
{
    // The manifest first: a run writes it last, so a directory without one is not a finished run.
    const auto manifestText = io::readRegularFile(dir + "/manifest.json", io::kMaxManifestBytes);
    if (!manifestText)
        return Error{dir, "no readable manifest.json: not a finished run (--batch and kvlens merge write it last; "
                          "a run that was stopped leaves none)"};
    auto manifest = manifestFromJson(*manifestText);
    if (!manifest)
        return Error{dir, "manifest.json: " + manifest.error().text() + ": not a finished run"};
    if (manifest->shard.count != 1)
        return Error{dir, "a shard (" + std::to_string(manifest->shard.index) + "/" + std::to_string(manifest->shard.count)
                              + "), not a whole run: put the shards together with kvlens merge first"};
    auto spec = loadSpecFile(dir + "/spec.json", InputCheck::SkipInputs);
    if (!spec)
        return inDir(dir, "spec.json", spec.error());
    // Bounded before the catalogue, which holds every trial of the spec.
    if (memoryLimitBytes > 0.0) {
        const MemoryEstimate need = estimateMemory(*spec, 1);
        if (need.resultBytes > memoryLimitBytes)
            return Error{dir, "its " + std::to_string(spec->trialCount()) + " trials need about "
                                  + std::to_string(static_cast<long long>(need.resultBytes / 1e6))
                                  + " MB, above the memory allowed for one run of the comparison ("
                                  + std::to_string(static_cast<long long>(memoryLimitBytes / 1e6)) + " MB)"};
    }
    const std::uint64_t hash = specHash(*spec, manifest->dataHash);
    if (manifest->specHash != hash)
        return Error{dir, "spec.json and manifest.json are not of one run (spec hash " + hex64(hash) + ", manifest "
                              + hex64(manifest->specHash) + ")"};
    const TrialCatalog catalog = catalogTrials(*spec, manifest->dataHash);
    std::vector<ShardPart> parts{ShardPart{dir, *manifest}};
    if (auto checked = checkShardSet(catalog, parts); !checked)
        return Error{dir, "not a whole run: " + checked.error().message};
    // The header first: a wrong or oversized trials.bin is refused before its body is read.
    if (auto header = checkTrialsFile(dir + "/trials.bin", manifest->specHash, manifest->trials.size(), *spec); !header)
        return inDir(dir, "trials.bin", header.error());
    const auto bytes = io::readRegularFile(dir + "/trials.bin", io::kMaxTrialsFileBytes);
    if (!bytes)
        return inDir(dir, "trials.bin", bytes.error());
    auto decoded = decodeTrials(*bytes);
    if (!decoded)
        return inDir(dir, "trials.bin", decoded.error());
    if (decoded->specHash != manifest->specHash || decoded->ids != manifest->trials)
        return Error{dir, "trials.bin does not hold the trials manifest.json lists"};
    std::vector<std::vector<TrialResult>> trials;
    trials.push_back(std::move(decoded->trials));
    auto merged = mergeShards(catalog, parts, std::move(trials));
    if (!merged)
        return Error{dir, merged.error().text()};
    merged->dataHash = manifest->dataHash;
    merged->pointDataHashes = manifest->pointDataHashes;
    RunDirectory run;
    run.dir = dir;
    run.manifest = std::move(*manifest);
    run.results = std::move(*merged);
    return run;
}

// ---------------------------------------------------------------------------------------------
// The spec diff.

namespace {

std::string pathKey(const std::string& parent, const std::string& key)
{
    // Keys that would read as path syntax ("regime.nu" under "sweep") are quoted.
    if (key.find_first_of(".[]\"") != std::string::npos)
        return parent + "[" + io::dumpJson(nlohmann::json(key)) + "]";
    return parent.empty() ? key : parent + "." + key;
}

/// Compact JSON with numbers as KVLens writes them everywhere (formatNumber: 1, not 1.0).
std::string jsonText(const nlohmann::json& v)
{
    if (v.is_number_float())
        return formatNumber(v.get<double>());
    if (v.is_array()) {
        std::string s = "[";
        for (std::size_t i = 0; i < v.size(); ++i)
            s += (i ? "," : "") + jsonText(v[i]);
        return s + "]";
    }
    if (v.is_object()) {
        std::string s = "{";
        for (auto it = v.begin(); it != v.end(); ++it)
            s += (it == v.begin() ? "" : ",") + io::dumpJson(nlohmann::json(it.key())) + ":" + jsonText(it.value());
        return s + "}";
    }
    return io::dumpJson(v);
}

void diffJson(const std::string& path, const nlohmann::json* a, const nlohmann::json* b,
              std::vector<SpecDifference>& out)
{
    if (a && b && *a == *b)
        return;
    if (a && b && a->is_object() && b->is_object()) {
        std::set<std::string> keys;
        for (auto it = a->begin(); it != a->end(); ++it)
            keys.insert(it.key());
        for (auto it = b->begin(); it != b->end(); ++it)
            keys.insert(it.key());
        for (const std::string& k : keys) {
            const auto ia = a->find(k), ib = b->find(k);
            diffJson(pathKey(path, k), ia != a->end() ? &*ia : nullptr, ib != b->end() ? &*ib : nullptr, out);
        }
        return;
    }
    // Arrays of objects (schemes) element by element, so a changed option reads "schemes[0].k.bits";
    // arrays of numbers or names (budgets, sweep values) as one field.
    auto nested = [](const nlohmann::json& v) { return v.is_object() || v.is_array(); };
    if (a && b && a->is_array() && b->is_array() && a->size() == b->size()
        && (std::any_of(a->begin(), a->end(), nested) || std::any_of(b->begin(), b->end(), nested))) {
        for (std::size_t i = 0; i < a->size(); ++i)
            diffJson(path + "[" + std::to_string(i) + "]", &(*a)[i], &(*b)[i], out);
        return;
    }
    out.push_back(SpecDifference{path, a ? jsonText(*a) : std::string(), b ? jsonText(*b) : std::string()});
}

} // namespace

std::vector<SpecDifference> diffSpecs(const ExperimentSpec& a, const ExperimentSpec& b)
{
    // specToJson writes every field with its defaults, so a field left out of one spec file and
    // set to its default in the other is no difference.
    const auto ja = io::parseJsonText(specToJson(a, -1));
    const auto jb = io::parseJsonText(specToJson(b, -1));
    std::vector<SpecDifference> out;
    if (!ja || !jb) // specToJson writes valid JSON: not reachable
        return {SpecDifference{"(spec)", ja ? "" : ja.error().message, jb ? "" : jb.error().message}};
    diffJson("", &*ja, &*jb, out);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Metrics, one value per trial (a seed).

namespace {

double meanOf(const std::vector<float>& v)
{
    double s = 0.0;
    for (float x : v)
        s += x;
    return v.empty() ? kNan : s / static_cast<double>(v.size());
}

double metricValue(std::size_t metric, const TrialResult& t)
{
    switch (metric) {
    case 0: return meanOf(t.kl);
    case 1: {
        // comparisons.csv's seed statistic: the median of the seed's per-query KL, NaN as +inf.
        const std::vector<double> v = stats::seedKl(t);
        return v.empty() ? kNan : stats::location(v, stats::Location::Median);
    }
    case 2: return meanOf(t.recall);
    case 3: {
        double s = 0.0;
        for (std::uint8_t x : t.argmaxShift)
            s += x;
        return t.argmaxShift.empty() ? kNan : s / static_cast<double>(t.argmaxShift.size());
    }
    case 4: return meanOf(t.relMseT);
    default: return t.sixD.values()[metric - 5];
    }
}

} // namespace

const std::vector<RunMetric>& runMetrics()
{
    static const std::vector<RunMetric> metrics = {
        {"kl_mean", "mean per-query KL(p || p^) of the seed (nats)", true},
        {"kl_median", "median per-query KL of the seed (comparisons.csv's seed statistic)", true},
        {"recall", "mean top-k recall of the seed", true},
        {"argmax_shift", "fraction of the seed's queries whose argmax moved", true},
        {"rel_mse_t", "mean output relative error ||t^ - t||^2 / ||t||^2 of the seed", true},
        {"snr_k", "mean key SNR of the seed (dB)", false},
        {"phi_k", "mean key direction error of the seed (rad)", true},
        {"snr_v", "mean value SNR of the seed (dB)", false},
        {"phi_v", "mean value direction error of the seed (rad)", true},
        {"snr_t", "mean output SNR of the seed (dB)", false},
        {"phi_t", "mean output direction error of the seed (rad)", true},
    };
    return metrics;
}

std::string_view runRowStatusName(RunRowStatus s)
{
    switch (s) {
    case RunRowStatus::Tested: return "tested";
    case RunRowStatus::Identical: return "identical";
    case RunRowStatus::Untestable: return "untestable";
    case RunRowStatus::OnlyInA: return "only_in_a";
    case RunRowStatus::OnlyInB: return "only_in_b";
    }
    return "tested";
}

// ---------------------------------------------------------------------------------------------
// What defines a grid point's draw, field by field.

namespace {

/// Hashes of the spec fields that define the data a grid point draws, by name: the trial cache's
/// defining fields (trial_cache.cpp) less the metric options, which change what is measured, not
/// the draw; plus the calibration rows drawn and the imported data's hash.
struct DrawFields {
    std::map<std::string, std::uint64_t>& out;
    template <class Role, class T>
    void operator()(const char* name, Role, const T& field) const
    {
        if constexpr (std::is_same_v<Role, DefinesNumbers>) {
            if (std::string_view(name).rfind("metrics.", 0) == 0)
                return;
            Fnv1a h;
            hashFieldValue(h, field);
            out[name] = h.value();
        }
    }
};

std::map<std::string, std::uint64_t> drawFields(const RunDirectory& run, int point)
{
    const ExperimentSpec ps = run.results.spec.pointSpec(point);
    std::map<std::string, std::uint64_t> fields;
    forEachSpecField(ps, DrawFields{fields});
    fields["calibration rows drawn"] = static_cast<std::uint64_t>(ps.calibrationRows());
    const auto& hashes = run.manifest.pointDataHashes;
    fields["data_hash"] = point < static_cast<int>(hashes.size()) ? hashes[static_cast<std::size_t>(point)]
                                                                  : run.manifest.dataHash;
    return fields;
}

/// The names of the fields that differ ("score_scale, regime_params"), or "" for the same draw.
std::string drawDifference(const RunDirectory& a, int pa, const RunDirectory& b, int pb)
{
    const auto fa = drawFields(a, pa), fb = drawFields(b, pb);
    std::string out;
    for (const auto& entry : fa) {
        const auto it = fb.find(entry.first);
        if (it == fb.end() || it->second != entry.second)
            out += (out.empty() ? "" : ", ") + entry.first;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// The tests of one row.

double tQuantile(double dof, double level)
{
    const boost::math::students_t_distribution<double, MathPolicy> student(dof);
    return boost::math::quantile(boost::math::complement(student, (1.0 - level) / 2.0));
}

double mean(const std::vector<double>& v)
{
    double s = 0.0;
    for (double x : v)
        s += x;
    return v.empty() ? kNan : s / static_cast<double>(v.size());
}

double variance(const std::vector<double>& v)
{
    const double m = mean(v);
    double ss = 0.0;
    for (double x : v)
        ss += (x - m) * (x - m);
    return v.size() < 2 ? kNan : ss / static_cast<double>(v.size() - 1);
}

/// Student's t interval of the mean of `d`.
void pairedInterval(const std::vector<double>& d, double level, double& low, double& high)
{
    const double m = mean(d);
    if (d.size() < 2) {
        low = high = m;
        return;
    }
    const double n = static_cast<double>(d.size());
    const double half = tQuantile(n - 1.0, level) * std::sqrt(variance(d) / n);
    low = m - half;
    high = m + half;
}

/// Welch's interval of mean(y) - mean(x) (Welch 1947; Satterthwaite's degrees of freedom).
void welchInterval(const std::vector<double>& x, const std::vector<double>& y, double level, double& low, double& high)
{
    const double m = mean(y) - mean(x);
    if (x.size() < 2 || y.size() < 2) {
        low = high = m;
        return;
    }
    const double vx = variance(x) / static_cast<double>(x.size()), vy = variance(y) / static_cast<double>(y.size());
    const double se2 = vx + vy;
    if (!(se2 > 0.0)) {
        low = high = m;
        return;
    }
    const double dof = se2 * se2
                       / (vx * vx / static_cast<double>(x.size() - 1) + vy * vy / static_cast<double>(y.size() - 1));
    const double half = tQuantile(dof, level) * std::sqrt(se2);
    low = m - half;
    high = m + half;
}

/// The trials of a cell keyed by seed value.
std::map<std::uint64_t, const TrialResult*> bySeed(const std::vector<const TrialResult*>& cell)
{
    std::map<std::uint64_t, const TrialResult*> out;
    for (const TrialResult* t : cell)
        out[t->key.seed] = t;
    return out;
}

/// Fills a row's numbers from the per-unit values (paired: xa[k], xb[k] are seed k in A and B).
void testRow(RunCompareRow& row, const std::vector<double>& xa, const std::vector<double>& xb, bool ratioScale)
{
    row.unitsA = static_cast<int>(xa.size());
    row.unitsB = static_cast<int>(xb.size());
    row.units = row.paired ? row.unitsA : row.unitsA + row.unitsB;
    row.meanA = mean(xa);
    row.meanB = mean(xb);
    row.difference = row.meanB - row.meanA;
    row.diffLow = row.diffHigh = row.difference;
    const bool finite = std::all_of(xa.begin(), xa.end(), [](double v) { return std::isfinite(v); })
                        && std::all_of(xb.begin(), xb.end(), [](double v) { return std::isfinite(v); });
    const bool positive = std::all_of(xa.begin(), xa.end(), [](double v) { return v > 0.0; })
                          && std::all_of(xb.begin(), xb.end(), [](double v) { return v > 0.0; });
    row.pMin = row.paired ? std::ldexp(2.0, -row.units)
                          : (xa.empty() || xb.empty() ? 1.0 : std::exp(stats::logSeparationTail(xa.size(), xb.size())));
    if (!finite) {
        row.status = RunRowStatus::Untestable;
        row.note = "a seed's value is not finite";
        return;
    }
    const bool identical = row.paired ? xa == xb
                                      : !xa.empty() && !xb.empty()
                                            && std::all_of(xa.begin(), xa.end(), [&](double v) { return v == xa.front(); })
                                            && std::all_of(xb.begin(), xb.end(), [&](double v) { return v == xa.front(); });
    if (ratioScale && positive) {
        row.hasLogRatio = true;
        std::vector<double> la, lb;
        for (double v : xa)
            la.push_back(std::log(v));
        for (double v : xb)
            lb.push_back(std::log(v));
        if (row.paired) {
            std::vector<double> d;
            for (std::size_t k = 0; k < la.size(); ++k)
                d.push_back(xa[k] == xb[k] ? 0.0 : lb[k] - la[k]);
            row.logRatio = mean(d);
            pairedInterval(d, row.level, row.logLow, row.logHigh);
        } else {
            row.logRatio = mean(lb) - mean(la);
            welchInterval(la, lb, row.level, row.logLow, row.logHigh);
        }
    }
    if (identical) {
        row.status = RunRowStatus::Identical;
        row.note = row.paired ? "every shared seed's value is the same in A and B" : "one constant value in A and B";
        row.logRatio = row.logLow = row.logHigh = 0.0;
        return;
    }
    if (row.paired) {
        std::vector<double> d;
        for (std::size_t k = 0; k < xa.size(); ++k)
            d.push_back(xb[k] - xa[k]);
        pairedInterval(d, row.level, row.diffLow, row.diffHigh);
        if (row.units < 2) {
            row.status = RunRowStatus::Untestable;
            row.note = std::to_string(row.units) + " shared seed: no seed-level test is possible";
            return;
        }
        row.test = "wilcoxon-seeds";
        row.p = stats::wilcoxonSignedRankExact(xb, xa).p;
    } else {
        welchInterval(xa, xb, row.level, row.diffLow, row.diffHigh);
        if (row.unitsA < 2 || row.unitsB < 2) {
            row.status = RunRowStatus::Untestable;
            row.note = "a run holds fewer than 2 seeds: no seed-level test is possible";
            return;
        }
        row.test = "mann-whitney-seeds";
        row.p = stats::mannWhitneyUExact(xa, xb).p;
    }
    row.status = RunRowStatus::Tested;
}

std::string schemesAndBudgets(const ResultSet& r)
{
    std::string s;
    for (const SchemeConfig& sc : r.schemes)
        s += (s.empty() ? "" : ", ") + sc.name;
    s += " at n = ";
    for (std::size_t i = 0; i < r.spec.budgets.size(); ++i)
        s += (i ? ", " : "") + std::to_string(r.spec.budgets[i]);
    if (r.spec.pointCount() > 1)
        s += " over " + std::to_string(r.spec.pointCount()) + " grid points";
    return s;
}

} // namespace

namespace {

/// The manifest fields that differ between the runs (program version, backend, imported data).
std::vector<SpecDifference> runDifferences(const RunDirectory& a, const RunDirectory& b)
{
    std::vector<SpecDifference> out;
    auto runField = [&](const char* name, const std::string& va, const std::string& vb) {
        if (va != vb)
            out.push_back(SpecDifference{std::string("run.") + name, io::dumpJson(nlohmann::json(va)),
                                         io::dumpJson(nlohmann::json(vb))});
    };
    runField("program_version", a.manifest.programVersion, b.manifest.programVersion);
    runField("backend", a.manifest.backend, b.manifest.backend);
    runField("data_hash", hex64(a.manifest.dataHash), hex64(b.manifest.dataHash));
    return out;
}

/// Grid points matched by their swept values, (A's point, B's point) with -1 where absent: A's
/// points in order, then B's unmatched ones. Two runs of one point each are that point.
std::vector<std::pair<int, int>> matchPoints(const ExperimentSpec& sa, const ExperimentSpec& sb)
{
    std::vector<std::pair<int, int>> points;
    if (sa.pointCount() == 1 && sb.pointCount() == 1) {
        points.emplace_back(0, 0);
        return points;
    }
    std::vector<bool> usedB(static_cast<std::size_t>(sb.pointCount()), false);
    for (int pa = 0; pa < sa.pointCount(); ++pa) {
        int match = -1;
        for (int pb = 0; pb < sb.pointCount() && match < 0; ++pb)
            if (!usedB[static_cast<std::size_t>(pb)] && sa.pointLabel(pa) == sb.pointLabel(pb))
                match = pb;
        if (match >= 0)
            usedB[static_cast<std::size_t>(match)] = true;
        points.emplace_back(pa, match);
    }
    for (int pb = 0; pb < sb.pointCount(); ++pb)
        if (!usedB[static_cast<std::size_t>(pb)])
            points.emplace_back(-1, pb);
    return points;
}

/// One configuration (grid point, scheme, budget) both runs hold: which seeds pair, and why not
/// when they do not.
struct Pairing {
    std::vector<const TrialResult*> a, b; ///< the trials compared (the shared seeds' when paired)
    std::string why;                      ///< why the rows are unpaired; empty when paired
};

Pairing pairSeeds(const std::vector<const TrialResult*>& cellA, const std::vector<const TrialResult*>& cellB,
                  const std::string& drawDiff, const std::string& label, RunCompareRow& base)
{
    // Seeds pair when the draw is the same and both runs hold them.
    const auto seedsA = bySeed(cellA), seedsB = bySeed(cellB);
    std::vector<std::uint64_t> shared;
    for (const auto& entry : seedsA)
        if (seedsB.count(entry.first))
            shared.push_back(entry.first);
    Pairing p;
    if (!drawDiff.empty())
        p.why = "the runs drew different data" + std::string(label.empty() ? "" : " at " + label) + " (" + drawDiff
                + " differ)";
    else if (shared.empty())
        p.why = "the runs share no seed";
    base.paired = p.why.empty();
    if (!base.paired) {
        base.note = "unpaired: " + p.why;
        p.a = cellA;
        p.b = cellB;
        return p;
    }
    if (shared.size() < seedsA.size() || shared.size() < seedsB.size())
        base.note = "paired on the " + std::to_string(shared.size()) + " shared seeds; "
                    + std::to_string(seedsA.size() - shared.size()) + " of A's and "
                    + std::to_string(seedsB.size() - shared.size()) + " of B's left out";
    for (std::uint64_t s : shared) {
        p.a.push_back(seedsA.at(s));
        p.b.push_back(seedsB.at(s));
    }
    return p;
}

/// The rows of one configuration: a row "only in A" or "only in B", or one tested row per metric.
/// The error is --paired's refusal of an unpaired configuration.
Status compareConfiguration(RunComparison& c, std::vector<std::string>& unpairedWhy, RunCompareRow base,
                            const std::vector<const TrialResult*>& cellA, const std::vector<const TrialResult*>& cellB,
                            const std::string& drawDiff, bool sameScheme, const RunCompareOptions& options)
{
    if (cellA.empty() || cellB.empty()) {
        base.status = cellB.empty() ? RunRowStatus::OnlyInA : RunRowStatus::OnlyInB;
        base.note = cellB.empty() ? "only in A" : "only in B";
        base.unitsA = static_cast<int>(cellA.size());
        base.unitsB = static_cast<int>(cellB.size());
        base.bitsA = meanBits(cellA); // 0 for the run without the configuration
        base.bitsB = meanBits(cellB);
        (cellB.empty() ? c.onlyA : c.onlyB) += 1;
        c.rows.push_back(base);
        return Ok{};
    }
    ++c.sharedConfigurations;
    const Pairing pairing = pairSeeds(cellA, cellB, drawDiff, base.pointLabel, base);
    if (!pairing.why.empty() && options.requirePaired)
        return Error{"--paired", base.scheme + " at n = " + std::to_string(base.budget) + ": " + pairing.why
                                     + ": no seed is the same unit in both runs; without --paired the rows "
                                       "use the unpaired test over the two groups of seeds"};
    if (!pairing.why.empty() && std::find(unpairedWhy.begin(), unpairedWhy.end(), pairing.why) == unpairedWhy.end())
        unpairedWhy.push_back(pairing.why);
    base.bitsA = meanBits(pairing.a);
    base.bitsB = meanBits(pairing.b);
    if (!sameScheme)
        base.note += std::string(base.note.empty() ? "" : "; ") + "the scheme's definition differs";
    const auto& metrics = runMetrics();
    for (std::size_t m = 0; m < metrics.size(); ++m) {
        RunCompareRow row = base;
        row.metric = metrics[m].name;
        std::vector<double> xa, xb;
        for (const TrialResult* t : pairing.a)
            xa.push_back(metricValue(m, *t));
        for (const TrialResult* t : pairing.b)
            xb.push_back(metricValue(m, *t));
        const std::string note = row.note;
        testRow(row, xa, xb, metrics[m].ratioScale);
        if (!note.empty() && row.note != note)
            row.note = row.note.empty() ? note : row.note + "; " + note;
        c.rows.push_back(row);
    }
    return Ok{};
}

} // namespace

Result<RunComparison> compareRuns(const RunDirectory& a, const RunDirectory& b, const RunCompareOptions& options)
{
    RunComparison c;
    c.dirA = a.dir;
    c.dirB = b.dir;
    c.specDiff = diffSpecs(a.results.spec, b.results.spec);
    c.runDiff = runDifferences(a, b);
    const ExperimentSpec& sa = a.results.spec;
    const ExperimentSpec& sb = b.results.spec;
    const TrialCells cellsA(a.results), cellsB(b.results);
    std::vector<std::string> unpairedWhy;
    for (const auto& [pa, pb] : matchPoints(sa, sb)) {
        const std::string label = pa >= 0 ? sa.pointLabel(pa) : sb.pointLabel(pb);
        // Schemes: A's order, then B's own; budgets ascending over both.
        std::vector<std::string> schemes;
        for (const SchemeConfig& s : a.results.schemes)
            schemes.push_back(s.name);
        for (const SchemeConfig& s : b.results.schemes)
            if (a.results.schemeIndex(s.name) < 0)
                schemes.push_back(s.name);
        std::set<int> budgetSet(sa.budgets.begin(), sa.budgets.end());
        budgetSet.insert(sb.budgets.begin(), sb.budgets.end());
        const std::string drawDiff = pa >= 0 && pb >= 0 ? drawDifference(a, pa, b, pb) : std::string();
        for (const std::string& scheme : schemes) {
            const int ia = a.results.schemeIndex(scheme), ib = b.results.schemeIndex(scheme);
            for (int budget : budgetSet) {
                static const std::vector<const TrialResult*> none;
                const auto& cellA = pa >= 0 && ia >= 0 ? cellsA.atBudget(pa, budget, ia) : none;
                const auto& cellB = pb >= 0 && ib >= 0 ? cellsB.atBudget(pb, budget, ib) : none;
                if (cellA.empty() && cellB.empty())
                    continue;
                RunCompareRow base;
                base.pointLabel = label;
                base.pointA = pa;
                base.pointB = pb;
                base.scheme = scheme;
                base.budget = budget;
                base.level = options.level;
                const bool sameScheme = ia < 0 || ib < 0
                                        || a.results.schemes[static_cast<std::size_t>(ia)]
                                               == b.results.schemes[static_cast<std::size_t>(ib)];
                if (auto ok = compareConfiguration(c, unpairedWhy, base, cellA, cellB, drawDiff, sameScheme, options); !ok)
                    return ok.error();
            }
        }
    }
    if (c.sharedConfigurations == 0)
        return Error{"", "the runs share no configuration (grid point, scheme, budget): A has "
                             + schemesAndBudgets(a.results) + "; B has " + schemesAndBudgets(b.results)};
    for (const std::string& why : unpairedWhy)
        c.pairingNote += (c.pairingNote.empty() ? "" : "; ") + why;
    // Holm over the tested rows of each metric.
    for (const RunMetric& metric : runMetrics())
        stats::holmAdjustRows(c.rows, [&](const RunCompareRow& r) {
            return r.metric == metric.name && r.status == RunRowStatus::Tested;
        });
    return c;
}

std::string specDiffCsv(const RunComparison& c)
{
    CsvWriter csv({"field", "a", "b"});
    for (const auto* list : {&c.specDiff, &c.runDiff})
        for (const SpecDifference& d : *list) {
            csv.add(d.path).add(d.a).add(d.b);
            csv.endRow();
        }
    return csv.text();
}

std::string runComparisonCsv(const RunComparison& c)
{
    CsvWriter csv({"point", "scheme", "budget", "metric", "status", "note", "unit", "paired", "units", "units_a",
                   "units_b", "bits_a", "bits_b", "mean_a", "mean_b", "difference", "diff_ci_low", "diff_ci_high",
                   "log_ratio", "log_ratio_ci_low", "log_ratio_ci_high", "level", "interval", "test", "p", "log10_p",
                   "p_holm", "log10_p_holm", "p_min"});
    const double toLog10 = 1.0 / std::numbers::ln10;
    for (const RunCompareRow& r : c.rows) {
        csv.add(r.pointLabel).add(r.scheme).add(r.budget).add(r.metric);
        csv.add(std::string(runRowStatusName(r.status))).add(r.note);
        const bool only = r.status == RunRowStatus::OnlyInA || r.status == RunRowStatus::OnlyInB;
        if (only) {
            csv.add(r.unit).add("").add("").add(r.unitsA).add(r.unitsB);
            csv.add(r.status == RunRowStatus::OnlyInA ? formatNumber(r.bitsA) : std::string());
            csv.add(r.status == RunRowStatus::OnlyInB ? formatNumber(r.bitsB) : std::string());
            for (int i = 0; i < 16; ++i)
                csv.add("");
            csv.endRow();
            continue;
        }
        csv.add(r.unit).add(r.paired ? "yes" : "no").add(r.units).add(r.unitsA).add(r.unitsB);
        csv.add(r.bitsA).add(r.bitsB).add(r.meanA).add(r.meanB).add(r.difference).add(r.diffLow).add(r.diffHigh);
        if (r.hasLogRatio)
            csv.add(r.logRatio).add(r.logLow).add(r.logHigh);
        else
            csv.add("").add("").add("");
        csv.add(r.level).add(r.paired ? "paired t over seeds" : "Welch t over seeds");
        if (r.status == RunRowStatus::Tested)
            csv.add(r.test).add(r.p.p).add(r.p.logP * toLog10).add(r.pHolm.p).add(r.pHolm.logP * toLog10);
        else
            csv.add("").add("").add("").add("").add("");
        csv.add(r.pMin);
        csv.endRow();
    }
    return csv.text();
}

std::string runComparisonText(const RunComparison& c)
{
    std::string out;
    char line[512];
    if (c.specDiff.empty() && c.runDiff.empty())
        out += "spec.json: no field differs\n";
    for (const auto* list : {&c.specDiff, &c.runDiff})
        for (const SpecDifference& d : *list) {
            auto clip = [](std::string s) { return s.size() > 60 ? s.substr(0, 57) + "..." : s; };
            std::snprintf(line, sizeof line, "  %-28s A: %-30s B: %s\n", d.path.c_str(),
                          clip(d.a.empty() ? "(absent)" : d.a).c_str(), clip(d.b.empty() ? "(absent)" : d.b).c_str());
            out += line;
        }
    std::snprintf(line, sizeof line, "%-28s %3s %7s %11s %11s %11s %23s %9s %9s %s\n", "mean KL (B vs A)", "n",
                  "seeds", "A", "B", "B - A", "95% interval", "p", "p_holm", "");
    out += line;
    for (const RunCompareRow& r : c.rows) {
        if (!(r.metric == "kl_mean" || r.status == RunRowStatus::OnlyInA || r.status == RunRowStatus::OnlyInB))
            continue;
        const std::string name = (r.pointLabel.empty() ? "" : "[" + r.pointLabel + "] ") + r.scheme;
        if (r.status == RunRowStatus::OnlyInA || r.status == RunRowStatus::OnlyInB) {
            std::snprintf(line, sizeof line, "%-28s %3d %7s %s\n", name.c_str(), r.budget, "-", r.note.c_str());
        } else {
            const std::string seeds = r.paired ? std::to_string(r.units) : std::to_string(r.unitsA) + "+" + std::to_string(r.unitsB);
            const bool tested = r.status == RunRowStatus::Tested;
            std::snprintf(line, sizeof line, "%-28s %3d %7s %11.4g %11.4g %11.4g [%10.4g,%10.4g] %9s %9s %s\n",
                          name.c_str(), r.budget, seeds.c_str(), r.meanA, r.meanB, r.difference, r.diffLow, r.diffHigh,
                          tested ? stats::formatPValue(r.p).c_str() : "-", tested ? stats::formatPValue(r.pHolm).c_str() : "-",
                          tested ? (r.paired ? "" : "(unpaired)") : std::string(runRowStatusName(r.status)).c_str());
        }
        out += line;
    }
    out += "The unit is the seed: paired (same data, same seeds) exact Wilcoxon signed-rank over the seeds on B - A;\n"
           "unpaired exact Mann-Whitney over the two groups of seeds. Intervals: Student's t (paired) or Welch.\n"
           "Every metric and the log ratios: run_comparison.csv.\n";
    return out;
}

} // namespace kvlens
