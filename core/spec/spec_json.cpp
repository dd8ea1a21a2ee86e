// SPDX-License-Identifier: GPL-3.0-or-later
// JSON mapping of specs with nlohmann::json, kept out of headers (compile time).
#include "core/spec/spec_json.h"

#include "core/spec/allocation.h"
#include "core/spec/eval_spec.h"

#include "core/quant/scheme.h"
#include "core/regimes/model_dump.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"
#include "core/regimes/imported.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace kvlens {

using nlohmann::json;

namespace {

constexpr int kFormatVersion = 2; // 2: paths as compositions of parts (1: flat paths, still read)

/// Throws inside this file only; converted to an Error at the public boundary.
struct FieldError {
    std::string field;
    std::string message;
};

void checkKeys(const json& object, const std::string& where, std::initializer_list<const char*> allowed)
{
    if (!object.is_object())
        throw FieldError{where, "must be a JSON object"};
    for (const auto& [key, value] : object.items()) {
        bool ok = false;
        for (const char* a : allowed)
            ok = ok || key == a;
        if (!ok) {
            std::string list;
            for (const char* a : allowed)
                list += (list.empty() ? "" : ", ") + std::string(a);
            throw FieldError{where.empty() ? key : where + "." + key, "unknown key (allowed: " + list + ")"};
        }
    }
}

int getInt(const json& v, const std::string& field, long long lo = std::numeric_limits<int>::min(),
           long long hi = std::numeric_limits<int>::max())
{
    auto outOfRange = [&] {
        return FieldError{field, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got "
                                     + v.dump()}; // a number here: dump() is one short token
    };
    if (v.is_number_unsigned()) {
        const auto x = v.get<unsigned long long>();
        if (x > static_cast<unsigned long long>(hi) || (lo > 0 && x < static_cast<unsigned long long>(lo)))
            throw outOfRange();
        return static_cast<int>(x);
    }
    if (v.is_number_integer()) {
        const auto x = v.get<long long>();
        if (x < lo || x > hi)
            throw outOfRange();
        return static_cast<int>(x);
    }
    if (v.is_number_float()) {
        // 128.0 is accepted as 128; 2.5 is not an integer.
        const double x = v.get<double>();
        if (std::isfinite(x) && x == std::floor(x)) {
            if (x < static_cast<double>(lo) || x > static_cast<double>(hi))
                throw outOfRange();
            return static_cast<int>(x);
        }
    }
    throw FieldError{field, "must be an integer, got " + io::describeJson(v)};
}

/// object[key], when present, as an integer in [lo, hi] into `target`; errors name `field`.
void readInt(const json& object, const char* key, const std::string& field, int& target, long long lo, long long hi)
{
    if (object.contains(key))
        target = getInt(object[key], field, lo, hi);
}

double getNumber(const json& v, const std::string& field)
{
    if (!v.is_number())
        throw FieldError{field, "must be a number, got " + io::describeJson(v)};
    return v.get<double>();
}

std::string getString(const json& v, const std::string& field)
{
    if (!v.is_string())
        throw FieldError{field, "must be a string, got " + io::describeJson(v)};
    return v.get<std::string>();
}

template <class Enum>
Enum getEnum(const json& v, const std::string& field, std::optional<Enum> (*parse)(std::string_view),
             const char* allowed)
{
    const std::string text = getString(v, field);
    const auto parsed = parse(text);
    if (!parsed)
        throw FieldError{field, "must be one of " + std::string(allowed) + ", got '" + text + "'"};
    return *parsed;
}

json partJson(const CodecPart& part)
{
    if (part.options.empty())
        return part.kind;
    json j;
    j["kind"] = part.kind;
    for (const auto& [key, value] : part.options) {
        if (const auto* d = std::get_if<double>(&value))
            j[key] = *d == std::floor(*d) && std::abs(*d) < 1e15 ? json(static_cast<long long>(*d)) : json(*d);
        else
            j[key] = std::get<std::string>(value);
    }
    return j;
}

/// A part written as its kind ("wht") or as {"kind": "uniform", "group": 64, ...}. The options are
/// checked against the kind's descriptions by normalizePath (validateScheme); here only their types.
CodecPart partFromJson(const json& j, const std::string& field)
{
    if (j.is_string())
        return CodecPart(j.get<std::string>());
    if (!j.is_object())
        throw FieldError{field, "must be a part kind (a string) or an object with \"kind\" and options, got "
                                    + io::describeJson(j)};
    if (!j.contains("kind"))
        throw FieldError{field + ".kind", "a part needs a kind"};
    CodecPart part(getString(j["kind"], field + ".kind"));
    constexpr std::size_t kMaxOptions = 64;
    if (j.size() > kMaxOptions)
        throw FieldError{field, "at most " + std::to_string(kMaxOptions) + " options"};
    for (const auto& [key, value] : j.items()) {
        if (key == "kind")
            continue;
        if (value.is_number())
            part.options[key] = value.get<double>();
        else if (value.is_string())
            part.options[key] = value.get<std::string>();
        else
            throw FieldError{field + "." + key, "must be a number or a string, got " + io::describeJson(value)};
    }
    return part;
}

BitsRule bitsFromJson(const json& b, const std::string& field)
{
    if (b.is_string()) {
        const auto rule = BitsRule::parse(b.get<std::string>());
        if (!rule)
            throw FieldError{field, "must be \"n\", \"n-1\", \"n+1\" ... or an integer 1..8, got " + io::describeJson(b)};
        return *rule;
    }
    return BitsRule{false, getInt(b, field, 1, 8)};
}

json pathToJson(const PathConfig& p)
{
    json j;
    j["transforms"] = json::array();
    for (const CodecPart& t : p.transforms)
        j["transforms"].push_back(partJson(t));
    j["quantizer"] = partJson(p.quantizer);
    j["residuals"] = json::array();
    for (const CodecPart& r : p.residuals)
        j["residuals"].push_back(partJson(r));
    j["token_policy"] = partJson(p.tokenPolicy);
    if (p.bits.relative)
        j["bits"] = p.bits.text();
    else
        j["bits"] = p.bits.value;
    return j;
}

/// The flat path form of format version 1 ("rotation", "quantizer": "lloyd_beta", "residual",
/// "qjl_dim", "group_size", ...), read into its composition. One norm_format served every stored
/// scalar of the path (norms, group scales, the sketch's residual norms).
PathConfig legacyPathFromJson(const json& j, const std::string& field)
{
    checkKeys(j, field, {"rotation", "quantizer", "bits", "norm_format", "residual", "qjl_dim", "qjl_reconstruction",
                         "qjl_sketch", "group_size", "axis", "window", "allocation", "deff_rule", "gap_threshold",
                         "tail_bits", "headq_rank", "headq_bits", "headq_control", "token_policy", "codec"});
    auto word = [&](const char* key, const char* fallback) {
        return j.contains(key) ? getString(j[key], field + "." + key) : std::string(fallback);
    };
    auto number = [&](const char* key) { return getNumber(j[key], field + "." + key); };
    PathConfig p;
    const std::string norm = word("norm_format", "fp16");
    if (j.contains("bits"))
        p.bits = bitsFromJson(j["bits"], field + ".bits");
    if (j.contains("codec")) {
        const std::string codec = getString(j["codec"], field + ".codec");
        if (codec == "kvquant_ds")
            p.quantizer = CodecPart("kvquant");
        else if (codec == "fp16")
            p.quantizer = CodecPart("fp16");
        else
            throw FieldError{field + ".codec", "must name a version-1 codec (kvquant_ds, fp16), got '" + codec + "'"};
        return p;
    }
    const std::string quantizer = word("quantizer", "lloyd_beta");
    const std::string rotation = word("rotation", quantizer == "spectral" ? "eigen" : "none");
    if (rotation == "wht" || rotation == "wht_permuted" || rotation == "eigen")
        p.transforms = {CodecPart(rotation)};
    else if (rotation != "none")
        throw FieldError{field + ".rotation", "must be one of none, wht, eigen, wht_permuted, got '" + rotation + "'"};
    if (quantizer == "lloyd_beta" || quantizer == "lloyd_gauss" || quantizer == "lloyd_empirical") {
        p.quantizer = CodecPart("lloyd", {{"law", quantizer.substr(6)}, {"norm", norm}});
    } else if (quantizer == "uniform") {
        p.quantizer = CodecPart("uniform", {{"axis", word("axis", "per_token")}, {"scale", norm}});
        if (j.contains("group_size"))
            p.quantizer.options["group"] = number("group_size");
        if (j.contains("window"))
            p.quantizer.options["window"] = number("window");
    } else if (quantizer == "spectral") {
        p.quantizer = CodecPart("spectral", {{"allocation", word("allocation", "water_filling")},
                                             {"deff_rule", word("deff_rule", "gap")}});
        if (j.contains("gap_threshold"))
            p.quantizer.options["gap_threshold"] = number("gap_threshold");
        if (j.contains("tail_bits"))
            p.quantizer.options["tail_bits"] = number("tail_bits");
    } else {
        throw FieldError{field + ".quantizer", "must be one of lloyd_beta, lloyd_gauss, lloyd_empirical, uniform, spectral, "
                                               "got '" + quantizer + "'"};
    }
    const std::string residual = word("residual", "none");
    if (residual == "qjl") {
        CodecPart qjl("qjl", {{"sketch", word("qjl_sketch", "gaussian")},
                              {"reconstruction", word("qjl_reconstruction", "unbiased")},
                              {"norm", norm}});
        if (j.contains("qjl_dim"))
            qjl.options["m"] = number("qjl_dim");
        p.residuals = {qjl};
    } else if (residual == "headq") {
        CodecPart headq("headq", {{"control", word("headq_control", "none")}});
        if (j.contains("headq_rank"))
            headq.options["rank"] = number("headq_rank");
        if (j.contains("headq_bits"))
            headq.options["bits"] = number("headq_bits");
        p.residuals = {headq};
    } else if (residual != "none") {
        throw FieldError{field + ".residual", "must be one of none, qjl, headq, got '" + residual + "'"};
    }
    p.tokenPolicy = CodecPart(word("token_policy", "uniform"));
    return p;
}

/// A path: the composition {"transforms": [...], "quantizer": ..., "residuals": [...],
/// "token_policy": ..., "bits": ...} (every key optional: no transform, Lloyd-Max Beta, no residual,
/// uniform tokens, n bits), or version 1's flat form.
PathConfig pathFromJson(const json& j, const std::string& field)
{
    if (!j.is_object())
        throw FieldError{field, "must be a JSON object (a path: transforms, quantizer, residuals, token_policy, bits)"};
    const bool composed = j.contains("transforms") || j.contains("residuals")
                          || (j.contains("quantizer") && j["quantizer"].is_object());
    bool legacy = !composed;
    if (legacy) {
        // A flat path that uses only keys of both forms with values of the new one reads as the new form.
        legacy = false;
        for (const auto& [key, value] : j.items())
            if (key != "quantizer" && key != "bits" && key != "token_policy")
                legacy = true;
        if (j.contains("quantizer") && j["quantizer"].is_string()) {
            const std::string q = j["quantizer"].get<std::string>();
            legacy = legacy || q == "lloyd_beta" || q == "lloyd_gauss" || q == "lloyd_empirical" || q == "spectral";
        }
    }
    if (legacy)
        return legacyPathFromJson(j, field);
    checkKeys(j, field, {"transforms", "quantizer", "residuals", "token_policy", "bits"});
    PathConfig p;
    auto list = [&](const char* key) {
        std::vector<CodecPart> parts;
        if (!j.contains(key))
            return parts;
        const json& a = j[key];
        const std::string where = field + "." + key;
        if (!a.is_array())
            throw FieldError{where, "must be an array of parts, got " + io::describeJson(a)};
        if (a.size() > 8)
            throw FieldError{where, "at most 8 parts, got " + std::to_string(a.size())};
        for (std::size_t i = 0; i < a.size(); ++i)
            parts.push_back(partFromJson(a[i], where + "[" + std::to_string(i) + "]"));
        return parts;
    };
    p.transforms = list("transforms");
    p.residuals = list("residuals");
    if (j.contains("quantizer"))
        p.quantizer = partFromJson(j["quantizer"], field + ".quantizer");
    if (j.contains("token_policy"))
        p.tokenPolicy = partFromJson(j["token_policy"], field + ".token_policy");
    if (j.contains("bits"))
        p.bits = bitsFromJson(j["bits"], field + ".bits");
    return p;
}

json schemeJson(const SchemeConfig& s)
{
    if (s.builtin)
        return s.name;
    json j;
    j["name"] = s.name;
    if (!s.description.empty())
        j["description"] = s.description;
    j["k"] = pathToJson(s.key);
    j["v"] = pathToJson(s.value);
    return j;
}

SchemeConfig schemeFromJson(const json& j, const std::string& field)
{
    if (j.is_string()) {
        const std::string name = j.get<std::string>();
        auto named = findScheme(name);
        if (!named)
            throw FieldError{field, "unknown scheme '" + name + "' (known: " + schemeNames() + ")"};
        return *named;
    }
    checkKeys(j, field, {"name", "description", "k", "v"});
    if (!j.contains("name"))
        throw FieldError{field + ".name", "a scheme needs a name"};
    SchemeConfig s;
    s.name = getString(j["name"], field + ".name");
    if (!j.contains("k") && !j.contains("v")) {
        auto named = findScheme(s.name);
        if (!named)
            throw FieldError{field + ".name", "unknown scheme '" + s.name + "'; give \"k\" and \"v\" paths to define it"};
        return *named;
    }
    if (!j.contains("k") || !j.contains("v"))
        throw FieldError{field, "a custom scheme needs both a \"k\" and a \"v\" path"};
    if (j.contains("description"))
        s.description = getString(j["description"], field + ".description");
    s.key = pathFromJson(j["k"], field + ".k");
    s.value = pathFromJson(j["v"], field + ".v");
    s.builtin = false;
    return s;
}

/// {"allocation": "allocation.json"}: the advisor's file, found beside the spec first, read back as
/// one fixed-width scheme per distinct (k_bits, v_bits).
std::vector<SchemeConfig> allocationSchemesFromJson(const json& j, const std::string& field,
                                                    const std::string& baseDirectory,
                                                    ExperimentSpec::SchemeOrigins::Allocation* read = nullptr)
{
    checkKeys(j, field, {"allocation"});
    const std::string name = getString(j["allocation"], field + ".allocation");
    std::filesystem::path path(name);
    std::error_code ec;
    if (path.is_relative() && !baseDirectory.empty() && std::filesystem::exists(std::filesystem::path(baseDirectory) / path, ec))
        path = std::filesystem::path(baseDirectory) / path;
    auto text = io::readRegularFile(path.string(), io::kMaxSpecBytes);
    if (!text)
        throw FieldError{field + ".allocation", text.error().text()};
    auto file = allocationFromJson(*text);
    if (!file)
        throw FieldError{field + ".allocation", path.string() + ": " + file.error().text()};
    if (read) {
        read->field = field;
        read->path = path.string();
        for (const AllocationEntry& e : file->entries)
            read->layers.push_back(e.layer);
    }
    return allocationSchemes(*file);
}

json paramValueJson(const ParamValue& v)
{
    if (const auto* d = std::get_if<double>(&v))
        return *d;
    return std::get<std::string>(v);
}

json toJson(const ExperimentSpec& s)
{
    json j;
    j["kvlens_spec"] = kFormatVersion;
    j["name"] = s.name;
    json regime;
    regime["name"] = s.regime;
    for (const auto& [key, value] : s.regimeParams)
        regime[key] = paramValueJson(value);
    j["regime"] = regime;
    j["d"] = s.d;
    j["tokens"] = s.tokens;
    j["queries"] = s.queries;
    j["calibration_tokens"] = s.calibrationTokens;
    j["score_scale"] = s.scoreScale;
    json schemes = json::array();
    for (const auto& scheme : s.schemes)
        schemes.push_back(schemeJson(scheme));
    j["schemes"] = schemes;
    j["budgets"] = s.budgets;
    j["seeds"] = {{"first", s.firstSeed}, {"count", s.seedCount}};
    j["rng"] = std::string(engineName(s.engine));
    j["backend"] = s.backendText();
    j["device"] = s.device;
    j["metrics"] = {{"top_k", s.metrics.topK}, {"sample_cap", s.metrics.sampleCap}};
    json pairs = json::array();
    for (const auto& [a, b] : s.comparisons.pairs)
        pairs.push_back(json::array({a, b}));
    j["comparisons"] = {{"pairs", pairs}, {"bootstrap", s.comparisons.bootstrap},
                        {"permutations", s.comparisons.permutations}};
    j["memory_limit_mb"] = s.memoryLimitMb;
    // Written only when the spec names it: every spec (and spec hash) from before the field reads
    // and writes as it did.
    if (!(s.advisor == AdvisorOptions{})) {
        json advisor = {{"objective", std::string(advisorStatisticName(s.advisor.objective))},
                        {"loss", std::string(advisorLossName(s.advisor.loss))}};
        if (!s.advisor.bits.empty())
            advisor["bits"] = s.advisor.bits;
        j["advisor"] = advisor;
    }
    if (!s.sweep.empty()) {
        json sweep = json::object();
        for (const auto& axis : s.sweep)
            sweep[axis.name()] = axis.values;
        j["sweep"] = sweep;
    }
    return j;
}

/// A model spec's "layers" / "heads" ("all" or a list of indices) as sweep axes over
/// regime.layer / regime.head: every (layer, head) cell becomes a grid point.
void addModelCells(ExperimentSpec& s, const std::vector<std::pair<std::string, json>>& cells)
{
    if (cells.empty())
        return;
    std::optional<ModelDump> dump;
    for (const auto& [key, value] : cells) {
        const std::string field = "regime." + key;
        const std::string param = key == "layers" ? "layer" : "head";
        for (const SweepAxis& a : s.sweep)
            if (a.parameter == SweepParameter::Regime && a.regimeKey == param)
                throw FieldError{field, "give \"" + key + "\" or a sweep over regime." + param + ", not both"};
        if (s.regimeParams.count(param))
            throw FieldError{field, "give \"" + key + "\" or \"" + param + "\", not both"};
        SweepAxis axis = *SweepAxis::named("regime." + param);
        if (value.is_string() && value.get<std::string>() == "all") {
            if (!dump) {
                const auto it = s.regimeParams.find("file");
                if (it == s.regimeParams.end() || !std::holds_alternative<std::string>(it->second))
                    throw FieldError{"regime.file", "the model regime needs its dump file for \"" + key + "\": \"all\""};
                auto inspected = inspectModelDump(std::get<std::string>(it->second));
                if (!inspected)
                    throw FieldError{inspected.error().field, inspected.error().message};
                dump = std::move(inspected).value();
            }
            const int count = key == "layers" ? dump->layers : dump->qHeads;
            for (int i = 0; i < count; ++i)
                axis.values.push_back(i);
        } else if (value.is_array() && !value.empty()) {
            std::set<int> seen;
            for (std::size_t i = 0; i < value.size(); ++i) {
                const std::string entry = field + "[" + std::to_string(i) + "]";
                const int index = getInt(value[i], entry, 0, 1 << 16);
                // A cell listed twice would run twice: every map row repeated, Holm's family doubled.
                if (!seen.insert(index).second)
                    throw FieldError{entry, std::string(key == "layers" ? "layer " : "head ") + std::to_string(index)
                                                + " is listed twice"};
                axis.values.push_back(index);
            }
        } else {
            throw FieldError{field, "must be \"all\" or a non-empty array of indices, got " + io::describeJson(value)};
        }
        s.sweep.push_back(std::move(axis));
    }
}

/// "regime": a name, or {"name": ..., parameters...}. A model's "layers" and "heads" are kept in
/// `cells` (they become grid axes once the dump's path is resolved).
void regimeFromJson(const json& j, ExperimentSpec& s, std::vector<std::pair<std::string, json>>& cells)
{
    const json& r = j["regime"];
    if (r.is_string()) {
        s.regime = r.get<std::string>();
        return;
    }
    if (!r.is_object())
        throw FieldError{"regime", "must be a regime name or an object {\"name\": ..., parameters...}"};
    if (!r.contains("name"))
        throw FieldError{"regime.name", "missing (known: " + regimeNames() + ")"};
    s.regime = getString(r["name"], "regime.name");
    const Regime* named = findRegime(s.regime);
    const bool cellAxes = named && named->hasModelCells(); // "layers" and "heads" are grid axes
    for (const auto& [key, value] : r.items()) {
        if (key == "name")
            continue;
        if (cellAxes && (key == "layers" || key == "heads")) {
            cells.emplace_back(key, value); // grid axes, once the file's path is resolved
            continue;
        }
        if (value.is_number())
            s.regimeParams[key] = value.get<double>();
        else if (value.is_string())
            s.regimeParams[key] = value.get<std::string>();
        else if (value.is_boolean()) // a two-way choice ("standardize": true)
            s.regimeParams[key] = std::string(value.get<bool>() ? "true" : "false");
        else
            throw FieldError{"regime." + key, "must be a number or a string, got " + io::describeJson(value)};
    }
}

/// The sizes, each integer with its own allowed range (so `"d": 1e308` says d's range), N and Q
/// as aliases of tokens and queries; the score scale.
void sizesFromJson(const json& j, ExperimentSpec& s)
{
    using L = SpecLimits;
    auto intField = [&](const char* key, const char* alias, int& target, int lo, int hi) {
        if (j.contains(key) && alias && j.contains(alias))
            throw FieldError{alias, std::string("give either \"") + key + "\" or \"" + alias + "\", not both"};
        if (j.contains(key))
            target = getInt(j[key], key, lo, hi);
        else if (alias && j.contains(alias))
            target = getInt(j[alias], alias, lo, hi);
    };
    intField("d", nullptr, s.d, L::kMinD, L::kMaxD);
    intField("tokens", "N", s.tokens, L::kMinTokens, L::kMaxTokens);
    intField("queries", "Q", s.queries, L::kMinQueries, L::kMaxQueries);
    intField("calibration_tokens", nullptr, s.calibrationTokens, 0, L::kMaxCalibration);
    if (j.contains("score_scale"))
        s.scoreScale = getNumber(j["score_scale"], "score_scale");
}

/// "schemes": names, compositions, or {"allocation": FILE} entries expanded to their schemes (each
/// remembered in schemeOrigins, so errors name the user's entry); absent: the default schemes.
void schemesFromJson(const json& j, ExperimentSpec& s, const std::string& baseDirectory)
{
    if (!j.contains("schemes")) {
        s.schemes = defaultSpec().schemes;
        return;
    }
    const json& list = j["schemes"];
    if (!list.is_array())
        throw FieldError{"schemes", "must be an array of scheme names or scheme objects"};
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string field = "schemes[" + std::to_string(i) + "]";
        if (list[i].is_object() && list[i].contains("allocation")) {
            ExperimentSpec::SchemeOrigins::Allocation read;
            const auto expanded = allocationSchemesFromJson(list[i], field, baseDirectory, &read);
            s.schemeOrigins.allocations.push_back(std::move(read));
            for (const SchemeConfig& c : expanded) {
                s.schemes.push_back(c);
                // Errors about an expanded scheme name the user's entry, not the expanded index.
                s.schemeOrigins.fields.push_back(
                    field + " (" + io::quoteName(getString(list[i]["allocation"], field + ".allocation")) + ": "
                    + c.name + ")");
            }
            continue;
        }
        s.schemes.push_back(schemeFromJson(list[i], field));
        s.schemeOrigins.fields.push_back(field);
    }
}

