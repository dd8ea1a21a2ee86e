// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: a GGUF model file on arbitrary bytes: the header parser, then configFromGguf
// (metadata into a ModelConfig, the rope_freqs tensor read from the bytes), vocabFromGguf, and the
// checkpoint assembly (loadFromCheckpoint: names, shapes, types, the GGUF q/k row order, the finite
// scan) under a small memory limit.
#include "core/io/gguf.h"
#include "core/lm/gguf_model.h"
#include "core/lm/gguf_vocab.h"
#include "core/lm/weights.h"

#include <cstdint>
#include <cstdlib>
#include <span>

using namespace kvlens;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::span<const std::uint8_t> bytes(data, size);
    const auto file = io::parseGgufHeader(bytes, size, "fuzz.gguf");
    if (!file)
        return 0;
    (void)lm::vocabFromGguf(*file);
    const auto config = lm::configFromGguf(*file, "fuzz.gguf", bytes);
    if (!config)
        return 0;
    if (config->layers < 1 || config->hidden < 1 || config->heads < 1 || config->kvHeads < 1
        || config->heads % config->kvHeads != 0 || config->headDim < 1)
        std::abort(); // validateModelConfig promises these
    const lm::Checkpoint checkpoint = lm::checkpointFromGguf(*file, bytes);
    if (checkpoint.tensors.size() != file->tensors.size())
        std::abort(); // a parsed header's tensors all lie inside the file
    lm::LoadOptions options;
    options.memoryLimitMiB = 64;
    options.contextTokens = 8;
    options.forwardsInFlight = 1;
    options.threads = 1;
    (void)lm::loadFromCheckpoint(checkpoint, *config, options);
    return 0;
}
