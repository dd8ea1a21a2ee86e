// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/analysis/run_overlay.h"

#include "core/analysis/run_compare.h"

#include <set>

namespace kvlens {

bool overlayMayDiffer(const std::string& specPath)
{
    static const char* const allowed[] = {"name", "schemes", "seeds.first", "comparisons", "advisor",
                                          "backend", "device", "rng", "memory_limit_mb"};
    for (const char* a : allowed) {
        const std::string prefix(a);
        if (specPath.compare(0, prefix.size(), prefix) == 0
            && (specPath.size() == prefix.size() || specPath[prefix.size()] == '.' || specPath[prefix.size()] == '['))
            return true;
    }
    return false;
}

Result<ResultSet> overlayRuns(const std::vector<OverlayRun>& runs)
{
    if (runs.size() < 2)
        return Error{"runs", "an overlay needs at least two runs, got " + std::to_string(runs.size())};
    std::set<std::string> names;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const std::string field = "runs[" + std::to_string(i) + "]";
        if (!runs[i].results)
            return Error{field, "has no results"};
        if (runs[i].name.empty() || !names.insert(runs[i].name).second)
            return Error{field + ".name", "must be non-empty and unique, got \"" + runs[i].name + "\""};
        if (runs[i].results->cancelled)
            return Error{field, "is a cancelled run; only finished runs overlay"};
    }
    const ResultSet& first = *runs.front().results;
    for (std::size_t i = 1; i < runs.size(); ++i) {
        // Imported tensors: the same spec may have read other bytes (the file replaced between runs).
        if (runs[i].results->dataHash != first.dataHash)
            return Error{"data", "differs between " + runs.front().name + " and " + runs[i].name
                                     + " (another data hash: the imported file changed between the runs); overlaid "
                                       "runs must share the data; compare them instead (Run → Compare)"};
        for (const SpecDifference& d : diffSpecs(first.spec, runs[i].results->spec))
            if (!overlayMayDiffer(d.path))
                return Error{d.path, "differs between " + runs.front().name + " (" + (d.a.empty() ? "none" : d.a)
                                         + ") and " + runs[i].name + " (" + (d.b.empty() ? "none" : d.b)
                                         + "): overlaid runs must share the grid and the data; compare them instead "
                                           "(Run → Compare)"};
    }
    ResultSet out;
    out.spec = first.spec;
    out.spec.schemes.clear();
    out.spec.comparisons.pairs.clear();
    std::string name = "overlay of";
    for (const OverlayRun& run : runs)
        name += " " + run.name;
    out.spec.name = name;
    out.backend = first.backend;
    out.regimeNote = first.regimeNote;
    out.dataHash = first.dataHash;
    out.pointDataHashes = first.pointDataHashes;
    for (const OverlayRun& run : runs) {
        const ResultSet& r = *run.results;
        const int offset = static_cast<int>(out.schemes.size());
        for (SchemeConfig s : r.schemes) {
            s.name = run.name + "/" + s.name;
            s.builtin = false; // a renamed builtin is written out in full
            out.schemes.push_back(s);
            out.spec.schemes.push_back(s);
        }
        for (TrialResult t : r.trials) {
            t.key.scheme += offset;
            out.trials.push_back(std::move(t));
        }
        out.totalTrials += r.totalTrials;
        out.reusedTrials += r.reusedTrials;
        out.elapsedMs += r.elapsedMs;
        if (r.backend != out.backend)
            out.backend += "; " + run.name + ": " + r.backend;
    }
    // The comparisons a reader of the overlay would ask for: each scheme of the first run against
    // the same scheme of every later run (empty would mean every pair of the merged list).
    for (const SchemeConfig& a : first.schemes)
        for (std::size_t i = 1; i < runs.size(); ++i)
            for (const SchemeConfig& b : runs[i].results->schemes)
                if (a.name == b.name)
                    out.spec.comparisons.pairs.emplace_back(runs.front().name + "/" + a.name,
                                                            runs[i].name + "/" + b.name);
    return out;
}

} // namespace kvlens
