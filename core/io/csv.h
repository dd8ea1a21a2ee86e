// SPDX-License-Identifier: GPL-3.0-or-later
// A small CSV builder (RFC 4180 quoting, round-trippable numbers) for every table KVLens writes.
#pragma once

#include "core/common/format.h"

#include <string>
#include <string_view>
#include <vector>

namespace kvlens {

/// Builds CSV text row by row. Numbers use the shortest form that reads back to the same
/// value (std::to_chars), so files are byte-identical across runs of the same spec.
class CsvWriter {
public:
    explicit CsvWriter(const std::vector<std::string>& header);

    CsvWriter& add(std::string_view text);   ///< quoted when it holds a comma, quote or newline
    CsvWriter& add(double value);            ///< "nan", "inf", "-inf" for non-finite values
    CsvWriter& add(float value);             ///< shortest form that reads back to the same float
    CsvWriter& add(long long value);
    CsvWriter& add(int value) { return add(static_cast<long long>(value)); }
    CsvWriter& add(unsigned long long value);
    void endRow();

    const std::string& text() const { return m_text; }
    std::size_t rows() const { return m_rows; }

private:
    void separator();
    std::string m_text;
    std::size_t m_columns = 0;
    std::size_t m_column = 0;
    std::size_t m_rows = 0;
};

} // namespace kvlens
