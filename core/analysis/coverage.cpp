// SPDX-License-Identifier: GPL-3.0-or-later
// Coverage of a grid by a result set, the shared-seed subset, and the exported spec's "partial" block.
#include "core/analysis/coverage.h"

#include "core/io/json_text.h"
#include "core/spec/grid.h"
#include "core/spec/spec_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace kvlens {

namespace {

/// Per cell (GridShape::cellIndex), the seed indices held; trials outside the grid are left out.
std::vector<std::set<int>> heldSeeds(const ResultSet& results, const GridShape& shape)
{
    std::vector<std::set<int>> held(static_cast<std::size_t>(shape.cellCount()));
    const auto& budgets = results.spec.budgets;
    for (const TrialResult& t : results.trials) {
        const auto b = std::find(budgets.begin(), budgets.end(), t.key.budget);
        if (b == budgets.end() || t.key.point < 0 || t.key.point >= shape.points || t.key.scheme < 0
            || t.key.scheme >= shape.schemes || t.key.seedIndex < 0 || t.key.seedIndex >= shape.seeds)
            continue;
        held[static_cast<std::size_t>(shape.cellIndex(t.key.point, b - budgets.begin(), t.key.scheme))].insert(
            t.key.seedIndex);
    }
    return held;
}

/// Per (point, budget index): the seeds every scheme holds.
std::vector<std::set<int>> sharedSeeds(const std::vector<std::set<int>>& held, const GridShape& shape)
{
    std::vector<std::set<int>> shared(static_cast<std::size_t>(shape.points * shape.budgets));
    for (long long p = 0; p < shape.points; ++p)
        for (long long b = 0; b < shape.budgets; ++b) {
            std::set<int> common = held[static_cast<std::size_t>(shape.cellIndex(p, b, 0))];
            for (long long s = 1; s < shape.schemes; ++s) {
                const std::set<int>& other = held[static_cast<std::size_t>(shape.cellIndex(p, b, s))];
                std::erase_if(common, [&](int seed) { return !other.count(seed); });
            }
            shared[static_cast<std::size_t>(p * shape.budgets + b)] = std::move(common);
        }
    return shared;
}

} // namespace

RunCoverage runCoverage(const ResultSet& results)
{
    RunCoverage c;
    const GridShape shape(results.spec);
    c.total = results.totalTrials > 0 ? results.totalTrials : shape.total();
    const std::vector<std::set<int>> held = heldSeeds(results, shape);
    for (long long p = 0; p < shape.points; ++p)
        for (long long b = 0; b < shape.budgets; ++b)
            for (long long s = 0; s < shape.schemes; ++s) {
                const std::set<int>& seeds = held[static_cast<std::size_t>(shape.cellIndex(p, b, s))];
                CoverageCell cell;
                cell.point = static_cast<int>(p);
                cell.budget = results.spec.budgets[static_cast<std::size_t>(b)];
                cell.scheme = static_cast<int>(s);
                cell.seedIndices.assign(seeds.begin(), seeds.end());
                c.held += static_cast<long long>(seeds.size());
                if (s > 0 && seeds != held[static_cast<std::size_t>(shape.cellIndex(p, b, 0))])
                    c.balanced = false;
                c.cells.push_back(std::move(cell));
            }
    return c;
}

ResultSet sharedSeedTrials(const ResultSet& results)
{
    const GridShape shape(results.spec);
    const std::vector<std::set<int>> shared = sharedSeeds(heldSeeds(results, shape), shape);
    const auto& budgets = results.spec.budgets;
    ResultSet out;
    out.spec = results.spec;
    out.schemes = results.schemes;
    out.totalTrials = results.totalTrials > 0 ? results.totalTrials : shape.total();
    out.cancelled = results.cancelled;
    out.elapsedMs = results.elapsedMs;
    out.backend = results.backend;
    out.regimeNote = results.regimeNote;
    out.dataHash = results.dataHash;
    out.pointDataHashes = results.pointDataHashes;
    out.pointScoredHashes = results.pointScoredHashes;
    for (const TrialResult& t : results.trials) {
        const auto b = std::find(budgets.begin(), budgets.end(), t.key.budget);
        if (b == budgets.end() || t.key.point < 0 || t.key.point >= shape.points)
            continue;
        if (!shared[static_cast<std::size_t>(t.key.point * shape.budgets + (b - budgets.begin()))].count(t.key.seedIndex))
            continue;
        out.trials.push_back(t);
    }
    // The count of cached trials cannot be split by trial (the set does not record which); keep it
    // only while nothing was left out.
    out.reusedTrials = out.trials.size() == results.trials.size() ? results.reusedTrials : 0;
    return out;
}

std::string partialRunNote(const RunCoverage& coverage)
{
    if (!coverage.partial())
        return {};
    return "partial run: " + std::to_string(coverage.held) + " of " + std::to_string(coverage.total) + " trials"
           + (coverage.balanced ? "; each scheme on the same seeds" : "; the schemes hold different seeds");
}

std::string exportedSpecJson(const ResultSet& results)
{
    const std::string spec = specToJson(results.spec);
    const RunCoverage coverage = runCoverage(results);
    if (!coverage.partial())
        return spec + "\n";
    auto parsed = io::parseJsonText(spec);
    if (!parsed) // specToJson writes what parseJsonText reads; never reached
        return spec + "\n";
    nlohmann::json j = std::move(parsed).value();
    nlohmann::json held = nlohmann::json::array();
    for (const CoverageCell& cell : coverage.cells) {
        nlohmann::json seeds = nlohmann::json::array();
        for (int index : cell.seedIndices)
            seeds.push_back(results.spec.seed(index));
        const std::string scheme = cell.scheme < static_cast<int>(results.schemes.size())
                                       ? results.schemes[static_cast<std::size_t>(cell.scheme)].name
                                       : results.spec.schemes[static_cast<std::size_t>(cell.scheme)].name;
        held.push_back({{"point", cell.point}, {"budget", cell.budget}, {"scheme", scheme}, {"seeds", std::move(seeds)}});
    }
    j["partial"] = {{"note", partialRunNote(coverage) + " (a cancelled run: the files hold only these trials; "
                                                        "\"held\" lists the seeds of every point, budget and scheme)"},
                    {"trials", coverage.held},
                    {"of", coverage.total},
                    {"balanced", coverage.balanced},
                    {"held", std::move(held)}};
    return io::dumpJson(j, 2) + "\n";
}

} // namespace kvlens
