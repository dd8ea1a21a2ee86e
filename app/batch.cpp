// SPDX-License-Identifier: GPL-3.0-or-later
// Batch mode: spec in, files out, nothing partial on failure; Ctrl-C cancels cleanly.
#include "app/batch.h"

#include "app/backend_factory.h"
#include "app/claim_figure_view.h"
#include "app/interrupt.h"
#include "app/progress_line.h"
#include "app/validation_run.h"
#include "core/experiment/runner.h"
#include "core/experiment/reuse.h"
#include "core/experiment/shard.h"
#include "core/spec/allocation.h"
#include "core/spec/spec_json.h"
#include "core/common/format.h"
#include "core/io/atomic_file.h"
#include "core/io/fault.h"
#include "core/analysis/result_tables.h"
#include "core/io/staged_dir.h"
#include "core/analysis/comparison.h"
#include "core/analysis/model_lens.h"
#include "core/analysis/proxies.h"
#include "core/analysis/teaching_pair.h"
#include "core/analysis/validation.h"
#include "widgets/figure_export.h"
#include "widgets/teaching_view.h"
#include "widgets/views.h"

#include <QDir>
#include <QWidget>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>

namespace kvlens::app {

namespace {

/// Writes `files` into `dir` atomically, one by one; stops at the first failure (named on `err`) or
/// at SIGINT/SIGTERM. Returns 0, kExitFailed or the interrupt's status.
int writeFiles(std::span<const std::pair<std::string, std::string>> files, const std::string& dir,
               const std::string& outDir, std::ostream& err)
{
    for (const auto& [name, contents] : files) {
        if (auto written = writeFileAtomic(dir + name, contents); !written) {
            err << "kvlens: " << written.error().text() << io::spaceNote(outDir) << "\n";
            return kExitFailed;
        }
        if (InterruptScope::interrupted())
            return InterruptScope::exitStatus();
    }
    return 0;
}

/// A shard's directory: the spec, its trials' CSVs, trials.bin, then manifest.json — written
/// last, so a directory with a manifest holds a complete shard.
int writeShardFiles(const ResultSet& results, const ExperimentSpec& spec, ShardId shard, const std::string& outDir,
                    const std::string& shownDir, std::ostream& out, std::ostream& err)
{
    const ShardManifest manifest = manifestFor(results, spec, shard);

    if (auto made = makeDirectories(outDir); !made) {
        err << "kvlens: " << made.error().text() << "\n";
        return 1;
    }
    // spec.json is the spec as run (loadable: the fallback label lives in the manifest).
    const std::pair<std::string, std::string> files[] = {
        {"spec.json", specToJson(spec) + "\n"},
        {"trials.csv", trialsCsv(results)},
        {"queries.csv", queriesCsv(results)},
        {"trials.bin", encodeTrials(manifest.specHash, results.trials, manifest.trials)},
        {"manifest.json", manifestToJson(manifest)},
    };
    if (const int status = writeFiles(files, outDir + "/", outDir, err); status != 0)
        return status;
    out << "KVLens " << spec.name << ": shard " << shard.index << "/" << shard.count << ", " << results.trials.size()
        << " of " << manifest.specTrials << " trials, backend " << results.backend << ", "
        << static_cast<long long>(results.elapsedMs) << " ms\n"
        << "wrote " << shownDir << "/{spec.json, trials.csv, queries.csv, trials.bin, manifest.json}; "
        << "put the shards together with: kvlens merge DIR_0 ... DIR_" << shard.count - 1 << " --out DIR\n";
    return 0;
}

} // namespace

bool samePath(const std::string& a, const std::string& b)
{
    std::error_code ea, eb;
    const auto pa = std::filesystem::weakly_canonical(a, ea), pb = std::filesystem::weakly_canonical(b, eb);
    return !ea && !eb && pa == pb;
}

std::string withoutTrailingSlashes(std::string dir)
{
    while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
    return dir;
}

Result<ExperimentSpec> loadBatchSpec(const BatchOptions& options)
{
    Result<ExperimentSpec> spec = options.specPath == "default" ? normalizeSpec(defaultSpec())
                                                                : loadSpecFile(options.specPath);
    if (!spec)
        return spec;
    if (auto applied = applyBackendOptions(*spec, options.backend, options.device); !applied) // as in the window
        return applied.error();
    auto checked = normalizeSpec(*spec);
    if (!checked)
        return Error{(options.specPath == "default" ? std::string() : options.specPath + ": ") + checked.error().field,
                     checked.error().message};
    return checked;
}

namespace {

/// A batch run's spec loaded, and its output directory claimed (staged, locked, writable) before
/// anything is computed.
struct PreparedRun {
    ExperimentSpec spec;
    io::StagedDirectory staged;
};

Result<PreparedRun> prepareRun(const BatchOptions& options)
{
    if (options.outDir.empty())
        return Error{"", "--batch needs --out DIR"};
    Result<ExperimentSpec> spec = loadBatchSpec(options);
    if (!spec)
        return spec.error();
    auto staged = io::StagedDirectory::begin(options.outDir);
    if (!staged)
        return staged.error();
    return PreparedRun{std::move(*spec), std::move(*staged)};
}

std::string refusalText(const BatchOptions& options, const Error& error)
{
    // A refusal found while running (NaN in a tensor, no spare calibration rows) reads like one found
    // in the spec: "SPEC: field: message".
    if (error.field == "run" || options.specPath == "default")
        return error.text();
    return options.specPath + ": " + error.text();
}

int exitStatusFor(const Error& error)
{
    return error.field == "run" ? kExitFailed : kExitRefused;
}

} // namespace

int runBatch(const BatchOptions& options, std::ostream& out, std::ostream& err)
{
    std::optional<ShardId> shard;
    if (!options.shard.empty()) {
        auto parsed = parseShard(options.shard);
        if (!parsed) {
            err << "kvlens: " << parsed.error().text() << "\n";
            return kExitRefused;
        }
        if (options.validate) {
            err << "kvlens: --shard does not apply to --validate\n";
            return kExitRefused;
        }
        shard = *parsed;
    }
    if (options.validate)
        return runValidation(options, out, err);
    auto prepared = prepareRun(options);
    if (!prepared) {
        err << "kvlens: " << prepared.error().text() << "\n";
        return kExitRefused;
    }
    const ExperimentSpec& spec = prepared->spec;
    io::StagedDirectory& staged = prepared->staged;
    BackendChoice backend = makeBackend(spec, options.threads);
    if (!backend.warning.empty() && spec.backend == BackendKind::OpenCl)
        err << "kvlens: OpenCL unavailable, running on the CPU backend: " << backend.warning << "\n";
    if (!backend.note.empty() && !options.quiet)
        err << "kvlens: " << backend.note << "\n";
    std::optional<TrialCache> cache;
    if (!options.reuseDir.empty()) {
        cache.emplace(0.0);
        const auto reused = loadRunIntoCache(options.reuseDir, *cache);
        if (!reused) {
            err << "kvlens: " << reused.error().text() << "\n";
            return kExitRefused;
        }
        cache->setReadOnly(true);
        if (!reused->note.empty())
            err << "kvlens: --reuse " << options.reuseDir << ": " << reused->note << "\n";
        if (reused->backend != backend.backend->name())
            err << "kvlens: --reuse " << options.reuseDir << ": its trials ran on " << reused->backend
                << ", this run on " << backend.backend->name() << ": none can be reused\n";
    }
    const InterruptScope interrupts;
    ProgressLine progress(err, options.quiet);
    Result<ResultSet> results = runExperiment(spec, *backend.backend, &progress,
                                              shard ? shardFilter(spec, *shard) : TrialFilter{},
                                              cache ? &*cache : nullptr);
    if (!results) {
        err << "kvlens: " << refusalText(options, results.error()) << "\n";
        return exitStatusFor(results.error());
    }
    if (!backend.warning.empty()) {
        // The exported spec says what really ran (issue: "cpu (fallback: <reason>)").
        results->backend = backend.label;
        results->spec.backend = BackendKind::Cpu;
        results->spec.fallback = backend.warning;
    }
    if (results->cancelled || InterruptScope::interrupted()) {
        err << "\nkvlens: " << InterruptScope::what() << " after " << results->trials.size() << " of "
            << results->totalTrials << " trials; nothing written\n";
        return InterruptScope::exitStatus();
    }

    std::ostringstream report;
    if (cache)
        report << "reused " << results->reusedTrials << " of " << results->trials.size() << " trials from "
               << options.reuseDir << "; computed " << static_cast<long long>(results->trials.size()) - results->reusedTrials
               << "\n";
    const int written = shard ? writeShardFiles(*results, spec, *shard, staged.path(), options.outDir, report, err)
                              : writeRunFiles(*results, staged.path(), options.figures, report, err, options.outDir,
                                              options.quiet, options.figure);
    return finishRun(staged, written, report.str(), out, err);
}

int finishRun(io::StagedDirectory& staged, int written, const std::string& report, std::ostream& out,
              std::ostream& err)
{
    if (written == 0 && InterruptScope::interrupted())
        written = InterruptScope::exitStatus();
    if (written != 0) {
        staged.abort();
        if (written == InterruptScope::exitStatus() && InterruptScope::interrupted())
            err << "\nkvlens: " << InterruptScope::what() << " while writing; nothing written, " << staged.target()
                << " is as it was\n";
        else
            err << "kvlens: nothing written; " << staged.target() << " is as it was\n";
        return written;
    }
    io::faultPoint("commit");
    if (written == 0 && InterruptScope::interrupted()) {
        staged.abort();
        err << "\nkvlens: " << InterruptScope::what() << " while writing; nothing written, " << staged.target()
            << " is as it was\n";
        return InterruptScope::exitStatus();
    }
    if (auto committed = staged.commit(); !committed) {
        err << "kvlens: " << committed.error().text() << staged.spaceNote() << "\n";
        return kExitFailed;
    }
    out << report;
    return 0;
}

namespace {

/// One target's advice and what its rerun measured (checks: the advice first).
struct TargetAdvice {
    double target = 0.0;
    BitAllocation advice;
    std::vector<AllocationCheck> checks;
};

/// The advisor's front as a figure: the predicted front (average bits against summed loss), each
/// target's predicted advice, and what each allocation measured when it was rerun, with 95%
/// intervals. One target: a series per rerun allocation, named as it ran; several: one series per
/// kind (the advice, the best uniform split, TQ-KV, KQV) with a point per target.
claims::Figure advisorFigure(const std::vector<BitAllocation>& front, const std::vector<TargetAdvice>& targets,
                             const AdvisorOptions& objective)
{
    claims::Figure fig;
    fig.id = "pareto_front";
    fig.title = "The K/V bit-allocation advisor: predicted front and measured allocations";
    fig.xLabel = "average bits per coordinate";
    const bool plain = objective.objective == AdvisorStatistic::Mean && objective.loss == AdvisorLoss::RelMseT;
    fig.yLabel = plain ? "summed output rel. error (layers)"
                       : "summed " + advisorObjectiveText(objective) + " (layers)";
    fig.logY = true;
    claims::Series line{"predicted front", {}, {}, {}, {}, true};
    for (const BitAllocation& a : front) {
        line.x.push_back(a.bits);
        line.y.push_back(a.loss);
    }
    fig.series.push_back(line);
    claims::Series predicted{"predicted advice", {}, {}, {}, {}, false};
    for (const TargetAdvice& t : targets) {
        predicted.x.push_back(t.advice.bits);
        predicted.y.push_back(t.advice.loss);
    }
    fig.series.push_back(predicted);
    // The series a check joins: its own name for one target; its kind for several.
    auto seriesName = [&](std::size_t index, const std::string& name) {
        if (targets.size() == 1)
            return name;
        if (index == 0)
            return std::string("advice");
        if (name.rfind("uniform ", 0) == 0)
            return std::string("best uniform split");
        const auto at = name.find(" n = ");
        return at == std::string::npos ? name : name.substr(0, at);
    };
    std::map<std::string, std::size_t> seriesOf;
    std::set<std::string> seen; // a plain scheme at one budget is the same rerun for every target
    for (const TargetAdvice& t : targets)
        for (std::size_t i = 0; i < t.checks.size(); ++i) {
            const AllocationCheck& c = t.checks[i];
            if (i > 0 && !seen.insert(c.name).second)
                continue;
            const std::string name = seriesName(i, c.name);
            if (!seriesOf.count(name)) {
                seriesOf[name] = fig.series.size();
                fig.series.push_back({name, {}, {}, {}, {}, false});
            }
            claims::Series& s = fig.series[seriesOf[name]];
            s.x.push_back(c.bits);
            s.y.push_back(c.measured);
            s.low.push_back(c.low);
            s.high.push_back(c.high);
        }
    // Points in ascending x: a graph keeps its data sorted by key, its error bars in the order given.
    for (claims::Series& s : fig.series) {
        if (s.line)
            continue;
        std::vector<std::size_t> order(s.x.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.x[a] < s.x[b]; });
        auto permuted = [&](const std::vector<double>& v) {
            std::vector<double> out;
            if (v.size() == order.size())
                for (const std::size_t k : order)
                    out.push_back(v[k]);
            return out;
        };
        s.x = permuted(s.x);
        s.y = permuted(s.y);
        s.low = permuted(s.low);
        s.high = permuted(s.high);
    }
    std::string which;
    for (std::size_t i = 0; i < targets.size(); ++i)
        which += (i ? (i + 1 == targets.size() ? " and " : ", ") : "") + formatNumber(targets[i].target);
    fig.caption = std::string(targets.size() == 1 ? "Target " : "Targets ") + which
                  + " bits per coordinate (K and V, overheads included). The front and the advice are predicted from "
                    "the K-only and V-only curves; the other points are measured, each allocation rerun as its own "
                    "experiment, with its 95% interval.";
    if (targets.size() > 1)
        fig.caption += " Each series has a point per target; the plain schemes run at the target's whole bits.";
    return fig;
}

/// `table` cut to its first kMaxTableLines lines, with a line saying how many more are in `file`.
std::string clippedTable(const std::string& table, const char* file)
{
    constexpr int kMaxTableLines = 60;
    std::size_t at = 0;
    for (int line = 0; line < kMaxTableLines && at != std::string::npos; ++line)
        at = table.find('\n', at == 0 && line == 0 ? 0 : at + 1);
    if (at == std::string::npos || at + 1 >= table.size())
        return table;
    const auto more = std::count(table.begin() + static_cast<std::ptrdiff_t>(at) + 1, table.end(), '\n');
    return table.substr(0, at + 1) + "... " + std::to_string(more) + " more lines in " + file + "\n";
}

/// Runs the advice as its own experiment beside uniform allocations, on the run's cells (CPU):
/// one scheme per distinct (k, v) of the advice, each layer scored on its own pair; the best
/// uniform split; TQ-KV and KQV at the integer budget. Empty (with `note`) when it cannot run.
/// The rerun reads the run's files again: they are first checked against the hashes of what the
/// run read, and the rerun's reads against those; a changed file is an Error (nothing is written:
/// the check would measure other data than every other table).
Result<std::vector<AllocationCheck>> checkAllocation(const ResultSet& results, const BitAllocation& advice,
                                                     const std::optional<BitAllocation>& uniform, int budget,
                                                     const AdvisorOptions& objective, Progress& progress,
                                                     std::string& note, const CancelToken& cancel)
{
    if (results.dataHash != 0 && static_cast<int>(results.pointDataHashes.size()) != results.spec.pointCount()) {
        note = "the run's manifests have no per-point data hashes (an older version's shards), so the files "
               "cannot be checked against what the run read";
        return std::vector<AllocationCheck>{};
    }
    auto expected = verifyPointData(results, cancel);
    if (!expected)
        return Error{expected.error().field, "the advice's rerun: " + expected.error().message};
    ExperimentSpec spec = results.spec;
    spec.name = results.spec.name + " (allocation check)";
    spec.backend = BackendKind::Cpu;
    spec.fallback.clear();
    spec.budgets = {budget};
    spec.advisor = AdvisorOptions{}; // the rerun advises nothing (its one budget may exceed the targets)
    spec.schemes.clear();
    std::map<std::pair<int, int>, int> pairScheme;
    std::map<int, int> layerScheme;
    auto custom = [&](int k, int v, const std::string& name) {
        spec.schemes.push_back(fixedWidthScheme(k, v, name));
        return static_cast<int>(spec.schemes.size()) - 1;
    };
    for (std::size_t l = 0; l < advice.layers.size(); ++l) {
        const std::pair<int, int> kv{advice.kBits[l], advice.vBits[l]};
        if (!pairScheme.count(kv))
            pairScheme[kv] = custom(kv.first, kv.second, "K" + std::to_string(kv.first) + "/V" + std::to_string(kv.second));
        layerScheme[advice.layers[l]] = pairScheme[kv];
    }
    int uniformScheme = -1;
    if (uniform)
        uniformScheme = custom(uniform->kBits.front(), uniform->vBits.front(),
                               "uniform K" + std::to_string(uniform->kBits.front()) + "/V"
                                   + std::to_string(uniform->vBits.front()));
    const int plain = static_cast<int>(spec.schemes.size());
    spec.schemes.push_back(*findScheme("TQ-KV"));
    spec.schemes.push_back(*findScheme("KQV"));
    auto normalized = normalizeSpec(spec);
    if (!normalized) {
        note = normalized.error().text();
        return std::vector<AllocationCheck>{};
    }
    CpuBackend cpu;
    auto run = runExperiment(*normalized, cpu, &progress);
    if (!run) {
        if (run.error().field == "regime.file")
            return Error{"regime.file", "the advice's rerun: " + run.error().message};
        note = run.error().text();
        return std::vector<AllocationCheck>{};
    }
    if (run->cancelled)
        throw Cancelled{};
    if (!expected->empty() && run->pointScoredHashes != *expected)
        return Error{"regime.file", "the advice's rerun read other data than the run (the file changed while it "
                                    "ran): nothing written; rerun on a file that stays put"};
    const std::vector<ModelCell> cells = modelCells(*run);
    auto only = [&](auto keep) {
        ResultSet r = *run;
        r.trials.clear();
        for (const TrialResult& t : run->trials)
            if (keep(t))
                r.trials.push_back(t);
        return r;
    };
    std::vector<AllocationCheck> checks;
    checks.push_back(measuredLoss(only([&](const TrialResult& t) {
                                      const auto it = layerScheme.find(cells[static_cast<std::size_t>(t.key.point)].layer);
                                      return it != layerScheme.end() && t.key.scheme == it->second;
                                  }),
                                  "advice", advice.loss, objective));
    if (uniformScheme >= 0)
        checks.push_back(measuredLoss(only([&](const TrialResult& t) { return t.key.scheme == uniformScheme; }),
                                      spec.schemes[static_cast<std::size_t>(uniformScheme)].name, uniform->loss,
                                      objective));
    for (int s = plain; s < plain + 2; ++s)
        checks.push_back(measuredLoss(only([&](const TrialResult& t) { return t.key.scheme == s; }),
                                      spec.schemes[static_cast<std::size_t>(s)].name + " n = " + std::to_string(budget),
                                      std::numeric_limits<double>::quiet_NaN(), objective));
    return checks;
}

} // namespace

