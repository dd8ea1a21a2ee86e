// SPDX-License-Identifier: GPL-3.0-or-later
// ExperimentSpec <-> JSON. Reading is strict (unknown keys and wrong types are errors that name the field).
#pragma once

#include "core/common/result.h"
#include "core/spec/spec.h"

#include <string>
#include <string_view>

namespace kvlens {

/// Parses a spec from JSON text and normalizes it (normalizeSpec). Missing fields take their
/// defaults; "N" and "Q" are accepted for "tokens" and "queries". The imported regime's
/// relative file paths are made absolute, looked up in `baseDirectory` first (the spec file's
/// folder) and then in the working directory.
/// A "partial" object (what an export of a cancelled run holds, core/analysis/coverage.h) is
/// accepted and ignored: the spec it sits in is still the whole run's.
/// The text is read as untrusted: nesting is capped, a key given twice is refused, and messages
/// describe a bad value by its type, never by dumping it.
Result<ExperimentSpec> specFromJson(std::string_view text, const std::string& baseDirectory = {},
                                    InputCheck inputs = InputCheck::Full);

/// Writes a spec as JSON (every field, canonical keys); specFromJson(specToJson(s)) == s
/// for a normalized spec.
std::string specToJson(const ExperimentSpec& spec, int indent = 2);

/// Reads and parses a spec file; errors name the path. Only a regular file of at most
/// io::kMaxSpecBytes is read (a device or FIFO is refused before reading).
Result<ExperimentSpec> loadSpecFile(const std::string& path, InputCheck inputs = InputCheck::Full);


} // namespace kvlens