/// "budgets" and "seeds" {"first", "count"}.
void budgetsAndSeedsFromJson(const json& j, ExperimentSpec& s)
{
    using L = SpecLimits;
    if (j.contains("budgets")) {
        const json& list = j["budgets"];
        if (!list.is_array())
            throw FieldError{"budgets", "must be an array of integers"};
        s.budgets.clear();
        for (std::size_t i = 0; i < list.size(); ++i)
            s.budgets.push_back(getInt(list[i], "budgets[" + std::to_string(i) + "]", L::kMinBudget, L::kMaxBudget));
    }
    if (j.contains("seeds")) {
        const json& seeds = j["seeds"];
        checkKeys(seeds, "seeds", {"first", "count"});
        if (seeds.contains("first")) {
            if (!seeds["first"].is_number_unsigned() && !(seeds["first"].is_number_integer() && seeds["first"].get<long long>() >= 0))
                throw FieldError{"seeds.first", "must be a non-negative integer, got " + io::describeJson(seeds["first"])};
            s.firstSeed = seeds["first"].get<std::uint64_t>();
        }
        readInt(seeds, "count", "seeds.count", s.seedCount, 1, L::kMaxSeeds);
    }
}

/// Where and how the run computes: "rng", "backend" (an exported "cpu (fallback: ...)" asks for the
/// CPU: the run that wrote it fell back), "device", "metrics".
void engineFromJson(const json& j, ExperimentSpec& s)
{
    using L = SpecLimits;
    if (j.contains("rng"))
        s.engine = getEnum<EngineKind>(j["rng"], "rng", engineFromName, "mt19937_64, pcg64");
    if (j.contains("backend")) {
        const auto parsed = parseBackendText(getString(j["backend"], "backend"));
        if (!parsed)
            throw FieldError{"backend", "must be one of cpu, opencl, auto, got " + io::describeJson(j["backend"])};
        s.backend = parsed->kind;
    }
    if (j.contains("device")) {
        const json& dev = j["device"];
        s.device = dev.is_number_integer() ? std::to_string(dev.get<long long>()) : getString(dev, "device");
    }
    if (j.contains("metrics")) {
        const json& m = j["metrics"];
        checkKeys(m, "metrics", {"top_k", "sample_cap"});
        readInt(m, "top_k", "metrics.top_k", s.metrics.topK, 1, L::kMaxTokens);
        readInt(m, "sample_cap", "metrics.sample_cap", s.metrics.sampleCap, 0, L::kMaxSampleCap);
    }
}

