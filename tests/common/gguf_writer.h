// SPDX-License-Identifier: GPL-3.0-or-later
// Writing small GGUF files in tests (v3 and v2): metadata of every type, tensors from floats quantized to
// any weight type or from hand-built block bytes, and the raw fields hostile-header tests need to break.
#pragma once

#include "core/io/ggml_types.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvlens::test {

/// A GGUF file under construction. Fields are public so a test can break any of them; bytes()
/// serialises the file as llama.cpp's gguf writer lays it out (gguf.cpp, gguf_write_to_buf).
struct GgufWriter {
    using Bytes = std::vector<std::uint8_t>;

    struct Kv {
        std::string key;
        std::uint32_t type = 0; ///< GGUF value type id (9 = array: `value` then starts with the element type)
        Bytes value;            ///< the value's bytes as stored after the type
    };
    struct Tensor {
        std::string name;
        std::vector<std::uint64_t> dims;      ///< innermost first
        std::uint32_t type = 0;               ///< ggml type id
        std::optional<std::uint64_t> offset;  ///< relative to the data section; default: packed, aligned
        Bytes data;
    };

    std::uint32_t version = 3;
    std::uint64_t alignment = 32;               ///< used to lay out the data; write general.alignment to change it
    std::optional<std::uint64_t> tensorCount;   ///< override the counts written in the preamble
    std::optional<std::uint64_t> keyCount;
    std::vector<Kv> kvs;
    std::vector<Tensor> tensors;

    // --- encoding helpers ---
    template <class T>
    static void put(Bytes& b, T v)
    {
        std::uint8_t raw[sizeof(T)];
        std::memcpy(raw, &v, sizeof(T)); // little-endian hosts only, as KVLens
        b.insert(b.end(), raw, raw + sizeof(T));
    }
    static void putString(Bytes& b, const std::string& s)
    {
        put<std::uint64_t>(b, s.size());
        b.insert(b.end(), s.begin(), s.end());
    }

    // --- metadata ---
    template <class T>
    GgufWriter& scalar(const std::string& key, std::uint32_t type, T v)
    {
        Bytes b;
        put(b, v);
        kvs.push_back({key, type, b});
        return *this;
    }
    GgufWriter& u8(const std::string& k, std::uint8_t v) { return scalar(k, 0, v); }
    GgufWriter& i8(const std::string& k, std::int8_t v) { return scalar(k, 1, v); }
    GgufWriter& u16(const std::string& k, std::uint16_t v) { return scalar(k, 2, v); }
    GgufWriter& i16(const std::string& k, std::int16_t v) { return scalar(k, 3, v); }
    GgufWriter& u32(const std::string& k, std::uint32_t v) { return scalar(k, 4, v); }
    GgufWriter& i32(const std::string& k, std::int32_t v) { return scalar(k, 5, v); }
    GgufWriter& f32(const std::string& k, float v) { return scalar(k, 6, v); }
    GgufWriter& boolean(const std::string& k, bool v) { return scalar(k, 7, std::uint8_t(v ? 1 : 0)); }
    GgufWriter& u64(const std::string& k, std::uint64_t v) { return scalar(k, 10, v); }
    GgufWriter& i64(const std::string& k, std::int64_t v) { return scalar(k, 11, v); }
    GgufWriter& f64(const std::string& k, double v) { return scalar(k, 12, v); }
    GgufWriter& string(const std::string& k, const std::string& v)
    {
        Bytes b;
        putString(b, v);
        kvs.push_back({k, 8, b});
        return *this;
    }
    /// An array of fixed-size elements of GGUF type `elementType`.
    template <class T>
    GgufWriter& array(const std::string& k, std::uint32_t elementType, const std::vector<T>& values)
    {
        Bytes b;
        put<std::uint32_t>(b, elementType);
        put<std::uint64_t>(b, values.size());
        for (const T& v : values)
            put(b, v);
        kvs.push_back({k, 9, b});
        return *this;
    }
    GgufWriter& strings(const std::string& k, const std::vector<std::string>& values)
    {
        Bytes b;
        put<std::uint32_t>(b, 8);
        put<std::uint64_t>(b, values.size());
        for (const std::string& v : values)
            putString(b, v);
        kvs.push_back({k, 9, b});
        return *this;
    }

    // --- tensors ---
    /// A tensor of `dims` (innermost first) from row-major floats, quantized row by row to `type`.
    GgufWriter& tensor(const std::string& name, std::vector<std::uint64_t> dims, ggml::GgmlType type,
                       const std::vector<float>& values)
    {
        const std::size_t row = static_cast<std::size_t>(dims.at(0));
        const std::size_t rowBytes = static_cast<std::size_t>(*ggml::rowBytes(type, static_cast<std::int64_t>(row)));
        Bytes data(values.size() / row * rowBytes);
        for (std::size_t r = 0; r < values.size() / row; ++r) {
            const Status s = ggml::quantizeRow(type, std::span<const float>(values.data() + r * row, row),
                                               std::span<std::uint8_t>(data.data() + r * rowBytes, rowBytes));
            if (!s)
                throw std::runtime_error("GgufWriter: " + s.error().text());
        }
        tensors.push_back({name, std::move(dims), static_cast<std::uint32_t>(type), std::nullopt, std::move(data)});
        return *this;
    }
    /// A tensor from its stored bytes (hand-built blocks).
    GgufWriter& rawTensor(const std::string& name, std::vector<std::uint64_t> dims, std::uint32_t type, Bytes data)
    {
        tensors.push_back({name, std::move(dims), type, std::nullopt, std::move(data)});
        return *this;
    }

    /// The file's bytes: preamble, key-value pairs, tensor infos, padding to `alignment`, then each
    /// tensor's data at its offset (padded to `alignment` between tensors).
    Bytes bytes() const
    {
        Bytes out{'G', 'G', 'U', 'F'};
        put<std::uint32_t>(out, version);
        put<std::uint64_t>(out, tensorCount.value_or(tensors.size()));
        put<std::uint64_t>(out, keyCount.value_or(kvs.size()));
        for (const Kv& kv : kvs) {
            putString(out, kv.key);
            put<std::uint32_t>(out, kv.type);
            out.insert(out.end(), kv.value.begin(), kv.value.end());
        }
        std::vector<std::uint64_t> offsets;
        std::uint64_t next = 0;
        for (const Tensor& t : tensors) {
            const std::uint64_t offset = t.offset.value_or(next);
            offsets.push_back(offset);
            next = std::max(next, (offset + t.data.size() + alignment - 1) / alignment * alignment);
            putString(out, t.name);
            put<std::uint32_t>(out, static_cast<std::uint32_t>(t.dims.size()));
            for (const std::uint64_t d : t.dims)
                put<std::uint64_t>(out, d);
            put<std::uint32_t>(out, t.type);
            put<std::uint64_t>(out, offset);
        }
        while (out.size() % alignment != 0)
            out.push_back(0);
        const std::size_t dataStart = out.size();
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            if (offsets[i] > (1ull << 30))
                continue; // a hostile offset: the header says it, no data goes there
            const std::size_t at = dataStart + static_cast<std::size_t>(offsets[i]);
            if (out.size() < at + tensors[i].data.size())
                out.resize(at + tensors[i].data.size(), 0);
            std::memcpy(out.data() + at, tensors[i].data.data(), tensors[i].data.size());
        }
        return out;
    }

    void write(const std::string& path) const
    {
        const Bytes b = bytes();
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        if (!out)
            throw std::runtime_error("GgufWriter: cannot write " + path);
    }
};

} // namespace kvlens::test
