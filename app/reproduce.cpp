// SPDX-License-Identifier: GPL-3.0-or-later
// Reproduction report: run the presets, evaluate the claims in core, draw their figures, write one HTML page.
#include "app/reproduce.h"

#include "app/backend_factory.h"
#include "app/batch.h"
#include "app/interrupt.h"
#include "app/claim_figure_view.h"
#include "app/progress_line.h"
#include "app/resources.h"
#include "core/io/staged_dir.h"
#include "core/analysis/eval_analysis.h"
#include "core/analysis/model_lens.h"
#include "core/eval/eval_files.h"
#include "core/eval/evaluator.h"
#include "core/report/claims.h"
#include "core/report/claims_output.h"
#include "core/spec/eval_spec.h"
#include "core/report/html_report.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/io/atomic_file.h"
#include "core/io/csv.h"
#include "widgets/eval_views.h"
#include "widgets/figure_export.h"
#include "widgets/plot_widget.h"
#include "widgets/result_view.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QSysInfo>
#include <QThread>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>
#include <sstream>

namespace kvlens::app {

const std::vector<ReproducePreset>& reproducePresets()
{
    static const std::vector<ReproducePreset> presets = {
        {"paper_a.json", "A1 (QJL variance), A2 (KQV vs QKQV), C2 (proxies)"},
        {"repro_score_scale.json", "A3 (KL ratio vs score scale), A4 (recall follows KL), AB1-2 (value path)"},
        {"heavy_tail_sweep.json", "A5 (heavy tails), A7 (crossover across tail weights)"},
        {"low_rank_d1024.json", "A6 (low-rank pathology, Haar subspace), A7"},
        {"low_rank_axis_d1024.json", "A6 (the subspace on the first coordinate axes)"},
        {"low_rank_random_axes_d1024.json", "A6 (the subspace on random coordinate axes)"},
        {"repro_heavy_tail_d1024.json", "A6 (the heavy-tailed partner)"},
        {"budget_crossover.json", "A7 (budget crossover)"},
        {"repro_vpath_heavy_tail.json", "AB1-2 (value path, heavy tail)"},
        {"repro_vpath_low_rank.json", "AB1-2 (value path, low rank), A7"},
        {"paper_b_gaussian.json", "B1 (SQ vs TQ), B2 (water-filling), C2"},
        {"paper_b_heavy_tail.json", "B1, B2, C2"},
        {"paper_b_low_rank.json", "B1, B2, C2"},
        {"paper_c_headq.json", "C1 (HeadQ and controls), C2"},
        {"repro_tiny_lm.json", "M1 (K-V asymmetry per layer), M2 (KQV < QKQV per layer), on the shipped tiny model"},
    };
    return presets;
}

namespace {


/// The sizes a preset runs at: as shipped, the papers' (--full), or shrunk (tests).
ExperimentSpec sized(ExperimentSpec spec, const ReproduceOptions& o)
{
    if (spec.regime == "model") {
        // A real model's dump: its head_dim, positions and heads are what they are; only seeds shrink.
        if (o.scale < 1.0) {
            spec.seedCount = std::max(3, static_cast<int>(std::lround(spec.seedCount * o.scale)));
            spec.comparisons.bootstrap = 200;
            spec.comparisons.permutations = 99;
        }
        return spec;
    }
    if (o.full) {
        spec.d = std::max(spec.d, 1024);
        spec.seedCount *= 2;
    }
    if (o.scale < 1.0) {
        auto shrink = [&](int v, int floor) {
            return std::max(floor, static_cast<int>(std::lround(v * o.scale)));
        };
        spec.seedCount = shrink(spec.seedCount, 3); // three: C2 ranks the trials of a cell
        spec.tokens = shrink(spec.tokens, 128);
        spec.queries = shrink(spec.queries, 16);
        spec.d = std::min(spec.d, 256);
        spec.comparisons.bootstrap = 200;
        spec.comparisons.permutations = 99;
    }
    return spec;
}

std::string stem(const std::string& file)
{
    return file.substr(0, file.rfind('.'));
}


struct PresetRun {
    ReproducePreset preset;
    ResultSet results;
    double seconds = 0.0;
};

/// The end-to-end evaluations of the report and what was derived from them.
struct OutputRuns {
    std::optional<eval::EvalResult> claimsRun, attributionRun, adviceRun;
    std::string allocationJson, outputVsAttentionCsv, proxiesCsv;
    std::vector<eval::OutputProxyCell> proxies; ///< paper C's proxies on the claims run
    claims::OutputRuns claims; ///< pointers into the runs above
};

/// One evaluation with a progress line (the report's clock); nullopt with status set on failure.
std::optional<eval::EvalResult> evaluate(const EvalSpec& spec, const char* what, bool quiet,
                                         std::chrono::steady_clock::time_point start, int& status, std::ostream& err)
{
    eval::EvalCallbacks callbacks;
    callbacks.cancelled = [] { return InterruptScope::interrupted(); };
    auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    callbacks.progress = [&](double done, double total, const std::string& stage) {
        if (quiet)
            return;
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::milliseconds(200) && done < total)
            return;
        last = now;
        const double elapsed = std::chrono::duration<double>(now - start).count();
        char line[200];
        std::snprintf(line, sizeof line, "\rreproduce [model output] %s: %3.0f%%  %.0f s  %-60.60s", what,
                      total > 0 ? 100.0 * done / total : 0.0, elapsed, stage.c_str());
        err << line << std::flush;
    };
    auto result = eval::runEval(spec, callbacks);
    if (!quiet)
        err << "\n";
    if (!result) {
        err << "kvlens: " << what << ": " << result.error().text() << "\n";
        status = 1;
        return std::nullopt;
    }
    if (result->cancelled || InterruptScope::interrupted()) {
        err << "kvlens: " << InterruptScope::what() << " during " << what << "; nothing written\n";
        status = InterruptScope::exitStatus();
        return std::nullopt;
    }
    return std::move(result).value();
}

/// Runs the evaluations of the end-to-end claims on the shipped model: the claims' configurations,
/// TQ-KV's per-layer and per-head attribution, and the advice (from the attribution's curves, at
/// 3 bits) against uniform allocations. Skipped (saying so) without the shipped model.
int runOutputClaims(const ReproduceOptions& options, const ResultSet* map, int resamples,
                    std::chrono::steady_clock::time_point start, OutputRuns& out, std::ostream& err)
{
    const std::string model = shippedModelDirectory(), text = model + "/heldout.txt";
    if (!QFile::exists(QString::fromStdString(model + "/config.json"))) {
        err << "kvlens: " << model << " is missing; the end-to-end claims (E1-E7) are skipped\n";
        return 0;
    }
    auto shrink = [&](EvalSpec s) {
        if (options.scale < 1.0) { // tests: fewer, shorter chunks
            s.ctx = 256;
            s.chunks = 4;
        }
        return s;
    };
    int status = 0;
    out.claimsRun = evaluate(shrink(claims::outputClaimsSpec(model, text)), "claims", options.quiet, start, status, err);
    if (status != 0)
        return status;
    out.attributionRun = evaluate(shrink(claims::outputAttributionSpec(model, text)), "attribution", options.quiet, start,
                                  status, err);
    if (status != 0)
        return status;
    out.claims.claims = &*out.claimsRun;
    out.proxies = eval::outputProxyStudy(*out.claimsRun, out.claims.seed + 90, resamples);
    out.proxiesCsv = eval::outputProxiesCsv(out.proxies);
    out.claims.proxies = &out.proxies;
    out.claims.attribution = &*out.attributionRun;
    out.claims.map = map;
    out.claims.resamples = resamples;
    out.claims.targetBits = 3.0;
    if (auto curves = eval::endToEndCurves(*out.attributionRun, "TQ-KV"); curves) {
        out.claims.allocation = allocate(*curves, out.claims.targetBits);
        out.claims.uniform = bestUniformSplit(*curves, out.claims.targetBits);
        if (out.claims.allocation) {
            out.allocationJson = allocationJson(*out.claims.allocation, out.claims.targetBits, 0, "kld_end_to_end");
            out.adviceRun = evaluate(shrink(claims::adviceCheckSpec(model, text, *out.claims.allocation, out.claims.uniform)),
                                     "advice", options.quiet, start, status, err);
            if (status != 0)
                return status;
            out.claims.advice = &*out.adviceRun;
        }
    } else {
        err << "kvlens: " << curves.error().text() << "\n";
    }
    if (map)
        out.outputVsAttentionCsv = eval::outputVsAttentionCsv(
            eval::outputVsAttention(*map, *out.attributionRun, "TQ-KV", out.claims.seed + 80, resamples));
    return 0;
}

/// DIR/model_output/{claims,attribution,advice}/ as kvlens eval writes them (figures/ with
/// options.figures), allocation.json, output_vs_attention.csv and output_proxies.csv.
int writeOutputRuns(const OutputRuns& out, const std::string& dir, const ReproduceOptions& options, std::ostream& err)
{
    const std::string base = dir + "/model_output";
    for (const auto& [name, run] : {std::pair<const char*, const std::optional<eval::EvalResult>*>{"claims", &out.claimsRun},
                                    {"attribution", &out.attributionRun},
                                    {"advice", &out.adviceRun}}) {
        if (!*run)
            continue;
        const std::string sub = base + "/" + name;
        if (auto made = makeDirectories(sub); !made) {
            err << "kvlens: " << made.error().text() << "\n";
            return 1;
        }
        for (const auto& [file, text] :
             {std::pair<std::string, std::string>{"spec.json", evalSpecToJson((*run)->spec)},
              {"eval_summary.csv", eval::summaryCsv(**run)},
              {"eval_layers.csv", eval::layersCsv(**run)},
              {"report.txt", eval::reportText(**run)}})
            if (auto ok = writeFileAtomic(sub + "/" + file, text); !ok) {
                err << "kvlens: " << ok.error().text() << "\n";
                return 1;
            }
        if (options.figures) {
            const auto outcome = widgets::exportEvalFigures(**run, QString::fromStdString(sub + "/figures"), options.figure,
                                                            QByteArray::fromStdString(evalSpecToJson((*run)->spec)));
            if (!outcome.ok()) {
                err << "kvlens: " << outcome.error.toStdString() << io::spaceNote(sub) << "\n";
                return 1;
            }
        }
    }
    for (const auto& [file, text] : {std::pair<std::string, std::string>{"allocation.json", out.allocationJson},
                                     {"output_vs_attention.csv", out.outputVsAttentionCsv},
                                     {"output_proxies.csv", out.proxiesCsv}})
        if (!text.empty())
            if (auto ok = writeFileAtomic(base + "/" + file, text); !ok) {
                err << "kvlens: " << ok.error().text() << "\n";
                return 1;
            }
    return 0;
}

} // namespace

