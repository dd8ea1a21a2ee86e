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
#include "core/report/claims.h"
#include "core/report/html_report.h"
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/io/atomic_file.h"
#include "core/io/csv.h"
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
    const std::vector<claims::Claim> claimList = claims::evaluateClaims(input);
    if (InterruptScope::interrupted()) {
        err << "kvlens: " << InterruptScope::what() << "; nothing written\n";
        return InterruptScope::exitStatus();
    }

    // 3. Files: each preset's run as --batch writes it, then the claim figures, tables and the page.
    const int written = writeReport(options, runs, claimList, staged->path(), start, err);
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
