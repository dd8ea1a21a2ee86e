// SPDX-License-Identifier: GPL-3.0-or-later
// The safetensors header (huggingface/safetensors format description): length, JSON, offsets that tile the buffer.
#include "core/io/safetensors.h"

#include "core/io/json_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <vector>

namespace kvlens::io {

using nlohmann::json;

namespace {

/// Thrown inside this file only; converted to an Error at the public boundary.
struct SafetensorsHeaderError {
    std::string message;
};

std::string tensorPrefix(const std::string& name)
{
    return "tensor " + quoteName(name) + ": ";
}

/// " (it is an array of 3 elements)": what a value of the wrong type is, never the value itself,
/// which may be megabytes long or nested deeply enough to exhaust the stack when printed.
std::string itIs(const json& value)
{
    return " (it is " + describeJson(value) + ")";
}

DType dtypeFromName(const std::string& tensor, const json& value)
{
    if (!value.is_string())
        throw SafetensorsHeaderError{tensorPrefix(tensor) + "'dtype' is not a string" + itIs(value)};
    const auto& name = value.get_ref<const std::string&>();
    if (name == "F16")
        return DType::F16;
    if (name == "BF16")
        return DType::BF16;
    if (name == "F32")
        return DType::F32;
    if (name == "F64")
        return DType::F64;
    throw SafetensorsHeaderError{tensorPrefix(tensor) + "dtype " + quoteName(name) + " is not supported (F16, BF16, F32, F64 only)"};
}

/// Element `index` of the array `field` as an unsigned integer.
std::uint64_t nonNegative(const std::string& tensor, const char* field, std::size_t index, const json& value)
{
    if (!value.is_number_unsigned())
        throw SafetensorsHeaderError{tensorPrefix(tensor) + "'" + field + "' element " + std::to_string(index)
                          + " is not a non-negative integer" + itIs(value)};
    return value.get<std::uint64_t>();
}

std::string offsetsText(std::uint64_t begin, std::uint64_t end)
{
    return "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

/// One tensor entry, with its offsets relative to the data buffer.
struct Entry {
    TensorInfo info;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

Entry parseEntry(const std::string& name, const json& value, const std::string& label)
{
    if (!value.is_object())
        throw SafetensorsHeaderError{tensorPrefix(name) + "entry is not a JSON object" + itIs(value)};
    for (const auto& [key, unused] : value.items())
        if (key != "dtype" && key != "shape" && key != "data_offsets")
            throw SafetensorsHeaderError{tensorPrefix(name) + "unknown key " + quoteName(key)
                              + " (expected 'dtype', 'shape', 'data_offsets')"};
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!value.contains(key))
            throw SafetensorsHeaderError{tensorPrefix(name) + "lacks '" + key + "'"};

    Entry entry;
    entry.info.name = name;
    entry.info.dtype = dtypeFromName(name, value["dtype"]);
    const json& shape = value["shape"];
    if (!shape.is_array())
        throw SafetensorsHeaderError{tensorPrefix(name) + "'shape' is not an array" + itIs(shape)};
    for (std::size_t i = 0; i < shape.size(); ++i) {
        const std::uint64_t dim = nonNegative(name, "shape", i, shape[i]);
        if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            throw SafetensorsHeaderError{tensorPrefix(name) + "'shape' element " + std::to_string(i) + " = " + std::to_string(dim)
                              + " exceeds 2^63 - 1"};
        entry.info.shape.push_back(static_cast<std::int64_t>(dim));
    }
    const json& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
        throw SafetensorsHeaderError{tensorPrefix(name) + "'data_offsets' is not a [begin, end] pair" + itIs(offsets)};
    entry.begin = nonNegative(name, "data_offsets", 0, offsets[0]);
    entry.end = nonNegative(name, "data_offsets", 1, offsets[1]);
    if (entry.end < entry.begin)
        throw SafetensorsHeaderError{tensorPrefix(name) + offsetsText(entry.begin, entry.end) + " end before they begin"};

    const auto bytes = checkedPayloadBytes(entry.info.shape, entry.info.dtype, name, label);
    if (!bytes)
        throw SafetensorsHeaderError{bytes.error().message};
    if (*bytes != entry.end - entry.begin)
        throw SafetensorsHeaderError{tensorPrefix(name) + "shape x " + std::string(dtypeName(entry.info.dtype)) + " needs "
                          + std::to_string(*bytes) + " bytes but " + offsetsText(entry.begin, entry.end) + " span "
                          + std::to_string(entry.end - entry.begin)};
    entry.info.dataBytes = *bytes;
    return entry;
}

/// The first key given twice at the top level of `text`, which holds no nesting deeper than
/// kMaxJsonDepth: a tensor name, so the error can name the tensor as the rest of this reader does.
std::optional<std::string> topLevelDuplicate(std::string_view text)
{
    std::set<std::string> seen;
    std::optional<std::string> duplicate;
    const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1 && !duplicate) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!seen.insert(key).second)
                duplicate = key;
        }
        return depth == 0; // keep nothing below the top level: only the keys matter here
    };
    // A text that is also malformed gets parseJsonText's verdict, as it would have without duplicates.
    const json kept = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
    return kept.is_discarded() ? std::nullopt : duplicate;
}

