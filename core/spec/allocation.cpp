// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/spec/allocation.h"

#include "core/io/json_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>
#include <utility>

namespace kvlens {

namespace {

using nlohmann::json;

struct Bad {
    std::string field, message;
};

int integerIn(const json& j, const std::string& field, int lo, int hi)
{
    if (!j.is_number_integer() && !(j.is_number_float() && j.get<double>() == static_cast<double>(static_cast<long long>(j.get<double>()))))
        throw Bad{field, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"};
    const long long v = j.is_number_integer() ? j.get<long long>() : static_cast<long long>(j.get<double>());
    if (v < lo || v > hi)
        throw Bad{field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v)};
    return static_cast<int>(v);
}

double number(const json& j, const std::string& field)
{
    if (!j.is_number())
        throw Bad{field, "must be a number"};
    return j.get<double>();
}

} // namespace

Result<AllocationFile> allocationFromJson(std::string_view text)
{
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return parsed.error();
    const json& j = *parsed;
    try {
        if (!j.is_object())
            throw Bad{"", "an allocation file is a JSON object"};
        if (!j.contains("format") || j["format"] != "kvlens-allocation")
            throw Bad{"format", "must be \"kvlens-allocation\" (the file the model lens's advisor writes)"};
        for (const auto& [key, value] : j.items())
            if (!std::set<std::string>{"format", "spec_hash", "target_bits", "bits", "predicted_loss", "loss", "layers"}
                     .count(key))
                throw Bad{key, "unknown field of an allocation file"};
        AllocationFile out;
        if (j.contains("spec_hash")) {
            if (!j["spec_hash"].is_string())
                throw Bad{"spec_hash", "must be a string of 16 hex digits"};
            // Exactly 16 hex digits, as the advisor writes it: no sign, no "0x", no spaces (stoull took
            // "-123..." and "0x..." and wrapped them).
            const std::string h = j["spec_hash"].get<std::string>();
            if (h.size() != 16 || !std::all_of(h.begin(), h.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
                throw Bad{"spec_hash", "must be a string of exactly 16 hex digits"};
            out.specHash = 0;
            for (const char c : h)
                out.specHash = out.specHash * 16 + static_cast<std::uint64_t>(
                                   c <= '9' ? c - '0' : (std::tolower(static_cast<unsigned char>(c)) - 'a' + 10));
        }
        for (const auto& [key, target] : {std::pair<const char*, double*>{"target_bits", &out.targetBits},
                                          {"bits", &out.bits},
                                          {"predicted_loss", &out.predictedLoss}})
            if (j.contains(key))
                *target = number(j[key], key);
        if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].empty())
            throw Bad{"layers", "must be a non-empty array of {\"layer\", \"k_bits\" or \"k_type\", \"v_bits\" or \"v_type\"}"};
        std::set<std::pair<int, int>> seen;
        for (std::size_t i = 0; i < j["layers"].size(); ++i) {
            const std::string field = "layers[" + std::to_string(i) + "]";
            const json& e = j["layers"][i];
            if (!e.is_object())
                throw Bad{field, "must be an object {\"layer\", \"k_bits\", \"v_bits\"}"};
            for (const auto& [key, value] : e.items())
                if (!std::set<std::string>{"layer", "head", "k_bits", "v_bits", "k_type", "v_type", "scheme"}.count(key))
                    throw Bad{field + "." + key, "unknown field of an allocation entry"};
            if (!e.contains("layer"))
                throw Bad{field + ".layer", "is missing"};
            AllocationEntry entry;
            entry.layer = integerIn(e["layer"], field + ".layer", 0, 1 << 16);
            if (e.contains("head"))
                entry.head = integerIn(e["head"], field + ".head", 0, 1 << 16);
            // Each side: a width of TurboQuant's scalar path, or one of llama.cpp's cache types.
            for (const auto& [side, bits, type] : {std::tuple{"k", &entry.kBits, &entry.kType}, std::tuple{"v", &entry.vBits, &entry.vType}}) {
                const std::string bitsKey = std::string(side) + "_bits", typeKey = std::string(side) + "_type";
                if (e.contains(bitsKey) == e.contains(typeKey))
                    throw Bad{field + "." + bitsKey, e.contains(bitsKey) ? "give " + bitsKey + " or " + typeKey + ", not both"
                                                                         : "is missing (or give " + typeKey + ")"};
                if (e.contains(bitsKey)) {
                    *bits = integerIn(e[bitsKey], field + "." + bitsKey, 1, 8);
                    continue;
                }
                if (!e[typeKey].is_string() || !llamaCachePath(e[typeKey].get<std::string>()))
                    throw Bad{field + "." + typeKey, "must be one of llama.cpp's cache types (" + llamaCacheTypeNames()
                                                         + "), got " + io::describeJson(e[typeKey])};
                *type = e[typeKey].get<std::string>();
            }
            if (!seen.insert({entry.layer, entry.head}).second)
                throw Bad{field, "layer " + std::to_string(entry.layer)
                                     + (entry.head >= 0 ? ", head " + std::to_string(entry.head) : std::string())
                                     + " is given twice"};
            out.entries.push_back(entry);
        }
        return out;
    } catch (const Bad& b) {
        return Error{b.field, b.message};
    } catch (const json::exception& e) {
        return Error{"", std::string("malformed allocation file: ") + e.what()};
    }
}

PathConfig fixedWidthPath(int bits)
{
    PathConfig p;
    p.transforms = {CodecPart("wht")};
    p.quantizer = CodecPart("lloyd");
    p.bits = BitsRule{false, bits};
    return normalizedScheme(SchemeConfig{"", "", p, p, false}).key;
}

SchemeConfig fixedWidthScheme(int kBits, int vBits, const std::string& name)
{
    return SchemeConfig{name.empty() ? "K" + std::to_string(kBits) + "/V" + std::to_string(vBits) : name,
                        "K at " + std::to_string(kBits) + " bits, V at " + std::to_string(vBits)
                            + " (WHT + Lloyd-Max, fixed widths)",
                        fixedWidthPath(kBits), fixedWidthPath(vBits), false};
}

SchemeConfig allocationScheme(const AllocationEntry& e)
{
    if (e.kType.empty() && e.vType.empty())
        return fixedWidthScheme(e.kBits, e.vBits);
    if (!e.kType.empty() && !e.vType.empty()) {
        SchemeConfig s = *findScheme("K=" + e.kType + ",V=" + e.vType);
        s.builtin = false;
        return s;
    }
    auto side = [](int bits, const std::string& type, const char* letter) {
        return type.empty() ? std::string(letter) + std::to_string(bits) : std::string(letter) + "=" + type;
    };
    auto path = [](int bits, const std::string& type) { return type.empty() ? fixedWidthPath(bits) : *llamaCachePath(type); };
    auto describe = [](int bits, const std::string& type) {
        return type.empty() ? std::to_string(bits) + " bits (WHT + Lloyd-Max)" : "llama.cpp's " + type;
    };
    return normalizedScheme(SchemeConfig{side(e.kBits, e.kType, "K") + "/" + side(e.vBits, e.vType, "V"),
                                         "K at " + describe(e.kBits, e.kType) + ", V at " + describe(e.vBits, e.vType),
                                         path(e.kBits, e.kType), path(e.vBits, e.vType), false});
}

std::vector<SchemeConfig> allocationSchemes(const AllocationFile& file)
{
    std::vector<SchemeConfig> out;
    std::set<std::string> seen;
    for (const AllocationEntry& e : file.entries) {
        SchemeConfig s = allocationScheme(e);
        if (seen.insert(s.name).second)
            out.push_back(std::move(s));
    }
    return out;
}

} // namespace kvlens
