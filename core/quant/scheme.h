// SPDX-License-Identifier: GPL-3.0-or-later
// A scheme is two codecs (K path, V path); a codec is a composition of registered parts with options.
#pragma once

#include "core/common/result.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvlens {

/// Bits of a path's quantizer: absolute, or relative to the budget n ("n", "n-1").
struct BitsRule {
    bool relative = true;
    int value = 0; ///< offset from n when relative, bits otherwise

    /// Bits at budget n.
    int at(int budget) const { return relative ? budget + value : value; }
    /// "n", "n-1", "n+2" or "3".
    std::string text() const;
    /// Parses the forms text() writes.
    static std::optional<BitsRule> parse(std::string_view text);
    bool operator==(const BitsRule&) const = default;
};

/// An option value of a codec part: a number or a word.
using OptionValue = std::variant<double, std::string>;

/// One part of a codec: a registered kind (core/quant/codec_parts.h) and its options. After
/// normalizeCodec every option of the kind is present (defaults filled), so equal parts compare
/// equal and hash alike.
struct CodecPart {
    std::string kind;
    std::map<std::string, OptionValue> options;

    CodecPart() = default;
    explicit CodecPart(std::string k, std::map<std::string, OptionValue> o = {}) : kind(std::move(k)), options(std::move(o)) {}

    /// The option `key` as a number / a word (the kind's default when absent).
    double number(std::string_view key) const;
    int integer(std::string_view key) const { return static_cast<int>(number(key)); }
    std::string text(std::string_view key) const;
    bool operator==(const CodecPart&) const = default;
};

/// How one of the two caches (K or V) is stored: transforms (applied in order, undone in reverse),
/// a quantizer, residual stages (each corrects what the previous stages left), a token policy, and
/// the quantizer's bits at budget n. Nothing outside the parts switches on their kinds.
struct PathConfig {
    std::vector<CodecPart> transforms;
    CodecPart quantizer{"lloyd"};
    std::vector<CodecPart> residuals;
    CodecPart tokenPolicy{"uniform"};
    BitsRule bits;                         ///< default "n"

    /// The first part of kind `kind` in any role, or null.
    const CodecPart* part(std::string_view kind) const;
    bool has(std::string_view kind) const { return part(kind) != nullptr; }
    bool operator==(const PathConfig&) const = default;
};

/// A scheme: a name, a one-line description, and the key and value paths.
struct SchemeConfig {
    std::string name;
    std::string description;
    PathConfig key;
    PathConfig value;
    bool builtin = false; ///< one of namedSchemes(), written to JSON by name only
    bool operator==(const SchemeConfig&) const = default;
};

/// The named schemes: KV, KQV, QKQV (paper A), Plain-/TQ- x {KV, QKV, KQV, QKQV} (paper B),
/// SQ-KV, SQU-KV, SQ-QKV (paper B's SpectralQuant), KIVI, KIVI-A2, HeadQ, HeadQ-A2,
/// HeadQ-wrong-sign, HeadQ-random-basis (paper C), KVQuant-DS, K-only, V-only, FP16, and the
/// llama.cpp cache types (q8_0, q4_0, ... on both paths). One table of compositions
/// (core/quant/named_schemes.cpp) plus each part file's own schemes.
const std::vector<SchemeConfig>& namedSchemes();
/// The named scheme called `name`, or a scheme of llama.cpp's per-path cache types written
/// "K=q8_0,V=q4_0" (what -ctk/-ctv set), or nothing.
std::optional<SchemeConfig> findScheme(std::string_view name);
/// Comma-separated names, for error messages.
std::string schemeNames();
/// A path storing llama.cpp's cache type `type` as -ctk / -ctv spell it: f32 (exact), f16, or a
/// ggml block type (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl); nothing for another name.
std::optional<PathConfig> llamaCachePath(std::string_view type);
/// "f32, f16, q8_0, ...", for messages.
std::string llamaCacheTypeNames();

/// Fills every part's defaults and checks the composition (kinds known and in their roles,
/// options in their ranges, the parts' cross-checks) at every budget in `budgets`; errors name
/// `field` and the option ("schemes[2].k.quantizer.group: must be an integer in [1, 1048576]").
Status normalizePath(PathConfig& path, const std::vector<int>& budgets, int d, const std::string& field);
/// Both paths, and the scheme-level rules.
Status validateScheme(const SchemeConfig& scheme, const std::vector<int>& budgets, int d, const std::string& field);
/// normalizePath on both paths of a copy (no budgets checked): the canonical form.
SchemeConfig normalizedScheme(SchemeConfig scheme);

/// True when any part needs a calibration set (empirical codebooks, eigenbases, HeadQ's basis, A^2).
bool needsCalibration(const SchemeConfig& scheme);

} // namespace kvlens
