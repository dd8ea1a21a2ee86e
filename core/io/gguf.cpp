// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF headers read as untrusted input, one function per phase: preamble, metadata, alignment, tensor
// infos, placement of the tensor bytes; every count is checked against the bytes left before it is used.
#include "core/io/gguf.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <set>
#include <utility>

namespace kvlens::io {

namespace {

using ggml::GgmlType;

/// The fewest bytes one key-value pair and one tensor info can take: a key of one byte (u64 length +
/// 1), the u32 type and a one-byte value; a name of one byte, n_dims, one dimension, type and offset.
constexpr std::uint64_t kMinKeyValueBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
constexpr std::size_t kGgufReadWindow = 1 << 20;

// --- Where the bytes come from ----------------------------------------------------------------------

/// Bytes at absolute file offsets, from memory or from a file.
class GgufSource {
public:
    virtual ~GgufSource() = default;
    /// Copies the n bytes at `offset` into `out`, or says why they cannot be had.
    virtual Status fetch(std::uint64_t offset, std::uint8_t* out, std::size_t n) = 0;
};

class GgufSpanSource final : public GgufSource {
public:
    GgufSpanSource(std::span<const std::uint8_t> bytes, const std::string& label) : m_bytes(bytes), m_label(label) {}

    Status fetch(std::uint64_t offset, std::uint8_t* out, std::size_t n) override
    {
        if (offset > m_bytes.size() || n > m_bytes.size() - offset)
            return Error{m_label, "the header runs past the " + std::to_string(m_bytes.size()) + " bytes given"};
        std::memcpy(out, m_bytes.data() + offset, n);
        return Ok{};
    }

private:
    std::span<const std::uint8_t> m_bytes;
    const std::string& m_label;
};

/// pread through a 1 MiB window, so the many small fields of a header cost few system calls.
class GgufFileSource final : public GgufSource {
public:
    GgufFileSource(int fd, std::uint64_t size, const std::string& label) : m_fd(fd), m_size(size), m_label(label) {}

    Status fetch(std::uint64_t offset, std::uint8_t* out, std::size_t n) override
    {
        if (offset >= m_windowStart && offset - m_windowStart <= m_window.size()
            && n <= m_window.size() - (offset - m_windowStart)) {
            std::memcpy(out, m_window.data() + (offset - m_windowStart), n);
            return Ok{};
        }
        if (n >= kGgufReadWindow)
            return readAt(offset, out, n);
        m_window.resize(static_cast<std::size_t>(std::min<std::uint64_t>(kGgufReadWindow, m_size - std::min(m_size, offset))));
        m_windowStart = offset;
        if (Status s = readAt(offset, m_window.data(), m_window.size()); !s) {
            m_window.clear();
            return s;
        }
        if (n > m_window.size())
            return Error{m_label, "the file shrank while its header was read"};
        std::memcpy(out, m_window.data(), n);
        return Ok{};
    }

private:
    Status readAt(std::uint64_t offset, std::uint8_t* out, std::size_t n) const
    {
        std::size_t got = 0;
        while (got < n) {
            const ssize_t r = ::pread(m_fd, out + got, n - got, static_cast<off_t>(offset + got));
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return Error{m_label, std::string("read error: ") + std::strerror(errno)};
            if (r == 0)
                return Error{m_label, "the file shrank while its header was read"};
            got += static_cast<std::size_t>(r);
        }
        return Ok{};
    }

    int m_fd;
    std::uint64_t m_size;
    const std::string& m_label;
    std::vector<std::uint8_t> m_window;
    std::uint64_t m_windowStart = 0;
};

// --- A bounded read position ----------------------------------------------------------------------------

/// Reads fields in order, never past the file's size or the header cap.
class GgufCursor {
public:
    GgufCursor(GgufSource& source, std::uint64_t fileSize, const std::string& label)
        : m_source(source), m_fileSize(fileSize), m_limit(std::min(fileSize, kGgufMaxHeaderBytes)), m_label(label)
    {
    }

