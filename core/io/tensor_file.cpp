// SPDX-License-Identifier: GPL-3.0-or-later
// Tensor payload decoding (byte order, Fortran order, f16/bf16/f64 to float32) and dispatch by file extension.
#include "core/io/tensor_file.h"

#include "core/common/fp16.h"
#include "core/io/npy.h"
#include "core/io/npz.h"
#include "core/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <utility>

namespace kvlens::io {

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

namespace {

Error tensorError(const std::string& label, const std::string& tensor, const std::string& message)
{
    return Error{label, "tensor " + quoteName(tensor) + ": " + message};
}

std::uint16_t load16(const std::uint8_t* p, bool swap)
{
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return swap ? static_cast<std::uint16_t>((v >> 8) | (v << 8)) : v;
}

std::uint32_t load32(const std::uint8_t* p, bool swap)
{
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    if (swap)
        v = (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
    return v;
}

std::uint64_t load64(const std::uint8_t* p, bool swap)
{
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    if (swap)
        v = (static_cast<std::uint64_t>(load32(p, true)) << 32) | load32(p + 4, true);
    return v;
}

/// Converts `count` stored elements into floats, in storage order.
void convert(const std::uint8_t* src, std::size_t count, DType type, bool swap, float* dst)
{
    switch (type) {
    case DType::F16:
        for (std::size_t i = 0; i < count; ++i)
            dst[i] = halfBitsToFloat(load16(src + 2 * i, swap));
        break;
    case DType::BF16:
        for (std::size_t i = 0; i < count; ++i)
            dst[i] = bfloat16BitsToFloat(load16(src + 2 * i, swap));
        break;
    case DType::F32:
        for (std::size_t i = 0; i < count; ++i)
            dst[i] = std::bit_cast<float>(load32(src + 4 * i, swap));
        break;
    case DType::F64:
        // IEEE 754 (Annex F) narrowing: round to nearest, beyond FLT_MAX to ±inf, NaN stays NaN.
        for (std::size_t i = 0; i < count; ++i)
            dst[i] = static_cast<float>(std::bit_cast<double>(load64(src + 8 * i, swap)));
        break;
    }
}

/// Column-major `in` to row-major `out` for an N-d shape: walks the source in storage order and
/// keeps the destination offset up to date with one add per step (an odometer over the indices).
void fortranToC(const std::vector<float>& in, const std::vector<std::int64_t>& shape, std::vector<float>& out)
{
    const std::size_t rank = shape.size();
    std::vector<std::size_t> cStride(rank, 1);
    for (std::size_t k = rank - 1; k > 0; --k)
        cStride[k - 1] = cStride[k] * static_cast<std::size_t>(shape[k]);
    std::vector<std::size_t> index(rank, 0);
    std::size_t dst = 0;
    for (std::size_t src = 0; src < in.size(); ++src) {
        out[dst] = in[src];
        for (std::size_t k = 0; k < rank; ++k) {
            dst += cStride[k];
            if (++index[k] < static_cast<std::size_t>(shape[k]))
                break;
            dst -= cStride[k] * index[k];
            index[k] = 0;
        }
    }
}

/// A read-only file with positioned, complete reads; every failure names the path.
class InputFile {
public:
    ~InputFile()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }

    Status open(const std::string& path)
    {
        m_path = path;
        // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat refuses it.
        m_fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (m_fd < 0)
            return Error{path, std::string("cannot open: ") + std::strerror(errno)};
        struct stat st {};
        if (::fstat(m_fd, &st) != 0)
            return Error{path, std::string("cannot stat: ") + std::strerror(errno)};
        if (!S_ISREG(st.st_mode))
            return Error{path, "is not a regular file"};
        m_size = static_cast<std::uint64_t>(st.st_size);
        return Ok{};
    }

    std::uint64_t size() const { return m_size; }

    /// Reads exactly out.size() bytes at `offset`; a file that ends early is a "short read" error.
    Status readAt(std::uint64_t offset, std::span<std::uint8_t> out, const std::string& what)
    {
        std::size_t done = 0;
        while (done < out.size()) {
            const ssize_t n = ::pread(m_fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return Error{m_path, what + ": read failed: " + std::strerror(errno)};
            }
            if (n == 0)
                return Error{m_path, what + ": short read: got " + std::to_string(done) + " of "
                                         + std::to_string(out.size()) + " bytes at offset " + std::to_string(offset)};
            done += static_cast<std::size_t>(n);
        }
        return Ok{};
    }

private:
    std::string m_path;
    int m_fd = -1;
    std::uint64_t m_size = 0;
};

/// Allocates `n` bytes, or an error naming the tensor instead of std::bad_alloc.
Result<std::vector<std::uint8_t>> allocateBytes(std::uint64_t n, const std::string& label, const std::string& tensor)
{
    try {
        return std::vector<std::uint8_t>(static_cast<std::size_t>(n));
    } catch (const std::bad_alloc&) {
        return tensorError(label, tensor, "cannot allocate " + std::to_string(n) + " bytes");
    }
}

/// A file read front to back through an InputFile: skipping is free (pread takes the offset).
/// `what` ("tensor 'k'") starts its error messages.
class FileStream : public ByteStream {
public:
    FileStream(InputFile& file, std::string what) : m_file(file), m_what(std::move(what)) {}

