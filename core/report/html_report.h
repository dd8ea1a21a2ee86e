// SPDX-License-Identifier: GPL-3.0-or-later
// The reproduction report as files: a self-contained HTML page (figures inlined as SVG) and the
// claims and checks tables. Strings in, strings out: the caller renders figures and writes files.
#pragma once

#include "core/spec/result.h"
#include "core/report/claims.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::claims {

/// One run the report lists.
struct ReportRun {
    std::string file;   ///< the preset's file name
    std::string role;   ///< what the run is used for
    std::string folder; ///< where its tables are, relative to the report
    const ResultSet* results = nullptr;
    double seconds = 0.0;
};

/// What the page says about itself, and the figures it inlines.
struct ReportPage {
    std::string version, generatedUtc, system, mode;
    int cores = 0;
    bool fullMode = false;
    double seconds = 0.0;                        ///< runs and report
    std::map<std::string, std::string> svgData;  ///< figure id -> base64 SVG
    std::vector<ReportRun> runs;
};

struct ReportFiles {
    std::string html, claimsCsv, checksCsv;
};

/// The report of `claimList` (in order) over `page.runs`.
ReportFiles reportFiles(const std::vector<Claim>& claimList, const ReportPage& page);

/// Text made safe for HTML (&, <, >, ").
std::string htmlEscape(std::string_view text);

} // namespace kvlens::claims
