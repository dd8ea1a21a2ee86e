// SPDX-License-Identifier: GPL-3.0-or-later
// .npz through libzip: list the .npy members, validate each header, read one payload with size caps and CRC check.
#include "core/io/npz.h"

#include "core/io/npy.h"

#include <zip.h>

#include <algorithm>
#include <filesystem>
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

Result<Archive> openPath(const std::string& path)
{
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0 && !ec)
        return Error{path, "empty file (not a zip archive)"}; // as openBuffer
    int code = 0;
    zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
    if (!archive) {
        zip_error_t error;
        zip_error_init_with_code(&error, code);
        return Error{path, "cannot open as a zip archive: " + zipErrorText(&error)};
    }
    return Archive(archive);
}

/// One .npy member: tensor name (member name without ".npy"), index, uncompressed size.
struct Member {
    std::string name;
    std::string memberName;
    zip_uint64_t index = 0;
    std::uint64_t size = 0;
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

Result<TensorFileInfo> inspectArchive(zip_t* archive, const std::string& label)
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
    const auto found = std::find_if(members->begin(), members->end(), [&](const Member& m) { return m.name == name; });
    if (found == members->end()) {
        std::vector<TensorInfo> names;
        for (const Member& m : *members) {
            names.emplace_back();
            names.back().name = m.name;
        }
        return Error{label, "no tensor named " + quoteName(name) + " (the archive has " + tensorNameList(names) + ")"};
    }
    MemberReader reader(archive, *found, label);
    std::vector<std::uint8_t> prefix;
    const auto info = readMemberHeader(reader, *found, label, prefix);
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

} // namespace

Result<TensorFileInfo> parseNpzArchive(std::span<const std::uint8_t> bytes, const std::string& label)
{
    const auto archive = openBuffer(bytes, label);
    if (!archive)
        return archive.error();
    return inspectArchive(archive->get(), label);
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
    const auto archive = openPath(path);
    if (!archive)
        return archive.error();
    return inspectArchive(archive->get(), path);
}

Result<Tensor> readNpzFileMember(const std::string& path, const std::string& name, const ReadLimits& limits)
{
    const auto archive = openPath(path);
    if (!archive)
        return archive.error();
    return readArchiveMember(archive->get(), name, path, limits);
}

} // namespace kvlens::io