    Status read(std::span<std::uint8_t> out) override
    {
        if (auto s = m_file.readAt(m_position, out, m_what); !s)
            return s;
        m_position += out.size();
        return Ok{};
    }

    Status skip(std::uint64_t n) override
    {
        m_position += n;
        return Ok{};
    }

private:
    InputFile& m_file;
    std::string m_what;
    std::uint64_t m_position = 0;
};

/// Bytes in memory read front to back; running past the end is a "short read" error naming
/// `label` and `what`, as FileStream's.
class MemoryStream : public ByteStream {
public:
    MemoryStream(std::span<const std::uint8_t> bytes, std::string label, std::string what)
        : m_bytes(bytes), m_label(std::move(label)), m_what(std::move(what))
    {
    }

    Status read(std::span<std::uint8_t> out) override
    {
        if (m_position > m_bytes.size() || out.size() > m_bytes.size() - m_position)
            return Error{m_label, m_what + ": short read: " + std::to_string(out.size()) + " bytes at offset "
                                      + std::to_string(m_position) + " of " + std::to_string(m_bytes.size())};
        std::copy_n(m_bytes.begin() + static_cast<std::ptrdiff_t>(m_position), out.size(), out.begin());
        m_position += out.size();
        return Ok{};
    }

    Status skip(std::uint64_t n) override
    {
        m_position = n > std::numeric_limits<std::uint64_t>::max() - m_position ? std::numeric_limits<std::uint64_t>::max()
                                                                                : m_position + n;
        return Ok{};
    }

private:
    std::span<const std::uint8_t> m_bytes;
    std::string m_label;
    std::string m_what;
    std::uint64_t m_position = 0;
};

/// Largest piece of a stream held at once by the slice reader, whatever the tensor's size.
constexpr std::size_t kChunkBytes = 1 << 20;

/// A forward-only window of at most kChunkBytes over a ByteStream: hands out byte ranges at
/// non-decreasing offsets, skipping (seeking) over what lies between them and never reading past
/// `end`, the byte after the last one the slice needs.
class ChunkCursor {
public:
    ChunkCursor(ByteStream& stream, std::uint64_t end) : m_stream(stream), m_end(end) {}

