// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens --reproduce --out DIR`: runs the shipped presets and writes a self-contained HTML report of the papers' claims.
#pragma once

#include "widgets/figure_export.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace kvlens::app {

struct ReproduceOptions {
    std::string outDir;
    bool full = false;      ///< the papers' sizes: d = 1024 wherever a preset uses less, twice the seeds
    double scale = 1.0;     ///< (hidden, for tests) shrinks seeds, tokens, queries and d; 1 = as shipped
    int threads = 0;        ///< 0: one per core
    bool quiet = false;     ///< no progress lines
    bool figures = true;    ///< every preset's views in DIR/presets/<preset>/figures, as --batch writes them
    widgets::ExportOptions figure; ///< --width, --dpi, --font-family, --font-size (claim figures: 7 in unless --width)
    bool widthGiven = false;
};

/// One preset the report runs, by file name in resources/presets.
struct ReproducePreset {
    std::string file;  ///< "paper_a.json"
    std::string role;  ///< what the report uses it for
};

/// The presets of the report, in run order.
const std::vector<ReproducePreset>& reproducePresets();

/// Runs every preset (sizes per `options`), evaluates the claims (core/report/claims.h)
/// and writes DIR/report.html (figures embedded as SVG, tables, each claim's measured figure,
/// interval or p-value and computed verdict), DIR/claims.csv and DIR/checks.csv, every claim
/// figure as DIR/figures/<id>.{pdf,svg,csv,spec.json}, and each preset's run files in
/// DIR/presets/<preset>/ as `--batch` writes them. Progress on `err`; Ctrl-C cancels (nothing
/// written). Returns 0, 2 for bad options, 1 on a failure, 130 when interrupted.
int runReproduce(const ReproduceOptions& options, std::ostream& out, std::ostream& err);

} // namespace kvlens::app