    std::uint64_t position() const { return m_pos; }
    /// Bytes the rest of the header may still take.
    std::uint64_t remaining() const { return m_limit - m_pos; }
    Error error(std::string message) const { return Error{m_label, std::move(message)}; }

    Status take(std::uint8_t* out, std::uint64_t n, const std::string& what)
    {
        if (n > remaining()) {
            if (m_limit < m_fileSize)
                return error(what + ": the header would pass the cap of " + byteSizeText(kGgufMaxHeaderBytes));
            return error(what + ": runs past the end of the file (" + std::to_string(n) + " bytes at offset "
                         + std::to_string(m_pos) + " of " + std::to_string(m_fileSize) + ")");
        }
        if (Status s = m_source.fetch(m_pos, out, static_cast<std::size_t>(n)); !s)
            return s;
        m_pos += n;
        return Ok{};
    }

    /// A little-endian unsigned integer of `size` bytes (1, 2, 4 or 8).
    Result<std::uint64_t> readUnsigned(std::size_t size, const std::string& what)
    {
        std::uint8_t b[8] = {};
        if (Status s = take(b, size, what); !s)
            return s.error();
        std::uint64_t v = 0;
        for (std::size_t i = size; i-- > 0;)
            v = (v << 8) | b[i];
        return v;
    }
    Result<std::uint32_t> readU32(const std::string& what)
    {
        const auto v = readUnsigned(4, what);
        return v ? Result<std::uint32_t>(static_cast<std::uint32_t>(*v)) : Result<std::uint32_t>(v.error());
    }
    Result<std::uint64_t> readU64(const std::string& what) { return readUnsigned(8, what); }

    /// A string: u64 length, then that many bytes; refused above `maxBytes` before allocating.
    Result<std::string> readString(const std::string& what, std::uint64_t maxBytes)
    {
        const auto length = readU64(what + "'s length");
        if (!length)
            return length.error();
        if (*length > maxBytes)
            return error(what + " is " + std::to_string(*length) + " bytes long; at most " + std::to_string(maxBytes));
        if (*length > remaining())
            return error(what + " (" + std::to_string(*length) + " bytes) runs past the end of the "
                         + (m_limit < m_fileSize ? "header cap" : "file"));
        std::string text(static_cast<std::size_t>(*length), '\0');
        if (Status s = take(reinterpret_cast<std::uint8_t*>(text.data()), *length, what); !s)
            return s.error();
        return text;
    }

    /// `n` raw bytes appended to `out` a window at a time (n was checked against remaining()).
    Status readRaw(std::uint64_t n, std::vector<std::uint8_t>& out, const std::string& what)
    {
        while (n > 0) {
            const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, kGgufReadWindow));
            const std::size_t at = out.size();
            out.resize(at + chunk);
            if (Status s = take(out.data() + at, chunk, what); !s)
                return s;
            n -= chunk;
        }
        return Ok{};
    }

private:
    GgufSource& m_source;
    std::uint64_t m_fileSize;
    std::uint64_t m_limit;
    std::uint64_t m_pos = 0;
    const std::string& m_label;
};

// --- Value types ------------------------------------------------------------------------------------

/// Bytes of one value of a fixed-size type; 0 for string and array.
std::size_t valueSize(GgufValueType type)
{
    switch (type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool: return 1;
    case GgufValueType::U16:
    case GgufValueType::I16: return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32: return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64: return 8;
    default: return 0;
    }
}

/// The type with id `id`, or a refusal naming `what` and the allowed ids.
Result<GgufValueType> valueType(std::uint32_t id, const std::string& what, const GgufCursor& c)
{
    if (id > static_cast<std::uint32_t>(GgufValueType::F64))
        return c.error(what + " has value type " + std::to_string(id) + "; GGUF knows 0 .. 12 (u8 .. f64)");
    return static_cast<GgufValueType>(id);
}

std::string ggufKeyText(std::string_view key) { return "key " + quoteName(key); }

// --- Phase 1: preamble --------------------------------------------------------------------------------

