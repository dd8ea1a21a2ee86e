// SPDX-License-Identifier: GPL-3.0-or-later
// The .npy header: magic, version, length field, and a strict parser for the Python dict literal NumPy writes.
#include "core/io/npy.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <string_view>

namespace kvlens::io {

namespace {

constexpr std::size_t kMaxDimensions = 64; // NPY_MAXDIMS of NumPy 2

/// Thrown inside this file only; converted to an Error at the public boundary.
struct NpyHeaderError {
    std::string message;
};

/// A hand-written parser for exactly the dict NumPy writes,
/// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, tolerating any spacing and trailing
/// commas. Anything else (expressions, escapes, other keys, nested values) is refused by name rather
/// than evaluated. The grammar has no nesting (a shape is a flat tuple of integers; a list, tuple or
/// dict anywhere else is refused at its first byte), so no input makes the parser recurse, and the
/// header it sees is capped at kNpyMaxHeaderBytes.
class DictParser {
public:
    DictParser(std::string_view text, std::string_view supported) : m_text(text), m_supported(supported) {}

    void parse()
    {
        skipSpace();
        expect('{');
        skipSpace();
        while (peek() != '}') {
            const std::string key = parseString("a header key");
            skipSpace();
            expect(':');
            skipSpace();
            parseValue(key);
            skipSpace();
            if (peek() == ',') {
                ++m_pos;
                skipSpace();
            } else if (peek() != '}') {
                fail("expected ',' or '}'");
            }
        }
        ++m_pos;
        skipSpace();
        if (m_pos != m_text.size())
            fail("unexpected text after the header dict");
        if (!m_descr)
            throw NpyHeaderError{"header lacks 'descr'"};
        if (!m_fortran)
            throw NpyHeaderError{"header lacks 'fortran_order'"};
        if (!m_shape)
            throw NpyHeaderError{"header lacks 'shape'"};
    }

    std::string descr() const { return *m_descr; }
    bool fortranOrder() const { return *m_fortran; }
    std::vector<std::int64_t> shape() const { return *m_shape; }

private:
    [[noreturn]] void fail(const std::string& what) const
    {
        std::string found = "the end of the header";
        if (m_pos < m_text.size())
            found = "'" + std::string(1, m_text[m_pos]) + "'";
        const auto c = m_pos < m_text.size() ? static_cast<unsigned char>(m_text[m_pos]) : 0;
        if (m_pos < m_text.size() && (c < 0x20 || c >= 0x7f)) {
            static constexpr char kHex[] = "0123456789abcdef";
            found = std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
        }
        throw NpyHeaderError{"malformed header dict: " + what + " at offset " + std::to_string(m_pos) + ", found " + found};
    }

    char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }

    void expect(char c)
    {
        if (peek() != c)
            fail(std::string("expected '") + c + "'");
        ++m_pos;
    }

    void skipSpace()
    {
        while (m_pos < m_text.size() && std::string_view(" \n\t\r").find(m_text[m_pos]) != std::string_view::npos)
            ++m_pos;
    }

    /// A Python string literal without escapes ('...' as repr() writes it, or "...").
    std::string parseString(const char* what)
    {
        const char quote = peek();
        if (quote != '\'' && quote != '"')
            fail(std::string("expected ") + what + " (a quoted string)");
        ++m_pos;
        std::string out;
        while (peek() != quote) {
            const auto c = static_cast<unsigned char>(peek());
            if (c == '\\')
                fail("escape sequences are not supported");
            if (c < 0x20 || c >= 0x7f)
                fail("expected printable ASCII in a string");
            out += static_cast<char>(c);
            ++m_pos;
        }
        ++m_pos;
        return out;
    }

