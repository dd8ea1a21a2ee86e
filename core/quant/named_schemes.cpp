// SPDX-License-Identifier: GPL-3.0-or-later
// The named schemes of papers A, B and C as one table of compositions. Schemes that come with a part
// (KVQuant-DS, K-only, V-only, FP16, exact, llama.cpp's cache types) are registered in that part's
// file and appended here.
#include "core/quant/part_support.h"

namespace kvlens {

namespace {

using parts::part;

/// n+offset bits of Lloyd-Max (Beta law), optionally after the WHT and with a 1-bit QJL residual.
PathConfig lloyd(bool rotated, int offset, bool qjl)
{
    PathConfig p;
    if (rotated)
        p.transforms = {part("wht")};
    p.quantizer = part("lloyd");
    p.bits = BitsRule{true, offset};
    if (qjl)
        p.residuals = {part("qjl")};
    return p;
}

PathConfig kivi(const char* axis)
{
    PathConfig p;
    p.quantizer = part("uniform", {{"axis", std::string(axis)}, {"group", 32.0}});
    return p;
}

SchemeConfig make(std::string name, std::string description, PathConfig k, PathConfig v)
{
    return SchemeConfig{std::move(name), std::move(description), std::move(k), std::move(v), true};
}

std::vector<SchemeConfig> table()
{
    std::vector<SchemeConfig> s;
    s.push_back(make("KV", "Paper A: n-bit Lloyd-Max on K and V, no rotation, no sketch.", lloyd(false, 0, false),
                     lloyd(false, 0, false)));
    s.push_back(make("KQV", "Paper A: WHT + n-bit Lloyd-Max on K; WHT + (n-1)-bit Lloyd-Max + 1-bit QJL on V.",
                     lloyd(true, 0, false), lloyd(true, -1, true)));
    s.push_back(make("QKQV", "Paper A: WHT + (n-1)-bit Lloyd-Max + 1-bit QJL on both K and V.", lloyd(true, -1, true),
                     lloyd(true, -1, true)));
    struct Variant {
        const char* suffix;
        bool qjlK, qjlV;
    };
    const Variant variants[] = {{"KV", false, false}, {"QKV", true, false}, {"KQV", false, true}, {"QKQV", true, true}};
    for (const char* family : {"Plain", "TQ"}) {
        const bool rotated = std::string_view(family) == "TQ";
        for (const auto& v : variants) {
            std::string description = std::string("Paper B: ") + (rotated ? "WHT + " : "no rotation, ") + "Lloyd-Max; QJL on "
                                      + (v.qjlK && v.qjlV ? "K and V" : v.qjlK ? "K" : v.qjlV ? "V" : "neither")
                                      + " (a QJL path spends n-1 scalar bits + 1 sketch bit).";
            s.push_back(make(std::string(family) + "-" + v.suffix, description, lloyd(rotated, v.qjlK ? -1 : 0, v.qjlK),
                             lloyd(rotated, v.qjlV ? -1 : 0, v.qjlV)));
        }
    }
    const PathConfig kiviK = kivi("per_channel"), kiviV = kivi("per_token");
    s.push_back(make("KIVI", "KIVI baseline: n-bit min-max integers, per-channel groups of 32 tokens for K, per-token "
                             "groups of 32 channels for V.",
                     kiviK, kiviV));
    PathConfig kiviA2 = kiviV;
    kiviA2.tokenPolicy = part("a2");
    s.push_back(make("KIVI-A2", "Paper C: KIVI keys; KIVI values with the A^2-weighted token policy (more bits for the "
                                "tokens calibration queries attend to most, same total).",
                     kiviK, kiviA2));

    PathConfig sq;
    sq.transforms = {part("eigen")};
    sq.quantizer = part("spectral");
    PathConfig squ = sq;
    squ.quantizer = part("spectral", {{"allocation", std::string("uniform")}});
    PathConfig sqQjl = sq;
    sqQjl.residuals = {part("qjl")};
    s.push_back(make("SQ-KV", "Paper B: SpectralQuant: calibrated eigenbasis per cache, water-filled bits over the d_eff "
                              "leading coordinates, a tail floor for the rest; K and V calibrated separately.",
                     sq, sq));
    s.push_back(make("SQU-KV", "Paper B: SpectralQuant with the same bits on every leading coordinate.", squ, squ));
    s.push_back(make("SQ-QKV", "Paper B: SpectralQuant, plus a selective QJL sketch of the key residual on the d_eff "
                               "leading coordinates (exact dot product on the tail).",
                     sqQjl, sq));

    PathConfig headq = kiviK;
    headq.residuals = {part("headq")};
    s.push_back(make("HeadQ", "Paper C: KIVI keys plus a rank-4, 8-bit side code of the key residual in the calibration "
                              "queries' PCA basis, applied as a logit correction; KIVI values.",
                     headq, kiviV));
    s.push_back(make("HeadQ-A2", "Paper C: HeadQ keys with A^2-weighted KIVI values.", headq, kiviA2));
    PathConfig wrongSign = kiviK;
    wrongSign.residuals = {part("headq", {{"control", std::string("wrong_sign")}})};
    s.push_back(make("HeadQ-wrong-sign", "Paper C control: HeadQ with the correction subtracted.", wrongSign, kiviV));
    PathConfig randomBasis = kiviK;
    randomBasis.residuals = {part("headq", {{"control", std::string("random_basis")}})};
    s.push_back(make("HeadQ-random-basis", "Paper C control: HeadQ with a random orthonormal basis of the same rank.",
                     randomBasis, kiviV));
    return s;
}

} // namespace

const std::vector<SchemeConfig>& namedSchemes()
{
    static const std::vector<SchemeConfig> schemes = [] {
        std::vector<SchemeConfig> all = table();
        for (const PartKind& k : partKinds())
            all.insert(all.end(), k.schemes.begin(), k.schemes.end());
        // Canonical form: every option present, so a named scheme equals its spelled-out composition.
        for (SchemeConfig& s : all)
            s = normalizedScheme(std::move(s));
        return all;
    }();
    return schemes;
}

} // namespace kvlens
