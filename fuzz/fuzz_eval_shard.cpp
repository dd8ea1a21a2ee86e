// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: eval_shard.bin and manifest.json from arbitrary bytes. The bytes become the body of
// a shard file with a valid header and checksum (so the decoder itself is reached, not only the
// checksum test); an accepted file encoded again must decode to the same encoding.
#include "core/common/hash.h"
#include "core/eval/eval_shard.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    (void)kvlens::eval::parseEvalManifest(input, "manifest.json");
    std::string file = "KVLEVAL1";
    file.append("\x01\x00\x00\x00", 4); // format version 1
    file += input;
    const std::uint64_t checksum = kvlens::fnv1a64(file);
    for (int i = 0; i < 8; ++i)
        file.push_back(static_cast<char>((checksum >> (8 * i)) & 0xff));
    kvlens::eval::EvalResult result;
    if (!kvlens::eval::decodeEvalShard(file, "eval_shard.bin", result))
        return 0;
    const std::string encoded = kvlens::eval::encodeEvalShard(result);
    kvlens::eval::EvalResult again;
    if (!kvlens::eval::decodeEvalShard(encoded, "again", again) || kvlens::eval::encodeEvalShard(again) != encoded)
        std::abort();
    return 0;
}