    void parseValue(const std::string& key)
    {
        if (key == "descr") {
            if (m_descr)
                throw NpyHeaderError{"duplicate header key 'descr'"};
            if (peek() == '[')
                throw NpyHeaderError{"structured dtypes (a list 'descr') are not supported (" + std::string(m_supported) + ")"};
            m_descr = parseString("'descr' as a string");
        } else if (key == "fortran_order") {
            if (m_fortran)
                throw NpyHeaderError{"duplicate header key 'fortran_order'"};
            if (m_text.substr(m_pos, 4) == "True") {
                m_fortran = true;
                m_pos += 4;
            } else if (m_text.substr(m_pos, 5) == "False") {
                m_fortran = false;
                m_pos += 5;
            } else {
                fail("expected True or False for 'fortran_order'");
            }
        } else if (key == "shape") {
            if (m_shape)
                throw NpyHeaderError{"duplicate header key 'shape'"};
            m_shape = parseShape();
        } else {
            throw NpyHeaderError{"unknown header key " + quoteName(key) + " (expected 'descr', 'fortran_order', 'shape')"};
        }
    }

    /// A tuple of non-negative integers: (), (3,), (3, 4), with an optional trailing comma.
    std::vector<std::int64_t> parseShape()
    {
        expect('(');
        std::vector<std::int64_t> shape;
        bool comma = false;
        skipSpace();
        while (peek() != ')') {
            if (peek() == '-')
                throw NpyHeaderError{"negative dimension in 'shape'"};
            if (peek() < '0' || peek() > '9')
                fail("expected a dimension in 'shape'");
            std::uint64_t value = 0;
            while (peek() >= '0' && peek() <= '9') {
                const auto digit = static_cast<std::uint64_t>(peek() - '0');
                if (value > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) / 10)
                    throw NpyHeaderError{"a dimension in 'shape' exceeds 2^63 - 1"};
                value = value * 10 + digit;
                ++m_pos;
            }
            if (peek() == 'L') // Python 2 wrote long integers as 3L
                ++m_pos;
            shape.push_back(static_cast<std::int64_t>(value));
            if (shape.size() > kMaxDimensions)
                throw NpyHeaderError{"'shape' has more than " + std::to_string(kMaxDimensions) + " dimensions"};
            skipSpace();
            comma = peek() == ',';
            if (comma) {
                ++m_pos;
                skipSpace();
            } else if (peek() != ')') {
                fail("expected ',' or ')' in 'shape'");
            }
        }
        ++m_pos;
        if (shape.size() == 1 && !comma)
            throw NpyHeaderError{"'shape' (" + std::to_string(shape[0]) + ") is not a tuple; NumPy writes ("
                              + std::to_string(shape[0]) + ",)"};
        return shape;
    }

    std::string_view m_text;
    std::string_view m_supported;
    std::size_t m_pos = 0;
    std::optional<std::string> m_descr;
    std::optional<bool> m_fortran;
    std::optional<std::vector<std::int64_t>> m_shape;
};

/// The element type and byte order of a descr such as '<f4', or an error naming it.
void decodeDescr(const std::string& descr, TensorInfo& info)
{
    const auto unsupported = [&](const std::string& why) {
        return NpyHeaderError{"dtype " + quoteName(descr) + why + " is not supported (F16, F32, F64 only for .npy)"};
    };
    char order = '=';
    std::string_view type = descr;
    if (!type.empty() && (type[0] == '<' || type[0] == '>' || type[0] == '=' || type[0] == '|')) {
        order = type[0];
        type.remove_prefix(1);
    }
    if (!type.empty() && type[0] == 'O')
        throw unsupported(" (Python objects)");
    if (type == "f2")
        info.dtype = DType::F16;
    else if (type == "f4")
        info.dtype = DType::F32;
    else if (type == "f8")
        info.dtype = DType::F64;
    else
        throw unsupported("");
    if (order == '|')
        throw NpyHeaderError{"dtype " + quoteName(descr) + ": byte order '|' is only valid for 1-byte types"};
    info.bigEndian = order == '>' || (order == '=' && std::endian::native == std::endian::big);
}

} // namespace

Result<TensorFileInfo> parseNpyHeader(std::span<const std::uint8_t> bytes, const std::string& label)
{
    return parseNpyHeader(bytes, bytes.size(), label);
}

