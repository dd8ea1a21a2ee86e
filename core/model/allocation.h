// SPDX-License-Identifier: GPL-3.0-or-later
// A K/V bit allocation file (allocation.json, written by the model lens's advisor) read back as a
// scheme set for a later run: one fixed-width TurboQuant scheme per distinct (k_bits, v_bits).
#pragma once

#include "core/common/result.h"
#include "core/quant/scheme.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// One layer's (or, with head >= 0, one head's) widths.
struct AllocationEntry {
    int layer = 0;
    int head = -1; ///< -1: every head of the layer
    int kBits = 0, vBits = 0;
    bool operator==(const AllocationEntry&) const = default;
};

/// An allocation.json: {"format": "kvlens-allocation", "spec_hash", "target_bits", "bits",
/// "predicted_loss", "loss", "layers": [{"layer", "head" (optional), "k_bits", "v_bits", "scheme"}]}.
struct AllocationFile {
    std::uint64_t specHash = 0;
    double targetBits = 0.0, bits = 0.0, predictedLoss = 0.0;
    std::vector<AllocationEntry> entries;
};

/// Strict reading: a wrong format, a missing or mistyped field, widths outside [1, 8] or a layer
/// (and head) given twice are refused, naming the field ("layers[2].k_bits").
Result<AllocationFile> allocationFromJson(std::string_view text);

/// TurboQuant's scalar path (WHT + Lloyd-Max) at a fixed width, whatever the run's budget.
PathConfig fixedWidthPath(int bits);

/// "K3/V2": K at 3 bits and V at 2, both on fixedWidthPath.
SchemeConfig fixedWidthScheme(int kBits, int vBits, const std::string& name = {});

/// One scheme per distinct (k_bits, v_bits) of the file, in order of first appearance.
std::vector<SchemeConfig> allocationSchemes(const AllocationFile& file);

} // namespace kvlens