    /// The `n` bytes (n <= kChunkBytes, offset + n <= end) at `offset`, valid until the next call.
    Result<const std::uint8_t*> at(std::uint64_t offset, std::size_t n)
    {
        const std::uint64_t held = m_start + m_buffer.size();
        if (offset >= m_start && offset + n <= held)
            return m_buffer.data() + (offset - m_start);
        // Offsets never decrease, so nothing before `offset` is needed again.
        std::size_t kept = 0;
        if (offset < held) {
            kept = static_cast<std::size_t>(held - offset);
            std::memmove(m_buffer.data(), m_buffer.data() + (offset - m_start), kept);
        } else if (auto s = m_stream.skip(offset - held); !s) {
            return s.error();
        }
        m_buffer.resize(static_cast<std::size_t>(std::min<std::uint64_t>(kChunkBytes, m_end - offset)));
        m_start = offset;
        if (auto s = m_stream.read(std::span(m_buffer).subspan(kept)); !s)
            return s.error();
        return m_buffer.data();
    }

private:
    ByteStream& m_stream;
    std::uint64_t m_end;
    std::uint64_t m_start = 0;          ///< stream offset of m_buffer[0]; the stream stands at m_start + size
    std::vector<std::uint8_t> m_buffer;
};

/// Where the block lies in storage: element (r, c) of the block, r counted from 0 (the request's
/// rowStart), is stored element first + r * rowStride + c * colStride.
struct BlockLayout {
    std::uint64_t first = 0;
    std::uint64_t rowStride = 0;
    std::uint64_t colStride = 0;
    std::uint64_t last = 0; ///< the stored element read last
};

/// The block's storage layout; the request has been checked, so no index overflows.
BlockLayout blockLayout(const TensorInfo& info, const SliceRequest& slice)
{
    const std::size_t rank = info.shape.size();
    const auto dim = [&](std::size_t k) { return static_cast<std::uint64_t>(info.shape[k]); };
    const auto rows = dim(rank - 2), cols = dim(rank - 1);
    const auto rowStart = static_cast<std::uint64_t>(slice.rowStart), rowCount = static_cast<std::uint64_t>(slice.rowCount);
    BlockLayout layout;
    if (!info.fortranOrder) {
        std::uint64_t matrix = 0; // C-order index of the [rows x cols] matrix
        for (std::size_t k = 0; k + 2 < rank; ++k)
            matrix = matrix * dim(k) + static_cast<std::uint64_t>(slice.leading[k]);
        layout.first = (matrix * rows + rowStart) * cols;
        layout.rowStride = cols;
        layout.colStride = 1;
    } else {
        std::uint64_t stride = 1; // Fortran order: the first index varies fastest
        for (std::size_t k = 0; k + 2 < rank; ++k) {
            layout.first += static_cast<std::uint64_t>(slice.leading[k]) * stride;
            stride *= dim(k);
        }
        layout.rowStride = stride;
        layout.colStride = stride * rows;
        layout.first += rowStart * layout.rowStride;
    }
    layout.last = layout.first + (rowCount - 1) * layout.rowStride + (cols - 1) * layout.colStride;
    return layout;
}

/// Converts `count` stored elements from element `first` on into dst[0], dst[stride], dst[2 * stride]...
Status readRun(ChunkCursor& cursor, const TensorInfo& info, std::uint64_t first, std::uint64_t count, float* dst,
               std::size_t stride)
{
    const std::uint64_t size = dtypeSize(info.dtype);
    const bool swap = info.bigEndian != (std::endian::native == std::endian::big);
    const std::uint64_t perChunk = kChunkBytes / size;
    for (std::uint64_t done = 0; done < count;) {
        const auto n = static_cast<std::size_t>(std::min(perChunk, count - done));
        const auto bytes = cursor.at(info.dataOffset + (first + done) * size, static_cast<std::size_t>(n * size));
        if (!bytes)
            return bytes.error();
        if (stride == 1)
            convert(*bytes, n, info.dtype, swap, dst + done);
        else
            for (std::size_t i = 0; i < n; ++i)
                convert(*bytes + i * size, 1, info.dtype, swap, dst + (done + i) * stride);
        done += n;
    }
    return Ok{};
}

/// Reads the block into `out` (rowCount x cols, C order) in storage order, so that the cursor only
/// moves forward: C order is one run; Fortran order is a run per column when rows are adjacent in
/// storage (rank 2), else one element at a time, the chunked cursor turning those into few reads.
Status readBlock(ChunkCursor& cursor, const TensorInfo& info, const SliceRequest& slice, const BlockLayout& layout,
                 float* out)
{
    const auto rowCount = static_cast<std::uint64_t>(slice.rowCount);
    const auto cols = static_cast<std::uint64_t>(info.shape.back());
    if (!info.fortranOrder)
        return readRun(cursor, info, layout.first, rowCount * cols, out, 1);
    for (std::uint64_t c = 0; c < cols; ++c) {
        const std::uint64_t column = layout.first + c * layout.colStride;
        if (layout.rowStride == 1) {
            if (auto s = readRun(cursor, info, column, rowCount, out + c, static_cast<std::size_t>(cols)); !s)
                return s;
            continue;
        }
        for (std::uint64_t r = 0; r < rowCount; ++r)
            if (auto s = readRun(cursor, info, column + r * layout.rowStride, 1, out + r * cols + c, 1); !s)
                return s;
    }
    return Ok{};
}

/// a * b, or UINT64_MAX when that overflows.
std::uint64_t saturatingProduct(std::uint64_t a, std::uint64_t b)
{
    return b != 0 && a > std::numeric_limits<std::uint64_t>::max() / b ? std::numeric_limits<std::uint64_t>::max() : a * b;
}

enum class Format { Npy, Npz, Safetensors };

Result<Format> formatOf(const std::string& path)
{
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext == ".npy")
        return Format::Npy;
    if (ext == ".npz")
        return Format::Npz;
    if (ext == ".safetensors")
        return Format::Safetensors;
    return Error{path, (ext.empty() ? std::string("no file extension") : "unknown extension " + quoteName(ext))
                           + " (expected .npy, .npz or .safetensors)"};
}

/// The header of an open .npy or .safetensors file, read with as few bytes as the format allows.
Result<TensorFileInfo> readHeader(InputFile& file, Format format, const std::string& path)
{
    const std::uint64_t size = file.size();
    if (format == Format::Npy) {
        std::vector<std::uint8_t> prefix(static_cast<std::size_t>(std::min(size, kNpyMaxPreambleBytes)));
        if (auto s = file.readAt(0, prefix, "header"); !s)
            return s.error();
        return parseNpyHeader(prefix, size, path);
    }
    std::vector<std::uint8_t> prefix(static_cast<std::size_t>(std::min<std::uint64_t>(size, 8)));
    if (auto s = file.readAt(0, prefix, "header length"); !s)
        return s.error();
    if (prefix.size() == 8) {
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i)
            n = (n << 8) | prefix[static_cast<std::size_t>(i)];
        // Only a length the parser will accept is read; otherwise it reports the bad length.
        if (n <= kSafetensorsMaxHeaderBytes && n <= size - 8) {
            prefix.resize(static_cast<std::size_t>(8 + n));
            if (auto s = file.readAt(8, std::span(prefix).subspan(8), "header"); !s)
                return s.error();
        }
    }
    return parseSafetensorsHeader(prefix, size, path);
}

} // namespace

