// SPDX-License-Identifier: GPL-3.0-or-later
// The registry of codec parts: one line per part file. Option normalization and checking, for every
// part alike.
#include "core/quant/codec_parts.h"
#include "core/quant/part_support.h"

#include <cmath>
#include <set>

namespace kvlens {

const std::vector<PartKind>& partKinds()
{
    static const std::vector<PartKind> all = [] {
        std::vector<PartKind> kinds;
        for (auto&& group : {parts::whtParts(), parts::channelNormParts(), parts::spectralParts(), parts::lloydParts(),
                             parts::uniformParts(), parts::kvquantParts(), parts::halfParts(), parts::ggmlParts(),
                             parts::qjlParts(), parts::headqParts(), parts::tokenPolicyParts()})
            kinds.insert(kinds.end(), group.begin(), group.end());
        return kinds;
    }();
    return all;
}

const PartKind* findPart(std::string_view name, PartRole role)
{
    for (const auto& k : partKinds())
        if (k.name == name && k.role == role)
            return &k;
    return nullptr;
}

std::string_view partRoleName(PartRole role)
{
    switch (role) {
    case PartRole::Transform: return "transform";
    case PartRole::Quantizer: return "quantizer";
    case PartRole::Residual: return "residual";
    case PartRole::TokenPolicy: return "token policy";
    }
    return "part";
}

std::string partNames(PartRole role)
{
    std::string names;
    for (const auto& k : partKinds())
        if (k.role == role)
            names += (names.empty() ? "" : ", ") + k.name;
    return names;
}

namespace {

std::string describe(const OptionValue& v)
{
    if (const auto* d = std::get_if<double>(&v)) {
        std::string s = std::to_string(*d);
        if (std::isfinite(*d) && *d == std::floor(*d) && std::abs(*d) < 1e15)
            s = std::to_string(static_cast<long long>(*d));
        return s;
    }
    return "'" + std::get<std::string>(v) + "'";
}

std::string rangeText(const OptionDesc& o)
{
    auto num = [](double x) {
        if (x == std::floor(x) && std::abs(x) < 1e15)
            return std::to_string(static_cast<long long>(x));
        std::string s = std::to_string(x);
        while (!s.empty() && s.back() == '0')
            s.pop_back();
        return s;
    };
    return "[" + num(o.lo) + ", " + num(o.hi) + "]";
}

} // namespace

Status normalizePart(CodecPart& part, PartRole role, const std::string& field)
{
    const PartKind* kind = findPart(part.kind, role);
    if (!kind)
        return Error{field, "unknown " + std::string(partRoleName(role)) + " '" + part.kind + "' (known: " + partNames(role)
                                + ")"};
    std::set<std::string> known;
    for (const OptionDesc& o : kind->options) {
        known.insert(o.name);
        auto it = part.options.find(o.name);
        if (it == part.options.end()) {
            part.options.emplace(o.name, o.fallback);
            continue;
        }
        const std::string where = field + "." + o.name;
        OptionValue& v = it->second;
        switch (o.type) {
        case OptionDesc::Type::Integer: {
            const double* x = std::get_if<double>(&v);
            if (!x || !std::isfinite(*x) || *x != std::floor(*x) || *x < o.lo || *x > o.hi)
                return Error{where, "must be an integer in " + rangeText(o) + ", got " + describe(v)};
            break;
        }
        case OptionDesc::Type::Real: {
            const double* x = std::get_if<double>(&v);
            if (!x || !std::isfinite(*x) || *x < o.lo || *x > o.hi)
                return Error{where, "must be a number in " + rangeText(o) + ", got " + describe(v)};
            break;
        }
        case OptionDesc::Type::Choice: {
            const std::string* s = std::get_if<std::string>(&v);
            bool ok = false;
            std::string allowed;
            for (const auto& c : o.choices) {
                ok = ok || (s && *s == c);
                allowed += (allowed.empty() ? "" : ", ") + c;
            }
            if (!ok)
                return Error{where, "must be one of " + allowed + ", got " + describe(v)};
            break;
        }
        }
    }
    for (const auto& [name, value] : part.options)
        if (!known.count(name)) {
            std::string allowed;
            for (const OptionDesc& o : kind->options)
                allowed += (allowed.empty() ? "" : ", ") + o.name;
            return Error{field + "." + name, "is not an option of " + part.kind + " (options: "
                                                 + (allowed.empty() ? std::string("none") : allowed) + ")"};
        }
    return Ok{};
}

} // namespace kvlens
