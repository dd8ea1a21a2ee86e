// SPDX-License-Identifier: GPL-3.0-or-later
// Writing small .safetensors files in tests (F32, F64, F16, BF16), so that loaders can be fed
// hand-built and deliberately broken weights.
#pragma once

#include "core/common/fp16.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace kvlens::test {

struct StTensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values; ///< product(shape) values, C order
    std::string dtype = "F32"; ///< "F32", "F64", "F16" or "BF16"
};

/// Writes `tensors` in order: 8-byte little-endian header length, the JSON header padded with
/// spaces to a multiple of 8, then each payload (values converted to the dtype).
inline void writeSafetensors(const std::string& path, const std::vector<StTensor>& tensors)
{
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    std::vector<std::string> payloads;
    std::uint64_t offset = 0;
    for (const StTensor& t : tensors) {
        std::string bytes;
        for (const float v : t.values) {
            if (t.dtype == "F32") {
                bytes.append(reinterpret_cast<const char*>(&v), 4);
            } else if (t.dtype == "F64") {
                const double d = v;
                bytes.append(reinterpret_cast<const char*>(&d), 8);
            } else {
                const std::uint16_t h = t.dtype == "F16" ? floatToHalfBits(v) : floatToBfloat16Bits(v);
                bytes.append(reinterpret_cast<const char*>(&h), 2);
            }
        }
        std::string shape;
        for (std::size_t i = 0; i < t.shape.size(); ++i)
            shape += (i ? "," : "") + std::to_string(t.shape[i]);
        header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":["
                  + std::to_string(offset) + "," + std::to_string(offset + bytes.size()) + "]}";
        offset += bytes.size();
        payloads.push_back(std::move(bytes));
    }
    header += "}";
    while (header.size() % 8 != 0)
        header += ' ';
    std::ofstream out(path, std::ios::binary);
    const std::uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const std::string& p : payloads)
        out.write(p.data(), static_cast<std::streamsize>(p.size()));
}

} // namespace kvlens::test