std::string_view dtypeName(DType type)
{
    switch (type) {
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    }
    return "?";
}

std::uint64_t dtypeSize(DType type)
{
    switch (type) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
    }
    return 0;
}

std::int64_t TensorInfo::elementCount() const
{
    std::int64_t n = 1;
    for (const std::int64_t d : shape) {
        if (d <= 0)
            return 0;
        if (n > std::numeric_limits<std::int64_t>::max() / d)
            return std::numeric_limits<std::int64_t>::max();
        n *= d;
    }
    return n;
}

Status checkReadLimits(const TensorInfo& info, const std::string& label, const ReadLimits& limits)
{
    const auto count = static_cast<std::uint64_t>(info.elementCount());
    const std::uint64_t bytes = count > std::numeric_limits<std::uint64_t>::max() / sizeof(float)
                                    ? std::numeric_limits<std::uint64_t>::max()
                                    : count * sizeof(float);
    if (bytes > limits.maxTensorBytes)
        return tensorError(label, info.name, "float32 copy needs " + std::to_string(bytes)
                                                 + " bytes, more than the limit of "
                                                 + std::to_string(limits.maxTensorBytes) + " bytes");
    return Ok{};
}

std::string quoteName(std::string_view text)
{
    constexpr std::size_t kMax = 80;
    std::string out = "'";
    for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c >= 0x7f || c == '\\') {
            static constexpr char kHex[] = "0123456789abcdef";
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    if (text.size() > kMax)
        out += "...";
    return out + "'";
}

