// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: the .npy header parser and payload decoder on arbitrary bytes, with consistency checks.
#include "core/io/npy.h"
#include "fuzz/slice_check.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>

using namespace kvlens::io;
using kvlens::fuzz::checkLastRowSlice;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::span<const std::uint8_t> bytes(data, size);
    const auto info = parseNpyHeader(bytes, "fuzz.npy");
    if (!info)
        return 0;
    const TensorInfo& t = info->tensors.front();
    // A valid header describes exactly the rest of the file.
    if (t.dataOffset + t.dataBytes != size)
        std::abort();
    // The header-only form, as inspectTensorFile calls it, agrees.
    const auto prefix = parseNpyHeader(bytes.first(std::min<std::size_t>(size, kNpyMaxPreambleBytes)), size, "fuzz.npy");
    if (!prefix || prefix->tensors.front().shape != t.shape || prefix->tensors.front().dataOffset != t.dataOffset)
        std::abort();
    ReadLimits limits;
    limits.maxTensorBytes = 1 << 20;
    const auto tensor = decodeTensor(bytes.subspan(t.dataOffset), t, "fuzz.npy", limits);
    if (tensor && tensor->data.size() != static_cast<std::size_t>(t.elementCount()))
        std::abort();
    if (tensor)
        checkLastRowSlice(bytes, t, *tensor, "fuzz.npy", limits);
    return 0;
}
