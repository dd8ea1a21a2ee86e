// SPDX-License-Identifier: GPL-3.0-or-later
// Reproduction report: run the presets, evaluate the claims in core, draw their figures, write one HTML page.
#include "app/reproduce.h"

#include "app/backend_factory.h"
#include "app/batch.h"
#include "app/interrupt.h"
#include "app/progress_line.h"
#include "core/io/staged_dir.h"
#include "core/analysis/claims.h"
#include "core/experiment/runner.h"
#include "core/model/spec_json.h"
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
        {"low_rank_d1024.json", "A6 (low-rank pathology), A7"},
        {"repro_heavy_tail_d1024.json", "A6 (the heavy-tailed partner)"},
        {"budget_crossover.json", "A7 (budget crossover)"},
        {"repro_vpath_heavy_tail.json", "AB1-2 (value path, heavy tail)"},
        {"repro_vpath_low_rank.json", "AB1-2 (value path, low rank), A7"},
        {"paper_b_gaussian.json", "B1 (SQ vs TQ), B2 (water-filling), C2"},
        {"paper_b_heavy_tail.json", "B1, B2, C2"},
        {"paper_b_low_rank.json", "B1, B2, C2"},
        {"paper_c_headq.json", "C1 (HeadQ and controls), C2"},
    };
    return presets;
}