/// "comparisons": {"pairs": [[a, b], ...], "bootstrap", "permutations"}.
void comparisonsFromJson(const json& c, ExperimentSpec& s)
{
    using L = SpecLimits;
    checkKeys(c, "comparisons", {"pairs", "bootstrap", "permutations"});
    if (c.contains("pairs")) {
        const json& pairs = c["pairs"];
        if (!pairs.is_array())
            throw FieldError{"comparisons.pairs", "must be an array of [scheme, scheme] pairs"};
        for (std::size_t i = 0; i < pairs.size(); ++i) {
            const std::string field = "comparisons.pairs[" + std::to_string(i) + "]";
            if (!pairs[i].is_array() || pairs[i].size() != 2)
                throw FieldError{field, "must be a pair of scheme names, got " + io::describeJson(pairs[i])};
            s.comparisons.pairs.emplace_back(getString(pairs[i][0], field + "[0]"), getString(pairs[i][1], field + "[1]"));
        }
    }
    readInt(c, "bootstrap", "comparisons.bootstrap", s.comparisons.bootstrap, 0, L::kMaxResamples);
    readInt(c, "permutations", "comparisons.permutations", s.comparisons.permutations, 0, L::kMaxResamples);
}

/// "advisor": {"bits": a number or a list, "objective", "loss"}; the ranges (against the budgets)
/// are normalizeSpec's.
void advisorFromJson(const json& a, ExperimentSpec& s)
{
    using L = SpecLimits;
    checkKeys(a, "advisor", {"bits", "objective", "loss"});
    if (a.contains("bits")) {
        const json& bits = a["bits"];
        if (bits.is_number()) {
            s.advisor.bits.push_back(getNumber(bits, "advisor.bits"));
        } else {
            if (!bits.is_array() || bits.empty())
                throw FieldError{"advisor.bits", "must be a number or a non-empty array of numbers (target average "
                                                 "bits per coordinate), got " + io::describeJson(bits)};
            if (bits.size() > static_cast<std::size_t>(L::kMaxAdvisorTargets))
                throw FieldError{"advisor.bits", "give at most " + std::to_string(L::kMaxAdvisorTargets)
                                                     + " targets, got " + std::to_string(bits.size())};
            for (std::size_t i = 0; i < bits.size(); ++i)
                s.advisor.bits.push_back(getNumber(bits[i], "advisor.bits[" + std::to_string(i) + "]"));
        }
    }
    if (a.contains("objective"))
        s.advisor.objective = getEnum(a["objective"], "advisor.objective", &parseAdvisorStatistic,
                                      "\"mean\", \"median\", \"p99\" (of the per-query loss)");
    if (a.contains("loss")) {
        const std::string loss = getString(a["loss"], "advisor.loss");
        if (loss == "kld_end_to_end")
            throw FieldError{"advisor.loss", "\"kld_end_to_end\" is the model's output KLD, which only kvlens eval "
                                             "measures (--reproduce advises on it); --batch advises on attention-level "
                                             "losses: \"rel_mse_t\" or \"kl\""};
        s.advisor.loss = getEnum(a["loss"], "advisor.loss", &parseAdvisorLoss,
                                 "\"rel_mse_t\" (output relative error), \"kl\" (KL of the weights; blind to V)");
    }
}