struct GgufPreamble {
    std::uint32_t version = 0;
    std::uint64_t tensorCount = 0;
    std::uint64_t keyCount = 0;
};

Result<GgufPreamble> readPreamble(GgufCursor& c)
{
    std::uint8_t magic[4] = {};
    if (Status s = c.take(magic, 4, "magic"); !s)
        return s.error();
    if (std::memcmp(magic, "GGUF", 4) != 0)
        return c.error("not a GGUF file (it does not start with the magic 'GGUF')");
    GgufPreamble p;
    const auto version = c.readU32("version");
    if (!version)
        return version.error();
    p.version = *version;
    if (p.version == 1)
        return c.error("GGUF version 1 (the 2023 format with 32-bit counts) is not supported; KVLens reads versions 2 and 3");
    if (p.version != 2 && p.version != 3)
        return c.error("GGUF version " + std::to_string(p.version) + " is not supported (2 or 3)"
                       + ((p.version & 0xffffu) == 0 ? "; the file looks big-endian, which KVLens does not read" : ""));
    const auto tensors = c.readU64("tensor count");
    const auto keys = tensors ? c.readU64("key count") : Result<std::uint64_t>(tensors.error());
    if (!keys)
        return keys.error();
    p.tensorCount = *tensors;
    p.keyCount = *keys;
    const std::uint64_t room = c.remaining();
    if (p.tensorCount > room / kMinTensorInfoBytes)
        return c.error("tensor count " + std::to_string(p.tensorCount) + " cannot fit: each tensor info takes at least "
                       + std::to_string(kMinTensorInfoBytes) + " bytes and " + std::to_string(room) + " remain");
    if (p.keyCount > (room - p.tensorCount * kMinTensorInfoBytes) / kMinKeyValueBytes)
        return c.error("key count " + std::to_string(p.keyCount) + " cannot fit: each key-value pair takes at least "
                       + std::to_string(kMinKeyValueBytes) + " bytes and " + std::to_string(room) + " remain");
    return p;
}

// --- Phase 2: metadata --------------------------------------------------------------------------------

Result<GgufValue> readArray(GgufCursor& c, const std::string& what)
{
    GgufValue v;
    v.type = GgufValueType::Array;
    const auto elementId = c.readU32(what + "'s element type");
    if (!elementId)
        return elementId.error();
    const auto element = valueType(*elementId, what + "'s array", c);
    if (!element)
        return element.error();
    if (*element == GgufValueType::Array)
        return c.error(what + " is an array of arrays; nested arrays are not supported");
    v.elementType = *element;
    const auto count = c.readU64(what + "'s element count");
    if (!count)
        return count.error();
    v.count = *count;
    const std::uint64_t minSize = *element == GgufValueType::String ? 8 : valueSize(*element);
    if (v.count > c.remaining() / minSize)
        return c.error(what + ": " + std::to_string(v.count) + " elements of " + std::string(ggufTypeName(*element))
                       + " cannot fit in the " + std::to_string(c.remaining()) + " bytes that remain");
    if (*element != GgufValueType::String) {
        if (Status s = c.readRaw(v.count * minSize, v.raw, what); !s)
            return s.error();
        if (*element == GgufValueType::Bool)
            for (std::uint64_t i = 0; i < v.count; ++i)
                if (v.raw[static_cast<std::size_t>(i)] > 1)
                    return c.error(what + ": element " + std::to_string(i) + " is a bool of value "
                                   + std::to_string(v.raw[static_cast<std::size_t>(i)]) + " (0 or 1)");
        return v;
    }
    for (std::uint64_t i = 0; i < v.count; ++i) { // grows with what has been read, never by the count
        auto text = c.readString(what + " element " + std::to_string(i), kGgufMaxStringBytes);
        if (!text)
            return text.error();
        v.strings.push_back(std::move(*text));
    }
    return v;
}

