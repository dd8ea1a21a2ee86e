// SPDX-License-Identifier: GPL-3.0-or-later
// Stored weight matrices read as float32 panels: contiguous rows dequantized by ggml's row
// kernels, transposed (Conv1D) parts gathered column by column, GGUF's q/k rows reordered.
#include "core/lm/weight_matrix.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "core/common/hash.h"

namespace kvlens::lm {

WeightMatrix WeightMatrix::fromFloat(const RowMatrixXf& m)
{
    auto buffer = std::make_shared<std::vector<float>>(m.data(), m.data() + m.size());
    StoredRows part;
    part.type = ggml::GgmlType::F32;
    part.rows = m.rows();
    part.cols = m.cols();
    part.data = reinterpret_cast<const std::uint8_t*>(buffer->data());
    part.rowBytes = static_cast<std::size_t>(m.cols()) * sizeof(float);
    WeightMatrix w;
    if (m.size() > 0)
        w.append(std::move(part), std::move(buffer));
    else
        w.m_cols = m.cols();
    return w;
}

void WeightMatrix::append(StoredRows part, std::shared_ptr<const void> owner)
{
    assert((m_parts.empty() || part.cols == m_cols) && "stacked parts need equal widths");
    assert((part.rowOrder.empty() || part.rowOrder.size() == static_cast<std::size_t>(part.rows)) && "row order size");
    m_cols = part.cols;
    Part p{std::move(part), m_rows, std::move(owner)};
    m_rows += p.rows.rows;
    m_parts.push_back(std::move(p));
}

std::uint64_t WeightMatrix::storedBytes() const
{
    std::uint64_t bytes = 0;
    for (const Part& p : m_parts)
        bytes += static_cast<std::uint64_t>(p.rows.transposed ? p.rows.cols : p.rows.rows) * p.rows.rowBytes;
    return bytes;
}

std::string WeightMatrix::typeName() const
{
    std::string out;
    for (const Part& p : m_parts) {
        const std::string name(ggml::ggmlName(p.rows.type));
        if (out.find(name) == std::string::npos)
            out += (out.empty() ? "" : "+") + name;
    }
    return out;
}

const WeightMatrix::Part& WeightMatrix::partOf(std::int64_t row) const
{
    const auto it = std::upper_bound(m_parts.begin(), m_parts.end(), row,
                                     [](std::int64_t r, const Part& p) { return r < p.first; });
    return *(it - 1);
}

void WeightMatrix::partToFloat(const StoredRows& p, std::int64_t r0, std::int64_t n, float* out)
{
    if (p.transposed) {
        // Stored [cols x rows]: stored row c holds input c of every output; gather outputs r0..r0+n.
        std::vector<float> line(static_cast<std::size_t>(n));
        const std::size_t valueBytes = p.rowBytes / static_cast<std::size_t>(p.rows);
        for (std::int64_t c = 0; c < p.cols; ++c) {
            const std::uint8_t* src = p.data + static_cast<std::size_t>(c) * p.rowBytes
                                      + static_cast<std::size_t>(r0) * valueBytes;
            ggml::dequantizeRow(p.type, src, line.data(), n);
            for (std::int64_t i = 0; i < n; ++i)
                out[i * p.cols + c] = line[static_cast<std::size_t>(i)];
        }
        return;
    }
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t stored = p.rowOrder.empty() ? r0 + i : p.rowOrder[static_cast<std::size_t>(r0 + i)];
        ggml::dequantizeRow(p.type, p.data + static_cast<std::size_t>(stored) * p.rowBytes, out + i * p.cols, p.cols);
    }
}

void WeightMatrix::toFloat(std::int64_t r0, std::int64_t n, float* out) const
{
    assert(r0 >= 0 && n >= 0 && r0 + n <= m_rows);
    while (n > 0) {
        const Part& p = partOf(r0);
        const std::int64_t local = r0 - p.first, take = std::min(n, p.rows.rows - local);
        partToFloat(p.rows, local, take, out);
        out += take * m_cols;
        r0 += take;
        n -= take;
    }
}

const float* WeightMatrix::directFloat(std::int64_t r0, std::int64_t n) const
{
    if (n <= 0 || r0 < 0 || r0 + n > m_rows)
        return nullptr;
    const Part& p = partOf(r0);
    const std::int64_t local = r0 - p.first;
    if (p.rows.type != ggml::GgmlType::F32 || p.rows.transposed || !p.rows.rowOrder.empty()
        || local + n > p.rows.rows || p.rows.rowBytes != static_cast<std::size_t>(m_cols) * sizeof(float)
        || reinterpret_cast<std::uintptr_t>(p.rows.data) % alignof(float) != 0)
        return nullptr;
    return reinterpret_cast<const float*>(p.rows.data + static_cast<std::size_t>(local) * p.rows.rowBytes);
}

std::uint64_t WeightMatrix::hash(std::uint64_t hash) const
{
    for (const Part& p : m_parts) {
        const StoredRows& r = p.rows;
        const std::uint64_t header[5] = {static_cast<std::uint64_t>(r.type), static_cast<std::uint64_t>(r.rows),
                                         static_cast<std::uint64_t>(r.cols), r.transposed ? 1u : 0u, r.rowOrder.size()};
        hash = fnv1a64Words(reinterpret_cast<const std::uint8_t*>(header), sizeof header, hash);
        if (!r.rowOrder.empty())
            hash = fnv1a64Words(reinterpret_cast<const std::uint8_t*>(r.rowOrder.data()), r.rowOrder.size() * 4, hash);
        const std::uint64_t stored = static_cast<std::uint64_t>(r.transposed ? r.cols : r.rows) * r.rowBytes;
        hash = fnv1a64Words(r.data, stored, hash);
    }
    return hash;
}

RowMatrixXf WeightMatrix::toDense() const
{
    RowMatrixXf m(m_rows, m_cols);
    if (m.size() > 0)
        toFloat(0, m_rows, m.data());
    return m;
}

} // namespace kvlens::lm
