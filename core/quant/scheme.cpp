// SPDX-License-Identifier: GPL-3.0-or-later
// Scheme and path configurations: bits rules, part options with their defaults, normalization and
// the composition checks, name lookup (named schemes and llama.cpp's per-path cache types).
#include "core/quant/scheme.h"

#include "core/quant/codec_parts.h"
#include "core/io/ggml_types.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace kvlens {

std::string BitsRule::text() const
{
    if (!relative)
        return std::to_string(value);
    if (value == 0)
        return "n";
    return value > 0 ? "n+" + std::to_string(value) : "n-" + std::to_string(-value);
}

std::optional<BitsRule> BitsRule::parse(std::string_view text)
{
    auto parseInt = [](std::string_view s, int& out) {
        const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        return ec == std::errc() && ptr == s.data() + s.size();
    };
    if (text == "n")
        return BitsRule{true, 0};
    if (text.size() > 2 && text[0] == 'n' && (text[1] == '-' || text[1] == '+')) {
        int v = 0;
        if (!parseInt(text.substr(2), v) || v < 0)
            return std::nullopt;
        return BitsRule{true, text[1] == '-' ? -v : v};
    }
    int v = 0;
    if (!parseInt(text, v))
        return std::nullopt;
    return BitsRule{false, v};
}

namespace {

/// The option `key` of `part`, or its kind's default (the kind of that name that has the option:
/// kinds sharing a name across roles have different options).
const OptionValue* optionOf(const CodecPart& part, std::string_view key)
{
    if (auto it = part.options.find(std::string(key)); it != part.options.end())
        return &it->second;
    for (const PartKind& kind : partKinds())
        if (kind.name == part.kind)
            for (const OptionDesc& o : kind.options)
                if (o.name == key)
                    return &o.fallback;
    return nullptr;
}

} // namespace

double CodecPart::number(std::string_view key) const
{
    const OptionValue* v = optionOf(*this, key);
    assert(v && std::holds_alternative<double>(*v) && "CodecPart::number: no such numeric option");
    return v && std::holds_alternative<double>(*v) ? std::get<double>(*v) : 0.0;
}

std::string CodecPart::text(std::string_view key) const
{
    const OptionValue* v = optionOf(*this, key);
    assert(v && std::holds_alternative<std::string>(*v) && "CodecPart::text: no such word option");
    return v && std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : std::string();
}

const CodecPart* PathConfig::part(std::string_view kind) const
{
    for (const CodecPart& t : transforms)
        if (t.kind == kind)
            return &t;
    if (quantizer.kind == kind)
        return &quantizer;
    for (const CodecPart& r : residuals)
        if (r.kind == kind)
            return &r;
    if (tokenPolicy.kind == kind)
        return &tokenPolicy;
    return nullptr;
}

namespace {

/// Every part of a path with its role and field name, in planning order.
template <class F>
Status forEachPart(PathConfig& path, const std::string& field, F&& f)
{
    for (std::size_t i = 0; i < path.transforms.size(); ++i)
        if (auto s = f(path.transforms[i], PartRole::Transform, field + ".transforms[" + std::to_string(i) + "]"); !s)
            return s;
    if (auto s = f(path.quantizer, PartRole::Quantizer, field + ".quantizer"); !s)
        return s;
    for (std::size_t i = 0; i < path.residuals.size(); ++i)
        if (auto s = f(path.residuals[i], PartRole::Residual, field + ".residuals[" + std::to_string(i) + "]"); !s)
            return s;
    return f(path.tokenPolicy, PartRole::TokenPolicy, field + ".token_policy");
}

/// Options filled and checked, no composition rule.
Status normalizeParts(PathConfig& path, const std::string& field)
{
    constexpr std::size_t kMaxParts = 8;
    if (path.transforms.size() > kMaxParts)
        return Error{field + ".transforms", "at most " + std::to_string(kMaxParts) + " transforms, got "
                                                + std::to_string(path.transforms.size())};
    if (path.residuals.size() > kMaxParts)
        return Error{field + ".residuals", "at most " + std::to_string(kMaxParts) + " residual stages, got "
                                               + std::to_string(path.residuals.size())};
    return forEachPart(path, field, [](CodecPart& part, PartRole role, const std::string& where) {
        return normalizePart(part, role, where);
    });
}

} // namespace

