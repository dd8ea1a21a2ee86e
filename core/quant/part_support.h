// SPDX-License-Identifier: GPL-3.0-or-later
// What part files share: option descriptions in one line, the registration functions, random streams.
#pragma once

#include "core/quant/codec_parts.h"
#include "core/quant/spectral.h"

#include <memory>
#include <string>
#include <vector>

namespace kvlens::parts {

inline OptionDesc integer(std::string name, double lo, double hi, double fallback, std::string description)
{
    return OptionDesc{std::move(name), OptionDesc::Type::Integer, lo, hi, {}, fallback, std::move(description)};
}

inline OptionDesc real(std::string name, double lo, double hi, double fallback, std::string description)
{
    return OptionDesc{std::move(name), OptionDesc::Type::Real, lo, hi, {}, fallback, std::move(description)};
}

inline OptionDesc choice(std::string name, std::vector<std::string> choices, std::string fallback, std::string description)
{
    return OptionDesc{std::move(name), OptionDesc::Type::Choice, 0, 0, std::move(choices), std::move(fallback),
                      std::move(description)};
}

/// The storage formats of a scalar (norms, group mins and scales).
inline OptionDesc scalarFormat(std::string name, std::string description)
{
    return choice(std::move(name), {"fp16", "bf16", "fp32"}, "fp16", std::move(description));
}

/// The stream of a path's random signs / sketches: keys and values draw independently.
inline Stream signStream(PathSite site) { return site == PathSite::Keys ? Stream::KeySigns : Stream::ValueSigns; }
inline Stream sketchStream(PathSite site) { return site == PathSite::Keys ? Stream::KeySketch : Stream::ValueSketch; }

/// The eigen-analysis of `rows`, from the trial group's cache when there is one.
std::shared_ptr<const SpectralAnalysis> spectrumOf(const RowMatrixXf& rows, double gapThreshold,
                                                   std::shared_ptr<const SpectralAnalysis>* cache);

/// A part of `kind` with the given options (the rest default when normalized).
inline CodecPart part(std::string kind, std::map<std::string, OptionValue> options = {})
{
    return CodecPart(std::move(kind), std::move(options));
}

// The part files' registration functions (one line each in codec_registry.cpp).
std::vector<PartKind> whtParts();        ///< transforms wht, wht_permuted
std::vector<PartKind> channelNormParts(); ///< transform channel_norm
std::vector<PartKind> spectralParts();   ///< transform eigen, quantizer spectral
std::vector<PartKind> lloydParts();      ///< quantizer lloyd
std::vector<PartKind> uniformParts();    ///< quantizer uniform
std::vector<PartKind> kvquantParts();    ///< quantizer kvquant (and KVQuant-DS)
std::vector<PartKind> halfParts();       ///< quantizers fp16, none (and K-only, V-only, FP16)
std::vector<PartKind> ggmlParts();       ///< quantizer ggml (and llama.cpp's cache types)
std::vector<PartKind> qjlParts();        ///< residual qjl
std::vector<PartKind> headqParts();      ///< residual headq
std::vector<PartKind> tokenPolicyParts(); ///< token policies uniform, a2

} // namespace kvlens::parts
