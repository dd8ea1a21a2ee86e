// SPDX-License-Identifier: GPL-3.0-or-later
// Number formatting shared by messages and files: the shortest text that reads back exactly.
#pragma once

#include <string>

namespace kvlens {

/// Shortest decimal that parses back to the same double (std::to_chars): 0.1, 1e-300; whole
/// numbers below 1e15 as plain integers (4194304, -0 as 0);
/// "nan", "inf", "-inf" for non-finite values.
std::string formatNumber(double value);
/// Shortest decimal that parses back to the same float.
std::string formatNumber(float value);

} // namespace kvlens
