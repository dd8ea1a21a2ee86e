// SPDX-License-Identifier: GPL-3.0-or-later
// A small float32 model dump written by hand, for the tests of the model features.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace kvlens::test {

/// Writes a per-layer dump (layers.{L}.k/v/q) of `layers` layers: 2 query heads over 1 K/V head,
/// `tokens` tokens of head_dim `headDim`, every value a small multiple of 1/8 (exact in fp16).
/// `scaleK` multiplies the keys of layer `scaledLayer` (-1: none), so a test can rewrite the "same"
/// file with other data.
inline void writeDump(const std::string& path, int layers, int tokens, double scaleK = 1.0, int scaledLayer = -1,
                      int headDim = 4)
{
    std::string header = "{";
    std::vector<float> payload;
    for (int l = 0; l < layers; ++l)
        for (char kind : {'k', 'v', 'q'}) {
            const int heads = kind == 'q' ? 2 : 1;
            const std::size_t begin = payload.size() * 4;
            for (int h = 0; h < heads; ++h)
                for (int t = 0; t < tokens; ++t)
                    for (int c = 0; c < headDim; ++c) {
                        double v = ((l * 3 + h * 5 + t * 7 + c * 11 + kind) % 13 - 6) * 0.125;
                        if (kind == 'k' && l == scaledLayer)
                            v *= scaleK;
                        payload.push_back(static_cast<float>(v));
                    }
            header += std::string(header.size() > 1 ? "," : "") + "\"layers." + std::to_string(l) + "." + kind
                      + "\":{\"dtype\":\"F32\",\"shape\":[1," + std::to_string(heads) + "," + std::to_string(tokens)
                      + "," + std::to_string(headDim) + "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(payload.size() * 4)
                      + "]}";
        }
    header += "}";
    while (header.size() % 8)
        header += ' ';
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const std::uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(payload.data()), static_cast<std::streamsize>(payload.size() * 4));
}

} // namespace kvlens::test