Status normalizePath(PathConfig& path, const std::vector<int>& budgets, int d, const std::string& field)
{
    if (auto s = normalizeParts(path, field); !s)
        return s;
    if (!findPart(path.quantizer.kind, PartRole::Quantizer)->fixedWidth)
        for (int n : budgets) {
            const int b = path.bits.at(n);
            if (b < 1 || b > 8)
                return Error{field + ".bits", "'" + path.bits.text() + "' gives " + std::to_string(b)
                                                  + " bits at budget n = " + std::to_string(n) + "; a path needs 1..8 bits"};
        }
    const PathConfig snapshot = path;
    std::vector<int> checked = budgets;
    if (checked.empty())
        checked.push_back(0);
    for (int n : checked)
        if (auto s = forEachPart(path, field,
                                 [&](CodecPart& part, PartRole role, const std::string& where) -> Status {
                                     const PartKind* kind = findPart(part.kind, role);
                                     return kind->validate ? kind->validate(part, snapshot, n, d, where) : Status(Ok{});
                                 });
            !s)
            return s;
    return Ok{};
}

Status validateScheme(const SchemeConfig& scheme, const std::vector<int>& budgets, int d, const std::string& field)
{
    if (scheme.name.empty())
        return Error{field + ".name", "a scheme needs a name"};
    for (const auto& [path, siteOfPath, name] : {std::tuple{scheme.key, PathSite::Keys, "k"}, std::tuple{scheme.value, PathSite::Values, "v"}}) {
        PathConfig copy = path;
        const PathSite site = siteOfPath; // clang 14 cannot capture a structured binding in a lambda
        const std::string where = field + "." + name;
        if (auto s = normalizePath(copy, budgets, d, where); !s)
            return s;
        if (auto s = forEachPart(copy, where,
                                 [&](CodecPart& part, PartRole role, const std::string& at) -> Status {
                                     const PartKind* kind = findPart(part.kind, role);
                                     if (kind->site && *kind->site != site)
                                         return Error{at, kind->siteReason};
                                     return Ok{};
                                 });
            !s)
            return s;
    }
    return Ok{};
}

SchemeConfig normalizedScheme(SchemeConfig scheme)
{
    const Status k = normalizeParts(scheme.key, "k");
    const Status v = normalizeParts(scheme.value, "v");
    (void)k;
    (void)v;
    return scheme;
}

bool needsCalibration(const SchemeConfig& scheme)
{
    bool needs = false;
    for (PathConfig path : {scheme.key, scheme.value})
        (void)forEachPart(path, "", [&](CodecPart& part, PartRole role, const std::string&) -> Status {
            const PartKind* kind = findPart(part.kind, role);
            needs = needs || (kind && kind->needsCalibration && kind->needsCalibration(part));
            return Ok{};
        });
    return needs;
}

std::optional<PathConfig> llamaCachePath(std::string_view name)
{
    PathConfig p;
    if (name == "f32")
        p.quantizer = CodecPart("none");
    else if (name == "f16")
        p.quantizer = CodecPart("fp16");
    else if (ggml::parseGgmlType(name))
        p.quantizer = CodecPart("ggml", {{"type", std::string(name)}});
    else
        return std::nullopt;
    return normalizedScheme(SchemeConfig{"", "", p, p, false}).key;
}

std::string llamaCacheTypeNames()
{
    return "f32, f16, " + ggml::ggmlTypeNames();
}

std::optional<SchemeConfig> findScheme(std::string_view name)
{
    for (const auto& s : namedSchemes())
        if (s.name == name)
            return s;
    // "K=q8_0,V=q4_0": llama.cpp's -ctk and -ctv.
    if (name.size() > 4 && (name.substr(0, 2) == "K=" || name.substr(0, 2) == "k=")) {
        const auto comma = name.find(',');
        if (comma == std::string_view::npos)
            return std::nullopt;
        const std::string_view rest = name.substr(comma + 1);
        if (rest.size() < 3 || (rest.substr(0, 2) != "V=" && rest.substr(0, 2) != "v="))
            return std::nullopt;
        const auto k = llamaCachePath(name.substr(2, comma - 2));
        const auto v = llamaCachePath(rest.substr(2));
        if (!k || !v)
            return std::nullopt;
        const std::string kName(name.substr(2, comma - 2)), vName(rest.substr(2));
        SchemeConfig s{"K=" + kName + ",V=" + vName,
                       "llama.cpp's cache types: K " + kName + ", V " + vName + " (-ctk " + kName + " -ctv " + vName + ").",
                       *k, *v, true};
        return normalizedScheme(std::move(s));
    }
    return std::nullopt;
}

std::string schemeNames()
{
    std::string names;
    for (const auto& s : namedSchemes())
        names += (names.empty() ? "" : ", ") + s.name;
    return names + ", K=<type>,V=<type> (llama.cpp cache types: " + llamaCacheTypeNames() + ")";
}

} // namespace kvlens