namespace {


/// The sizes a preset runs at: as shipped, the papers' (--full), or shrunk (tests).
ExperimentSpec sized(ExperimentSpec spec, const ReproduceOptions& o)
{
    if (o.full) {
        spec.d = std::max(spec.d, 1024);
        spec.seedCount *= 2;
    }
    if (o.scale < 1.0) {
        auto shrink = [&](int v, int floor) {
            return std::max(floor, static_cast<int>(std::lround(v * o.scale)));
        };
        spec.seedCount = shrink(spec.seedCount, 2);
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

std::string html(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

/// A claim figure as a view, so it exports through the same code (and paper style) as every other figure.
class ClaimFigureView final : public widgets::ResultView {
public:
    ClaimFigureView(claims::Figure figure, QWidget* parent) : ResultView(parent), m_figure(std::move(figure)) { draw(); }

    QString viewId() const override { return QString::fromStdString(m_figure.id); }
    QString viewTitle() const override { return QString::fromStdString(m_figure.title); }
    QString viewDescription() const override { return QString::fromStdString(m_figure.caption); }

protected:
    void redraw() override { draw(); }

private:
    void draw();
    claims::Figure m_figure;
};

void ClaimFigureView::draw()
{
    widgets::PlotWidget* plot = m_plot;
    plot->resetPlot();
    int colour = 0, shape = 0;
    for (const claims::Series& s : m_figure.series) {
        // QCPGraph keeps its points sorted by x; sort here so the error bars stay with their points.
        std::vector<std::size_t> order(s.x.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.x[a] < s.x[b]; });
        QVector<double> x, y, minus, plus;
        const bool bars = s.low.size() == s.x.size() && s.high.size() == s.x.size() && !s.x.empty();
        for (std::size_t i : order) {
            if (!std::isfinite(s.y[i]) || (m_figure.logY && s.y[i] <= 0.0))
                continue;
            x << s.x[i];
            y << s.y[i];
            if (bars) {
                double down = std::max(0.0, s.y[i] - (std::isfinite(s.low[i]) ? s.low[i] : s.y[i]));
                if (m_figure.logY)
                    down = std::min(down, 0.999 * s.y[i]); // a log axis has no room at or below 0
                minus << down;
                plus << std::max(0.0, (std::isfinite(s.high[i]) ? s.high[i] : s.y[i]) - s.y[i]);
            }
        }
        const QString name = QString::fromStdString(s.name);
        QCPGraph* g = nullptr;
        if (s.reference) {
            g = plot->addGraph();
            g->setName(name);
            QPen pen(Qt::black, 1.0, shape % 2 == 0 ? Qt::DashLine : Qt::DotLine);
            g->setPen(pen);
            ++shape;
        } else if (s.steps) {
            g = plot->addLineSeries(name, widgets::seriesColor(colour++), QCPScatterStyle::ssNone);
            g->setLineStyle(QCPGraph::lsStepCenter);
        } else if (!s.line) {
            g = plot->addScatterSeries(name, widgets::seriesColor(colour), widgets::seriesShape(colour), 6.0);
            ++colour;
        } else {
            g = plot->addLineSeries(name, widgets::seriesColor(colour), widgets::seriesShape(colour));
            ++colour;
        }
        g->setData(x, y, true);
        if (bars && !s.reference) {
            auto* errors = new QCPErrorBars(plot->xAxis, plot->yAxis);
            errors->removeFromLegend();
            errors->setDataPlottable(g);
            errors->setData(minus, plus);
            errors->setPen(g->pen().color());
        }
    }
    plot->xAxis->setLabel(QString::fromStdString(m_figure.xLabel));
    plot->yAxis->setLabel(QString::fromStdString(m_figure.yLabel));
    if (m_figure.logX)
        widgets::PlotWidget::setLogAxis(plot->xAxis);
    if (m_figure.logY)
        widgets::PlotWidget::setLogAxis(plot->yAxis);
    if (!m_figure.categories.empty()) {
        QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
        for (std::size_t i = 0; i < m_figure.categories.size(); ++i)
            ticks->addTick(static_cast<double>(i), QString::fromStdString(m_figure.categories[i]));
        plot->xAxis->setTicker(ticks);
        plot->xAxis->setTickLabelRotation(m_figure.categories.size() > 4 ? 50 : 0);
    }
    plot->rescaleAxes();
    // Room around the points: a decade fraction on log axes, 5% on linear ones.
    for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
        const QCPRange r = axis->range();
        if (axis->scaleType() == QCPAxis::stLogarithmic && r.lower > 0.0) {
            axis->setRange(r.lower / 1.3, r.upper * 1.3);
            widgets::PlotWidget::tuneLogAxis(axis);
        } else {
            const double pad = 0.05 * std::max(r.size(), 1e-12);
            axis->setRange(r.lower - pad, r.upper + pad);
        }
    }
    if (!m_figure.categories.empty())
        plot->xAxis->setRange(-0.6, static_cast<double>(m_figure.categories.size()) - 0.4);
    plot->legend->setVisible(true);
    plot->placeLegendBelow(m_figure.series.size() > 4 ? 3 : 2);
    plot->replot();
}

struct PresetRun {
    ReproducePreset preset;
    ResultSet results;
    double seconds = 0.0;
};

std::string verdictClass(claims::Verdict v)
{
    switch (v) {
    case claims::Verdict::Reproduced: return "ok";
    case claims::Verdict::NotReproduced: return "no";
    case claims::Verdict::DependsOnSetting: return "depends";
    }
    return "no";
}

std::string schemesText(const ExperimentSpec& s)
{
    std::string out;
    for (const SchemeConfig& c : s.schemes)
        out += (out.empty() ? "" : ", ") + c.name;
    return out;
}

std::string tableHtml(const claims::Table& t)
{
    std::string h = "<div class=\"scroll\"><table>";
    if (!t.caption.empty())
        h += "<caption>" + html(t.caption) + "</caption>";
    h += "<tr>";
    for (const std::string& c : t.header)
        h += "<th>" + html(c) + "</th>";
    h += "</tr>\n";
    for (const auto& row : t.rows) {
        h += "<tr>";
        for (const std::string& c : row)
            h += "<td>" + html(c) + "</td>";
        h += "</tr>\n";
    }
    return h + "</table></div>\n";
}

constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em} h2{font-size:1.3em;margin-top:2.2em;border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.82em;margin:.6em 0} td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3} caption{text-align:left;font-weight:600;padding:.3em 0}
.scroll{overflow-x:auto} .verdict{display:inline-block;padding:1px 8px;border-radius:4px;color:#fff;font-weight:600;font-size:.9em}
.ok{background:#009E73} .no{background:#D55E00} .depends{background:#E69F00;color:#222}
.holds{color:#009E73;font-weight:700} .fails{color:#D55E00;font-weight:700}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee} figcaption{font-size:.85em;color:#444}
.meta{color:#555;font-size:.9em} .claim p{margin:.35em 0} code{background:#f5f5f5;padding:0 3px}
)";

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
        Result<ExperimentSpec> spec = specFromJson(file.readAll().toStdString());
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
    input.crossover = find("budget_crossover.json");
    input.vpathHeavyTail = find("repro_vpath_heavy_tail.json");
    input.vpathLowRank = find("repro_vpath_low_rank.json");
    input.paperBGaussian = find("paper_b_gaussian.json");
    input.paperBHeavyTail = find("paper_b_heavy_tail.json");
    input.paperBLowRank = find("paper_b_low_rank.json");
    input.paperC = find("paper_c_headq.json");
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
        if (const int status = writeRunFiles(runs[i].results, presetDir, options.figures, tables, err); status != 0)
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
    widgets::ExportOptions exportOptions;
    exportOptions.widthInches = 7.0;
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

    CsvWriter claimsCsv({"id", "paper", "title", "verdict", "checks", "holding", "headline", "depends_on", "criterion"});
    CsvWriter checksCsv({"claim", "setting", "measured", "holds"});
    for (const claims::Claim& c : claimList) {
        const auto holding = std::count_if(c.checks.begin(), c.checks.end(), [](const auto& k) { return k.holds; });
        claimsCsv.add(c.id).add(c.paper).add(c.title).add(claims::verdictText(c.verdict))
            .add(static_cast<long long>(c.checks.size())).add(static_cast<long long>(holding)).add(c.headline)
            .add(c.dependsOn).add(c.criterion);
        claimsCsv.endRow();
        for (const claims::Check& k : c.checks) {
            checksCsv.add(c.id).add(k.setting).add(k.measured).add(k.holds ? "yes" : "no");
            checksCsv.endRow();
        }
    }

    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string mode = options.full ? "full (the papers' sizes: d = 1024, twice the seeds)"
                             : options.scale < 1.0 ? "reduced (scale " + claims::formatSig(options.scale) + ", for tests)"
                                                   : "normal (the presets as shipped)";
    std::string page;
    page += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" "
            "content=\"width=device-width, initial-scale=1\">\n<title>KVLens reproduction report</title>\n<style>";
    page += kStyle;
    page += "</style></head><body>\n<h1>KVLens reproduction report</h1>\n";
    page += "<p class=\"meta\">KVLens " KVLENS_VERSION ", " +
            html(QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString()) + " UTC, " +
            html(QSysInfo::prettyProductName().toStdString()) + ", " + std::to_string(QThread::idealThreadCount()) +
            " cores. Mode: " + html(mode) + ". Runs and report took " + claims::formatSig(wall, 3) +
            " s. Regenerate with <code>kvlens --reproduce --out DIR" + (options.full ? " --full" : "") + "</code>.</p>\n";
    page += "<p>Each claim of the three papers (A: D'Alberto, KV-cache quantization inspired by TurboQuant; B: "
            "ablation and validation of KV-cache compression; C: HeadQ) is checked on runs of the presets shipped in "
            "<code>resources/presets</code>, with fixed seeds. Every verdict is <em>computed</em> from the measured "
            "numbers against the criterion stated under the claim, which is fixed in the code before any run: a claim "
            "is <span class=\"verdict ok\">reproduced</span> when every check holds, <span class=\"verdict no\">not "
            "reproduced</span> when none does, and <span class=\"verdict depends\">depends on setting</span> when some "
            "do — the report then names the settings on each side. Directional tests use α = 0.01, two-sided.</p>\n";
    page += "<h2>Summary</h2>\n<div class=\"scroll\"><table><tr><th>claim</th><th>paper</th><th>what</th><th>verdict</th>"
            "<th>checks holding</th><th>measured</th></tr>\n";
    for (const claims::Claim& c : claimList) {
        const auto holding = std::count_if(c.checks.begin(), c.checks.end(), [](const auto& k) { return k.holds; });
        page += "<tr><td><a href=\"#" + html(c.id) + "\">" + html(c.id) + "</a></td><td>" + html(c.paper) + "</td><td>" +
                html(c.title) + "</td><td><span class=\"verdict " + verdictClass(c.verdict) + "\">" +
                html(claims::verdictText(c.verdict)) + "</span></td><td>" + std::to_string(holding) + " / " +
                std::to_string(c.checks.size()) + "</td><td>" + html(c.headline) + "</td></tr>\n";
    }
    page += "</table></div>\n";

    for (const claims::Claim& c : claimList) {
        page += "<section class=\"claim\" id=\"" + html(c.id) + "\">\n<h2>" + html(c.id) + " — " + html(c.title) +
                "</h2>\n";
        page += "<p><b>Verdict:</b> <span class=\"verdict " + verdictClass(c.verdict) + "\">" +
                html(claims::verdictText(c.verdict)) + "</span></p>\n";
        page += "<p><b>Paper " + html(c.paper) + " claims:</b> " + html(c.statement) + "</p>\n";
        page += "<p><b>Criterion:</b> " + html(c.criterion) + "</p>\n";
        page += "<p><b>Measured:</b> " + html(c.headline) + "</p>\n";
        if (!c.dependsOn.empty())
            page += "<p><b>Depends on the setting:</b> " + html(c.dependsOn) + "</p>\n";
        std::string runNames;
        for (const std::string& r : c.runs)
            runNames += (runNames.empty() ? "" : "; ") + r;
        page += "<p class=\"meta\">Runs: " + html(runNames) + "</p>\n";
        for (const claims::Figure& f : c.figures) {
            page += "<figure><img alt=\"" + html(f.title) + "\" src=\"data:image/svg+xml;base64," + svgData[f.id] +
                    "\">\n<figcaption><b>" + html(f.title) + ".</b> " + html(f.caption) + " Files: <a href=\"figures/" +
                    html(f.id) + ".pdf\">PDF</a>, <a href=\"figures/" + html(f.id) + ".svg\">SVG</a>, <a href=\"figures/" +
                    html(f.id) + ".csv\">CSV</a>.</figcaption></figure>\n";
        }
        for (const claims::Table& t : c.tables)
            page += tableHtml(t);
        page += "<div class=\"scroll\"><table><caption>Checks</caption><tr><th>setting</th><th>measured</th>"
                "<th>criterion holds</th></tr>\n";
        for (const claims::Check& k : c.checks)
            page += "<tr><td>" + html(k.setting) + "</td><td>" + html(k.measured) + "</td><td class=\"" +
                    (k.holds ? "holds\">yes" : "fails\">no") + "</td></tr>\n";
        page += "</table></div>\n</section>\n";
    }

    page += "<h2>Runs</h2>\n<div class=\"scroll\"><table><tr><th>preset</th><th>name</th><th>regime</th><th>d</th>"
            "<th>N</th><th>Q</th><th>seeds</th><th>grid points</th><th>schemes</th><th>budgets</th><th>trials</th>"
            "<th>run time (s)</th><th>used for</th><th>files</th></tr>\n";
    for (const PresetRun& r : runs) {
        const ExperimentSpec& s = r.results.spec;
        std::string budgets;
        for (int n : s.budgets)
            budgets += (budgets.empty() ? "" : ", ") + std::to_string(n);
        const std::string folder = "presets/" + stem(r.preset.file);
        page += "<tr><td>" + html(r.preset.file) + "</td><td>" + html(s.name) + "</td><td>" + html(s.regime) +
                "</td><td>" + std::to_string(s.d) + "</td><td>" + std::to_string(s.tokens) + "</td><td>" +
                std::to_string(s.queries) + "</td><td>" + std::to_string(s.seedCount) + "</td><td>" +
                std::to_string(s.pointCount()) + "</td><td>" + html(schemesText(s)) + "</td><td>" + budgets + "</td><td>" +
                std::to_string(r.results.trials.size()) + "</td><td>" + claims::formatSig(r.seconds, 3) + "</td><td>" +
                html(r.preset.role) + "</td><td><a href=\"" + folder + "/summary.csv\">summary</a>, <a href=\"" + folder +
                "/comparisons.csv\">comparisons</a>, <a href=\"" + folder + "/spec.json\">spec</a></td></tr>\n";
    }
    page += "</table></div>\n<p class=\"meta\">Tables of every claim: <a href=\"claims.csv\">claims.csv</a>, "
            "<a href=\"checks.csv\">checks.csv</a>. Backend: " +
            html(runs.empty() ? std::string() : runs.front().results.backend) + ".</p>\n</body></html>\n";

    for (const auto& [name, contents] : {std::pair<std::string, std::string>{"claims.csv", claimsCsv.text()},
                                         {"checks.csv", checksCsv.text()},
                                         {"report.html", page}}) {
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