namespace {

/// The report's presets, each as shipped or resized (sized), run one after the other with a
/// progress line; a preset whose data is missing is skipped with a line on `err`. Returns 0, or
/// the status to stop with (1 on a failure, 130/143 when interrupted).
int runPresets(const ReproduceOptions& options, std::chrono::steady_clock::time_point start,
               std::vector<PresetRun>& runs, std::ostream& err)
{
    const auto& presets = reproducePresets();
    for (std::size_t i = 0; i < presets.size(); ++i) {
        const ReproducePreset& preset = presets[i];
        QFile file(QStringLiteral(":/presets/") + QString::fromStdString(preset.file));
        if (!file.open(QIODevice::ReadOnly)) {
            err << "kvlens: the built-in preset " << preset.file << " is missing\n";
            return 1;
        }
        // The model presets read their dump from the shipped examples; without it their claims are skipped.
        const bool model = preset.file == "repro_tiny_lm.json";
        const std::string examples = presetDataDirectory();
        if (model && !QFile::exists(QString::fromStdString(examples + "/tiny_lm_kv.safetensors"))) {
            err << "kvlens: " << examples << "/tiny_lm_kv.safetensors is missing; " << preset.role << ": skipped\n";
            continue;
        }
        Result<ExperimentSpec> spec = specFromJson(file.readAll().toStdString(), model ? examples : std::string());
        if (spec)
            spec = normalizeSpec(sized(*spec, options));
        if (!spec) {
            err << "kvlens: preset " << preset.file << ": " << spec.error().text() << "\n";
            return 1;
        }
        BackendChoice backend = makeBackend(*spec, options.threads);
        char prefix[160];
        std::snprintf(prefix, sizeof prefix, "reproduce [%zu/%zu] %s:", i + 1, presets.size(), stem(preset.file).c_str());
        ProgressLine progress(err, options.quiet, prefix, start);
        const auto t0 = std::chrono::steady_clock::now();
        Result<ResultSet> results = runExperiment(*spec, *backend.backend, &progress);
        if (!results) {
            err << "kvlens: " << preset.file << ": " << results.error().text() << "\n";
            return 1;
        }
        if (results->cancelled || InterruptScope::interrupted()) {
            err << "\nkvlens: " << InterruptScope::what() << " during " << preset.file << "; nothing written\n";
            return InterruptScope::exitStatus();
        }
        results->backend = backend.label;
        runs.push_back({preset, std::move(*results), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    }
    return 0;
}

} // namespace

namespace {
int writeReport(const ReproduceOptions& options, const std::vector<PresetRun>& runs,
                const std::vector<claims::Claim>& claimList, const std::string& dir,
                std::chrono::steady_clock::time_point start, std::ostream& err);
std::string reportLines(const std::vector<claims::Claim>& claimList, const std::string& dir,
                        std::chrono::steady_clock::time_point start);
} // namespace

int runReproduce(const ReproduceOptions& options, std::ostream& out, std::ostream& err)
{
    if (options.outDir.empty()) {
        err << "kvlens: --reproduce needs --out DIR\n";
        return 2;
    }
    if (!(options.scale > 0.0 && options.scale <= 1.0)) {
        err << "kvlens: --reproduce-scale must be in (0, 1]\n";
        return 2;
    }
    const auto start = std::chrono::steady_clock::now();
    // Locked and checked for writability before an hour of computing; written whole at the end.
    auto staged = io::StagedDirectory::begin(options.outDir);
    if (!staged) {
        err << "kvlens: " << staged.error().text() << "\n";
        return kExitRefused;
    }
    const InterruptScope interrupts;

    // 1. Every preset, as shipped or resized; nothing is written before all of them ran.
    std::vector<PresetRun> runs;
    if (const int status = runPresets(options, start, runs, err); status != 0)
        return status;
    auto find = [&](const char* file) -> const ResultSet* {
        for (const PresetRun& r : runs)
            if (r.preset.file == file)
                return &r.results;
        return nullptr;
    };

    // 2. The claims, from the numbers.
    if (!options.quiet)
        err << "kvlens: evaluating the claims\n";
    claims::Runs input;
    input.paperA = find("paper_a.json");
    input.scoreScale = find("repro_score_scale.json");
    input.heavyTailSweep = find("heavy_tail_sweep.json");
    input.lowRank1024 = find("low_rank_d1024.json");
    input.heavyTail1024 = find("repro_heavy_tail_d1024.json");
    input.lowRankAxis1024 = find("low_rank_axis_d1024.json");
    input.lowRankRandomAxes1024 = find("low_rank_random_axes_d1024.json");
    input.crossover = find("budget_crossover.json");
    input.vpathHeavyTail = find("repro_vpath_heavy_tail.json");
    input.vpathLowRank = find("repro_vpath_low_rank.json");
    input.paperBGaussian = find("paper_b_gaussian.json");
    input.paperBHeavyTail = find("paper_b_heavy_tail.json");
    input.paperBLowRank = find("paper_b_low_rank.json");
    input.paperC = find("paper_c_headq.json");
    input.tinyModel = find("repro_tiny_lm.json");
    input.resamples = options.scale < 1.0 ? 100 : 400;
    Result<claims::MarginalHistogram> lowMarginal = claims::rotatedKeyMarginal(input.lowRank1024->spec);
    Result<claims::MarginalHistogram> heavyMarginal = claims::rotatedKeyMarginal(input.heavyTail1024->spec);
    if (lowMarginal && heavyMarginal) {
        input.lowRankMarginal = &*lowMarginal;
        input.heavyTailMarginal = &*heavyMarginal;
    }
    std::vector<claims::Claim> claimList = claims::evaluateClaims(input);

    // 3. The claims end to end, on the shipped model's output (kvlens eval).
    OutputRuns output;
    if (const int status = runOutputClaims(options, input.tinyModel, input.resamples, start, output, err); status != 0)
        return status;
    for (claims::Claim& c : claims::outputClaims(output.claims))
        claimList.push_back(std::move(c));
    if (InterruptScope::interrupted()) {
        err << "kvlens: " << InterruptScope::what() << "; nothing written\n";
        return InterruptScope::exitStatus();
    }

    // 4. Files: each preset's run as --batch writes it, the evaluations, then the claim figures, tables and the page.
    int written = writeReport(options, runs, claimList, staged->path(), start, err);
    if (written == 0)
        written = writeOutputRuns(output, staged->path(), options, err);
    return finishRun(*staged, written, reportLines(claimList, options.outDir, start), out, err);
}

namespace {

int writeReport(const ReproduceOptions& options, const std::vector<PresetRun>& runs,
                const std::vector<claims::Claim>& claimList, const std::string& dir,
                std::chrono::steady_clock::time_point start, std::ostream& err)
{
    if (auto made = makeDirectories(dir + "/figures"); !made) {
        err << "kvlens: " << made.error().text() << "\n";
        return 1;
    }
    for (std::size_t i = 0; i < runs.size(); ++i) {
        if (!options.quiet)
            err << "kvlens: writing [" << i + 1 << "/" << runs.size() << "] presets/" << stem(runs[i].preset.file) << "\n";
        std::ostringstream tables;
        const std::string presetDir = dir + "/presets/" + stem(runs[i].preset.file);
        if (const int status = writeRunFiles(runs[i].results, presetDir, options.figures, tables, err, {}, options.quiet,
                                              options.figure);
            status != 0)
            return status;
        if (auto written = writeFileAtomic(presetDir + "/tables.txt", tables.str()); !written) {
            err << "kvlens: " << written.error().text() << "\n";
            return 1;
        }
        if (InterruptScope::interrupted())
            return InterruptScope::exitStatus();
    }

    QWidget host;
    const QString figuresDir = QDir(QString::fromStdString(dir)).filePath(QStringLiteral("figures"));
    std::map<std::string, std::string> svgData; // figure id -> base64 SVG
    widgets::ExportOptions exportOptions = options.figure;
    exportOptions.widthInches = options.widthGiven ? options.figure.widthInches : 7.0;
    exportOptions.aspect = 0.55;
    exportOptions.png = false;
    for (const claims::Claim& claim : claimList) {
        std::string specJson = "[\n";
        for (const std::string& name : claim.runs)
            for (const PresetRun& r : runs)
                if (r.results.spec.name == name)
                    specJson += (specJson.size() > 2 ? ",\n" : "") + specToJson(r.results.spec);
        specJson += "\n]\n";
        for (const claims::Figure& figure : claim.figures) {
            ClaimFigureView view(figure, &host);
            view.resize(1000, 560);
            const auto outcome = widgets::exportView(view, figuresDir, QString::fromStdString(figure.id), exportOptions,
                                                     QByteArray::fromStdString(specJson));
            if (!outcome.ok()) {
                err << "kvlens: " << outcome.error.toStdString() << "\n";
                return 1;
            }
            QFile svg(QDir(figuresDir).filePath(QString::fromStdString(figure.id) + QStringLiteral(".svg")));
            if (svg.open(QIODevice::ReadOnly))
                svgData[figure.id] = svg.readAll().toBase64().toStdString();
        }
    }

    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string mode = options.full ? "full (the papers' sizes: d = 1024, twice the seeds)"
                             : options.scale < 1.0 ? "reduced (scale " + claims::formatSig(options.scale) + ", for tests)"
                                                   : "normal (the presets as shipped)";
    claims::ReportPage page;
    page.version = KVLENS_VERSION;
    page.generatedUtc = QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
    page.system = QSysInfo::prettyProductName().toStdString();
    page.cores = QThread::idealThreadCount();
    page.mode = mode;
    page.fullMode = options.full;
    page.seconds = wall;
    page.svgData = std::move(svgData);
    for (const PresetRun& r : runs)
        page.runs.push_back(claims::ReportRun{r.preset.file, r.preset.role, "presets/" + stem(r.preset.file), &r.results, r.seconds});
    const claims::ReportFiles files = claims::reportFiles(claimList, page);
    for (const auto& [name, contents] : {std::pair<std::string, std::string>{"claims.csv", files.claimsCsv},
                                         {"checks.csv", files.checksCsv},
                                         {"report.html", files.html}}) {
        if (auto written = writeFileAtomic(dir + "/" + name, contents); !written) {
            err << "kvlens: " << written.error().text() << io::spaceNote(dir) << "\n";
            return 1;
        }
    }
    return 0;
}

std::string reportLines(const std::vector<claims::Claim>& claimList, const std::string& dir,
                        std::chrono::steady_clock::time_point start)
{
    std::ostringstream out;
    for (const claims::Claim& c : claimList) {
        const auto holding = std::count_if(c.checks.begin(), c.checks.end(), [](const auto& k) { return k.holds; });
        char line[512];
        std::snprintf(line, sizeof line, "%-26s %-20s %3lld/%-3zu %s\n", c.id.c_str(),
                      std::string(claims::verdictText(c.verdict)).c_str(), static_cast<long long>(holding),
                      c.checks.size(), c.title.c_str());
        out << line;
    }
    out << "wrote " << dir << "/report.html, claims.csv, checks.csv, figures/ and presets/ in "
        << claims::formatSig(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3)
        << " s\n";
    return out.str();
}

} // namespace

} // namespace kvlens::app