namespace {

/// What a model run adds to its directory: the files, the report's lines, the advisor's figure.
struct ModelOutputs {
    std::vector<std::pair<std::string, std::string>> files;
    std::string text;
    std::optional<claims::Figure> advisor;
};

/// One advisor target: the advice, its files (allocation.json and its layers first for the first
/// target; each target's own, named by it, when there are several), and its rerun as its own
/// experiment. Returns 0, or the status to stop with (refused rerun, interrupt).
int adviseTarget(const ResultSet& results, const std::vector<LayerCurves>& curves, double target, std::size_t index,
                 bool several, std::uint64_t specHash, bool quiet, std::ostream& err, const CancelToken& cancel,
                 ModelOutputs& model, std::vector<TargetAdvice>& shown)
{
    const AdvisorOptions& objective = results.spec.advisor;
    model.text += advisorText(curves, target, objective);
    const auto advice = allocate(curves, target);
    if (!advice)
        return 0;
    const std::string tag = "_" + formatNumber(target);
    const AllocationFile file = allocationFile(*advice, target, specHash, std::string(advisorLossName(objective.loss)),
                                               std::string(advisorStatisticName(objective.objective)));
    const std::string json = allocationToJson(file), layersCsv = allocationLayersCsv(file);
    if (index == 0) {
        model.files.emplace_back("allocation.json", json);
        model.files.emplace_back("allocation_layers.csv", layersCsv);
    }
    if (several) {
        model.files.emplace_back("allocation" + tag + ".json", json);
        model.files.emplace_back("allocation_layers" + tag + ".csv", layersCsv);
    }
    const LlamaCppTypes llama = llamaCppTypes(file.entries);
    model.text += "llama.cpp: " + (llama.ctk.empty() ? llama.note : llama.args()) + "\n";
    std::string note;
    io::faultPoint("advisor"); // tests replace the dump here: the rerun must not read it as the run's
    ProgressLine progress(err, quiet,
                          several ? "checking the advice at " + formatNumber(target) + " bits:"
                                  : std::string("checking the advice:"));
    // The plain schemes run at the target's whole bits (3 for 3.5): none of them costs more than the
    // target before overheads.
    const int budget = std::clamp(static_cast<int>(std::floor(target)), SpecLimits::kMinBudget, SpecLimits::kMaxBudget);
    const auto checked = checkAllocation(results, *advice, bestUniformSplit(curves, target), budget, objective, progress,
                                         note, cancel);
    if (InterruptScope::interrupted())
        return InterruptScope::exitStatus();
    if (!checked) {
        err << "kvlens: " << checked.error().text() << "\n";
        return kExitRefused;
    }
    if (checked->empty()) {
        model.text += "the advice was not rerun: " + note + "\n";
        return 0;
    }
    if (index == 0)
        model.files.emplace_back("allocation_check.csv", allocationChecksCsv(*checked));
    if (several)
        model.files.emplace_back("allocation_check" + tag + ".csv", allocationChecksCsv(*checked));
    model.text += allocationChecksText(*checked, objective);
    shown.push_back({target, *advice, *checked});
    return 0;
}

/// A model run's map, and with K-only and V-only its sensitivity, front and advice (each target
/// checked by a rerun). Returns 0, or the status to stop with.
int modelOutputs(const ResultSet& results, std::uint64_t specHash, bool quiet, std::ostream& err,
                 const CancelToken& cancel, ModelOutputs& model)
{
    const auto map = modelMap(results);
    if (map.empty()) {
        if (!(results.spec.advisor == AdvisorOptions{}))
            model.text += "advisor: not run: the spec's \"advisor\" applies to a model run (regime \"model\") with the "
                          "schemes K-only and V-only\n";
        return 0;
    }
    model.files.emplace_back("model_map.csv", modelMapCsv(results, map));
    const auto sensitivity = kvSensitivity(results);
    if (sensitivity.empty()) {
        model.text += "advisor: no advice: add the schemes K-only and V-only to the spec (the advisor needs each "
                      "layer's K-only and V-only damage curves)\n";
        return 0;
    }
    model.files.emplace_back("kv_sensitivity.csv", kvSensitivityCsv(sensitivity));
    const AdvisorOptions& objective = results.spec.advisor;
    const auto curves = layerCurves(results, objective);
    if (!curves) {
        model.text += "advisor: " + curves.error().message + "\n";
        return 0;
    }
    if (curves->empty())
        return 0;
    const auto front = paretoFront(*curves);
    model.files.emplace_back("pareto.csv", paretoCsv(front));
    model.text = kvSensitivityText(sensitivity);
    if (!(objective == AdvisorOptions{}))
        model.text += "advisor: minimizing the summed " + advisorObjectiveText(objective) + " over layers\n";
    const std::vector<double> targets = objective.targets();
    std::vector<TargetAdvice> shown;
    for (std::size_t i = 0; i < targets.size(); ++i)
        if (const int status = adviseTarget(results, *curves, targets[i], i, targets.size() > 1, specHash, quiet, err,
                                            cancel, model, shown);
            status != 0)
            return status;
    if (!shown.empty())
        model.advisor = advisorFigure(front, shown, objective);
    return 0;
}

/// What the figures phase tells the report.
struct FigureNotes {
    int files = 0;
    std::string teaching; ///< which pair the Teaching figure draws, or why it is not drawn
    std::string skipped;  ///< the views with nothing to draw, named
};

/// Prepares the Teaching view for the run: its one-query chain for the run's first scheme pair on
/// the run's data law, every stage revealed. False (with the reason in `note`) when it cannot be drawn.
bool prepareTeaching(widgets::TeachingView& teaching, const ResultSet& results, std::string& note)
{
    const auto config = teachingConfigForRun(results.spec);
    if (!config) {
        note = "teaching figure not drawn: " + config.error().text() + "\n";
        return false;
    }
    teaching.setRunConfig(*config);
    teaching.setStage(widgets::TeachingView::StageCount - 1);
    if (!teaching.waitUntilDrawn(120000) || !teaching.result()) {
        note = "teaching figure not drawn: "
               + (teaching.error().isEmpty() ? std::string("no result in 120 s") : teaching.error().toStdString()) + "\n";
        return false;
    }
    note = "teaching figure: " + config->schemes[0] + " against " + config->schemes[1] + " at n = "
           + std::to_string(config->budget) + ", seed " + std::to_string(config->seed) + " (the run's first scheme pair)\n";
    return true;
}

/// Every view as PDF, SVG and PNG with its data and the spec in DIR/figures, and the advisor's
/// front. Needs a QApplication. Returns 0, kExitFailed or the interrupt's status.
int writeFigures(const ResultSet& results, const std::vector<stats::ComparisonRow>& comparisons,
                 const std::vector<stats::ProxyRow>& proxies, const std::optional<claims::Figure>& advisor,
                 const std::string& outDir, const widgets::ExportOptions& figureOptions, std::ostream& err,
                 const CancelToken& cancel, FigureNotes& notes)
{
    const std::string specJson = specToJson(results.spec) + "\n";
    widgets::ViewData data;
    data.figures = std::make_shared<const FigureData>(buildFigureData(results));
    data.comparisons = std::make_shared<const std::vector<stats::ComparisonRow>>(comparisons);
    data.proxies = std::make_shared<const std::vector<stats::ProxyRow>>(proxies);
    data.results = std::make_shared<const ResultSet>(results);
    if (results.spec.regime == "model") {
        data.modelMap = std::make_shared<const std::vector<MapValue>>(modelMap(results));
        data.sensitivity = std::make_shared<const std::vector<SensitivityRow>>(kvSensitivity(results));
    }
    QWidget host;
    const QString figuresDir = QDir(QString::fromStdString(outDir)).filePath(QStringLiteral("figures"));
    auto exported = [&](widgets::ResultView& view, const QString& stem) {
        const auto outcome = widgets::exportView(view, figuresDir, stem, figureOptions, QByteArray::fromStdString(specJson));
        if (!outcome.ok()) {
            err << "kvlens: " << outcome.error.toStdString() << io::spaceNote(outDir) << "\n";
            return false;
        }
        notes.files += static_cast<int>(outcome.written.size());
        for (const QString& why : outcome.skipped) // a view with nothing to draw is named, never silently absent
            notes.skipped += "no figure: " + why.toStdString() + "\n";
        return true;
    };
    for (widgets::ResultView* view : widgets::createViews(&host)) {
        cancel.check();
        if (auto* teaching = qobject_cast<widgets::TeachingView*>(view); teaching && !prepareTeaching(*teaching, results, notes.teaching))
            continue;
        view->resize(900, 650);
        view->setData(data);
        if (!exported(*view, view->viewId()))
            return kExitFailed;
    }
    if (advisor) {
        ClaimFigureView view(*advisor, &host);
        view.resize(900, 650);
        if (!exported(view, QStringLiteral("pareto_front")))
            return kExitFailed;
        if (InterruptScope::interrupted())
            return InterruptScope::exitStatus();
    }
    return 0;
}

/// The run's report on the terminal: the headline, the summary and comparison tables (clipped),
/// the proxies, the model's lines and what was written.
void printRunReport(const ResultSet& results, const std::vector<stats::ComparisonRow>& comparisons,
                    const std::vector<stats::ProxyRow>& proxies, const ModelOutputs& model, const FigureNotes& notes,
                    bool figures, const std::string& shown, std::ostream& out)
{
    out << "KVLens " << results.spec.name << ": regime " << results.spec.regime << ", d = " << results.spec.d
        << ", N = " << results.spec.tokens << ", Q = " << results.spec.queries << ", " << results.spec.seedCount
        << " seeds, backend " << results.backend << ", " << results.trials.size() << " trials in "
        << static_cast<long long>(results.elapsedMs) << " ms\n";
    if (!results.regimeNote.empty())
        out << results.regimeNote << "\n";
    // A whole model's map has thousands of rows: the terminal gets the first, the files every one.
    out << clippedTable(summaryText(results), "summary.csv") << "\n"
        << clippedTable(stats::comparisonsText(results, comparisons), "comparisons.csv") << "\n"
        << stats::proxiesText(proxies);
    out << model.text << notes.teaching << notes.skipped;
    out << "wrote " << shown
        << "/{spec.json, summary.csv, trials.csv, queries.csv, comparisons.csv, proxies.csv, trials.bin, manifest.json";
    for (const auto& file : model.files)
        out << ", " << file.first;
    out << "}";
    if (figures)
        out << " and " << notes.files << " files in " << shown << "/figures";
    out << "\n";
}

/// writeRunFiles's work, in phases: analyse, the tables, the model's files, the figures, the
/// report. The analyses poll `cancel` and may throw Cancelled or bad_alloc.
int writeRunFilesUnguarded(const ResultSet& results, const std::string& outDir, bool figures, std::ostream& out,
                           std::ostream& err, const std::string& shownDir, bool quiet,
                           const widgets::ExportOptions& figureOptions, const CancelToken& cancel)
{
    if (auto made = makeDirectories(outDir); !made) {
        err << "kvlens: " << made.error().text() << "\n";
        return 1;
    }
    const std::string dir = outDir + "/";
    io::faultPoint("analysis"); // tests interrupt the comparisons from here
    const std::vector<stats::ComparisonRow> comparisons = stats::compareSchemes(results, cancel);
    cancel.check();
    const std::vector<stats::ProxyRow> proxies = stats::proxyStudy(results);
    cancel.check();
    // The whole run is shard 0 of 1: trials.bin keeps every result for --reuse (and kvlens merge).
    const ShardManifest manifest = manifestFor(results, results.spec, ShardId{0, 1});
    {
        const std::pair<std::string, std::string> tables[] = {
            {"spec.json", specToJson(results.spec) + "\n"},
            {"summary.csv", summaryCsv(results)},
            {"trials.csv", trialsCsv(results)},
            {"queries.csv", queriesCsv(results)},
            {"comparisons.csv", stats::comparisonsCsv(results, comparisons)},
            {"proxies.csv", stats::proxiesCsv(results, proxies)},
            {"trials.bin", encodeTrials(manifest.specHash, results.trials, manifest.trials)},
            {"manifest.json", manifestToJson(manifest)},
        };
        if (const int status = writeFiles(tables, dir, outDir, err); status != 0)
            return status;
    } // the tables' text is freed before the advisor's rerun and the figures

    ModelOutputs model;
    if (const int status = modelOutputs(results, manifest.specHash, quiet, err, cancel, model); status != 0)
        return status;
    if (const int status = writeFiles(model.files, dir, outDir, err); status != 0)
        return status;
    io::faultPoint("writing");
    FigureNotes notes;
    if (figures)
        if (const int status = writeFigures(results, comparisons, proxies, model.advisor, outDir, figureOptions, err,
                                            cancel, notes);
            status != 0)
            return status;
    printRunReport(results, comparisons, proxies, model, notes, figures, shownDir.empty() ? outDir : shownDir, out);
    return 0;
}

} // namespace

