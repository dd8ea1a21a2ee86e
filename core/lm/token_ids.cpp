// SPDX-License-Identifier: GPL-3.0-or-later
// Reading int32/int64 token ids from .npy files, strictly, and checking them against a vocabulary.
#include "core/lm/token_ids.h"

#include "core/io/file_read.h"
#include "core/io/npy.h"
#include "core/io/tensor_file.h"
#include "core/lm/tokenizer.h"

#include <bit>
#include <cstring>

namespace kvlens::lm {

Result<std::vector<std::int32_t>> parseTokenIdsNpy(std::span<const std::uint8_t> bytes, const std::string& label)
{
    static_assert(std::endian::native == std::endian::little, "token ids are read as little-endian");
    auto raw = io::parseNpyRawHeader(bytes, bytes.size(), label, "token ids are '<i4' or '<i8'");
    if (!raw)
        return raw.error();
    const std::string& descr = raw->descr;
    std::size_t itemBytes = 0;
    if (descr == "<i4" || descr == "=i4")
        itemBytes = 4;
    else if (descr == "<i8" || descr == "=i8")
        itemBytes = 8;
    else
        return Error{label, "dtype " + io::quoteName(descr) + " is not supported: token ids are '<i4' or '<i8' "
                                + "(little-endian int32 or int64)"};
    if (raw->fortranOrder)
        return Error{label, "fortran_order is True: token ids must be in C order"};
    const auto& shape = raw->shape;
    std::int64_t count = -1;
    if (shape.size() == 1)
        count = shape[0];
    else if (shape.size() == 2 && shape[0] == 1)
        count = shape[1];
    std::string shapeText = "(";
    for (std::size_t i = 0; i < shape.size(); ++i)
        shapeText += (i ? ", " : "") + std::to_string(shape[i]);
    shapeText += shape.size() == 1 ? ",)" : ")";
    if (count < 0)
        return Error{label, "shape " + shapeText + " is not (n,) or (1, n): token ids are one sequence"};
    if (count == 0)
        return Error{label, "holds no token ids (shape " + shapeText + ")"};
    const std::uint64_t available = bytes.size() - raw->dataOffset;
    // count * itemBytes cannot overflow: a count above available / itemBytes is refused first.
    if (static_cast<std::uint64_t>(count) > available / itemBytes || static_cast<std::uint64_t>(count) * itemBytes != available)
        return Error{label, "the payload is " + std::to_string(available) + " bytes, shape " + shapeText
                                + " of " + std::to_string(itemBytes) + "-byte ids needs "
                                + (static_cast<std::uint64_t>(count) > available / itemBytes
                                       ? "more"
                                       : std::to_string(static_cast<std::uint64_t>(count) * itemBytes))};
    std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
    const std::uint8_t* payload = bytes.data() + raw->dataOffset;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        std::int64_t id = 0;
        if (itemBytes == 4) {
            std::int32_t v = 0;
            std::memcpy(&v, payload + i * 4, 4);
            id = v;
        } else {
            std::memcpy(&id, payload + i * 8, 8);
        }
        if (id < 0 || id >= kMaxVocabSize)
            return Error{label, "id " + std::to_string(id) + " at index " + std::to_string(i) + " is outside [0, "
                                    + std::to_string(kMaxVocabSize) + ")"};
        ids[i] = static_cast<std::int32_t>(id);
    }
    return ids;
}

Result<std::vector<std::int32_t>> readTokenIds(const std::string& npyPath, std::uint64_t maxBytes)
{
    auto bytes = io::readRegularFile(npyPath, maxBytes);
    if (!bytes)
        return bytes.error();
    const auto* data = reinterpret_cast<const std::uint8_t*>(bytes->data());
    return parseTokenIdsNpy(std::span<const std::uint8_t>(data, bytes->size()), npyPath);
}

Status checkTokenIds(std::span<const std::int32_t> ids, std::int32_t vocabSize, const std::string& label)
{
    for (std::size_t i = 0; i < ids.size(); ++i)
        if (ids[i] < 0 || ids[i] >= vocabSize)
            return Error{label, "token id " + std::to_string(ids[i]) + " at index " + std::to_string(i)
                                    + " is outside the vocabulary [0, " + std::to_string(vocabSize) + ")"};
    return Ok{};
}

} // namespace kvlens::lm
