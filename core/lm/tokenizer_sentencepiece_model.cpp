// SPDX-License-Identifier: GPL-3.0-or-later
// tokenizer.model's protobuf wire format read with bounds on every length, and the library's own checks on the pieces.
#include "core/lm/tokenizer_sentencepiece_model.h"

#include "core/io/file_read.h"
#include "core/io/tensor_file.h"
#include "core/lm/tokenizer.h"
#include "core/lm/tokenizer_unicode.h"

#include <cmath>
#include <cstring>
#include <unordered_map>

namespace kvlens::lm {

namespace {

/// Thrown inside the reader only; parseSentencePieceModelProto turns it into an Error.
struct ModelRefusal {
    std::string field;
    std::string message;
};

[[noreturn]] void refuseModel(std::string field, std::string message)
{
    throw ModelRefusal{std::move(field), std::move(message)};
}

enum ProtoWire { kWireVarint = 0, kWireFixed64 = 1, kWireBytes = 2, kWireFixed32 = 5 };

/// One protobuf message's fields, read front to back (developers.google.com/protocol-buffers/docs/encoding).
class ProtoReader {
public:
    ProtoReader(std::string_view data, std::string where) : m_data(data), m_where(std::move(where)) {}

    /// The next field's number and wire type; false at the end of the message.
    bool next(int& field, int& wire)
    {
        if (m_pos == m_data.size())
            return false;
        const std::uint64_t key = varint();
        field = static_cast<int>(key >> 3);
        wire = static_cast<int>(key & 7);
        if (key >> 3 == 0 || key >> 3 > 536870911)
            refuseModel(m_where, "field number " + std::to_string(key >> 3) + " at byte " + std::to_string(m_pos)
                                + " is outside [1, 2^29)");
        if (wire == 3 || wire == 4 || wire > 5)
            refuseModel(m_where, "wire type " + std::to_string(wire) + " at byte " + std::to_string(m_pos)
                                + (wire == 3 || wire == 4 ? " (a group) is not used by sentencepiece_model.proto"
                                                          : " does not exist"));
        return true;
    }

    std::uint64_t varint()
    {
        std::uint64_t value = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (m_pos == m_data.size())
                refuseModel(m_where, "a varint runs past the end of the message");
            const auto b = static_cast<unsigned char>(m_data[m_pos++]);
            if (shift == 63 && b > 1)
                refuseModel(m_where, "a varint overflows 64 bits");
            value |= static_cast<std::uint64_t>(b & 0x7F) << shift;
            if (!(b & 0x80))
                return value;
        }
        refuseModel(m_where, "a varint is longer than 10 bytes");
    }

    std::string_view bytes()
    {
        const std::uint64_t length = varint();
        if (length > m_data.size() - m_pos)
            refuseModel(m_where, "a field of " + std::to_string(length) + " bytes runs past the end of the message ("
                                + std::to_string(m_data.size() - m_pos) + " bytes left)");
        const std::string_view out = m_data.substr(m_pos, static_cast<std::size_t>(length));
        m_pos += static_cast<std::size_t>(length);
        return out;
    }

    float fixed32()
    {
        if (m_data.size() - m_pos < 4)
            refuseModel(m_where, "a 32-bit field runs past the end of the message");
        std::uint32_t bits = 0;
        for (int i = 0; i < 4; ++i)
            bits |= static_cast<std::uint32_t>(static_cast<unsigned char>(m_data[m_pos + i])) << (8 * i);
        m_pos += 4;
        float value = 0;
        std::memcpy(&value, &bits, 4);
        return value;
    }

    void skip(int wire)
    {
        if (wire == kWireVarint)
            (void)varint();
        else if (wire == kWireBytes)
            (void)bytes();
        else if (wire == kWireFixed32)
            (void)fixed32();
        else if (m_data.size() - m_pos < 8)
            refuseModel(m_where, "a 64-bit field runs past the end of the message");
        else
            m_pos += 8;
    }

