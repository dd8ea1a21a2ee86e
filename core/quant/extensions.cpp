// SPDX-License-Identifier: GPL-3.0-or-later
// The registry of scheme extensions: one declaration and one list entry per extension file.
#include "core/quant/codec.h"

namespace kvlens {

SchemeExtension kvquantDenseSparseExtension(); // kvquant_ds.cpp
SchemeExtension halfPrecisionExtension();      // fp16_codec.cpp

const std::vector<SchemeExtension>& schemeExtensions()
{
    static const std::vector<SchemeExtension> all{
        kvquantDenseSparseExtension(),
        halfPrecisionExtension(),
    };
    return all;
}

const CodecKind* findCodec(std::string_view name)
{
    for (const auto& e : schemeExtensions())
        if (e.codec.name == name)
            return &e.codec;
    return nullptr;
}

std::string codecNames()
{
    std::string names;
    for (const auto& e : schemeExtensions())
        names += (names.empty() ? "" : ", ") + e.codec.name;
    return names;
}

} // namespace kvlens
