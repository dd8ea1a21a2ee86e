// SPDX-License-Identifier: GPL-3.0-or-later
// CSV text building.
#include "core/io/csv.h"

#include <cassert>
#include <cmath>

namespace kvlens {

CsvWriter::CsvWriter(const std::vector<std::string>& header)
    : m_columns(header.size())
{
    for (const auto& h : header)
        add(h);
    endRow();
    m_rows = 0;
}

void CsvWriter::separator()
{
    if (m_column++ > 0)
        m_text += ',';
}

CsvWriter& CsvWriter::add(std::string_view text)
{
    separator();
    if (text.find_first_of(",\"\n\r") == std::string_view::npos) {
        m_text += text;
    } else {
        m_text += '"';
        for (char c : text) {
            if (c == '"')
                m_text += '"';
            m_text += c;
        }
        m_text += '"';
    }
    return *this;
}

CsvWriter& CsvWriter::add(double value)
{
    separator();
    m_text += formatNumber(value);
    return *this;
}

CsvWriter& CsvWriter::add(float value)
{
    separator();
    m_text += formatNumber(value);
    return *this;
}

CsvWriter& CsvWriter::add(long long value)
{
    separator();
    m_text += std::to_string(value);
    return *this;
}

CsvWriter& CsvWriter::add(unsigned long long value)
{
    separator();
    m_text += std::to_string(value);
    return *this;
}

void CsvWriter::endRow()
{
    assert(m_column == m_columns && "CSV row with the wrong number of fields");
    m_text += '\n';
    m_column = 0;
    ++m_rows;
}

} // namespace kvlens
