// SPDX-License-Identifier: GPL-3.0-or-later
// SentencePiece models loaded from bytes already size-checked, with the library's status turned into an Error.
#include "core/lm/tokenizer_sentencepiece.h"

#include "core/io/file_read.h"

#include <sentencepiece_processor.h>

#include <vector>

namespace kvlens::lm {

struct SentencePieceTokenizer::Impl {
    std::string label;
    sentencepiece::SentencePieceProcessor processor;
    std::vector<std::string> idBytes;
    std::optional<std::int32_t> modelBos;
    std::optional<std::int32_t> bos;
};

namespace {

/// "<0x0A>" -> 10; -1 for anything else.
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
        else if (c >= 'a' && c <= 'f')
            value |= c - 'a' + 10;
        else
            return -1;
    }
    return value;
}

/// A piece's text with each U+2581 (the SentencePiece space) as ' '.
std::string pieceText(const std::string& piece)
{
    static constexpr std::string_view kSpace = "\xE2\x96\x81";
    std::string out;
    out.reserve(piece.size());
    for (std::size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpace.size(), kSpace) == 0) {
            out += ' ';
            i += kSpace.size();
        } else {
            out += piece[i++];
        }
    }
    return out;
}

} // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Result<std::vector<std::int32_t>> SentencePieceTokenizer::encode(std::string_view text) const
{
    try {
        std::vector<int> ids;
        const auto status = m_impl->processor.Encode(text, &ids);
        if (!status.ok())
            return Error{m_impl->label, "SentencePiece could not encode the text: " + status.ToString()};
        return std::vector<std::int32_t>(ids.begin(), ids.end());
    } catch (const std::exception& e) {
        return Error{m_impl->label, std::string("encoding failed: ") + e.what()};
    }
}

std::string SentencePieceTokenizer::tokenBytes(std::int32_t id) const
{
    if (id < 0 || static_cast<std::size_t>(id) >= m_impl->idBytes.size())
        return {};
    return m_impl->idBytes[static_cast<std::size_t>(id)];
}

std::int32_t SentencePieceTokenizer::vocabSize() const
{
    return static_cast<std::int32_t>(m_impl->idBytes.size());
}

std::optional<std::int32_t> SentencePieceTokenizer::bos() const
{
    return m_impl->bos;
}

std::optional<std::int32_t> SentencePieceTokenizer::modelBos() const
{
    return m_impl->modelBos;
}

void SentencePieceTokenizer::setBos(std::optional<std::int32_t> id)
{
    m_impl->bos = id;
}

std::optional<std::int32_t> SentencePieceTokenizer::pieceId(std::string_view piece) const
{
    const int id = m_impl->processor.PieceToId(piece);
    // PieceToId answers unk_id for an unknown piece: only the unknown piece itself maps there.
    if (id < 0 || (m_impl->processor.IsUnknown(id) && m_impl->processor.IdToPiece(id) != piece))
        return std::nullopt;
    return id;
}

Result<std::unique_ptr<SentencePieceTokenizer>> parseSentencePieceModel(std::string_view bytes,
                                                                        const std::string& label)
{
    if (bytes.size() > kMaxSentencePieceModelBytes)
        return Error{label, "is " + io::byteSizeText(bytes.size()) + ", above the cap of "
                                + io::byteSizeText(kMaxSentencePieceModelBytes) + " for tokenizer.model"};
    try {
        auto impl = std::make_unique<SentencePieceTokenizer::Impl>();
        impl->label = label;
        const auto status = impl->processor.LoadFromSerializedProto(bytes);
        if (!status.ok())
            return Error{label, "not a SentencePiece model SentencePiece can load: " + status.ToString()};
        const int pieces = impl->processor.GetPieceSize();
        if (pieces <= 0 || pieces > kMaxVocabSize)
            return Error{label, "has " + std::to_string(pieces) + " pieces, outside [1, " + std::to_string(kMaxVocabSize)
                                    + "]"};
        impl->idBytes.resize(static_cast<std::size_t>(pieces));
        for (int id = 0; id < pieces; ++id) {
            const std::string& piece = impl->processor.IdToPiece(id);
            const int byte = impl->processor.IsByte(id) ? bytePieceValue(piece) : -1;
            impl->idBytes[static_cast<std::size_t>(id)] =
                byte >= 0 ? std::string(1, static_cast<char>(byte))
                          : (impl->processor.IsControl(id) || impl->processor.IsUnknown(id) ? piece : pieceText(piece));
        }
        const int bos = impl->processor.bos_id();
        if (bos >= 0 && bos < pieces)
            impl->modelBos = bos;
        impl->bos = impl->modelBos;
        return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl)));
    } catch (const std::exception& e) {
        return Error{label, std::string("SentencePiece failed to load it: ") + e.what()};
    }
}

Result<std::unique_ptr<SentencePieceTokenizer>> loadSentencePieceModel(const std::string& path)
{
    auto bytes = io::readRegularFile(path, kMaxSentencePieceModelBytes);
    if (!bytes)
        return bytes.error();
    return parseSentencePieceModel(*bytes, path);
}

} // namespace kvlens::lm