/// "sweep": {"parameter": [values...]} (N and Q as aliases of tokens and queries).
void sweepFromJson(const json& sweep, ExperimentSpec& s)
{
    if (!sweep.is_object())
        throw FieldError{"sweep", "must be an object {\"parameter\": [values...]}"};
    for (const auto& [key, values] : sweep.items()) {
        const std::string name = key == "N" ? "tokens" : key == "Q" ? "queries" : key;
        const std::string field = "sweep." + name;
        if (!values.is_array())
            throw FieldError{field, "must be an array of numbers"};
        auto named = SweepAxis::named(name);
        if (!named)
            throw FieldError{field, "cannot be swept (sweepable: regime.<parameter>, d, tokens, queries, score_scale, budget)"};
        SweepAxis axis = std::move(*named);
        for (std::size_t i = 0; i < values.size(); ++i)
            axis.values.push_back(getNumber(values[i], field + "[" + std::to_string(i) + "]"));
        s.sweep.push_back(std::move(axis));
    }
}

ExperimentSpec fromJson(const json& j, const std::string& baseDirectory)
{
    checkKeys(j, "", {"kvlens_spec", "name", "regime", "d", "tokens", "N", "queries", "Q", "calibration_tokens",
                      "score_scale", "schemes", "budgets", "seeds", "rng", "backend", "device", "metrics",
                      "comparisons", "memory_limit_mb", "sweep", "advisor", "partial"});
    // An export of a cancelled run notes the trials it holds ("partial", core/analysis/coverage.h);
    // it describes the files beside it, not the run to make, so reading the spec ignores it.
    if (j.contains("partial") && !j["partial"].is_object())
        throw FieldError{"partial", "must be an object (an export's note of the trials it holds), got "
                                        + io::describeJson(j["partial"])};
    ExperimentSpec s;
    s.schemes.clear();
    if (j.contains("kvlens_spec")) {
        const int version = getInt(j["kvlens_spec"], "kvlens_spec");
        if (version < 1 || version > kFormatVersion)
            throw FieldError{"kvlens_spec", "format version " + std::to_string(version) + " is not supported (this "
                                            "build reads versions 1 to " + std::to_string(kFormatVersion) + ")"};
    }
    if (j.contains("name"))
        s.name = getString(j["name"], "name");
    std::vector<std::pair<std::string, json>> modelCells;
    if (j.contains("regime"))
        regimeFromJson(j, s, modelCells);
    sizesFromJson(j, s);
    schemesFromJson(j, s, baseDirectory);
    budgetsAndSeedsFromJson(j, s);
    engineFromJson(j, s);
    if (j.contains("comparisons"))
        comparisonsFromJson(j["comparisons"], s);
    if (j.contains("memory_limit_mb"))
        s.memoryLimitMb = getNumber(j["memory_limit_mb"], "memory_limit_mb");
    if (j.contains("advisor"))
        advisorFromJson(j["advisor"], s);
    if (j.contains("sweep"))
        sweepFromJson(j["sweep"], s);
    resolveImportPaths(s.regime, s.regimeParams, baseDirectory);
    addModelCells(s, modelCells);
    return s;
}

} // namespace

