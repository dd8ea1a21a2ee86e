// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/spec/allocation.h"

#include "core/io/csv.h"
#include "core/io/json_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
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
            if (!std::set<std::string>{"format", "spec_hash", "target_bits", "bits", "predicted_loss", "loss",
                                       "objective", "llama_cpp", "layers"}
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
        for (const auto& [key, target] : {std::pair<const char*, std::string*>{"loss", &out.loss},
                                          {"objective", &out.objective}})
            if (j.contains(key)) {
                if (!j[key].is_string())
                    throw Bad{key, "must be a string, got " + io::describeJson(j[key])};
                *target = j[key].get<std::string>();
            }
        // Derived from the layers (what llamaCppTypes says of them): checked for shape, not kept.
        if (j.contains("llama_cpp")) {
            const json& l = j["llama_cpp"];
            if (!l.is_object())
                throw Bad{"llama_cpp", "must be an object {\"ctk\", \"ctv\", \"args\"} or {\"note\"}"};
            for (const auto& [key, value] : l.items()) {
                if (!std::set<std::string>{"ctk", "ctv", "args", "note"}.count(key))
                    throw Bad{"llama_cpp." + key, "unknown field (allowed: ctk, ctv, args, note)"};
                if (!value.is_string())
                    throw Bad{"llama_cpp." + key, "must be a string, got " + io::describeJson(value)};
            }
        }
        if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].empty())
            throw Bad{"layers", "must be a non-empty array of {\"layer\", \"k_bits\" or \"k_type\", \"v_bits\" or \"v_type\"}"};
        std::set<std::pair<int, int>> seen;
        for (std::size_t i = 0; i < j["layers"].size(); ++i) {
            const std::string field = "layers[" + std::to_string(i) + "]";
            const json& e = j["layers"][i];
            if (!e.is_object())
                throw Bad{field, "must be an object {\"layer\", \"k_bits\", \"v_bits\"}"};
            for (const auto& [key, value] : e.items())
                if (!std::set<std::string>{"layer", "head", "k_bits", "v_bits", "k_type", "v_type", "bits", "scheme"}
                         .count(key))
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
            if (e.contains("bits")) {
                entry.bits = number(e["bits"], field + ".bits");
                if (!(entry.bits > 0.0 && entry.bits <= 64.0))
                    throw Bad{field + ".bits", "must be in (0, 64] (stored bits per coordinate), got "
                                                   + io::describeJson(e["bits"])};
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

std::string allocationToJson(const AllocationFile& f)
{
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(f.specHash));
    json layers = json::array();
    for (const AllocationEntry& e : f.entries) {
        json entry = {{"layer", e.layer}};
        if (e.head >= 0)
            entry["head"] = e.head;
        if (e.kType.empty())
            entry["k_bits"] = e.kBits;
        else
            entry["k_type"] = e.kType;
        if (e.vType.empty())
            entry["v_bits"] = e.vBits;
        else
            entry["v_type"] = e.vType;
        if (e.bits > 0.0)
            entry["bits"] = e.bits;
        entry["scheme"] = e.kType.empty() && e.vType.empty() ? std::string("TQ (WHT + Lloyd-Max), as K-only / V-only")
                                                             : allocationScheme(e).description;
        layers.push_back(entry);
    }
    const LlamaCppTypes llama = llamaCppTypes(f.entries);
    const json llamaJson = llama.ctk.empty() ? json{{"note", llama.note}}
                                             : json{{"ctk", llama.ctk}, {"ctv", llama.ctv}, {"args", llama.args()}};
    json j = {{"format", "kvlens-allocation"}, {"spec_hash", hash}, {"target_bits", f.targetBits}, {"bits", f.bits},
              {"predicted_loss", f.predictedLoss}};
    if (!f.loss.empty())
        j["loss"] = f.loss;
    if (!f.objective.empty())
        j["objective"] = f.objective;
    j["llama_cpp"] = llamaJson;
    j["layers"] = layers;
    return j.dump(2) + "\n";
}

LlamaCppTypes llamaCppTypes(const std::vector<AllocationEntry>& entries)
{
    LlamaCppTypes out;
    if (entries.empty()) {
        out.note = "no layers";
        return out;
    }
    const bool widths = std::any_of(entries.begin(), entries.end(),
                                    [](const AllocationEntry& e) { return e.kType.empty() || e.vType.empty(); });
    if (widths) {
        out.note = "no -ctk/-ctv: TurboQuant's widths (WHT + Lloyd-Max at k_bits / v_bits) are not llama.cpp cache types";
        return out;
    }
    const AllocationEntry& first = entries.front();
    const bool same = std::all_of(entries.begin(), entries.end(), [&](const AllocationEntry& e) {
        return e.kType == first.kType && e.vType == first.vType;
    });
    if (!same) {
        out.note = "no single -ctk/-ctv: layers differ (llama.cpp takes one K type and one V type for every layer)";
        return out;
    }
    out.ctk = first.kType;
    out.ctv = first.vType;
    return out;
}

std::string allocationLayersCsv(const AllocationFile& f)
{
    CsvWriter csv({"layer", "head", "k_type", "v_type", "k_bits", "v_bits", "bits"});
    for (const AllocationEntry& e : f.entries) {
        csv.add(e.layer);
        if (e.head >= 0)
            csv.add(e.head);
        else
            csv.add(std::string_view());
        csv.add(e.kType).add(e.vType);
        for (const auto& [type, bits] : {std::pair{&e.kType, e.kBits}, std::pair{&e.vType, e.vBits}}) {
            if (type->empty())
                csv.add(bits);
            else
                csv.add(std::string_view());
        }
        if (e.bits > 0.0)
            csv.add(e.bits);
        else
            csv.add(std::string_view());
        csv.endRow();
    }
    return csv.text();
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
