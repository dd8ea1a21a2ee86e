// SPDX-License-Identifier: GPL-3.0-or-later
// The reproduction report: one self-contained HTML page and the claims/checks tables.
#include "core/report/html_report.h"

#include "core/io/csv.h"

#include <algorithm>
#include <variant>

namespace kvlens::claims {

namespace {

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

/// Escaped text with the report's symbols typeset: ε_dir^K, φ_K, SNR_K... get real sub- and
/// superscripts (a whitelist: identifiers such as rel_mse_t and file names keep their underscores).
std::string prose(std::string_view text)
{
    static const std::pair<std::string_view, std::string_view> symbols[] = {
        {"ε_dir^K", "ε<sub>dir</sub><sup>K</sup>"}, {"ε_dir^V", "ε<sub>dir</sub><sup>V</sup>"},
        {"ε_dir", "ε<sub>dir</sub>"},               {"φ_K", "φ<sub>K</sub>"},
        {"φ_V", "φ<sub>V</sub>"},                   {"φ_T", "φ<sub>T</sub>"},
        {"SNR_K", "SNR<sub>K</sub>"},               {"SNR_V", "SNR<sub>V</sub>"},
        {"SNR_T", "SNR<sub>T</sub>"},               {"D_{n-1}", "D<sub>n−1</sub>"},
        {"D_n", "D<sub>n</sub>"},                   {"d_eff", "d<sub>eff</sub>"},
        {"relMSE_K", "relMSE<sub>K</sub>"},         {"relMSE_V", "relMSE<sub>V</sub>"},
    };
    std::string out = html(text);
    for (const auto& [from, to] : symbols)
        for (std::size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
            out.replace(at, from.size(), to);
    return out;
}

/// Text without sub/superscript markers, for attributes (alt text): "ε_dir^K" -> "ε dir K".
std::string plainSymbols(std::string text)
{
    for (char& c : text)
        if (c == '_' || c == '^')
            c = ' ';
    return text;
}

std::string verdictClass(Verdict v)
{
    switch (v) {
    case Verdict::Holds:
    case Verdict::HoldsLarger: return "ok";
    case Verdict::Contradicted: return "no";
    case Verdict::Borderline:
    case Verdict::DependsOnSetting: return "depends";
    case Verdict::NotTestable: return "untestable";
    }
    return "untestable";
}

std::string schemesText(const ExperimentSpec& s)
{
    std::string out;
    for (const SchemeConfig& c : s.schemes)
        out += (out.empty() ? "" : ", ") + c.name;
    return out;
}

std::string tableHtml(const Table& t)
{
    std::string h = "<div class=\"scroll\"><table>";
    if (!t.caption.empty())
        h += "<caption>" + prose(t.caption) + "</caption>";
    h += "<tr>";
    for (const std::string& c : t.header)
        h += "<th>" + prose(c) + "</th>";
    h += "</tr>\n";
    for (const auto& row : t.rows) {
        h += "<tr>";
        for (const std::string& c : row)
            h += "<td>" + prose(c) + "</td>";
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
.ok{background:#009E73} .no{background:#D55E00} .depends{background:#E69F00;color:#222} .untestable{background:#777}
.holds{color:#009E73;font-weight:700} .fails{color:#D55E00;font-weight:700}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee} figcaption{font-size:.85em;color:#444}
.meta{color:#555;font-size:.9em} .claim p{margin:.35em 0} code{background:#f5f5f5;padding:0 3px}
details{margin:.5em 0} summary{cursor:pointer;font-weight:600;font-size:.9em}
@media print{
 body{max-width:none;margin:0;font-size:9pt} .scroll{overflow:visible}
 table{font-size:6.5pt;width:100%;table-layout:fixed;word-wrap:break-word;overflow-wrap:anywhere}
 td,th{padding:1px 3px} details:not([open])>*:not(summary){display:none}
 figure{break-inside:avoid} h2{break-after:avoid} section.claim{break-before:auto}
}
)";

/// Tables with at most this many rows start unfolded.
constexpr std::size_t kOpenRows = 12;


const std::string& svgOf(const ReportPage& p, const std::string& id)
{
    static const std::string none;
    const auto it = p.svgData.find(id);
    return it == p.svgData.end() ? none : it->second;
}

/// What a reader needs to rerun a run exactly: preset, regime and its parameters, sizes, seeds, RNG.
std::string runDetail(const ReportRun& r)
{
    const ExperimentSpec& s = r.results->spec;
    std::string params;
    for (const auto& [key, value] : s.regimeParams) {
        if (key == "path" || key == "keys" || key == "values" || key == "queries")
            continue;
        params += (params.empty() ? "" : ", ") + key + " = " +
                  (std::holds_alternative<double>(value) ? formatSig(std::get<double>(value), 4) : std::get<std::string>(value));
    }
    return r.file + ": " + s.regime + (params.empty() ? "" : " (" + params + ")") + ", d = " + std::to_string(s.d) +
           ", N = " + std::to_string(s.tokens) + ", Q = " + std::to_string(s.queries) + ", score scale " +
           formatSig(s.scoreScale) + ", seeds " + std::to_string(s.firstSeed) + ".." +
           std::to_string(s.firstSeed + static_cast<std::uint64_t>(s.seedCount) - 1) + " (" +
           (s.engine == EngineKind::Pcg64 ? "pcg64" : "mt19937_64") + ")";
}

/// The claim's runs, as runDetail says them.
std::string runsText(const ReportPage& p, const Claim& c)
{
    std::string out;
    for (const std::string& name : c.runs)
        for (const ReportRun& r : p.runs)
            if (r.results && r.results->spec.name == name)
                out += (out.empty() ? "" : "; ") + runDetail(r);
    return out;
}

} // namespace

std::string htmlEscape(std::string_view text)
{
    return html(text);
}

namespace {

/// claims.csv (one row a claim) and checks.csv (one row a check).
void writeClaimTables(const std::vector<Claim>& claimList, const ReportPage& p, ReportFiles& out)
{
    CsvWriter claimsCsv({"id", "paper", "title", "verdict", "checks", "holding", "headline", "depends_on", "criterion"});
    CsvWriter checksCsv({"claim", "setting", "measured", "holds", "outcome", "runs"});
    for (const Claim& c : claimList) {
        const auto holding = std::count_if(c.checks.begin(), c.checks.end(), [](const auto& k) { return k.holds; });
        claimsCsv.add(c.id).add(c.paper).add(c.title).add(verdictText(c.verdict))
            .add(static_cast<long long>(c.checks.size())).add(static_cast<long long>(holding)).add(c.headline)
            .add(c.dependsOn).add(c.criterion);
        claimsCsv.endRow();
        for (const Check& k : c.checks) {
            checksCsv.add(c.id).add(k.setting).add(k.measured).add(k.holds ? "yes" : "no")
                .add(std::string(outcomeText(k.outcome))).add(runsText(p, c));
            checksCsv.endRow();
        }
    }
    out.claimsCsv = claimsCsv.text();
    out.checksCsv = checksCsv.text();
}

/// The page's head, the line on how it was made and how to read the verdicts.
void appendIntroduction(std::string& page, const ReportPage& p)
{
    page += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" "
            "content=\"width=device-width, initial-scale=1\">\n<title>KVLens reproduction report</title>\n<style>";
    page += kStyle;
    page += "</style></head><body>\n<h1>KVLens reproduction report</h1>\n";
    page += "<p class=\"meta\">KVLens " + html(p.version) + ", " + html(p.generatedUtc) + " UTC, " + html(p.system) + ", "
            + std::to_string(p.cores) + " cores. Mode: " + html(p.mode) + ". Runs and report took "
            + formatSig(p.seconds, 3) + " s. Regenerate with <code>kvlens --reproduce --out DIR"
            + (p.fullMode ? " --full" : "") + "</code>.</p>\n";
    page += "<p>Each claim of the three papers (A: D'Alberto, KV-cache quantization inspired by TurboQuant; B: "
            "ablation and validation of KV-cache compression; C: HeadQ) is checked on runs of the presets shipped in "
            "<code>resources/presets</code>, with fixed seeds; the M claims test paper A on the real attention of the small "
            "trained model shipped in <code>resources/examples/tiny_lm_kv.safetensors</code>, every layer and head. Every verdict is <em>computed</em> from the measured "
            "numbers against the criterion stated under the claim, which is fixed in the code before any run. Each check "
            "keeps direction and strength: it <em>holds</em>, holds with a <em>larger effect than claimed</em>, is "
            "<em>borderline</em> (a p within 5 times the level, or an interval touching the criterion), is "
            "<em>contradicted</em>, or is <em>not testable here</em> (too few seeds for the test to reach its level, or "
            "an effect the run cannot show). A claim <span class=\"verdict ok\">holds</span> when every testable check "
            "holds, is <span class=\"verdict depends\">borderline</span> when nothing contradicts it but some checks "
            "are borderline, <span class=\"verdict no\">contradicted</span> when no testable check holds, <span "
            "class=\"verdict depends\">depends on setting</span> when settings disagree (named), and <span "
            "class=\"verdict untestable\">not testable here</span> when no check could be decided. The statistical "
            "unit is the seed: the queries of one seed share its draw of the data and of the rotation and sketch, so "
            "p-values come from exact tests over seeds (with k seeds no p is below 2/2^k), and intervals resample "
            "seeds (and, for the fixed queries of a model, queries). Directional tests use α = 0.01, two-sided.</p>\n";
}

/// One row per claim: its verdict, the checks holding and the headline.
void appendSummary(std::string& page, const std::vector<Claim>& claimList)
{
    page += "<h2>Summary</h2>\n<div class=\"scroll\"><table><tr><th>claim</th><th>paper</th><th>what</th><th>verdict</th>"
            "<th>checks holding</th><th>measured</th></tr>\n";
    for (const Claim& c : claimList) {
        const auto holding = std::count_if(c.checks.begin(), c.checks.end(), [](const auto& k) { return k.holds; });
        page += "<tr><td><a href=\"#" + html(c.id) + "\">" + html(c.id) + "</a></td><td>" + html(c.paper) + "</td><td>" +
                prose(c.title) + "</td><td><span class=\"verdict " + verdictClass(c.verdict) + "\">" +
                html(verdictText(c.verdict)) + "</span></td><td>" + std::to_string(holding) + " / " +
                std::to_string(c.checks.size()) + "</td><td>" + prose(c.headline) + "</td></tr>\n";
    }
    page += "</table></div>\n";

}

/// A claim's section: verdict, statement, criterion, what was measured, its figures, and its tables
/// and checks folded under it.
void appendClaim(std::string& page, const Claim& c, const ReportPage& p)
{
    page += "<section class=\"claim\" id=\"" + html(c.id) + "\">\n<h2>" + html(c.id) + " — " + prose(c.title) +
            "</h2>\n";
    page += "<p><b>Verdict:</b> <span class=\"verdict " + verdictClass(c.verdict) + "\">" +
            html(verdictText(c.verdict)) + "</span></p>\n";
    page += "<p><b>Paper " + html(c.paper) + " claims:</b> " + prose(c.statement) + "</p>\n";
    page += "<p><b>Criterion:</b> " + prose(c.criterion) + "</p>\n";
    page += "<p><b>Measured:</b> " + prose(c.headline) + "</p>\n";
    if (!c.dependsOn.empty())
        page += "<p><b>Depends on the setting:</b> " + prose(c.dependsOn) + "</p>\n";
    std::string runNames;
    for (const std::string& r : c.runs)
        runNames += (runNames.empty() ? "" : "; ") + r;
    page += "<p class=\"meta\">Runs: " + html(runsText(p, c).empty() ? runNames : runsText(p, c)) + "</p>\n";
    for (const Figure& f : c.figures) {
        page += "<figure><img alt=\"" + html(plainSymbols(f.title)) + "\" src=\"data:image/svg+xml;base64," + svgOf(p, f.id) +
                "\">\n<figcaption><b>" + prose(f.title) + ".</b> " + prose(f.caption) + " Files: <a href=\"figures/" +
                html(f.id) + ".pdf\">PDF</a>, <a href=\"figures/" + html(f.id) + ".svg\">SVG</a>, <a href=\"figures/" +
                html(f.id) + ".csv\">CSV</a>.</figcaption></figure>\n";
    }
    // The raw tables fold under the claim (open on screen when short), the verdict and figures stay in view.
    const auto fold = [](const std::string& summary, std::size_t rows, const std::string& body) {
        return std::string(rows > kOpenRows ? "<details>" : "<details open>") + "<summary>" + summary + " ("
               + std::to_string(rows) + " rows)</summary>\n" + body + "</details>\n";
    };
    for (const Table& t : c.tables)
        page += fold(prose(t.caption.empty() ? std::string("Table") : t.caption), t.rows.size(), tableHtml(t));
    std::string checks = "<div class=\"scroll\"><table><caption>Checks</caption><tr><th>setting</th><th>measured</th>"
                         "<th>outcome</th></tr>\n";
    for (const Check& k : c.checks)
        checks += "<tr><td>" + prose(k.setting) + "</td><td>" + prose(k.measured) + "</td><td class=\"" +
                  (k.holds ? "holds" : k.outcome == Outcome::Contradicted ? "fails" : "other") + "\">" +
                  html(outcomeText(k.outcome)) + "</td></tr>\n";
    checks += "</table></div>\n";
    page += fold("Checks", c.checks.size(), checks);
    page += "</section>\n";
}

/// The runs behind the claims, one row a preset, and the links to the claim tables.
void appendRuns(std::string& page, const ReportPage& p)
{
    page += "<h2>Runs</h2>\n<div class=\"scroll\"><table><tr><th>preset</th><th>name</th><th>regime</th><th>d</th>"
            "<th>N</th><th>Q</th><th>seeds</th><th>grid points</th><th>schemes</th><th>budgets</th><th>trials</th>"
            "<th>run time (s)</th><th>used for</th><th>files</th></tr>\n";
    for (const ReportRun& r : p.runs) {
        const ExperimentSpec& s = r.results->spec;
        std::string budgets;
        for (int n : s.budgets)
            budgets += (budgets.empty() ? "" : ", ") + std::to_string(n);
        const std::string& folder = r.folder;
        page += "<tr><td>" + html(r.file) + "</td><td>" + html(s.name) + "</td><td>" + html(s.regime) +
                "</td><td>" + std::to_string(s.d) + "</td><td>" + std::to_string(s.tokens) + "</td><td>" +
                std::to_string(s.queries) + "</td><td>" + std::to_string(s.seedCount) + "</td><td>" +
                std::to_string(s.pointCount()) + "</td><td>" + html(schemesText(s)) + "</td><td>" + budgets + "</td><td>" +
                std::to_string(r.results->trials.size()) + "</td><td>" + formatSig(r.seconds, 3) + "</td><td>" +
                html(r.role) + "</td><td><a href=\"" + folder + "/summary.csv\">summary</a>, <a href=\"" + folder +
                "/comparisons.csv\">comparisons</a>, <a href=\"" + folder + "/spec.json\">spec</a></td></tr>\n";
    }
    page += "</table></div>\n<p class=\"meta\">Tables of every claim: <a href=\"claims.csv\">claims.csv</a>, "
            "<a href=\"checks.csv\">checks.csv</a>. Backend: " +
            html(p.runs.empty() ? std::string() : p.runs.front().results->backend) + ".</p>\n</body></html>\n";
}

} // namespace

ReportFiles reportFiles(const std::vector<Claim>& claimList, const ReportPage& p)
{
    ReportFiles out;
    writeClaimTables(claimList, p, out);
    std::string page;
    appendIntroduction(page, p);
    appendSummary(page, claimList);
    for (const Claim& c : claimList)
        appendClaim(page, c, p);
    appendRuns(page, p);
    out.html = std::move(page);
    return out;
}

} // namespace kvlens::claims
