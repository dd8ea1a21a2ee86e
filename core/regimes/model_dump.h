// SPDX-License-Identifier: GPL-3.0-or-later
// A whole model's KV cache in one file: the dump layout, its checks, and the `model` regime (one
// (layer, head) cell of it, with grouped-query heads mapped and causal attention).
#pragma once

#include "core/common/result.h"
#include "core/regimes/regime.h"

#include <map>
#include <string>

namespace kvlens {

/// What a model dump holds. Two layouts: one tensor per layer and kind, `layers.{L}.k`, `.v`, `.q`,
/// each [batch, heads, tokens, head_dim]; or one rank-5 tensor per kind, `k`, `v`, `q`, each
/// [layers, batch, heads, tokens, head_dim]. Q may have more heads than K and V (grouped-query
/// attention): Q head h reads K/V head h / (qHeads / kvHeads).
struct ModelDump {
    std::string path;
    int layers = 0, qHeads = 0, kvHeads = 0, headDim = 0, tokens = 0, queryTokens = 0;
    bool perLayer = true;
    std::map<std::string, std::string> metadata; ///< the safetensors __metadata__ (model, rope, positions, source)

    /// The tensor holding `kind` ('k', 'v' or 'q') of `layer`.
    std::string tensorName(int layer, char kind) const;
    /// The K/V head Q head `qHead` attends with.
    int kvHead(int qHead) const { return qHead / (qHeads / kvHeads); }
};

/// Reads and checks a dump's header(s): every layer from 0 has k, v and q; ranks 4 (or 5);
/// one head count for K and V and one for Q across layers, Q's a multiple of K's; one head_dim;
/// K and V with the same tokens. Errors (field `field`) name the tensor that is missing or wrong.
Result<ModelDump> inspectModelDump(const std::string& path, const std::string& field = "regime.file");

const Regime& modelRegime();

} // namespace kvlens
