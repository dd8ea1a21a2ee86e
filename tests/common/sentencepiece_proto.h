// SPDX-License-Identifier: GPL-3.0-or-later
// Hand-built SentencePiece models for tests: a ModelProto written in the protobuf wire format, with pieces and scores chosen so that segmentations can be worked out by hand.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::test {

/// Protobuf wire format (developers.google.com/protocol-buffers/docs/encoding): varints, 32-bit
/// floats and length-delimited fields, enough for sentencepiece_model.proto.
class ProtoWriter {
public:
    void varint(int field, std::uint64_t value)
    {
        key(field, 0);
        raw(value);
    }
    void boolean(int field, bool value) { varint(field, value ? 1 : 0); }
    /// int32 fields take negative values as 10-byte two's complement varints.
    void int32(int field, std::int32_t value) { varint(field, static_cast<std::uint64_t>(static_cast<std::int64_t>(value))); }
    void f32(int field, float value)
    {
        key(field, 5);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &value, 4);
        for (int i = 0; i < 4; ++i)
            m_bytes += static_cast<char>((bits >> (8 * i)) & 0xFF);
    }
    void bytes(int field, std::string_view value)
    {
        key(field, 2);
        raw(value.size());
        m_bytes += value;
    }
    void message(int field, const ProtoWriter& inner) { bytes(field, inner.m_bytes); }
    const std::string& data() const { return m_bytes; }

private:
    void key(int field, int wire) { raw((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire)); }
    void raw(std::uint64_t value)
    {
        do {
            const auto low = static_cast<char>(value & 0x7F);
            value >>= 7;
            m_bytes += static_cast<char>(low | (value ? 0x80 : 0));
        } while (value);
    }
    std::string m_bytes;
};

/// sentencepiece_model.proto's SentencePiece.Type.
enum class PieceType { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Piece {
    std::string text;
    float score = 0;
    PieceType type = PieceType::Normal;
};

/// A ModelProto: `modelType` 1 unigram, 2 BPE; unk 0, bos 1, eos 2 (the trainer's defaults); the
/// "identity" normalizer with a dummy prefix and spaces as U+2581, as Llama's tokenizer.model has.
inline std::string sentencePieceModel(const std::vector<Piece>& pieces, int modelType, bool byteFallback)
{
    ProtoWriter model;
    for (const Piece& p : pieces) {
        ProtoWriter piece;
        piece.bytes(1, p.text);
        piece.f32(2, p.score);
        piece.varint(3, static_cast<std::uint64_t>(p.type));
        model.message(1, piece);
    }
    ProtoWriter trainer;
    trainer.varint(3, static_cast<std::uint64_t>(modelType));
    trainer.int32(4, static_cast<std::int32_t>(pieces.size()));
    trainer.boolean(35, byteFallback);
    trainer.int32(40, 0);
    trainer.int32(41, 1);
    trainer.int32(42, 2);
    trainer.int32(43, -1);
    model.message(2, trainer);
    ProtoWriter normalizer;
    normalizer.bytes(1, "identity");
    normalizer.boolean(3, true);
    normalizer.boolean(4, false);
    normalizer.boolean(5, true);
    model.message(3, normalizer);
    return model.data();
}

/// Unigram model U (ids): 0 <unk>, 1 <s>, 2 </s>, 3 "▁" -2, 4 "▁a" -1, 5 "b" -2, 6 "▁ab" -1.5,
/// 7 "a" -3, 8 "c" -2.5, 9 "bc" -2, 10 "▁abc" -10.
inline std::string unigramModel()
{
    return sentencePieceModel({{"<unk>", 0, PieceType::Unknown},
                               {"<s>", 0, PieceType::Control},
                               {"</s>", 0, PieceType::Control},
                               {"\xE2\x96\x81", -2},
                               {"\xE2\x96\x81" "a", -1},
                               {"b", -2},
                               {"\xE2\x96\x81" "ab", -1.5f},
                               {"a", -3},
                               {"c", -2.5f},
                               {"bc", -2},
                               {"\xE2\x96\x81" "abc", -10}},
                              1, false);
}

/// BPE model B with byte fallback, as Llama 2's: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>,
/// 259 "▁" -10, 260 "a" -10, 261 "b" -10, 262 "c" -10, 263 "ab" -1, 264 "bc" -0.5, 265 "▁a" -2.
inline std::string bpeByteFallbackModel()
{
    std::vector<Piece> pieces = {{"<unk>", 0, PieceType::Unknown}, {"<s>", 0, PieceType::Control}, {"</s>", 0, PieceType::Control}};
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b)
        pieces.push_back({std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, PieceType::Byte});
    for (const Piece& p : std::vector<Piece>{{"\xE2\x96\x81", -10}, {"a", -10}, {"b", -10}, {"c", -10},
                                             {"ab", -1}, {"bc", -0.5f}, {"\xE2\x96\x81" "a", -2}})
        pieces.push_back(p);
    return sentencePieceModel(pieces, 2, true);
}

} // namespace kvlens::test
