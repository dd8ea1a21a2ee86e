// SPDX-License-Identifier: GPL-3.0-or-later
// .npz through libzip: list the .npy members, validate each header, read one payload with size caps and CRC check.
#include "core/io/npz.h"

#include "core/io/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <set>

namespace kvlens::io {

namespace {

constexpr std::string_view kSuffix = ".npy";

struct ArchiveCloser {
    void operator()(zip_t* archive) const { zip_discard(archive); } // read-only: nothing to write back
};
using Archive = std::unique_ptr<zip_t, ArchiveCloser>;

struct FileCloser {
    void operator()(zip_file_t* file) const { zip_fclose(file); }
};

/// libzip's text for an error code (with the system error where one applies).
std::string zipErrorText(zip_error_t* error)
{
    std::string text = zip_error_strerror(error);
    zip_error_fini(error);
    return text;
}

Result<Archive> openBuffer(std::span<const std::uint8_t> bytes, const std::string& label)
{
    // libzip opens a zero-byte file as an empty archive; a zero-byte .npz is more likely an accident.
    if (bytes.empty())
        return Error{label, "empty file (not a zip archive)"};
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
    if (!source)
        return Error{label, "cannot read the archive: " + zipErrorText(&error)};
    zip_t* archive = zip_open_from_source(source, ZIP_RDONLY, &error);
    if (!archive) {
        zip_source_free(source);
        return Error{label, "not a readable zip archive: " + zipErrorText(&error)};
    }
    zip_error_fini(&error);
    return Archive(archive);
}

/// Opens `path` through a descriptor checked to be a regular file, as the other readers do: zip_open
/// would block on a FIFO and misreport a device or folder. `size` receives the file's size.
Result<Archive> openPath(const std::string& path, std::uint64_t& size)
{
    // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat refuses it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return Error{path, std::string("cannot open: ") + std::strerror(errno)};
    const auto refuse = [&](const std::string& message) {
        ::close(fd);
        return Error{path, message};
    };
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return refuse(std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
        return refuse("is not a regular file");
    size = static_cast<std::uint64_t>(st.st_size);
    if (size == 0)
        return refuse("empty file (not a zip archive)"); // as openBuffer
    int code = 0;
    zip_t* archive = zip_fdopen(fd, 0, &code); // read-only; takes the descriptor only on success
    if (!archive) {
        zip_error_t error;
        zip_error_init_with_code(&error, code);
        return refuse("cannot open as a zip archive: " + zipErrorText(&error));
    }
    return Archive(archive);
}

/// One .npy member: tensor name (member name without ".npy"), index, uncompressed size.
struct Member {
    std::string name;
    std::string memberName;
    zip_uint64_t index = 0;
    std::uint64_t size = 0;
    bool stored = false; ///< not compressed, so libzip can seek in it
};

/// The .npy members in archive order, refusing duplicate names, encrypted members and compression
/// methods this libzip cannot decode.
Result<std::vector<Member>> listMembers(zip_t* archive, const std::string& label)
{
    const zip_int64_t count = zip_get_num_entries(archive, 0);
    std::vector<Member> members;
    std::set<std::string> seen;
    for (zip_int64_t i = 0; i < count; ++i) {
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(archive, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME))
            return Error{label, "cannot read zip entry " + std::to_string(i) + ": " + zip_strerror(archive)};
        const std::string memberName = st.name;
        if (memberName.size() < kSuffix.size() || !memberName.ends_with(kSuffix))
            continue; // np.load also ignores members that are not .npy files
        Member m;
        m.memberName = memberName;
        m.name = memberName.substr(0, memberName.size() - kSuffix.size());
        m.index = static_cast<zip_uint64_t>(i);
        const std::string prefix = "tensor " + quoteName(m.name) + ": ";
        if (!seen.insert(m.name).second)
            return Error{label, prefix + "duplicate member name " + quoteName(memberName) + " in the archive"};
        if (!(st.valid & ZIP_STAT_SIZE))
            return Error{label, prefix + "member " + quoteName(memberName) + " has no recorded size"};
        if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
            return Error{label, prefix + "member " + quoteName(memberName) + " is encrypted"};
        if ((st.valid & ZIP_STAT_COMP_METHOD) && !zip_compression_method_supported(st.comp_method, 0))
            return Error{label, prefix + "member " + quoteName(memberName) + " uses compression method "
                                    + std::to_string(st.comp_method) + ", which this libzip cannot decode"};
        m.size = st.size;
        m.stored = (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE;
        members.push_back(std::move(m));
    }
    return members;
}

/// An open member read strictly in sequence; every failure names the archive and the tensor.
class MemberReader {
public:
    MemberReader(zip_t* archive, const Member& member, const std::string& label)
        : m_member(member), m_label(label), m_file(zip_fopen_index(archive, member.index, 0))
    {
        if (!m_file)
            m_openError = zip_strerror(archive);
    }

    Status open() const
    {
        if (!m_file)
            return fail("cannot open member " + quoteName(m_member.memberName) + ": " + m_openError);
        return Ok{};
    }

    /// Reads exactly out.size() bytes; a member that ends early is a "short read" error.
    Status read(std::span<std::uint8_t> out)
    {
        std::size_t done = 0;
        while (done < out.size()) {
            const zip_int64_t n = zip_fread(m_file.get(), out.data() + done, out.size() - done);
            if (n < 0)
                return fail("cannot decompress member " + quoteName(m_member.memberName) + ": "
                            + zip_file_strerror(m_file.get()));
            if (n == 0)
                return fail("short read: member " + quoteName(m_member.memberName) + " ended after "
                            + std::to_string(m_done + done) + " of its " + std::to_string(m_member.size) + " bytes");
            done += static_cast<std::size_t>(n);
        }
        m_done += done;
        return Ok{};
    }

    /// Moves `n` bytes forward: a seek in a stored member, else decompressing into a fixed-size
    /// scratch buffer, so skipping a gigabyte costs time but not memory.
    Status skip(std::uint64_t n)
    {
        if (n == 0)
            return Ok{};
        if (m_member.stored) {
            if (zip_fseek(m_file.get(), static_cast<zip_int64_t>(m_done + n), SEEK_SET) != 0)
                return fail("cannot seek to byte " + std::to_string(m_done + n) + " of member "
                            + quoteName(m_member.memberName) + ": " + zip_file_strerror(m_file.get()));
            m_done += n;
            return Ok{};
        }
        constexpr std::uint64_t kScratch = 64 * 1024;
        std::vector<std::uint8_t> scratch(static_cast<std::size_t>(std::min(n, kScratch)));
        while (n > 0) {
            const auto piece = static_cast<std::size_t>(std::min<std::uint64_t>(n, scratch.size()));
            if (auto s = read(std::span(scratch).first(piece)); !s)
                return s;
            n -= piece;
        }
        return Ok{};
    }

    /// Reads past the last byte, which makes libzip compare the CRC, and refuses a member that
    /// holds more than its recorded size.
    Status finish()
    {
        std::uint8_t extra = 0;
        const zip_int64_t n = zip_fread(m_file.get(), &extra, 1);
        if (n < 0)
            return fail("member " + quoteName(m_member.memberName) + " is damaged: " + zip_file_strerror(m_file.get()));
        if (n > 0)
            return fail("member " + quoteName(m_member.memberName) + " holds more than its recorded "
                        + std::to_string(m_member.size) + " bytes");
        return Ok{};
    }

private:
    Error fail(const std::string& message) const
    {
        return Error{m_label, "tensor " + quoteName(m_member.name) + ": " + message};
    }

    const Member& m_member;
    const std::string& m_label;
    std::unique_ptr<zip_file_t, FileCloser> m_file;
    std::string m_openError;
    std::uint64_t m_done = 0;
};

/// Decompresses just enough of a member to hold any valid .npy header and validates it against the
/// member's recorded size. `prefix` receives the bytes read (they may include part of the payload).
Result<TensorInfo> readMemberHeader(MemberReader& reader, const Member& member, const std::string& label,
                                    std::vector<std::uint8_t>& prefix)
{
    if (auto s = reader.open(); !s)
        return s.error();
    prefix.resize(static_cast<std::size_t>(std::min(member.size, kNpyMaxPreambleBytes)));
    if (auto s = reader.read(prefix); !s)
        return s.error();
    auto header = parseNpyHeader(prefix, member.size, label, member.name);
    if (!header)
        return header.error();
    return std::move(header->tensors.front());
}

/// A member as a ByteStream from its first byte: the header prefix already decompressed, then the rest.
class MemberStream : public ByteStream {
public:
    MemberStream(MemberReader& reader, std::span<const std::uint8_t> prefix) : m_reader(reader), m_prefix(prefix) {}

    Status read(std::span<std::uint8_t> out) override
    {
        const std::size_t held = std::min(out.size(), m_prefix.size());
        std::copy_n(m_prefix.begin(), held, out.begin());
        m_prefix = m_prefix.subspan(held);
        return m_reader.read(out.subspan(held));
    }

    Status skip(std::uint64_t n) override
    {
        const auto held = static_cast<std::size_t>(std::min<std::uint64_t>(n, m_prefix.size()));
        m_prefix = m_prefix.subspan(held);
        return m_reader.skip(n - held);
    }

private:
    MemberReader& m_reader;
    std::span<const std::uint8_t> m_prefix;
};

/// The member named `name`, or an error listing what the archive holds.
Result<const Member*> findMember(const std::vector<Member>& members, const std::string& name, const std::string& label)
{
    const auto found = std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.name == name; });
    if (found != members.end())
        return &*found;
    std::vector<TensorInfo> names;
    for (const Member& m : members) {
        names.emplace_back();
        names.back().name = m.name;
    }
    return Error{label, "no tensor named " + quoteName(name) + " (the archive has " + tensorNameList(names) + ")"};
}

Result<TensorFileInfo> inspectArchive(zip_t* archive, const std::string& label, std::uint64_t archiveBytes)
{
    const auto members = listMembers(archive, label);
    if (!members)
        return members.error();
    TensorFileInfo result;
    result.path = label;
    result.format = "npz";
    std::vector<std::uint8_t> prefix;
    for (const Member& member : *members) {
        MemberReader reader(archive, member, label);
        auto info = readMemberHeader(reader, member, label, prefix);
        if (!info)
            return info.error();
        info->fileBytes = archiveBytes; // what readTensorSlice checks: the archive's size, not the member's
        result.tensors.push_back(std::move(*info));
    }
    return result;
}

Result<Tensor> readArchiveMember(zip_t* archive, const std::string& name, const std::string& label,
                                 const ReadLimits& limits)
{
    const auto members = listMembers(archive, label);
    if (!members)
        return members.error();
    const auto found = findMember(*members, name, label);
    if (!found)
        return found.error();
    MemberReader reader(archive, **found, label);
    std::vector<std::uint8_t> prefix;
    const auto info = readMemberHeader(reader, **found, label, prefix);
    if (!info)
        return info.error();
    // The header has been checked against the member's recorded size; the limits bound that size
    // before anything of payload size is allocated or decompressed.
    if (auto s = checkReadLimits(*info, label, limits); !s)
        return s.error();
    std::vector<std::uint8_t> payload;
    try {
        payload.resize(static_cast<std::size_t>(info->dataBytes));
    } catch (const std::bad_alloc&) {
        return Error{label, "tensor " + quoteName(name) + ": cannot allocate " + std::to_string(info->dataBytes) + " bytes"};
    }
    // The prefix holds the header and possibly the start of the payload; read the rest.
    const std::size_t inPrefix = prefix.size() - static_cast<std::size_t>(info->dataOffset);
    std::copy(prefix.begin() + static_cast<std::ptrdiff_t>(info->dataOffset), prefix.end(), payload.begin());
    if (auto s = reader.read(std::span(payload).subspan(inPrefix)); !s)
        return s.error();
    if (auto s = reader.finish(); !s)
        return s.error();
    return decodeTensor(payload, *info, label, limits);
}

Result<Tensor> readArchiveMemberSlice(zip_t* archive, std::uint64_t archiveBytes, const TensorInfo& info,
                                      const SliceRequest& slice, const std::string& label, const ReadLimits& limits)
{
    const auto fail = [&](const std::string& message) {
        return Error{label, "tensor " + quoteName(info.name) + ": " + message};
    };
    if (archiveBytes != info.fileBytes)
        return fail("the archive is " + std::to_string(archiveBytes) + " bytes, " + std::to_string(info.fileBytes)
                    + " when it was inspected; it has changed (inspect it again)");
    const auto members = listMembers(archive, label);
    if (!members)
        return members.error();
    const auto found = findMember(*members, info.name, label);
    if (!found)
        return found.error();
    MemberReader reader(archive, **found, label);
    std::vector<std::uint8_t> prefix;
    const auto now = readMemberHeader(reader, **found, label, prefix);
    if (!now)
        return now.error();
    if (!samePayloadLayout(*now, info))
        return fail("the member's header has changed since the file was inspected (inspect it again)");
    MemberStream stream(reader, prefix);
    return decodeTensorSlice(stream, *now, slice, label, limits);
}

} // namespace