Result<GgufValue> readValue(GgufCursor& c, GgufValueType type, const std::string& what)
{
    if (type == GgufValueType::Array)
        return readArray(c, what);
    GgufValue v;
    v.type = type;
    if (type == GgufValueType::String) {
        auto text = c.readString(what, kGgufMaxStringBytes);
        if (!text)
            return text.error();
        v.text = std::move(*text);
        return v;
    }
    const auto bits = c.readUnsigned(valueSize(type), what);
    if (!bits)
        return bits.error();
    if (type == GgufValueType::Bool && *bits > 1)
        return c.error(what + " is a bool of value " + std::to_string(*bits) + " (0 or 1)");
    v.bits = *bits;
    return v;
}

Status readMetadata(GgufCursor& c, std::uint64_t count, GgufFile& file)
{
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::string which = "key " + std::to_string(i);
        auto key = c.readString(which, kGgufMaxKeyBytes);
        if (!key)
            return key.error();
        if (key->empty())
            return c.error(which + " is empty");
        if (!isValidUtf8(*key))
            return c.error(which + " (" + quoteName(*key) + ") is not valid UTF-8");
        const std::string what = ggufKeyText(*key);
        if (file.metadata.count(*key) != 0)
            return c.error(what + " is given twice");
        const auto typeId = c.readU32(what + "'s value type");
        if (!typeId)
            return typeId.error();
        const auto type = valueType(*typeId, what, c);
        if (!type)
            return type.error();
        auto value = readValue(c, *type, what);
        if (!value)
            return value.error();
        file.metadata.emplace(std::move(*key), std::move(*value));
    }
    return Ok{};
}

// --- Phase 3: alignment ------------------------------------------------------------------------------

Status readAlignment(GgufFile& file)
{
    const auto alignment = file.getOptional<std::uint64_t>("general.alignment");
    if (!alignment)
        return alignment.error();
    if (!*alignment)
        return Ok{};
    const std::uint64_t a = **alignment;
    if (a == 0 || !std::has_single_bit(a) || a > kGgufMaxAlignment)
        return Error{file.path, "key 'general.alignment' = " + std::to_string(a) + " is not a power of two in 1 .. "
                                    + std::to_string(kGgufMaxAlignment)};
    file.alignment = a;
    return Ok{};
}

// --- Phase 4: tensor infos ------------------------------------------------------------------------------

std::string knownTypes()
{
    std::string names;
    for (const ggml::GgmlTypeTraits& t : ggml::kGgmlTypes)
        names += (names.empty() ? "" : ", ") + std::string(t.name) + " (" + std::to_string(static_cast<std::uint32_t>(t.type)) + ")";
    return names;
}

/// n_dims and the dimensions: 1 .. 4 of them, each >= 1, their product at most kGgufMaxElements.
Status readDims(GgufCursor& c, GgufTensor& t, const std::string& what)
{
    const auto nDims = c.readU32(what + "'s n_dims");
    if (!nDims)
        return nDims.error();
    if (*nDims < 1 || *nDims > kGgufMaxDims)
        return c.error(what + ": n_dims = " + std::to_string(*nDims) + "; 1 .. " + std::to_string(kGgufMaxDims));
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < *nDims; ++d) {
        const auto dim = c.readU64(what + "'s dims[" + std::to_string(d) + "]");
        if (!dim)
            return dim.error();
        if (*dim == 0)
            return c.error(what + ": dims[" + std::to_string(d) + "] = 0; every dimension is at least 1");
        if (*dim > kGgufMaxElements || elements > kGgufMaxElements / *dim)
            return c.error(what + ": dims[" + std::to_string(d) + "] = " + std::to_string(*dim)
                           + " makes more than 2^40 elements");
        elements *= *dim;
        t.dims.push_back(*dim);
    }
    return Ok{};
}