Result<ExperimentSpec> specFromJson(std::string_view text, const std::string& baseDirectory, InputCheck inputs)
{
    // Nesting capped and duplicate keys refused before any field is read (io::parseJsonText);
    // parse_error and out_of_range (numbers like 1e400) come back as errors too.
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return parsed.error();
    const json& j = *parsed;
    try {
        return normalizeSpec(fromJson(j, baseDirectory), inputs);
    } catch (const FieldError& e) {
        return Error{e.field, e.message};
    } catch (const json::exception& e) {
        return Error{"", std::string("malformed spec: ") + e.what()};
    }
}

std::string specToJson(const ExperimentSpec& spec, int indent)
{
    return io::dumpJson(toJson(spec), indent);
}

Result<ExperimentSpec> loadSpecFile(const std::string& path, InputCheck inputs)
{
    // Only a regular file below the cap: `--batch /dev/zero` is refused, not read until memory runs out.
    auto text = io::readRegularFile(path, io::kMaxSpecBytes);
    if (!text)
        return text.error();
    auto spec = specFromJson(*text, std::filesystem::path(path).parent_path().string(), inputs);
    if (!spec)
        return Error{path + (spec.error().field.empty() ? "" : ": " + spec.error().field), spec.error().message};
    return spec;
}

} // namespace kvlens

