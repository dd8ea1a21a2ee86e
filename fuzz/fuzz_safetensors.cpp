// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: the safetensors header parser and payload decoder on arbitrary bytes, with consistency checks.
#include "core/io/safetensors.h"
#include "fuzz/slice_check.h"

#include <cstdint>
#include <cstdlib>
#include <span>

using namespace kvlens::io;
using kvlens::fuzz::checkLastRowSlice;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::span<const std::uint8_t> bytes(data, size);
    const auto info = parseSafetensorsHeader(bytes, size, "fuzz.safetensors");
    if (!info)
        return 0;
    ReadLimits limits;
    limits.maxTensorBytes = 1 << 20;
    std::uint64_t covered = 0;
    for (const TensorInfo& t : info->tensors) {
        // Tensors come back in payload order and tile the buffer up to the end of the file.
        if (covered != 0 && t.dataOffset != covered)
            std::abort();
        covered = t.dataOffset + t.dataBytes;
        if (covered > size)
            std::abort();
        const auto tensor = decodeTensor(bytes.subspan(t.dataOffset, t.dataBytes), t, "fuzz.safetensors", limits);
        if (tensor && tensor->data.size() != static_cast<std::size_t>(t.elementCount()))
            std::abort();
        if (tensor)
            checkLastRowSlice(bytes, t, *tensor, "fuzz.safetensors", limits);
    }
    if (covered != 0 && covered != size)
        std::abort();
    return 0;
}