/// The ggml type, the row length against its block, and the byte size.
Status readTensorType(GgufCursor& c, GgufTensor& t, const std::string& what)
{
    const auto id = c.readU32(what + "'s type");
    if (!id)
        return id.error();
    const ggml::GgmlTypeTraits* traits = ggml::findGgmlType(*id);
    if (!traits)
        return c.error(what + ": ggml type id " + std::to_string(*id) + " is not one KVLens knows (" + knownTypes() + ")");
    t.type = traits->type;
    if (t.dims[0] % traits->blockSize != 0)
        return c.error(what + ": row length dims[0] = " + std::to_string(t.dims[0]) + " is not a multiple of "
                       + std::string(traits->name) + "'s block of " + std::to_string(traits->blockSize));
    // At most 2^40 elements of at most 9.125 bytes each (q8_K): no overflow.
    t.bytes = t.dims[0] / traits->blockSize * traits->bytesPerBlock * t.rowCount();
    return Ok{};
}

Result<GgufTensor> readTensorInfo(GgufCursor& c, std::uint64_t index, std::uint64_t alignment)
{
    const std::string which = "tensor " + std::to_string(index);
    GgufTensor t;
    auto name = c.readString(which + "'s name", kGgufMaxTensorNameBytes);
    if (!name)
        return name.error();
    if (name->empty())
        return c.error(which + "'s name is empty");
    if (!isValidUtf8(*name))
        return c.error(which + "'s name " + quoteName(*name) + " is not valid UTF-8");
    t.name = std::move(*name);
    const std::string what = "tensor " + quoteName(t.name);
    if (Status s = readDims(c, t, what); !s)
        return s.error();
    if (Status s = readTensorType(c, t, what); !s)
        return s.error();
    const auto offset = c.readU64(what + "'s offset");
    if (!offset)
        return offset.error();
    if (*offset % alignment != 0)
        return c.error(what + ": offset " + std::to_string(*offset) + " is not a multiple of the alignment "
                       + std::to_string(alignment));
    t.offset = *offset; // relative until placeTensors
    return t;
}

Status readTensorInfos(GgufCursor& c, std::uint64_t count, GgufFile& file)
{
    std::set<std::string, std::less<>> names;
    for (std::uint64_t i = 0; i < count; ++i) { // grows with what has been read, never by the count
        auto t = readTensorInfo(c, i, file.alignment);
        if (!t)
            return t.error();
        if (!names.insert(t->name).second)
            return c.error("tensor " + quoteName(t->name) + " is given twice");
        file.tensors.push_back(std::move(*t));
    }
    return Ok{};
}

// --- Phase 5: the data section ------------------------------------------------------------------------

std::string ggufRangeText(const GgufTensor& t) { return "[" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.bytes) + ")"; }

/// Absolute offsets from the aligned start of the data section; every range inside the file, none overlapping.
Status placeTensors(GgufFile& file, std::uint64_t headerEnd)
{
    file.dataOffset = (headerEnd + file.alignment - 1) / file.alignment * file.alignment; // headerEnd <= 512 MiB
    for (GgufTensor& t : file.tensors) {
        const std::string what = "tensor " + quoteName(t.name);
        if (t.offset > UINT64_MAX - file.dataOffset || t.bytes > UINT64_MAX - (file.dataOffset + t.offset))
            return Error{file.path, what + ": offset " + std::to_string(t.offset) + " overflows"};
        t.offset += file.dataOffset;
        if (t.offset + t.bytes > file.fileSize)
            return Error{file.path, what + ": bytes " + ggufRangeText(t) + " run past the end of the file ("
                                        + std::to_string(file.fileSize) + " bytes)"};
    }
    std::vector<std::size_t> order(file.tensors.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return file.tensors[a].offset < file.tensors[b].offset; });
    for (std::size_t i = 1; i < order.size(); ++i) {
        const GgufTensor& a = file.tensors[order[i - 1]];
        const GgufTensor& b = file.tensors[order[i]];
        if (b.offset < a.offset + a.bytes)
            return Error{file.path, "tensors " + quoteName(a.name) + " " + ggufRangeText(a) + " and " + quoteName(b.name) + " "
                                        + ggufRangeText(b) + " overlap"};
    }
    return Ok{};
}

