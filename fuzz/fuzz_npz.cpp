// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: .npz archives from memory (libzip), every member's header, and member reads under a small limit.
#include "core/io/npz.h"

#include <cstdint>
#include <cstdlib>
#include <span>

using namespace kvlens::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::span<const std::uint8_t> bytes(data, size);
    ReadLimits limits;
    limits.maxTensorBytes = 1 << 20;
    const auto info = parseNpzArchive(bytes, "fuzz.npz");
    if (!info) {
        // Members are read lazily, so a damaged archive may still yield one; it must not crash.
        (void)readNpzMember(bytes, "a", "fuzz.npz", limits);
        return 0;
    }
    for (const TensorInfo& t : info->tensors) {
        const auto tensor = readNpzMember(bytes, t.name, "fuzz.npz", limits);
        if (tensor && (tensor->shape != t.shape || tensor->data.size() != static_cast<std::size_t>(t.elementCount())))
            std::abort();
    }
    return 0;
}
