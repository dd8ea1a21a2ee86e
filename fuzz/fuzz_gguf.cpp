// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: the GGUF header parser on arbitrary bytes, then the first row of every tensor it
// accepts dequantized, with the checks a valid header promises (ranges inside the file, no overlap).
#include "core/io/gguf.h"

#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

using namespace kvlens;
using namespace kvlens::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::span<const std::uint8_t> bytes(data, size);
    const auto file = parseGgufHeader(bytes, size, "fuzz.gguf");
    if (!file)
        return 0;
    if (file->dataOffset % file->alignment != 0)
        std::abort();
    std::vector<float> row;
    for (const GgufTensor& t : file->tensors) {
        const auto rowBytes = ggml::rowBytes(t.type, static_cast<std::int64_t>(t.rowLength()));
        if (!rowBytes || t.offset < file->dataOffset || t.offset + t.bytes > size || t.bytes != *rowBytes * t.rowCount())
            std::abort();
        if (!ggml::ggmlTraits(t.type).dequantizable || t.rowLength() > (1u << 20))
            continue;
        row.assign(static_cast<std::size_t>(t.rowLength()), 0.0f);
        for (const ggml::SimdLevel level : {ggml::SimdLevel::Scalar, ggml::bestSimdLevel()})
            ggml::dequantizeRowAt(level, t.type, data + t.offset, row.data(), static_cast<std::int64_t>(t.rowLength()));
    }
    // Typed reads of whatever keys the input holds: each either converts or refuses, never crashes.
    for (const auto& [key, value] : file->metadata) {
        (void)file->getString(key);
        (void)file->getU32(key);
        (void)file->getI32(key);
        (void)file->getF32(key);
        (void)file->getBool(key);
        (void)file->getArray<std::string>(key);
        (void)file->getArray<float>(key);
        (void)file->getArray<std::int32_t>(key);
    }
    return 0;
}