std::string tensorNameList(const std::vector<TensorInfo>& tensors)
{
    constexpr std::size_t kShown = 8;
    std::string out;
    for (std::size_t i = 0; i < tensors.size() && i < kShown; ++i)
        out += (i ? ", " : "") + quoteName(tensors[i].name);
    if (tensors.size() > kShown)
        out += " and " + std::to_string(tensors.size() - kShown) + " more";
    return tensors.empty() ? "none" : out;
}

Result<std::uint64_t> checkedPayloadBytes(const std::vector<std::int64_t>& shape, DType type, const std::string& tensor,
                                          const std::string& label)
{
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    // As NumPy does (gh-15397), a zero dimension does not excuse an overflowing product of the others.
    std::uint64_t bytes = dtypeSize(type);
    bool overflow = false;
    bool empty = false;
    std::string product;
    for (const std::int64_t d : shape) {
        if (d < 0)
            return tensorError(label, tensor, "negative dimension " + std::to_string(d));
        product += std::to_string(d) + " x ";
        const auto u = static_cast<std::uint64_t>(d);
        if (u == 0)
            empty = true;
        else if (bytes > kMax / u)
            overflow = true;
        else
            bytes *= u;
    }
    if (overflow)
        return tensorError(label, tensor, "shape product overflows (" + product + std::to_string(dtypeSize(type))
                                              + " bytes exceeds 2^63 - 1)");
    return empty ? std::uint64_t{0} : bytes;
}

namespace {

/// The header's payload size must be what its shape and dtype need (with overflow checks): shared
/// by the whole-tensor and the slice decoders.
Status checkPayloadSize(const TensorInfo& info, const std::string& label)
{
    const auto expected = checkedPayloadBytes(info.shape, info.dtype, info.name, label);
    if (!expected)
        return expected.error();
    if (*expected != info.dataBytes)
        return tensorError(label, info.name, "header gives " + std::to_string(info.dataBytes) + " payload bytes but shape x "
                                                 + std::string(dtypeName(info.dtype)) + " needs "
                                                 + std::to_string(*expected));
    return Ok{};
}

} // namespace

Result<Tensor> decodeTensor(std::span<const std::uint8_t> payload, const TensorInfo& info, const std::string& label,
                            const ReadLimits& limits)
{
    if (auto sized = checkPayloadSize(info, label); !sized)
        return sized.error();
    if (payload.size() < info.dataBytes)
        return tensorError(label, info.name, "truncated payload: " + std::to_string(payload.size()) + " of "
                                                 + std::to_string(info.dataBytes) + " bytes");
    if (payload.size() > info.dataBytes)
        return tensorError(label, info.name, "payload has " + std::to_string(payload.size()) + " bytes, expected "
                                                 + std::to_string(info.dataBytes));
    if (auto s = checkReadLimits(info, label, limits); !s)
        return s.error();

    const auto count = static_cast<std::size_t>(info.dataBytes / dtypeSize(info.dtype));
    Tensor tensor;
    tensor.name = info.name;
    tensor.storedType = info.dtype;
    tensor.shape = info.shape;
    const bool swap = info.bigEndian != (std::endian::native == std::endian::big);
    const bool transpose = info.fortranOrder && info.shape.size() > 1 && count > 1;
    try {
        tensor.data.resize(count);
        if (transpose) {
            std::vector<float> stored(count);
            convert(payload.data(), count, info.dtype, swap, stored.data());
            fortranToC(stored, info.shape, tensor.data);
        } else {
            convert(payload.data(), count, info.dtype, swap, tensor.data.data());
        }
    } catch (const std::bad_alloc&) {
        return tensorError(label, info.name, "cannot allocate " + std::to_string(count * sizeof(float)) + " bytes");
    }
    return tensor;
}

