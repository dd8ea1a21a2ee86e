// SPDX-License-Identifier: GPL-3.0-or-later
// JSON mapping of specs with nlohmann::json, kept out of headers (compile time).
#include "core/model/spec_json.h"

#include "core/model/allocation.h"

#include "core/quant/codec.h"
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

constexpr int kFormatVersion = 1;

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

json pathToJson(const PathConfig& p)
{
    json j;
    j["rotation"] = std::string(rotationName(p.rotation));
    j["quantizer"] = std::string(quantizerName(p.quantizer));
    if (p.bits.relative)
        j["bits"] = p.bits.text();
    else
        j["bits"] = p.bits.value;
    j["norm_format"] = std::string(scalarFormatName(p.normFormat));
    j["residual"] = std::string(residualName(p.residual));
    j["qjl_dim"] = p.qjlDim;
    j["qjl_reconstruction"] = std::string(qjlReconstructionName(p.qjlReconstruction));
    j["qjl_sketch"] = std::string(qjlSketchName(p.qjlSketch));
    j["group_size"] = p.groupSize;
    j["axis"] = std::string(uniformAxisName(p.axis));
    j["window"] = p.window;
    j["allocation"] = std::string(allocationName(p.allocation));
    j["deff_rule"] = std::string(deffRuleName(p.deffRule));
    j["gap_threshold"] = p.gapThreshold;
    j["tail_bits"] = p.tailBits;
    j["headq_rank"] = p.headqRank;
    j["headq_bits"] = p.headqBits;
    j["headq_control"] = std::string(headqControlName(p.headqControl));
    j["token_policy"] = std::string(tokenPolicyName(p.tokenPolicy));
    if (!p.codec.empty())
        j["codec"] = p.codec;
    return j;
}

