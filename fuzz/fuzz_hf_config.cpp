// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: Hugging Face config.json text through the transformer engine's parser, and the
// invariants an accepted config promises.
#include "core/lm/hf_config.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace kvlens::lm;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto config = parseHfConfig(text, "fuzz/config.json");
    if (!config)
        return 0;
    const ModelConfig& c = *config;
    // hf_config.h: every size in range, kv heads divide heads, RoPE head dimensions even.
    const bool sizes = c.layers >= 1 && c.layers <= kMaxLayers && c.hidden >= 1 && c.hidden <= kMaxHidden && c.heads >= 1
                       && c.heads <= kMaxHeads && c.kvHeads >= 1 && c.heads % c.kvHeads == 0 && c.headDim >= 1
                       && c.headDim <= kMaxHeadDim && c.intermediate >= 1 && c.intermediate <= kMaxIntermediate
                       && c.vocab >= 1 && c.vocab <= kMaxVocab && c.maxPositions >= 1 && c.maxPositions <= kMaxPositions
                       && c.normEps > 0 && c.normEps <= 1 && c.slidingWindow >= 0;
    const bool rope = c.arch().positions != PositionKind::Rope ? c.ropeTheta == 0.0 : (c.headDim % 2 == 0 && c.ropeTheta > 1 && c.ropeTheta <= kMaxRopeTheta);
    if (!sizes || !rope || c.maxChunkTokens() < 1 || c.nonEmbeddingParameters() <= 0 || !(c.flopsPerToken(512) > 0)
        || c.summary().empty())
        std::abort();
    return 0;
}