Result<NpyRawHeader> parseNpyRawHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize,
                                       const std::string& label, std::string_view supportedTypes)
{
    const auto fail = [&](const std::string& message) { return Error{label, message}; };
    if (bytes.size() > fileSize)
        return fail("given " + std::to_string(bytes.size()) + " bytes of a " + std::to_string(fileSize) + "-byte file");
    constexpr std::uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (fileSize < 10)
        return fail("file too short for a .npy header (" + std::to_string(fileSize) + " bytes)");
    if (bytes.size() < 10)
        return fail("short read: " + std::to_string(bytes.size()) + " bytes given, the .npy preamble needs 10");
    if (!std::equal(kMagic, kMagic + 6, bytes.begin()))
        return fail("not a .npy file (no \\x93NUMPY magic)");
    const unsigned major = bytes[6];
    const unsigned minor = bytes[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return fail("unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor)
                    + " (1.0, 2.0, 3.0 only)");
    // Version 1.0 has a 2-byte header length; 2.0 and 3.0 (UTF-8 header) a 4-byte one, all little-endian.
    const std::size_t lengthBytes = major == 1 ? 2 : 4;
    const std::size_t preamble = 8 + lengthBytes;
    if (fileSize < preamble)
        return fail("file too short for a version " + std::to_string(major) + ".0 preamble (" + std::to_string(fileSize)
                    + " bytes)");
    if (bytes.size() < preamble)
        return fail("short read: " + std::to_string(bytes.size()) + " bytes given, the preamble needs "
                    + std::to_string(preamble));
    std::uint64_t headerLength = 0;
    for (std::size_t i = lengthBytes; i > 0; --i)
        headerLength = (headerLength << 8) | bytes[8 + i - 1];
    if (headerLength > kNpyMaxHeaderBytes)
        return fail("header length " + std::to_string(headerLength) + " exceeds the cap of "
                    + std::to_string(kNpyMaxHeaderBytes) + " bytes");
    const std::uint64_t dataOffset = preamble + headerLength;
    if (dataOffset > fileSize)
        return fail("header length " + std::to_string(headerLength) + " runs past the end of the file ("
                    + std::to_string(fileSize) + " bytes)");
    if (dataOffset > bytes.size())
        return fail("short read: " + std::to_string(bytes.size()) + " bytes given, the header needs "
                    + std::to_string(dataOffset));

    NpyRawHeader raw;
    raw.dataOffset = dataOffset;
    try {
        const std::string_view text(reinterpret_cast<const char*>(bytes.data() + preamble),
                                    static_cast<std::size_t>(headerLength));
        DictParser parser(text, supportedTypes);
        parser.parse();
        raw.descr = parser.descr();
        raw.fortranOrder = parser.fortranOrder();
        raw.shape = parser.shape();
    } catch (const NpyHeaderError& e) {
        return fail(e.message);
    }
    return raw;
}

Result<TensorFileInfo> parseNpyHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize,
                                      const std::string& label, const std::string& tensor)
{
    const auto fail = [&](const std::string& message) {
        return Error{label, "tensor " + quoteName(tensor) + ": " + message};
    };
    auto raw = parseNpyRawHeader(bytes, fileSize, label);
    if (!raw)
        return fail(raw.error().message);
    const std::uint64_t dataOffset = raw->dataOffset;

    TensorInfo info;
    info.name = tensor;
    info.dataOffset = dataOffset;
    info.fileBytes = fileSize;
    try {
        decodeDescr(raw->descr, info);
    } catch (const NpyHeaderError& e) {
        return fail(e.message);
    }
    info.fortranOrder = raw->fortranOrder;
    info.shape = std::move(raw->shape);
    const auto payload = checkedPayloadBytes(info.shape, info.dtype, tensor, label);
    if (!payload)
        return payload.error();
    info.dataBytes = *payload;
    const std::uint64_t available = fileSize - dataOffset;
    if (info.dataBytes > available)
        return fail("truncated payload: the header declares " + std::to_string(info.dataBytes) + " bytes, only "
                    + std::to_string(available) + " follow the " + std::to_string(dataOffset) + "-byte header");
    if (info.dataBytes < available)
        return fail(std::to_string(available - info.dataBytes) + " trailing bytes after the "
                    + std::to_string(info.dataBytes) + "-byte payload");

    TensorFileInfo result;
    result.path = label;
    result.format = "npy";
    result.tensors.push_back(std::move(info));
    return result;
}

} // namespace kvlens::io