int writeRunFiles(const ResultSet& results, const std::string& outDir, bool figures, std::ostream& out,
                  std::ostream& err, const std::string& shownDir, bool quiet, const widgets::ExportOptions& figureOptions)
{
    // SIGINT/SIGTERM reach the statistics and the advisor too, not only the trials: a table over
    // 10^5 seeds must stop within a second. Out of memory in an analysis is one line, not abort().
    const CancelToken cancel([] { return InterruptScope::interrupted(); });
    try {
        return writeRunFilesUnguarded(results, outDir, figures, out, err, shownDir, quiet, figureOptions, cancel);
    } catch (const Cancelled&) {
        return InterruptScope::exitStatus();
    } catch (const std::bad_alloc&) {
        err << "kvlens: out of memory while analysing the results (comparisons, advisor or figures)\n";
        return kExitFailed;
    }
}

} // namespace kvlens::app

namespace kvlens::app {

int runValidation(const BatchOptions& options, std::ostream& out, std::ostream& err)
{
    BatchOptions plain = options; // the validation runs the spec on every backend itself
    plain.backend.clear();
    plain.device.clear();
    auto prepared = prepareRun(plain);
    if (!prepared) {
        err << "kvlens: " << prepared.error().text() << "\n";
        return kExitRefused;
    }
    const ExperimentSpec& spec = prepared->spec;
    io::StagedDirectory& staged = prepared->staged;
    const InterruptScope interrupts;
    BackendPool pool;
    std::optional<ProgressLine> line;
    ValidationRun run = runValidationSet(spec, options.device, pool, options.threads,
                                         [&](int, const std::string& label) -> Progress* {
                                             if (!options.quiet)
                                                 err << "kvlens: validation run: " << label << "\n";
                                             line.emplace(err, options.quiet);
                                             return &*line;
                                         });
    if (run.failure) {
        err << "kvlens: " << refusalText(options, *run.failure) << "\n";
        return exitStatusFor(*run.failure);
    }
    if (run.cancelled || InterruptScope::interrupted()) {
        err << "\nkvlens: " << InterruptScope::what() << "; nothing written\n";
        return InterruptScope::exitStatus();
    }
    const stats::ValidationReport& report = run.report;
    const ResultSet& ref = *run.reference;
    const bool compared = report.implementationRan;
    if (!compared)
        err << "kvlens: --validate compared nothing: no OpenCL implementation to compare with the CPU ("
            << report.implementationNote << "); only the RNG check ran (exit status " << kExitNotCompared << ")\n";
    const std::pair<std::string, std::string> files[] = {{"spec.json", specToJson(spec) + "\n"},
                                                         {"validation.csv", stats::validationCsv(ref, report)}};
    const int written = writeFiles(files, staged.path() + "/", staged.path(), err);
    const std::string text =
        stats::validationText(ref, report) + "wrote " + options.outDir + "/{spec.json, validation.csv}\n";
    if (const int status = finishRun(staged, written, text, out, err); status != 0)
        return status;
    if (!compared)
        return kExitNotCompared;
    return report.implementationDifferences() > 0 ? kExitDifferent : kExitOk;
}

} // namespace kvlens::app
