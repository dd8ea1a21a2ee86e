// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: model.safetensors.index.json text through the shard index parser, and the
// promise that every accepted shard name is a plain .safetensors file name.
#include "core/lm/weights.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto index = kvlens::lm::parseWeightIndex(text, "fuzz/model.safetensors.index.json");
    if (!index)
        return 0;
    if (index->weightMap.empty() || index->shards.empty() || !std::is_sorted(index->shards.begin(), index->shards.end()))
        std::abort();
    for (const std::string& shard : index->shards)
        if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos
            || shard.find('\\') != std::string::npos || !shard.ends_with(".safetensors"))
            std::abort();
    for (const auto& [tensor, shard] : index->weightMap)
        if (!std::binary_search(index->shards.begin(), index->shards.end(), shard))
            std::abort();
    return 0;
}
