// SPDX-License-Identifier: GPL-3.0-or-later
// A weight matrix as the checkpoint stores it (F32, F16, BF16 or one of ggml's block types, inside a
// memory map or an owned buffer), read a panel of rows at a time as float32 by the products: a 7 B
// model is never widened to float32 whole.
#pragma once

#include "core/common/types.h"
#include "core/io/ggml_types.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvlens::lm {

/// One stored tensor viewed as logical rows of y = x W^T: row r holds the `cols` weights of output r.
struct StoredRows {
    ggml::GgmlType type = ggml::GgmlType::F32;
    std::int64_t rows = 0, cols = 0;   ///< logical shape
    const std::uint8_t* data = nullptr;
    std::size_t rowBytes = 0;          ///< bytes between consecutive stored rows
    /// Stored [cols x rows] (Hugging Face's Conv1D, F32/F16/BF16 only): logical row r is stored column r.
    bool transposed = false;
    /// Logical row r reads stored row rowOrder[r] (GGUF's q/k row order); empty: the identity.
    std::vector<std::int32_t> rowOrder;
};

/// A logical [rows x cols] matrix made of stored parts stacked by rows (q|k|v, gate|up). Immutable
/// once built; toFloat may run from several threads at once.
class WeightMatrix {
public:
    WeightMatrix() = default;
    /// An owning float32 copy of `m` (hand-built models, tests).
    static WeightMatrix fromFloat(const RowMatrixXf& m);

    /// Appends `part` below the rows already held (its cols must equal theirs). `owner` keeps the
    /// part's bytes alive (a memory map or a buffer); may be null when something else does.
    void append(StoredRows part, std::shared_ptr<const void> owner = nullptr);

    std::int64_t rows() const { return m_rows; }
    std::int64_t cols() const { return m_cols; }
    bool empty() const { return m_rows == 0; }
    /// Bytes the stored parts occupy.
    std::uint64_t storedBytes() const;
    /// The parts' type names ("bf16", or "q4_K+q6_K" when they differ).
    std::string typeName() const;
    /// The stored parts, top to bottom (a forward device uploads them as stored).
    std::size_t partCount() const { return m_parts.size(); }
    const StoredRows& part(std::size_t i) const { return m_parts[i].rows; }

    /// Logical rows [r0, r0 + n) as float32 into `out` ([n x cols], row-major).
    void toFloat(std::int64_t r0, std::int64_t n, float* out) const;
    /// Rows [r0, r0 + n) stored as contiguous float32 in logical order, or null (then use toFloat).
    const float* directFloat(std::int64_t r0, std::int64_t n) const;
    /// The whole matrix as float32 (small models and tests only).
    RowMatrixXf toDense() const;
    /// `hash` continued over every part's type, shape, row order and stored bytes (fnv1a64Words).
    std::uint64_t hash(std::uint64_t hash) const;

private:
    struct Part {
        StoredRows rows;
        std::int64_t first = 0; ///< logical index of the part's row 0
        std::shared_ptr<const void> owner;
    };
    const Part& partOf(std::int64_t row) const;
    static void partToFloat(const StoredRows& p, std::int64_t r0, std::int64_t n, float* out);

    std::vector<Part> m_parts;
    std::int64_t m_rows = 0, m_cols = 0;
};

} // namespace kvlens::lm
