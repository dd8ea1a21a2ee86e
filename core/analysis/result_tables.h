// SPDX-License-Identifier: GPL-3.0-or-later
// The CSV tables of a run: summary (per scheme and budget), trials (6D points), queries (per query).
#pragma once

#include "core/spec/result.h"

#include <string>
#include <vector>

namespace kvlens {

class CsvWriter;

/// Header names of the swept parameters (one column per sweep axis, after "point").
std::vector<std::string> sweepColumns(const ExperimentSpec& spec);
/// Writes a grid point's swept values (one per sweep axis).
void addSweepValues(CsvWriter& csv, const ExperimentSpec& spec, int point);
/// `before`, the sweep columns, then `after`.
std::vector<std::string> withSweepColumns(const ExperimentSpec& spec, std::vector<std::string> before,
                                          const std::vector<std::string>& after);

/// One row per (point, scheme, budget): KL mean/median/p99/max, recall, argmax-shift rate,
/// 6D means, relMSE, proxies, score-error theory, bit accounting.
std::string summaryCsv(const ResultSet& results);
/// One row per trial: the 6D point and trial-level errors, bits and timings.
std::string trialsCsv(const ResultSet& results);
/// One row per query of every trial: KL, recall, argmax shift, Fisher, A^2, output errors, d^2.
std::string queriesCsv(const ResultSet& results);

} // namespace kvlens

namespace kvlens {

/// The summary as an aligned text table for terminals (scheme, budget, bits, KL, recall, 6D).
std::string summaryText(const ResultSet& results);

} // namespace kvlens
