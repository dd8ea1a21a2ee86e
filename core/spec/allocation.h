// SPDX-License-Identifier: GPL-3.0-or-later
// A K/V bit allocation file (allocation.json, written by the model lens's advisor) read back as a
// scheme set for a later run: one fixed-width scheme per distinct (K, V) pair of widths or llama.cpp
// cache types.
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
    int kBits = 0, vBits = 0;     ///< TurboQuant's WHT + Lloyd-Max at these widths (0 where a type is given)
    std::string kType, vType;     ///< llama.cpp cache types instead ("q8_0", "q4_0", "f16"; empty: the widths)
    /// Stored bits per coordinate of the entry, K and V averaged, overheads included, as the run
    /// measured them (0: not given).
    double bits = 0.0;
    bool operator==(const AllocationEntry&) const = default;
};

/// An allocation.json: {"format": "kvlens-allocation", "spec_hash", "target_bits", "bits",
/// "predicted_loss", "loss", "objective", "llama_cpp", "layers": [{"layer", "head" (optional), "k_bits"
/// or "k_type", "v_bits" or "v_type", "bits" (optional), "scheme"}]}. A type is one of llama.cpp's -ctk
/// / -ctv values (f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl). "llama_cpp" ({"ctk", "ctv", "args"} or
/// {"note"}) is derived from the layers (llamaCppTypes) and not kept when read.
struct AllocationFile {
    std::uint64_t specHash = 0;
    double targetBits = 0.0, bits = 0.0, predictedLoss = 0.0;
    std::string loss;      ///< what the loss measured: "rel_mse_t", "kl", "kld_end_to_end" (empty: not given)
    std::string objective; ///< its statistic over the queries: "mean", "median", "p99" (empty: not given)
    std::vector<AllocationEntry> entries;
    bool operator==(const AllocationFile&) const = default;
};

/// The file as allocationFromJson reads it back (specFromJson's inverse for allocations): a side
/// given as a type is written as "k_type", else as "k_bits"; "bits" only when known (> 0).
std::string allocationToJson(const AllocationFile& file);

/// llama.cpp's cache-type flags for a whole allocation. llama.cpp takes one K type and one V type
/// for every layer (-ctk, -ctv), so they are set only when every entry names the same two types;
/// otherwise `note` says why not (TurboQuant widths have no llama.cpp type; layers differ).
struct LlamaCppTypes {
    std::string ctk, ctv; ///< both set, or both empty
    std::string note;     ///< why there are none
    std::string args() const { return ctk.empty() ? std::string() : "-ctk " + ctk + " -ctv " + ctv; }
};
LlamaCppTypes llamaCppTypes(const std::vector<AllocationEntry>& entries);

/// allocation_layers.csv: layer,head,k_type,v_type,k_bits,v_bits,bits, one row per entry in file
/// order. Empty cells mirror absent JSON fields: head for every head, k_type where K is a width,
/// k_bits where K is a type, bits where not measured.
std::string allocationLayersCsv(const AllocationFile& file);

/// Strict reading: a wrong format, a missing or mistyped field, widths outside [1, 8] or a layer
/// (and head) given twice, both or neither of k_bits and k_type are refused, naming the field
/// ("layers[2].k_bits").
Result<AllocationFile> allocationFromJson(std::string_view text);

/// TurboQuant's scalar path (WHT + Lloyd-Max) at a fixed width, whatever the run's budget.
PathConfig fixedWidthPath(int bits);

/// "K3/V2": K at 3 bits and V at 2, both on fixedWidthPath.
SchemeConfig fixedWidthScheme(int kBits, int vBits, const std::string& name = {});

/// "K3/V=q4_0"-style names: each side "K3" (bits) or "K=q8_0" (a type); both types read as findScheme's
/// "K=q8_0,V=q4_0".
SchemeConfig allocationScheme(const AllocationEntry& entry);

/// One scheme per distinct (K, V) of the file, in order of first appearance.
std::vector<SchemeConfig> allocationSchemes(const AllocationFile& file);

} // namespace kvlens