// --- eval specs (core/spec/eval_spec.h) ------------------------------------------------------

namespace kvlens {

namespace {

/// A path of an eval spec: beside the spec file first, else as given.
std::string resolveBeside(const std::string& path, const std::string& baseDirectory)
{
    std::filesystem::path p(path);
    std::error_code ec;
    if (p.is_relative() && !baseDirectory.empty() && std::filesystem::exists(std::filesystem::path(baseDirectory) / p, ec))
        return (std::filesystem::path(baseDirectory) / p).string();
    return path;
}

/// {"allocation": FILE} as one configuration: layer l takes the file's layer-l widths or types.
EvalScheme evalAllocationFromJson(const json& j, const std::string& field, const std::string& baseDirectory)
{
    checkKeys(j, field, {"allocation"});
    const std::string name = getString(j["allocation"], field + ".allocation");
    const std::string path = resolveBeside(name, baseDirectory);
    auto text = io::readRegularFile(path, io::kMaxSpecBytes);
    if (!text)
        throw FieldError{field + ".allocation", text.error().text()};
    auto file = allocationFromJson(*text);
    if (!file)
        throw FieldError{field + ".allocation", path + ": " + file.error().text()};
    int layers = 0;
    for (const AllocationEntry& e : file->entries) {
        if (e.head >= 0)
            throw FieldError{field + ".allocation", path + ": layer " + std::to_string(e.layer) + " gives a head ("
                                                        + std::to_string(e.head) + "); the evaluator applies per-layer "
                                                        "allocations only"};
        layers = std::max(layers, e.layer + 1);
    }
    EvalScheme s;
    s.origin = path;
    s.layers.resize(static_cast<std::size_t>(layers));
    std::vector<char> seen(static_cast<std::size_t>(layers), 0);
    for (const AllocationEntry& e : file->entries) {
        s.layers[static_cast<std::size_t>(e.layer)] = allocationScheme(e);
        seen[static_cast<std::size_t>(e.layer)] = 1;
    }
    for (int l = 0; l < layers; ++l)
        if (!seen[static_cast<std::size_t>(l)])
            throw FieldError{field + ".allocation", path + ": layer " + std::to_string(l) + " is missing (the file gives "
                                                        "layers up to " + std::to_string(layers - 1) + ")"};
    s.scheme = SchemeConfig{"allocation " + std::filesystem::path(path).filename().string(),
                            "per-layer widths of " + path, s.layers.front().key, s.layers.front().value, false};
    return s;
}

EvalSpec evalFromJson(const json& j, const std::string& baseDirectory)
{
    checkKeys(j, "", {"kvlens_eval", "name", "model", "text", "tokens", "ctx", "chunks", "calibration_tokens", "schemes",
                      "budgets", "seeds", "residual", "attribution", "parse_special", "threads", "memory_limit_mb",
                      "query_conversion", "backend", "device"});
    EvalSpec s;
    const int version = getInt(j["kvlens_eval"], "kvlens_eval");
    if (version != 1)
        throw FieldError{"kvlens_eval", "format version " + std::to_string(version) + " is not supported (this build "
                                                                                      "reads version 1)"};
    if (j.contains("name"))
        s.name = getString(j["name"], "name");
    if (!j.contains("model"))
        throw FieldError{"model", "name the model folder"};
    s.modelDir = resolveBeside(getString(j["model"], "model"), baseDirectory);
    if (j.contains("text"))
        s.textFile = resolveBeside(getString(j["text"], "text"), baseDirectory);
    if (j.contains("tokens"))
        s.tokensFile = resolveBeside(getString(j["tokens"], "tokens"), baseDirectory);
    using L = EvalLimits;
    if (j.contains("ctx"))
        s.ctx = getInt(j["ctx"], "ctx", L::kMinCtx, L::kMaxCtx);
    if (j.contains("chunks"))
        s.chunks = getInt(j["chunks"], "chunks", 0, L::kMaxChunks);
    if (j.contains("calibration_tokens"))
        s.calibrationTokens = getInt(j["calibration_tokens"], "calibration_tokens", -1, L::kMaxCtx * 16);
    if (j.contains("schemes")) {
        const json& list = j["schemes"];
        if (!list.is_array())
            throw FieldError{"schemes", "must be an array of scheme names, compositions or {\"allocation\": FILE}"};
        for (std::size_t i = 0; i < list.size(); ++i) {
            const std::string field = "schemes[" + std::to_string(i) + "]";
            if (list[i].is_object() && list[i].contains("allocation")) {
                s.schemes.push_back(evalAllocationFromJson(list[i], field, baseDirectory));
                continue;
            }
            if (list[i].is_object() && list[i].contains("layers")) {
                // Per-layer schemes written inline: {"name", "layers": [scheme, ...]} (layer l takes entry l).
                checkKeys(list[i], field, {"name", "layers"});
                const json& layers = list[i]["layers"];
                if (!layers.is_array() || layers.empty() || layers.size() > 4096)
                    throw FieldError{field + ".layers", "must be a non-empty array of schemes, one per layer"};
                EvalScheme e;
                for (std::size_t l = 0; l < layers.size(); ++l)
                    e.layers.push_back(normalizedScheme(schemeFromJson(layers[l], field + ".layers[" + std::to_string(l) + "]")));
                e.scheme = e.layers.front();
                e.scheme.name = getString(list[i].contains("name") ? list[i]["name"] : json(), field + ".name");
                e.scheme.builtin = false;
                s.schemes.push_back(std::move(e));
                continue;
            }
            EvalScheme e;
            e.scheme = normalizedScheme(schemeFromJson(list[i], field));
            s.schemes.push_back(std::move(e));
        }
    }
    if (j.contains("budgets")) {
        if (!j["budgets"].is_array())
            throw FieldError{"budgets", "must be an array of integers in [1, 8]"};
        s.budgets.clear();
        for (std::size_t i = 0; i < j["budgets"].size(); ++i)
            s.budgets.push_back(getInt(j["budgets"][i], "budgets[" + std::to_string(i) + "]", 1, 8));
    }
    if (j.contains("seeds")) {
        const json& seeds = j["seeds"];
        checkKeys(seeds, "seeds", {"first", "count"});
        if (seeds.contains("first")) {
            if (!seeds["first"].is_number_unsigned())
                throw FieldError{"seeds.first", "must be a non-negative integer below 2^64"};
            s.firstSeed = seeds["first"].get<std::uint64_t>();
        }
        if (seeds.contains("count"))
            s.seedCount = getInt(seeds["count"], "seeds.count", 1, L::kMaxSeeds);
    }
    if (j.contains("residual"))
        s.residual = getInt(j["residual"], "residual", 0, L::kMaxCtx);
    if (j.contains("attribution")) {
        const std::string a = getString(j["attribution"], "attribution");
        if (a == "none")
            s.attribution = Attribution::None;
        else if (a == "layers")
            s.attribution = Attribution::Layers;
        else if (a == "heads")
            s.attribution = Attribution::Heads;
        else
            throw FieldError{"attribution", "must be one of none, layers, heads, got '" + a + "'"};
    }
    if (j.contains("parse_special")) {
        if (!j["parse_special"].is_boolean())
            throw FieldError{"parse_special", "must be true or false"};
        s.parseSpecialTokens = j["parse_special"].get<bool>();
    }
    if (j.contains("threads"))
        s.threads = getInt(j["threads"], "threads", 0, 1024);
    if (j.contains("memory_limit_mb"))
        s.memoryLimitMb = getNumber(j["memory_limit_mb"], "memory_limit_mb");
    if (j.contains("query_conversion")) {
        const std::string q = getString(j["query_conversion"], "query_conversion");
        if (q != "ggml" && q != "none")
            throw FieldError{"query_conversion", "must be \"ggml\" (queries converted as llama.cpp converts them for its "
                                                 "cache types) or \"none\" (float32 queries: the codec alone), got '" + q + "'"};
        s.ggmlQueryConversion = q == "ggml";
    }
    if (j.contains("backend")) {
        const std::string b = getString(j["backend"], "backend");
        const auto parsed = parseBackendText(b);
        if (!parsed || !parsed->fallback.empty())
            throw FieldError{"backend", "must be one of cpu, opencl, auto, got " + io::describeJson(j["backend"])};
        s.backend = parsed->kind;
    }
    if (j.contains("device")) {
        const json& dev = j["device"];
        s.device = dev.is_number_integer() ? std::to_string(dev.get<long long>()) : getString(dev, "device");
    }
    return s;
}

} // namespace

bool isEvalSpecText(std::string_view text)
{
    auto parsed = io::parseJsonText(text);
    return parsed && parsed->is_object() && parsed->contains("kvlens_eval");
}

Result<EvalSpec> evalSpecFromJson(std::string_view text, const std::string& baseDirectory)
{
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return parsed.error();
    try {
        EvalSpec s = evalFromJson(*parsed, baseDirectory);
        if (auto ok = checkEvalSpec(s); !ok)
            return ok.error();
        return s;
    } catch (const FieldError& e) {
        return Error{e.field, e.message};
    } catch (const json::exception& e) {
        return Error{"", std::string("malformed eval spec: ") + e.what()};
    }
}

namespace {

/// `path` made absolute (against the working directory) and normalized, so a written spec runs again
/// from any folder; empty stays empty.
std::string absolutePath(const std::string& path)
{
    if (path.empty())
        return path;
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    return ec ? path : absolute.lexically_normal().string();
}

} // namespace

std::string evalSpecToJson(const EvalSpec& s, int indent)
{
    json j;
    j["kvlens_eval"] = 1;
    j["name"] = s.name;
    j["model"] = absolutePath(s.modelDir);
    if (!s.textFile.empty())
        j["text"] = absolutePath(s.textFile);
    if (!s.tokensFile.empty())
        j["tokens"] = absolutePath(s.tokensFile);
    j["ctx"] = s.ctx;
    j["chunks"] = s.chunks;
    j["calibration_tokens"] = s.calibrationTokens;
    j["schemes"] = json::array();
    for (const EvalScheme& e : s.schemes) {
        if (!e.origin.empty()) {
            j["schemes"].push_back(json{{"allocation", absolutePath(e.origin)}});
        } else if (!e.layers.empty()) {
            json layers = json::array();
            for (const SchemeConfig& l : e.layers)
                layers.push_back(schemeJson(l));
            j["schemes"].push_back(json{{"name", e.scheme.name}, {"layers", layers}});
        } else {
            j["schemes"].push_back(schemeJson(e.scheme));
        }
    }
    j["budgets"] = s.budgets;
    j["seeds"] = json{{"first", s.firstSeed}, {"count", s.seedCount}};
    j["residual"] = s.residual;
    j["attribution"] = std::string(attributionName(s.attribution));
    j["parse_special"] = s.parseSpecialTokens;
    j["threads"] = s.threads;
    j["memory_limit_mb"] = s.memoryLimitMb;
    j["query_conversion"] = s.ggmlQueryConversion ? "ggml" : "none";
    // Written only when asked for: a spec that computes on the CPU reads (and hashes) as before.
    if (s.backend != BackendKind::Cpu)
        j["backend"] = std::string(backendKindName(s.backend));
    if (!s.device.empty())
        j["device"] = s.device;
    return io::dumpJson(j, indent);
}

Result<EvalSpec> loadEvalSpecFile(const std::string& path)
{
    auto text = io::readRegularFile(path, io::kMaxSpecBytes);
    if (!text)
        return text.error();
    auto spec = evalSpecFromJson(*text, std::filesystem::path(path).parent_path().string());
    if (!spec)
        return Error{path + (spec.error().field.empty() ? "" : ": " + spec.error().field), spec.error().message};
    return spec;
}

} // namespace kvlens