Result<TensorFileInfo> inspectTensorFile(const std::string& path)
{
    const auto format = formatOf(path);
    if (!format)
        return format.error();
    if (*format == Format::Npz)
        return inspectNpzFile(path);
    InputFile file;
    if (auto s = file.open(path); !s)
        return s.error();
    return readHeader(file, *format, path);
}

bool samePayloadLayout(const TensorInfo& a, const TensorInfo& b)
{
    return a.dtype == b.dtype && a.shape == b.shape && a.fortranOrder == b.fortranOrder && a.bigEndian == b.bigEndian
           && a.dataOffset == b.dataOffset && a.dataBytes == b.dataBytes;
}

Status checkSliceRequest(const TensorInfo& info, const SliceRequest& slice, const std::string& label,
                         const ReadLimits& limits)
{
    const auto fail = [&](const std::string& message) {
        return tensorError(label, info.name, "slice " + message + " (shape " + shapeText(info.shape) + ")");
    };
    // Also refuses negative dimensions, so every index below fits the shape's 63-bit product.
    if (const auto bytes = checkedPayloadBytes(info.shape, info.dtype, info.name, label); !bytes)
        return bytes.error();
    const std::size_t rank = info.shape.size();
    if (rank < 2)
        return fail("needs a tensor of rank 2 or more, laid out [..., rows, cols]");
    if (slice.leading.size() != rank - 2)
        return fail("'leading' has " + std::to_string(slice.leading.size()) + " indices, the tensor needs "
                    + std::to_string(rank - 2) + " (one for each dimension before the last two)");
    for (std::size_t k = 0; k + 2 < rank; ++k)
        if (slice.leading[k] < 0 || slice.leading[k] >= info.shape[k])
            return fail("'leading[" + std::to_string(k) + "]' = " + std::to_string(slice.leading[k])
                        + " is outside dimension " + std::to_string(k) + " of size " + std::to_string(info.shape[k]));
    const std::int64_t rows = info.shape[rank - 2];
    if (slice.rowCount < 1)
        return fail("'rowCount' = " + std::to_string(slice.rowCount) + ": at least one row is needed");
    if (slice.rowStart < 0 || slice.rowStart >= rows)
        return fail("'rowStart' = " + std::to_string(slice.rowStart) + " is outside the " + std::to_string(rows) + " rows");
    if (slice.rowCount > rows - slice.rowStart)
        return fail("'rowStart' + 'rowCount' = " + std::to_string(slice.rowStart) + " + " + std::to_string(slice.rowCount)
                    + " runs past the " + std::to_string(rows) + " rows");
    const auto cols = static_cast<std::uint64_t>(info.shape[rank - 1]);
    const std::uint64_t bytes = saturatingProduct(saturatingProduct(static_cast<std::uint64_t>(slice.rowCount), cols),
                                                  sizeof(float));
    if (bytes > limits.maxTensorBytes)
        return fail("float32 copy needs " + std::to_string(bytes) + " bytes ('rowCount' " + std::to_string(slice.rowCount)
                    + " x " + std::to_string(cols) + " columns x 4), more than the limit of "
                    + std::to_string(limits.maxTensorBytes) + " bytes");
    return Ok{};
}

Result<Tensor> decodeTensorSlice(ByteStream& stream, const TensorInfo& info, const SliceRequest& slice,
                                 const std::string& label, const ReadLimits& limits)
{
    if (auto s = checkSliceRequest(info, slice, label, limits); !s)
        return s.error();
    if (auto sized = checkPayloadSize(info, label); !sized)
        return sized.error();
    if (info.dataOffset > std::numeric_limits<std::uint64_t>::max() - info.dataBytes)
        return tensorError(label, info.name, "payload offset " + std::to_string(info.dataOffset) + " overflows");
    const auto cols = static_cast<std::uint64_t>(info.shape.back());
    const auto count = static_cast<std::size_t>(static_cast<std::uint64_t>(slice.rowCount) * cols);
    Tensor tensor;
    tensor.name = info.name;
    tensor.storedType = info.dtype;
    tensor.shape = {slice.rowCount, info.shape.back()};
    try {
        tensor.data.resize(count);
    } catch (const std::bad_alloc&) {
        return tensorError(label, info.name, "cannot allocate " + std::to_string(count * sizeof(float)) + " bytes");
    }
    if (count == 0)
        return tensor; // zero columns: nothing is stored
    const BlockLayout layout = blockLayout(info, slice);
    ChunkCursor cursor(stream, info.dataOffset + (layout.last + 1) * dtypeSize(info.dtype));
    if (auto s = readBlock(cursor, info, slice, layout, tensor.data.data()); !s)
        return s.error();
    return tensor;
}

