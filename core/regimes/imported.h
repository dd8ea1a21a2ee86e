// SPDX-License-Identifier: GPL-3.0-or-later
// The imported regime: K, V and Q read from a .npy, .npz or .safetensors file instead of drawn.
#pragma once

#include "core/regimes/regime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvlens {

const Regime& importedRegime();

/// Where each of K, V, Q comes from after resolving the regime's fields: a tensor `name` in
/// `path` (a k/v/q field that itself ends in .npy/.npz/.safetensors names a file of its own).
struct ImportSource {
    std::string field; ///< "regime.k", "regime.v", "regime.q"
    std::string path;
    std::string name;  ///< "" for a .npy file
};

/// The three sources of a normalized imported parameter set, in K, V, Q order.
std::vector<ImportSource> importSources(const RegimeParams& params);

/// Makes the regime's file fields absolute: a relative path is taken relative to `baseDirectory`
/// when it exists there, else relative to the working directory. No-op for regimes that read no
/// files (not seedIndependent).
void resolveImportPaths(const std::string& regime, RegimeParams& params, const std::string& baseDirectory);

/// Which [rows x d] slice of a tensor the regime selects: the index of every leading dimension
/// (layer, batch, head from the outside in), for a tensor of rank >= 2 laid out [..., tokens, d].
struct SliceIndex {
    std::vector<std::int64_t> leading; ///< one per leading dimension of the tensor
};

/// The slice for a tensor `shape` from head/batch/layer indices; an error names the index field
/// and its allowed range. Dimensions before layer must have size 1.
Result<SliceIndex> sliceFor(const std::vector<std::int64_t>& shape, std::int64_t head, std::int64_t batch,
                            std::int64_t layer, const std::string& field);

/// Drops every cached header and slice (the caches hold the last files read, keyed by path, inode,
/// size and modification time, so repeated normalizations and runs do not re-read them).
void clearImportCache();

/// How many times a tensor file's header(s) were parsed by the imported regime in this process:
/// once per file and version of it, however many tensors, normalizations and draws use it.
long long importHeaderParses();

} // namespace kvlens