Result<TensorFileInfo> parseNpzArchive(std::span<const std::uint8_t> bytes, const std::string& label)
{
    const auto archive = openBuffer(bytes, label);
    if (!archive)
        return archive.error();
    return inspectArchive(archive->get(), label, bytes.size());
}

Result<Tensor> readNpzMember(std::span<const std::uint8_t> bytes, const std::string& name, const std::string& label,
                             const ReadLimits& limits)
{
    const auto archive = openBuffer(bytes, label);
    if (!archive)
        return archive.error();
    return readArchiveMember(archive->get(), name, label, limits);
}

Result<TensorFileInfo> inspectNpzFile(const std::string& path)
{
    std::uint64_t size = 0;
    const auto archive = openPath(path, size);
    if (!archive)
        return archive.error();
    return inspectArchive(archive->get(), path, size);
}

Result<Tensor> readNpzFileMember(const std::string& path, const std::string& name, const ReadLimits& limits)
{
    std::uint64_t size = 0;
    const auto archive = openPath(path, size);
    if (!archive)
        return archive.error();
    return readArchiveMember(archive->get(), name, path, limits);
}

Result<Tensor> readNpzFileMemberSlice(const std::string& path, const TensorInfo& info, const SliceRequest& slice,
                                      const ReadLimits& limits)
{
    // The request is checked before the archive is opened: a bad index is the caller's, not the file's.
    if (auto s = checkSliceRequest(info, slice, path, limits); !s)
        return s.error();
    std::uint64_t size = 0;
    const auto archive = openPath(path, size);
    if (!archive)
        return archive.error();
    return readArchiveMemberSlice(archive->get(), size, info, slice, path, limits);
}

Result<Tensor> readNpzMemberSlice(std::span<const std::uint8_t> bytes, const TensorInfo& info, const SliceRequest& slice,
                                  const std::string& label, const ReadLimits& limits)
{
    if (auto s = checkSliceRequest(info, slice, label, limits); !s)
        return s.error();
    const auto archive = openBuffer(bytes, label);
    if (!archive)
        return archive.error();
    return readArchiveMemberSlice(archive->get(), bytes.size(), info, slice, label, limits);
}

} // namespace kvlens::io