Result<Tensor> decodeTensorSlice(std::span<const std::uint8_t> bytes, const TensorInfo& info, const SliceRequest& slice,
                                 const std::string& label, const ReadLimits& limits)
{
    if (bytes.size() != info.fileBytes)
        return tensorError(label, info.name, "given " + std::to_string(bytes.size()) + " bytes, the header was read from "
                                                 + std::to_string(info.fileBytes));
    MemoryStream stream(bytes, label, "tensor " + quoteName(info.name));
    return decodeTensorSlice(stream, info, slice, label, limits);
}

Result<Tensor> readTensorSlice(const std::string& path, const TensorInfo& info, const SliceRequest& slice,
                               const ReadLimits& limits)
{
    const auto format = formatOf(path);
    if (!format)
        return format.error();
    // The request is checked before the file is opened: a bad index is the caller's, not the file's.
    if (auto s = checkSliceRequest(info, slice, path, limits); !s)
        return s.error();
    if (*format == Format::Npz)
        return readNpzFileMemberSlice(path, info, slice, limits);
    InputFile file;
    if (auto s = file.open(path); !s)
        return s.error();
    if (file.size() != info.fileBytes)
        return tensorError(path, info.name, "the file is " + std::to_string(file.size()) + " bytes, "
                                                + std::to_string(info.fileBytes)
                                                + " when it was inspected; it has changed (inspect it again)");
    if (*format == Format::Npy) {
        // At most 64 KiB: cheap enough to confirm the header still says what `info` says.
        const auto now = readHeader(file, *format, path);
        if (!now)
            return now.error();
        if (!samePayloadLayout(now->tensors.front(), info))
            return tensorError(path, info.name, "the header has changed since the file was inspected (inspect it again)");
    }
    if (info.dataOffset > file.size() || info.dataBytes > file.size() - info.dataOffset)
        return tensorError(path, info.name, "payload [" + std::to_string(info.dataOffset) + ", +"
                                                + std::to_string(info.dataBytes) + ") runs past the end of the "
                                                + std::to_string(file.size()) + "-byte file");
    FileStream stream(file, "tensor " + quoteName(info.name));
    return decodeTensorSlice(stream, info, slice, path, limits);
}

Result<Tensor> readTensor(const std::string& path, const std::string& name, const ReadLimits& limits)
{
    const auto format = formatOf(path);
    if (!format)
        return format.error();
    if (*format == Format::Npz)
        return readNpzFileMember(path, name, limits);
    InputFile file;
    if (auto s = file.open(path); !s)
        return s.error();
    const auto info = readHeader(file, *format, path);
    if (!info)
        return info.error();
    const TensorInfo* found = nullptr;
    for (const TensorInfo& t : info->tensors)
        if (*format == Format::Npy || t.name == name)
            found = &t;
    if (!found)
        return Error{path, "no tensor named " + quoteName(name) + " (the file has " + tensorNameList(info->tensors) + ")"};
    if (auto s = checkReadLimits(*found, path, limits); !s)
        return s.error();
    auto payload = allocateBytes(found->dataBytes, path, found->name);
    if (!payload)
        return payload.error();
    if (auto s = file.readAt(found->dataOffset, *payload, "tensor " + quoteName(found->name)); !s)
        return s.error();
    return decodeTensor(*payload, *found, path, limits);
}

} // namespace kvlens::io