PathConfig pathFromJson(const json& j, const std::string& field)
{
    checkKeys(j, field, {"rotation", "quantizer", "bits", "norm_format", "residual", "qjl_dim", "qjl_reconstruction",
                         "qjl_sketch", "group_size", "axis",
                         "window", "allocation", "deff_rule", "gap_threshold", "tail_bits", "headq_rank", "headq_bits",
                         "headq_control", "token_policy", "codec"});
    PathConfig p;
    if (j.contains("codec")) {
        // A registered codec replaces the composition; validateScheme checks the name.
        if (!j["codec"].is_string() || !findCodec(j["codec"].get<std::string>()))
            throw FieldError{field + ".codec", "must name a registered codec (" + codecNames() + "), got "
                                                   + io::describeJson(j["codec"])};
        p.codec = j["codec"].get<std::string>();
    }
    if (j.contains("rotation"))
        p.rotation = getEnum<Rotation>(j["rotation"], field + ".rotation", rotationFromName, "none, wht, eigen, wht_permuted");
    // The spectral quantizer lives in the eigenbasis: "quantizer": "spectral" alone implies it.
    if (j.contains("quantizer") && j["quantizer"] == "spectral" && !j.contains("rotation"))
        p.rotation = Rotation::Eigen;
    if (j.contains("quantizer"))
        p.quantizer = getEnum<QuantizerKind>(j["quantizer"], field + ".quantizer", quantizerFromName,
                                             "lloyd_beta, lloyd_gauss, lloyd_empirical, uniform, spectral");
    if (j.contains("bits")) {
        const json& b = j["bits"];
        if (b.is_string()) {
            const auto rule = BitsRule::parse(b.get<std::string>());
            if (!rule)
                throw FieldError{field + ".bits", "must be \"n\", \"n-1\", \"n+1\" ... or an integer 1..8, got " + io::describeJson(b)};
            p.bits = *rule;
        } else {
            p.bits = BitsRule{false, getInt(b, field + ".bits", 1, 8)};
        }
    }
    if (j.contains("norm_format"))
        p.normFormat = getEnum<ScalarFormat>(j["norm_format"], field + ".norm_format", scalarFormatFromName,
                                             "fp16, bf16, fp32");
    if (j.contains("residual"))
        p.residual = getEnum<ResidualKind>(j["residual"], field + ".residual", residualFromName, "none, qjl, headq");
    if (j.contains("qjl_dim"))
        p.qjlDim = getInt(j["qjl_dim"], field + ".qjl_dim", 0, 1 << 20);
    if (j.contains("qjl_reconstruction"))
        p.qjlReconstruction = getEnum<QjlReconstruction>(j["qjl_reconstruction"], field + ".qjl_reconstruction",
                                                         qjlReconstructionFromName, "unbiased, mse");
    if (j.contains("qjl_sketch"))
        p.qjlSketch = getEnum<QjlSketchKind>(j["qjl_sketch"], field + ".qjl_sketch", qjlSketchFromName,
                                             "gaussian, orthogonal");
    if (j.contains("group_size"))
        p.groupSize = getInt(j["group_size"], field + ".group_size", 1, 1 << 20);
    if (j.contains("axis"))
        p.axis = getEnum<UniformAxis>(j["axis"], field + ".axis", uniformAxisFromName, "per_channel, per_token");
    if (j.contains("window"))
        p.window = getInt(j["window"], field + ".window", 0, 1 << 22);
    if (j.contains("allocation"))
        p.allocation = getEnum<Allocation>(j["allocation"], field + ".allocation", allocationFromName, "water_filling, uniform");
    if (j.contains("deff_rule"))
        p.deffRule = getEnum<DeffRule>(j["deff_rule"], field + ".deff_rule", deffRuleFromName, "gap, participation");
    if (j.contains("gap_threshold"))
        p.gapThreshold = getNumber(j["gap_threshold"], field + ".gap_threshold");
    if (j.contains("tail_bits"))
        p.tailBits = getInt(j["tail_bits"], field + ".tail_bits");
    if (j.contains("headq_rank"))
        p.headqRank = getInt(j["headq_rank"], field + ".headq_rank");
    if (j.contains("headq_bits"))
        p.headqBits = getInt(j["headq_bits"], field + ".headq_bits");
    if (j.contains("headq_control"))
        p.headqControl = getEnum<HeadqControl>(j["headq_control"], field + ".headq_control", headqControlFromName,
                                               "none, wrong_sign, random_basis");
    if (j.contains("token_policy"))
        p.tokenPolicy = getEnum<TokenPolicy>(j["token_policy"], field + ".token_policy", tokenPolicyFromName, "uniform, a2");
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

ExperimentSpec fromJson(const json& j, const std::string& baseDirectory)
{
    std::vector<std::pair<std::string, json>> modelCells;
    checkKeys(j, "", {"kvlens_spec", "name", "regime", "d", "tokens", "N", "queries", "Q", "calibration_tokens",
                      "score_scale", "schemes", "budgets", "seeds", "rng", "backend", "device", "metrics",
                      "comparisons", "memory_limit_mb", "sweep", "partial"});
    // An export of a cancelled run notes the trials it holds ("partial", core/analysis/coverage.h);
    // it describes the files beside it, not the run to make, so reading the spec ignores it.
    if (j.contains("partial") && !j["partial"].is_object())
        throw FieldError{"partial", "must be an object (an export's note of the trials it holds), got "
                                        + io::describeJson(j["partial"])};
    ExperimentSpec s;
    s.schemes.clear();
    if (j.contains("kvlens_spec")) {
        const int version = getInt(j["kvlens_spec"], "kvlens_spec");
        if (version != kFormatVersion)
            throw FieldError{"kvlens_spec", "format version " + std::to_string(version) + " is not supported (this "
                                            "build reads version " + std::to_string(kFormatVersion) + ")"};
    }
    if (j.contains("name"))
        s.name = getString(j["name"], "name");
    if (j.contains("regime")) {
        const json& r = j["regime"];
        if (r.is_string()) {
            s.regime = r.get<std::string>();
        } else {
            if (!r.is_object())
                throw FieldError{"regime", "must be a regime name or an object {\"name\": ..., parameters...}"};
            if (!r.contains("name"))
                throw FieldError{"regime.name", "missing (known: " + regimeNames() + ")"};
            s.regime = getString(r["name"], "regime.name");
            for (const auto& [key, value] : r.items()) {
                if (key == "name")
                    continue;
                if (s.regime == "model" && (key == "layers" || key == "heads")) {
                    modelCells.emplace_back(key, value); // grid axes, once the file's path is resolved
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
    }
    // Each integer field is read with its own allowed range, so `"d": 1e308` says d's range.
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
    if (j.contains("schemes")) {
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
    } else {
        s.schemes = defaultSpec().schemes;
    }
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
        if (seeds.contains("count"))
            s.seedCount = getInt(seeds["count"], "seeds.count", 1, L::kMaxSeeds);
    }
    if (j.contains("rng"))
        s.engine = getEnum<EngineKind>(j["rng"], "rng", engineFromName, "mt19937_64, pcg64");
    if (j.contains("backend")) {
        // An exported "cpu (fallback: ...)" asks for the CPU: the run that wrote it fell back.
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
        if (m.contains("top_k"))
            s.metrics.topK = getInt(m["top_k"], "metrics.top_k", 1, L::kMaxTokens);
        if (m.contains("sample_cap"))
            s.metrics.sampleCap = getInt(m["sample_cap"], "metrics.sample_cap", 0, L::kMaxSampleCap);
    }
    if (j.contains("comparisons")) {
        const json& c = j["comparisons"];
        checkKeys(c, "comparisons", {"pairs", "bootstrap", "permutations"});
        if (c.contains("pairs")) {
            const json& pairs = c["pairs"];
            if (!pairs.is_array())
                throw FieldError{"comparisons.pairs", "must be an array of [scheme, scheme] pairs"};
            for (std::size_t i = 0; i < pairs.size(); ++i) {
                const std::string field = "comparisons.pairs[" + std::to_string(i) + "]";
                if (!pairs[i].is_array() || pairs[i].size() != 2)
                    throw FieldError{field, "must be a pair of scheme names, got " + io::describeJson(pairs[i])};
                s.comparisons.pairs.emplace_back(getString(pairs[i][0], field + "[0]"),
                                                 getString(pairs[i][1], field + "[1]"));
            }
        }
        if (c.contains("bootstrap"))
            s.comparisons.bootstrap = getInt(c["bootstrap"], "comparisons.bootstrap", 0, L::kMaxResamples);
        if (c.contains("permutations"))
            s.comparisons.permutations = getInt(c["permutations"], "comparisons.permutations", 0, L::kMaxResamples);
    }
    if (j.contains("memory_limit_mb"))
        s.memoryLimitMb = getNumber(j["memory_limit_mb"], "memory_limit_mb");
    if (j.contains("sweep")) {
        const json& sweep = j["sweep"];
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
