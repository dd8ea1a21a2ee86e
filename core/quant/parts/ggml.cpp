// SPDX-License-Identifier: GPL-3.0-or-later
// Quantizer ggml: llama.cpp's KV-cache block types (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl), bit for
// bit as ggml's reference quantizers store them (core/io/ggml_types.h): blocks of 32
// consecutive coordinates of a row (along head_dim), an fp16 scale (and minimum) per block. Fixed
// widths: the budget n does not change them. Schemes: each type on both paths ("q8_0"), and any
// pair "K=q8_0,V=q4_0" as llama.cpp's -ctk / -ctv set them (findScheme).
#include "core/quant/part_support.h"

#include "core/common/format.h"
#include "core/io/ggml_types.h"

#include <limits>

namespace kvlens::parts {

namespace {

class GgmlPlan final : public QuantizerPlan {
public:
    explicit GgmlPlan(ggml::Type type) : m_type(type) {}

    /// A block ggml would store with an infinite scale (|x| past about 65504 times its largest
    /// code, or a NaN/inf input) dequantizes to NaN there, as llama.cpp's would: counted saturated.
    void roundTrip(const Eigen::Ref<const RowMatrixXf>& x, int, RowMatrixXf& xHat, int& saturated) const override
    {
        const std::size_t block = ggml::kBlockSize;
        const std::size_t bytes = ggml::traits(m_type).bytesPerBlock;
        std::vector<std::uint8_t> codes(bytes);
        std::vector<float> in(block);
        xHat.resize(x.rows(), x.cols());
        for (Eigen::Index r = 0; r < x.rows(); ++r)
            for (Eigen::Index c = 0; c + static_cast<Eigen::Index>(block) <= x.cols(); c += static_cast<Eigen::Index>(block)) {
                for (std::size_t i = 0; i < block; ++i)
                    in[i] = x(r, c + static_cast<Eigen::Index>(i));
                std::span<float> out(&xHat(r, c), block);
                if (!ggml::quantizeRow(m_type, in, codes) || !ggml::dequantizeRow(m_type, codes, out)) {
                    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
                    ++saturated;
                }
            }
    }
    double bits(int tokens, int dim, double) const override
    {
        return static_cast<double>(tokens) * dim * ggml::traits(m_type).bitsPerCoordinate;
    }
    /// Blocks run along a row: every token is encoded alone.
    int causalGroup() const override { return 1; }

private:
    ggml::Type m_type;
};

std::vector<std::string> typeNames()
{
    std::vector<std::string> names;
    for (const auto& t : ggml::kTypes)
        names.emplace_back(t.name);
    return names;
}

} // namespace

std::vector<PartKind> ggmlParts()
{
    PartKind k;
    k.name = "ggml";
    k.role = PartRole::Quantizer;
    k.description = "llama.cpp's KV-cache block types, bit-exact with ggml's reference quantizers: blocks of 32 "
                    "coordinates with an fp16 scale (q8_0 8.5, q4_0 4.5, q4_1 5.0, q5_0 5.5, q5_1 6.0, iq4_nl 4.5 bits "
                    "a coordinate), whatever the budget.";
    k.options = {choice("type", typeNames(), "q8_0", "The ggml block type (llama.cpp's -ctk / -ctv).")};
    k.fixedWidth = true;
    // Transforms before the blocks are allowed (a Hadamard rotation before q4_0 is QuaRot's recipe);
    // every transform keeps d or pads it to a power of two, so d % 32 == 0 suffices.
    k.validate = [](const CodecPart&, const PathConfig&, int, int d, const std::string& field) -> Status {
        if (d % static_cast<int>(ggml::kBlockSize) != 0)
            return Error{field, "ggml block types need d to be a multiple of 32 (blocks along head_dim), got d = "
                                    + std::to_string(d)};
        return Ok{};
    };
    k.planQuantizer = [](const CodecPart& p, PlanContext&) -> std::shared_ptr<const QuantizerPlan> {
        return std::make_shared<GgmlPlan>(*ggml::parseGgmlType(p.text("type")));
    };
    for (const auto& t : ggml::kTypes) {
        PathConfig path;
        path.quantizer = part("ggml", {{"type", std::string(t.name)}});
        k.schemes.push_back(SchemeConfig{std::string(t.name),
                                         "llama.cpp's " + std::string(t.name) + " cache type on K and V ("
                                             + formatNumber(t.bitsPerCoordinate) + " bits a coordinate).",
                                         path, path, true});
    }
    return {k};
}

} // namespace kvlens::parts