/// parseJsonText (nesting capped at kMaxJsonDepth, duplicate keys refused), with a tensor name
/// given twice reported by name.
json parseHeaderJson(std::string_view text)
{
    auto header = parseJsonText(text);
    if (header)
        return std::move(*header);
    // Only a text within the nesting cap is parsed again, and only on this error path.
    if (jsonNestingError(text).empty())
        if (const auto name = topLevelDuplicate(text))
            throw SafetensorsHeaderError{*name == "__metadata__" ? std::string("'__metadata__' is given twice in the header")
                                                      : tensorPrefix(*name) + "duplicate name in the header"};
    throw SafetensorsHeaderError{"header: " + header.error().message};
}

} // namespace

Result<TensorFileInfo> parseSafetensorsHeader(std::span<const std::uint8_t> bytes, std::uint64_t fileSize,
                                              const std::string& label)
{
    if (bytes.size() > fileSize)
        return Error{label, "given " + std::to_string(bytes.size()) + " bytes of a " + std::to_string(fileSize)
                                + "-byte file"};
    if (fileSize < 8)
        return Error{label, "file too short for the 8-byte header length (" + std::to_string(fileSize) + " bytes)"};
    if (bytes.size() < 8)
        return Error{label, "short read: " + std::to_string(bytes.size()) + " bytes given, the header length needs 8"};
    std::uint64_t headerLength = 0;
    for (std::size_t i = 8; i > 0; --i)
        headerLength = (headerLength << 8) | bytes[i - 1];
    if (headerLength > kSafetensorsMaxHeaderBytes)
        return Error{label, "header length " + std::to_string(headerLength) + " exceeds the cap of "
                                + std::to_string(kSafetensorsMaxHeaderBytes) + " bytes"};
    if (headerLength > fileSize - 8)
        return Error{label, "header length " + std::to_string(headerLength) + " runs past the end of the file ("
                                + std::to_string(fileSize) + " bytes)"};
    if (bytes.size() < 8 + headerLength)
        return Error{label, "short read: " + std::to_string(bytes.size()) + " bytes given, the header needs "
                                + std::to_string(8 + headerLength)};
    const std::uint64_t bufferBytes = fileSize - 8 - headerLength;

    TensorFileInfo result;
    result.path = label;
    result.format = "safetensors";
    std::vector<Entry> entries;
    try {
        const json header = parseHeaderJson(std::string_view(reinterpret_cast<const char*>(bytes.data() + 8),
                                                       static_cast<std::size_t>(headerLength)));
        if (!header.is_object())
            throw SafetensorsHeaderError{"header is not a JSON object" + itIs(header)};
        for (const auto& [key, value] : header.items()) {
            if (key != "__metadata__") {
                entries.push_back(parseEntry(key, value, label));
                continue;
            }
            if (!value.is_object())
                throw SafetensorsHeaderError{"'__metadata__' is not a JSON object" + itIs(value)};
            for (const auto& [mkey, mvalue] : value.items()) {
                if (!mvalue.is_string())
                    throw SafetensorsHeaderError{"'__metadata__' value of " + quoteName(mkey) + " is not a string" + itIs(mvalue)};
                result.metadata[mkey] = mvalue.get<std::string>();
            }
        }
    } catch (const SafetensorsHeaderError& e) {
        return Error{label, e.message};
    }

    // Sorted by position, the tensors must tile [0, bufferBytes): the reference implementation's rule,
    // which also guarantees no byte of the file is unaccounted for.
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    for (const Entry& e : entries)
        if (e.end > bufferBytes)
            return Error{label, tensorPrefix(e.info.name) + offsetsText(e.begin, e.end) + " run past the end of the "
                                    + std::to_string(bufferBytes) + "-byte data buffer"};
    std::uint64_t covered = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const Entry& e = entries[i];
        if (e.begin < covered)
            return Error{label, tensorPrefix(e.info.name) + offsetsText(e.begin, e.end) + " overlap tensor "
                                    + quoteName(entries[i - 1].info.name) + " (which ends at " + std::to_string(covered)
                                    + ")"};
        if (e.begin > covered)
            return Error{label, tensorPrefix(e.info.name) + "hole of " + std::to_string(e.begin - covered)
                                    + " bytes before its " + offsetsText(e.begin, e.end)};
        covered = e.end;
    }
    if (covered < bufferBytes)
        return Error{label, (entries.empty() ? std::string() : tensorPrefix(entries.back().info.name)) + "hole of "
                                + std::to_string(bufferBytes - covered) + " bytes at the end of the "
                                + std::to_string(bufferBytes) + "-byte data buffer"};

    for (Entry& e : entries) {
        e.info.dataOffset = 8 + headerLength + e.begin;
        e.info.fileBytes = fileSize;
        result.tensors.push_back(std::move(e.info));
    }
    return result;
}

} // namespace kvlens::io