Result<GgufFile> parseFrom(GgufSource& source, std::uint64_t fileSize, const std::string& label)
{
    GgufCursor c(source, fileSize, label);
    const auto preamble = readPreamble(c);
    if (!preamble)
        return preamble.error();
    GgufFile file;
    file.path = label;
    file.version = preamble->version;
    file.fileSize = fileSize;
    if (Status s = readMetadata(c, preamble->keyCount, file); !s)
        return s.error();
    if (Status s = readAlignment(file); !s)
        return s.error();
    if (Status s = readTensorInfos(c, preamble->tensorCount, file); !s)
        return s.error();
    if (Status s = placeTensors(file, c.position()); !s)
        return s.error();
    return file;
}

// --- Typed access -------------------------------------------------------------------------------------

bool isIntegerType(GgufValueType t)
{
    return valueSize(t) != 0 && t != GgufValueType::F32 && t != GgufValueType::F64 && t != GgufValueType::Bool;
}

bool isSignedType(GgufValueType t)
{
    return t == GgufValueType::I8 || t == GgufValueType::I16 || t == GgufValueType::I32 || t == GgufValueType::I64;
}

/// One stored number (`bits` of type `t`) as T, or nothing when the types do not convert or the value
/// does not fit.
template <class T>
std::optional<T> convertNumber(GgufValueType t, std::uint64_t bits)
{
    if constexpr (std::is_same_v<T, bool>) {
        if (t == GgufValueType::Bool)
            return bits != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
        if (t == GgufValueType::F32)
            return static_cast<T>(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
        if (t == GgufValueType::F64)
            return static_cast<T>(std::bit_cast<double>(bits));
    } else {
        if (!isIntegerType(t))
            return std::nullopt;
        if (isSignedType(t)) {
            const unsigned shift = 64u - 8u * static_cast<unsigned>(valueSize(t));
            const auto v = static_cast<std::int64_t>(bits << shift) >> shift; // sign-extend
            if (std::in_range<T>(v))
                return static_cast<T>(v);
        } else if (std::in_range<T>(bits)) {
            return static_cast<T>(bits);
        }
    }
    return std::nullopt;
}

template <class T>
constexpr std::string_view wantedName()
{
    if constexpr (std::is_same_v<T, std::string>) return "string";
    else if constexpr (std::is_same_v<T, bool>) return "bool";
    else if constexpr (std::is_same_v<T, float>) return "f32 (or f64)";
    else if constexpr (std::is_same_v<T, std::uint32_t>) return "u32 (an integer in 0 .. 2^32 - 1)";
    else if constexpr (std::is_same_v<T, std::int32_t>) return "i32 (an integer in -2^31 .. 2^31 - 1)";
    else return "u64 (an integer in 0 .. 2^64 - 1)";
}

template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

template <class T>
Result<T> convertValue(const GgufValue& v, std::string_view key, const std::string& label)
{
    if constexpr (IsVector<T>::value) {
        using E = typename T::value_type;
        const auto wrong = [&] {
            return Error{label, ggufKeyText(key) + " is " + v.typeText() + "; an array of " + std::string(wantedName<E>()) + " was expected"};
        };
        if (!v.isArray())
            return wrong();
        T out;
        if constexpr (std::is_same_v<E, std::string>) {
            if (v.elementType != GgufValueType::String)
                return wrong();
            out = v.strings;
        } else {
            const std::size_t size = valueSize(v.elementType);
            if (size == 0)
                return wrong();
            out.reserve(static_cast<std::size_t>(v.count));
            for (std::size_t i = 0; i < v.count; ++i) {
                std::uint64_t bits = 0;
                for (std::size_t k = size; k-- > 0;)
                    bits = (bits << 8) | v.raw[i * size + k];
                const auto e = convertNumber<E>(v.elementType, bits);
                if (!e)
                    return Error{label, ggufKeyText(key) + ": element " + std::to_string(i) + " of " + v.typeText()
                                            + " is not " + std::string(wantedName<E>())};
                out.push_back(*e);
            }
        }
        return out;
    } else {
        const auto wrong = [&] {
            return Error{label, ggufKeyText(key) + " is " + v.typeText() + "; " + std::string(wantedName<T>()) + " was expected"};
        };
        if constexpr (std::is_same_v<T, std::string>) {
            if (v.type != GgufValueType::String)
                return wrong();
            return v.text;
        } else {
            const auto n = v.isArray() || v.type == GgufValueType::String ? std::nullopt : convertNumber<T>(v.type, v.bits);
            if (!n)
                return wrong();
            return *n;
        }
    }
}

/// Opens a GGUF file for reading: regular files only, never blocking on a FIFO.
Result<int> openGgufFile(const std::string& path, std::uint64_t& size)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return Error{path, std::string("cannot be opened: ") + std::strerror(errno)};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const bool folder = S_ISDIR(st.st_mode);
        ::close(fd);
        return Error{path, folder ? "is a folder, not a file" : "is not a regular file (a device, FIFO or socket); refused"};
    }
    size = static_cast<std::uint64_t>(st.st_size);
    return fd;
}

} // namespace