    /// The value of a field the schema declares with wire type `expected`, named `name` in errors.
    void expect(int wire, int expected, const std::string& name) const
    {
        if (wire != expected)
            refuseModel(name, "wire type " + std::to_string(wire) + ", expected " + std::to_string(expected));
    }

private:
    std::string_view m_data;
    std::size_t m_pos = 0;
    std::string m_where;
};

std::string protoString(ProtoReader& reader, int wire, const std::string& name)
{
    reader.expect(wire, kWireBytes, name);
    const std::string_view text = reader.bytes();
    if (const auto bad = firstInvalidUtf8(text))
        refuseModel(name, "is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
    return std::string(text);
}

bool protoBool(ProtoReader& reader, int wire, const std::string& name)
{
    reader.expect(wire, kWireVarint, name);
    return reader.varint() != 0;
}

void readPiece(std::string_view message, std::size_t index, SentencePieceSpec& spec)
{
    const std::string where = "pieces[" + std::to_string(index) + "]";
    ProtoReader reader(message, where);
    std::string piece;
    float score = 0;
    PieceType type = PieceType::Normal;
    int field = 0, wire = 0;
    while (reader.next(field, wire)) {
        if (field == 1) {
            piece = protoString(reader, wire, where + ".piece");
        } else if (field == 2) {
            reader.expect(wire, kWireFixed32, where + ".score");
            score = reader.fixed32();
        } else if (field == 3) {
            reader.expect(wire, kWireVarint, where + ".type");
            const std::uint64_t value = reader.varint();
            if (value < 1 || value > 6)
                refuseModel(where + ".type", std::to_string(value) + " is not a piece type (1 normal, 2 unknown, 3 control, "
                                                                 "4 user-defined, 5 unused, 6 byte)");
            type = static_cast<PieceType>(value);
        } else {
            reader.skip(wire);
        }
    }
    spec.pieces.push_back(std::move(piece));
    spec.scores.push_back(score);
    spec.types.push_back(type);
}

void readTrainerSpec(std::string_view message, SentencePieceSpec& spec)
{
    ProtoReader reader(message, "trainer_spec");
    int field = 0, wire = 0;
    while (reader.next(field, wire)) {
        if (field == 3) {
            reader.expect(wire, kWireVarint, "trainer_spec.model_type");
            const std::uint64_t value = reader.varint();
            if (value != 1 && value != 2)
                refuseModel("trainer_spec.model_type", std::to_string(value) + (value == 3 || value == 4
                                                                               ? " (WORD or CHAR) is not supported"
                                                                               : " is not a model type")
                                                      + ": KVLens encodes unigram (1) and BPE (2) models");
            spec.algorithm = value == 1 ? SentencePieceSpec::Algorithm::Unigram : SentencePieceSpec::Algorithm::Bpe;
        } else if (field == 35) {
            spec.byteFallback = protoBool(reader, wire, "trainer_spec.byte_fallback");
        } else if (field == 24) {
            spec.treatWhitespaceAsSuffix = protoBool(reader, wire, "trainer_spec.treat_whitespace_as_suffix");
        } else if (field == 45 || field == 46 || field == 47) {
            static const char* const kNames[] = {"trainer_spec.unk_piece", "trainer_spec.bos_piece", "trainer_spec.eos_piece"};
            std::string value = protoString(reader, wire, kNames[field - 45]);
            // The library falls back to its default name when the field is empty.
            if (!value.empty())
                (field == 45 ? spec.unkPiece : field == 46 ? spec.bosPiece : spec.eosPiece) = std::move(value);
        } else {
            reader.skip(wire);
        }
    }
}

void readNormalizerSpec(std::string_view message, SentencePieceSpec& spec)
{
    ProtoReader reader(message, "normalizer_spec");
    int field = 0, wire = 0;
    while (reader.next(field, wire)) {
        if (field == 2) {
            reader.expect(wire, kWireBytes, "normalizer_spec.precompiled_charsmap");
            const std::string_view map = reader.bytes();
            if (map.size() > kMaxCharsmapBytes)
                refuseModel("normalizer_spec.precompiled_charsmap", io::byteSizeText(map.size()) + ", above the cap of "
                                                                   + io::byteSizeText(kMaxCharsmapBytes));
            spec.charsmap.assign(map);
        } else if (field == 3) {
            spec.addDummyPrefix = protoBool(reader, wire, "normalizer_spec.add_dummy_prefix");
        } else if (field == 4) {
            spec.removeExtraWhitespaces = protoBool(reader, wire, "normalizer_spec.remove_extra_whitespaces");
        } else if (field == 5) {
            spec.escapeWhitespaces = protoBool(reader, wire, "normalizer_spec.escape_whitespaces");
        } else {
            reader.skip(wire);
        }
    }
}

void readModelProto(std::string_view bytes, std::int32_t maxPieces, SentencePieceSpec& spec)
{
    ProtoReader reader(bytes, "ModelProto");
    int field = 0, wire = 0;
    while (reader.next(field, wire)) {
        if (field == 1) {
            reader.expect(wire, kWireBytes, "pieces[" + std::to_string(spec.pieces.size()) + "]");
            if (spec.pieces.size() >= static_cast<std::size_t>(maxPieces))
                refuseModel("pieces", "more than " + std::to_string(maxPieces) + " pieces, the most ids this model has ("
                                     + (maxPieces == kMaxVocabSize ? "KVLens's cap" : "its embedding's rows") + ")");
            readPiece(reader.bytes(), spec.pieces.size(), spec);
        } else if (field == 2) {
            reader.expect(wire, kWireBytes, "trainer_spec");
            readTrainerSpec(reader.bytes(), spec); // a message given twice merges, as protobuf's does
        } else if (field == 3) {
            reader.expect(wire, kWireBytes, "normalizer_spec");
            readNormalizerSpec(reader.bytes(), spec);
        } else {
            reader.skip(wire);
        }
    }
}

} // namespace

int bytePieceValue(std::string_view piece)
{
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>')
        return -1;
    int value = 0;
    for (const char c : piece.substr(3, 2)) {
        value <<= 4;
        if (c >= '0' && c <= '9')
            value |= c - '0';
        else if (c >= 'A' && c <= 'F')
            value |= c - 'A' + 10;
        else
            return -1;
    }
    return value;
}

Status checkSentencePieceSpec(const SentencePieceSpec& spec, const std::string& where)
{
    const std::size_t n = spec.pieces.size();
    if (spec.scores.size() != n || spec.types.size() != n)
        return Error{spec.label, where + ": " + std::to_string(n) + " pieces but " + std::to_string(spec.scores.size())
                                     + " scores and " + std::to_string(spec.types.size()) + " types"};
    // The library keeps normal, user-defined and unused pieces in one map and the others in a second.
    std::unordered_map<std::string_view, std::size_t> normal, reserved;
    std::optional<std::size_t> unknown;
    std::vector<bool> bytes(256, false);
    bool anyNormal = false;
    for (std::size_t i = 0; i < n; ++i) {
        const std::string name = where + "[" + std::to_string(i) + "]";
        const std::string& piece = spec.pieces[i];
        const PieceType type = spec.types[i];
        if (piece.empty())
            return Error{spec.label, name + ": a piece must not be empty"};
        if (piece.size() > kMaxPieceBytes)
            return Error{spec.label, name + ": " + std::to_string(piece.size()) + " bytes, above the cap of "
                                         + std::to_string(kMaxPieceBytes)};
        if (firstInvalidUtf8(piece) || piece.find('\0') != std::string::npos)
            return Error{spec.label, name + ": not valid UTF-8 without NUL bytes"};
        if (!std::isfinite(spec.scores[i]))
            return Error{spec.label, name + ": its score is not finite"};
        const bool isNormal = type == PieceType::Normal || type == PieceType::UserDefined || type == PieceType::Unused;
        anyNormal = anyNormal || isNormal;
        auto& map = isNormal ? normal : reserved;
        if (const auto [it, fresh] = map.emplace(piece, i); !fresh)
            return Error{spec.label, name + ": " + io::quoteName(piece) + " is already " + where + "["
                                         + std::to_string(it->second) + "]"};
        if (type == PieceType::Unknown) {
            if (unknown)
                return Error{spec.label, name + ": a second UNKNOWN piece (the first is " + where + "["
                                             + std::to_string(*unknown) + "])"};
            unknown = i;
        }
        if (type == PieceType::Byte) {
            const int b = bytePieceValue(piece);
            if (!spec.byteFallback)
                return Error{spec.label, name + ": a byte piece, but byte_fallback is false"};
            if (b < 0)
                return Error{spec.label, name + ": " + io::quoteName(piece) + " is not a byte piece <0x00>..<0xFF>"};
            bytes[static_cast<std::size_t>(b)] = true;
        }
    }
    if (!unknown)
        return Error{spec.label, where + ": no piece of type UNKNOWN (2)"};
    if (spec.byteFallback)
        for (int b = 0; b < 256; ++b)
            if (!bytes[static_cast<std::size_t>(b)])
                return Error{spec.label, where + ": byte_fallback is true but there is no piece <0x"
                                             + std::string(1, "0123456789ABCDEF"[b >> 4]) + "0123456789ABCDEF"[b & 15] + ">"};
    if (spec.algorithm == SentencePieceSpec::Algorithm::Unigram && !anyNormal)
        return Error{spec.label, where + ": a unigram model needs at least one normal, user-defined or unused piece"};
    return Ok{};
}

Result<SentencePieceSpec> parseSentencePieceModelProto(std::string_view bytes, const std::string& label,
                                                       std::int32_t maxPieces)
{
    if (bytes.size() > kMaxSentencePieceModelBytes)
        return Error{label, "is " + io::byteSizeText(bytes.size()) + ", above the cap of "
                                + io::byteSizeText(kMaxSentencePieceModelBytes) + " for tokenizer.model"};
    SentencePieceSpec spec;
    spec.label = label;
    try {
        readModelProto(bytes, std::min(maxPieces, kMaxVocabSize), spec);
    } catch (const ModelRefusal& r) {
        return Error{label, r.field + ": " + r.message};
    } catch (const std::exception& e) {
        return Error{label, std::string("unreadable tokenizer.model: ") + e.what()};
    }
    if (spec.pieces.empty())
        return Error{label, "pieces: none (not a SentencePiece model)"};
    if (Status s = checkSentencePieceSpec(spec, "pieces"); !s)
        return s.error();
    return spec;
}

} // namespace kvlens::lm
