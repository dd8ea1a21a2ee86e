// SPDX-License-Identifier: GPL-3.0-or-later
// Validation table: paired agreement of two implementations, KS tests of two RNGs.
#include "core/analysis/validation.h"

#include "core/io/csv.h"
#include "core/stats/kolmogorov_smirnov.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <tuple>

namespace kvlens::stats {

int ValidationReport::implementationDifferences() const
{
    return static_cast<int>(std::count_if(rows.begin(), rows.end(),
                                          [](const ValidationRow& r) { return r.verdict == "implementation difference"; }));
}

namespace {

struct Metric {
    const char* name;
    std::function<double(const TrialResult&)> value;
};

double meanOf(const std::vector<float>& v)
{
    double s = 0.0;
    for (float x : v)
        s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

const std::vector<Metric>& metrics()
{
    static const std::vector<Metric> list = {
        {"kl_mean", [](const TrialResult& t) { return meanOf(t.kl); }},
        {"recall", [](const TrialResult& t) { return meanOf(t.recall); }},
        {"snr_k", [](const TrialResult& t) { return t.sixD.snrK; }},
        {"phi_k", [](const TrialResult& t) { return t.sixD.phiK; }},
        {"snr_v", [](const TrialResult& t) { return t.sixD.snrV; }},
        {"phi_v", [](const TrialResult& t) { return t.sixD.phiV; }},
        {"snr_t", [](const TrialResult& t) { return t.sixD.snrT; }},
        {"phi_t", [](const TrialResult& t) { return t.sixD.phiT; }},
    };
    return list;
}

using Key = std::tuple<int, int, int>; // point, scheme, budget

std::map<Key, std::vector<const TrialResult*>> cells(const ResultSet& r)
{
    std::map<Key, std::vector<const TrialResult*>> out;
    for (const auto& t : r.trials)
        out[{t.key.point, t.key.scheme, t.key.budget}].push_back(&t);
    for (auto& [k, v] : out)
        std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->key.seedIndex < b->key.seedIndex; });
    return out;
}

std::string describe(const ResultSet& r)
{
    return r.backend + ", " + std::string(engineName(r.spec.engine));
}

} // namespace

ValidationReport validateRuns(const ResultSet& reference, const ResultSet* implementation, const ResultSet& seed,
                              double tolerance, const std::function<int(const TrialResult&)>& boundaryDecisions)
{
    std::map<const TrialResult*, int> boundary; // computed once per trial, only where needed
    auto onBoundary = [&](const TrialResult* t) {
        if (!boundaryDecisions)
            return false;
        auto it = boundary.find(t);
        if (it == boundary.end())
            it = boundary.emplace(t, boundaryDecisions(*t)).first;
        return it->second > 0;
    };
    ValidationReport report;
    report.tolerance = tolerance;
    report.referenceLabel = describe(reference);
    report.seedLabel = describe(seed);
    report.implementationRan = implementation != nullptr;
    if (implementation)
        report.implementationLabel = describe(*implementation);
    const auto ref = cells(reference), sd = cells(seed);
    const auto impl = implementation ? cells(*implementation) : decltype(ref){};
    for (const auto& [key, trials] : ref) {
        const auto seedIt = sd.find(key);
        const auto implIt = impl.find(key);
        for (const Metric& m : metrics()) {
            ValidationRow row;
            row.point = std::get<0>(key);
            row.scheme = std::get<1>(key);
            row.budget = std::get<2>(key);
            row.metric = m.name;
            row.trials = static_cast<int>(trials.size());
            std::vector<double> a;
            for (const auto* t : trials)
                a.push_back(m.value(*t));
            bool implDiffers = false;
            if (implIt != impl.end() && implIt->second.size() == trials.size()) {
                std::vector<double> b;
                for (std::size_t i = 0; i < trials.size(); ++i) {
                    const double x = a[i], y = m.value(*implIt->second[i]);
                    b.push_back(y);
                    const double rel = std::abs(x - y) / std::max({std::abs(x), std::abs(y), 1e-30});
                    row.implMaxRelDiff = std::max(row.implMaxRelDiff, rel);
                    if (rel > tolerance) {
                        if (onBoundary(trials[i]))
                            ++row.boundaryTrials;
                        else
                            implDiffers = true;
                    }
                }
                const KsResult ks = ksTwoSample(a, b);
                row.implKsD = ks.d;
                row.implKsP = ks.p;
            }
            bool seedDiffers = false;
            if (seedIt != sd.end()) {
                std::vector<double> c;
                for (const auto* t : seedIt->second)
                    c.push_back(m.value(*t));
                const KsResult ks = ksTwoSample(a, c);
                row.seedKsD = ks.d;
                row.seedKsP = ks.p;
                seedDiffers = ks.p.p < 0.01;
            }
            // Only the same-RNG pair can reveal an implementation difference; a significant
            // difference between RNGs is reported as such, not blamed on the code.
            row.verdict = implDiffers            ? "implementation difference"
                          : seedDiffers          ? "seed-dependent"
                          : row.boundaryTrials > 0 ? "agree (boundary decision)"
                                                   : "agree";
            report.rows.push_back(std::move(row));
        }
    }
    return report;
}

std::string validationCsv(const ResultSet& reference, const ValidationReport& report)
{
    CsvWriter csv({"point", "scheme", "budget", "metric", "trials", "impl_max_rel_diff", "impl_ks_d", "impl_ks_p",
                   "seed_ks_d", "seed_ks_p", "verdict", "boundary_trials"});
    for (const ValidationRow& r : report.rows) {
        csv.add(r.point).add(reference.schemes[static_cast<std::size_t>(r.scheme)].name).add(r.budget).add(r.metric)
            .add(r.trials);
        if (report.implementationRan)
            csv.add(r.implMaxRelDiff).add(r.implKsD).add(r.implKsP.p);
        else
            csv.add("").add("").add("");
        csv.add(r.seedKsD).add(r.seedKsP.p).add(r.verdict).add(r.boundaryTrials);
        csv.endRow();
    }
    return csv.text();
}

std::string validationText(const ResultSet& reference, const ValidationReport& report)
{
    std::string out = "validation: reference " + report.referenceLabel + "; implementation "
                      + (report.implementationRan ? report.implementationLabel : "not run (" + report.implementationNote + ")")
                      + "; seed " + report.seedLabel + "\n";
    char line[200];
    std::snprintf(line, sizeof line, "%-12s %2s %-8s %12s %9s %9s %9s  %s\n", "scheme", "n", "metric", "impl max rel",
                  "impl KS p", "seed KS D", "seed KS p", "verdict");
    out += line;
    for (const ValidationRow& r : report.rows) {
        std::snprintf(line, sizeof line, "%-12s %2d %-8s %12.3g %9.3g %9.3f %9.3g  %s\n",
                      reference.schemes[static_cast<std::size_t>(r.scheme)].name.c_str(), r.budget, r.metric.c_str(),
                      r.implMaxRelDiff, report.implementationRan ? r.implKsP.p : NAN, r.seedKsD, r.seedKsP.p,
                      r.verdict.c_str());
        out += line;
    }
    char summary[160];
    std::snprintf(summary, sizeof summary, "%d implementation difference(s) at relative tolerance %g\n",
                  report.implementationDifferences(), report.tolerance);
    return out + summary;
}

} // namespace kvlens::stats