std::string_view ggufTypeName(GgufValueType type)
{
    static constexpr std::string_view kNames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                  "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<std::size_t>(type);
    return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

std::string GgufValue::typeText() const
{
    if (!isArray())
        return std::string(ggufTypeName(type));
    return "an array of " + std::to_string(count) + " " + std::string(ggufTypeName(elementType));
}

std::uint64_t GgufTensor::rowCount() const
{
    std::uint64_t rows = 1;
    for (std::size_t i = 1; i < dims.size(); ++i)
        rows *= dims[i];
    return rows;
}

const GgufValue* GgufFile::find(std::string_view key) const
{
    const auto it = metadata.find(key);
    return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::findTensor(std::string_view name) const
{
    for (const GgufTensor& t : tensors)
        if (t.name == name)
            return &t;
    return nullptr;
}

template <class T>
Result<T> GgufFile::get(std::string_view key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return Error{path, ggufKeyText(key) + " is missing"};
    return convertValue<T>(*v, key, path);
}

template <class T>
Result<std::optional<T>> GgufFile::getOptional(std::string_view key) const
{
    const GgufValue* v = find(key);
    if (!v)
        return std::optional<T>{};
    auto value = convertValue<T>(*v, key, path);
    if (!value)
        return value.error();
    return std::optional<T>(std::move(*value));
}

#define KVLENS_GGUF_ACCESSORS(T)                                                     \
    template Result<T> GgufFile::get<T>(std::string_view key) const;                 \
    template Result<std::optional<T>> GgufFile::getOptional<T>(std::string_view key) const;
KVLENS_GGUF_ACCESSORS(std::string)
KVLENS_GGUF_ACCESSORS(std::uint32_t)
KVLENS_GGUF_ACCESSORS(std::int32_t)
KVLENS_GGUF_ACCESSORS(std::uint64_t)
KVLENS_GGUF_ACCESSORS(float)
KVLENS_GGUF_ACCESSORS(bool)
KVLENS_GGUF_ACCESSORS(std::vector<std::string>)
KVLENS_GGUF_ACCESSORS(std::vector<float>)
KVLENS_GGUF_ACCESSORS(std::vector<std::int32_t>)
#undef KVLENS_GGUF_ACCESSORS

Result<GgufFile> parseGgufHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize, const std::string& label)
{
    if (bytes.size() > fileSize)
        return Error{label, "given " + std::to_string(bytes.size()) + " bytes of a " + std::to_string(fileSize) + "-byte file"};
    GgufSpanSource source(bytes, label);
    return parseFrom(source, fileSize, label);
}

Result<GgufFile> readGgufHeader(const std::string& path)
{
    std::uint64_t size = 0;
    const auto fd = openGgufFile(path, size);
    if (!fd)
        return fd.error();
    GgufFileSource source(*fd, size, path);
    auto file = parseFrom(source, size, path);
    ::close(*fd);
    return file;
}

} // namespace kvlens::io
